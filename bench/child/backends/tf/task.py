"""What a run trains: the model, its optimizer, its loss and its data (child side).

One ``TrainingTask`` for a built-in workload and for a model of the user's own
(``module:function``, ``file.py:function``, ``model.keras``; parsed and hashed by
workloads.user on the parent side), so that the custom loop, ``fit``, the
ParameterServer coordinator and the probes train either without a second path.

For a user's model this is where the user's code runs: the module is imported (or
the ``.keras`` file loaded) and the model built inside the strategy's scope, and what
the model needs is read from it by bench.child.description, the one description the
JAX lane trains from too: its inputs, its outputs (one, a list or a dict of heads), a
loss per head (its ``compile()``'s, else the harness's default from the head's units
and activation), summed as Keras sums them, the labels each loss takes and the
optimizer (its own or ``--optimizer``/``--lr``). Beside the function, the module may
define ``dataset_fn(input_context)``: the pipeline ``--data tfdata`` reads instead of
the teacher's pool.

What cannot be used raises ``UserModelError`` (a failed run, or exit 2 in the
preflight, bench.child.backends.tf.preflight) or ``Unsupported`` (inputs the teacher cannot make,
and no dataset_fn to read instead), with a message that names the value.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from bench.child.description import (
    LOSS_LABELS,
    Ops,
    UserModelError,
    describe,
    harness_optimizer,
    import_user_module,
    last_line,
    load_user_model,
    optimizer_text,
    record,
    synth_problem,
)
from bench.errors import Unsupported
from bench.spec import RunSpec
from workloads import UserWorkload, Workload, find_workload
from workloads.synth import InputSpec, LabelSpec, PackedLabels
from workloads.user import DATASET_FN

# Read from here by the TF lane's callers (the description module holds them).
__all__ = ["LOSS_LABELS", "TrainingTask", "UserModelError", "build_task", "check_data",
           "harness_optimizer", "import_user_module", "last_line", "load_user_model"]


@dataclass
class TrainingTask:
    """A built model and optimizer (variables and slots made under the strategy) and
    how to feed and score them.

    ``per_example_loss(labels, outputs)``: one float32 loss per example (the custom
    loop averages it over the global batch); ``keras_loss`` and ``loss_weights``: what
    ``fit`` compiles with, the same loss (one per head for several outputs), and
    ``unpack_labels``: the packed labels of several heads as ``fit`` matches them.
    ``pool(examples, seed)``: host arrays of synthetic examples and labels (x is an
    array, or a dict by input name for several inputs), None where ``synth_problem``
    says why they cannot be made. ``dataset_fn(ctx, batch)``: the
    user's pipeline, per-replica batches, or None.
    """

    model: Any
    optimizer: Any
    inputs: tuple[InputSpec, ...]
    labels: LabelSpec | PackedLabels | None
    per_example_loss: Callable[[Any, Any], Any]
    keras_loss: Any
    pool: Callable[[int, int], tuple[Any, np.ndarray]] | None
    flops: str = "analytic"
    synth_problem: str | None = None
    dataset_fn: Callable[[Any, int], Any] | None = None
    loss_weights: Any = None
    unpack_labels: Callable[[Any], Any] | None = None
    # What the run fed and how it scored the model, for the result (ModelInfo).
    record: dict[str, Any] = field(default_factory=dict)

    def make_pool(self, examples: int, seed: int) -> tuple[Any, np.ndarray]:
        """The teacher's pool; Unsupported when it cannot be made for this model."""
        if self.pool is None:
            raise Unsupported(self.synth_problem or "no synthetic data for this model")
        return self.pool(examples, seed)


def build_task(spec: RunSpec, strategy: Any) -> TrainingTask:
    """The spec's model and optimizer under ``strategy`` (seeded by ``spec.seed``, the
    precision policy set first), slots created, and how to feed and score it."""
    import keras

    keras.mixed_precision.set_global_policy(spec.precision)
    keras.utils.set_random_seed(spec.seed)  # same initial weights across strategies
    workload = find_workload(spec.workload)
    with strategy.scope():
        if isinstance(workload, UserWorkload):
            task = _user_task(spec, workload)
        else:
            task = _builtin_task(spec, workload)
        opt = task.optimizer
        if spec.precision == "mixed_float16" and not isinstance(
                opt, keras.optimizers.LossScaleOptimizer):
            opt = keras.optimizers.LossScaleOptimizer(opt)
        opt.build(task.model.trainable_variables)  # slots now, not inside tf.function
        task.optimizer = opt
    return task


def _builtin_task(spec: RunSpec, workload: Workload) -> TrainingTask:
    import keras
    import tensorflow as tf

    params = spec.workload_params()
    model = workload.build(params)
    classes = workload.num_classes(params)

    def per_example(y: Any, out: Any) -> Any:
        logits = tf.cast(out, tf.float32)
        return tf.keras.losses.sparse_categorical_crossentropy(y, logits, from_logits=True)

    inputs = workload.input_specs(params)
    labels = LabelSpec("class_ids", classes)
    return TrainingTask(
        model=model, optimizer=harness_optimizer(spec), inputs=inputs, labels=labels,
        per_example_loss=per_example,
        keras_loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        pool=lambda n, seed: workload.make_pool(params, n, seed), flops=workload.flops,
        record=record([s.describe() for s in inputs], labels,
                      "sparse categorical cross-entropy on float32 logits",
                      optimizer_text(spec, None), "synthetic (teacher)"))


# -- a user's model ----------------------------------------------------------------------
def tf_ops() -> Ops:
    """TensorFlow's functions for the description's loss (Keras 3 and Keras 2 models)."""
    import tensorflow as tf

    return Ops(cast=tf.cast, mean=lambda v, axes: tf.reduce_mean(v, axis=axes),
               rank=lambda v: v.shape.rank or 0)


def _user_task(spec: RunSpec, workload: UserWorkload) -> TrainingTask:
    """Import or load the user's model (inside the scope) and train it as its
    description (bench.child.description, shared with the JAX lane) says."""
    ref = workload.ref
    model, module = load_user_model(spec, ref)
    # A subclassed model makes its variables at its first call: here, in the scope
    # (a variable made inside strategy.run would be a replica's own).
    desc = describe(model, ref)
    fn = getattr(module, DATASET_FN, None) if module is not None else None
    dataset_fn = _pipeline(fn) if callable(fn) else None
    ops = tf_ops()
    keras_loss, loss_weights = desc.keras_loss()
    data = ("the module's dataset_fn" if dataset_fn and spec.data == "tfdata"
            else "synthetic (teacher)")
    return TrainingTask(
        model=model, optimizer=desc.optimizer(spec), inputs=desc.inputs, labels=desc.labels,
        per_example_loss=desc.per_example_loss(ops), keras_loss=keras_loss,
        loss_weights=loss_weights,
        unpack_labels=(lambda y: desc.unpack_labels(y, ops)) if len(desc.heads) > 1 else None,
        pool=desc.pool(), flops="graph",
        synth_problem=synth_problem(desc, ref, dataset_fn is not None),
        dataset_fn=dataset_fn, record=desc.record(spec, data))


def _pipeline(fn: Callable[..., Any]) -> Callable[[Any, int], Any]:
    """The user's ``dataset_fn`` as the harness calls it: per input pipeline, endless,
    in per-replica batches. ``dataset_fn(input_context)`` yields single examples (the
    harness batches them); ``dataset_fn(input_context, batch_size)`` yields batches of
    ``batch_size`` itself. Sharding is the function's choice (``input_context``)."""
    import tensorflow as tf

    try:
        takes_batch = "batch_size" in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        takes_batch = False

    def pipeline(ctx: Any, batch: int) -> Any:
        ds = fn(ctx, batch_size=batch) if takes_batch else \
            fn(ctx).repeat().batch(batch, drop_remainder=True)
        return ds.repeat().prefetch(tf.data.AUTOTUNE)
    return pipeline


def check_data(task: TrainingTask, spec: RunSpec) -> None:
    """Unsupported when the run's data source cannot feed this model: synthetic data it
    cannot have (its reason says what dataset_fn must provide)."""
    if spec.data == "tfdata" and task.dataset_fn is not None:
        return
    if task.pool is None:
        raise Unsupported(task.synth_problem or "no synthetic data for this model")

