"""What the JAX lane trains: a built-in workload or a model of the user's own, with its
inputs, its synthetic pool, its loss and its optimizer (Keras 3, no TensorFlow).

A user's model is read by bench.child.description, the description the TensorFlow lane
trains from too: the same inputs, heads, loss per head (the model's ``compile()``'s or
the harness's default), labels and optimizer, with the loss written in ``keras.ops``.
Whatever this lane cannot train is ``Unsupported`` here, while the run is built and
before anything is measured, with its reason: a model that does not load or is not
a Keras model (the TF lane's preflight refuses those up front), a model whose file
imports TensorFlow, data the teacher cannot make (the JAX lane has no ``dataset_fn``:
``--data tfdata`` is TensorFlow's), and a step Keras on JAX cannot trace
(bench.child.backends.jax.step).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from bench.child.description import (
    ModelDescription,
    UserModelError,
    describe,
    harness_optimizer,
    keras_ops,
    load_user_model,
    optimizer_text,
    record,
    synth_problem,
)
from bench.errors import Unsupported
from bench.spec import RunSpec
from workloads import UserWorkload, find_workload
from workloads.synth import InputSpec, LabelSpec


@dataclass
class JaxTask:
    """A built model and optimizer, its inputs and pool, and its per-example loss."""

    model: Any
    optimizer: Any
    inputs: tuple[InputSpec, ...]
    pool: Callable[[int, int], tuple[Any, np.ndarray]]
    per_example_loss: Callable[[Any, Any], Any]
    record: dict[str, Any]
    user: bool = False  # a model of the user's own (its step may not trace on JAX)


def calls_tensorflow(before: set[str]) -> bool:
    """Whether TensorFlow was imported since ``before`` (the user's code did it: Keras
    on JAX never does)."""
    return "tensorflow" in sys.modules and "tensorflow" not in before


def build_task(spec: RunSpec) -> JaxTask:
    """The spec's model and optimizer (call inside the distribution's scope), seeded by
    the spec."""
    workload = find_workload(spec.workload)
    if isinstance(workload, UserWorkload):
        return _user_task(spec, workload)
    params = spec.workload_params()
    labels = LabelSpec("class_ids", workload.num_classes(params))
    inputs = workload.input_specs(params)
    from keras import losses, ops

    def per_example(y: Any, out: Any) -> Any:
        return losses.sparse_categorical_crossentropy(y, ops.cast(out, "float32"),
                                                      from_logits=True)

    return JaxTask(workload.build(params), harness_optimizer(spec), inputs,
                   lambda n, seed: workload.make_pool(params, n, seed), per_example,
                   record([s.describe() for s in inputs], labels,
                          "sparse categorical cross-entropy on float32 logits",
                          optimizer_text(spec, None), "synthetic (teacher)"))


def _tensorflow_reason(spec: RunSpec, workload: UserWorkload) -> str:
    return (f"{workload.ref.display} imports TensorFlow, which the JAX backend does not run "
            f"(Keras 3 on JAX needs a model of Keras layers and keras.ops only); train it "
            f"with --backend tf. Received: workload={spec.workload!r}, backend='jax'")


def describe_for_jax(spec: RunSpec, workload: UserWorkload) -> ModelDescription:
    """The user's model loaded and described as the TF lane describes it, or
    Unsupported with the reason this lane cannot train it."""
    before = set(sys.modules)
    try:
        model, _ = load_user_model(spec, workload.ref)
        if calls_tensorflow(before):
            raise Unsupported(_tensorflow_reason(spec, workload))
        desc = describe(model, workload.ref)  # a subclassed model is called here
    except UserModelError as exc:  # the TF lane's preflight refuses these up front
        raise Unsupported(str(exc)) from None
    if calls_tensorflow(before):
        raise Unsupported(_tensorflow_reason(spec, workload))
    problem = synth_problem(desc, workload.ref, has_pipeline=False, lane="jax")
    if problem is not None:
        raise Unsupported(problem)
    return desc


def _user_task(spec: RunSpec, workload: UserWorkload) -> JaxTask:
    desc = describe_for_jax(spec, workload)
    pool = desc.pool()
    assert pool is not None  # describe_for_jax refused a model without one
    return JaxTask(desc.model, desc.optimizer(spec), desc.inputs, pool,
                   desc.per_example_loss(keras_ops()), desc.record(spec), user=True)
