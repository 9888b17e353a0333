"""What a run trains: the model, its optimizer, its loss and its data (child side).

One ``TrainingTask`` for a built-in workload and for a model of the user's own
(``module:function``, ``file.py:function``, ``model.keras``; parsed and hashed by
workloads.user on the parent side), so that the custom loop, ``fit``, the
ParameterServer coordinator and the probes train either without a second path.

For a user's model this is where the user's code runs: the module is imported (or
the ``.keras`` file loaded) and the model built inside the strategy's scope, and what
the model needs is read from it rather than declared:

- inputs from ``model.inputs`` (names, per-example shapes, dtypes; an integer input
  takes ids below the smallest ``input_dim`` of the Embedding layers it feeds), or,
  for a subclassed model, the shape it was built or first called with;
- the loss and the optimizer from its ``compile()`` where it has one, else the
  harness's: sparse categorical cross-entropy for an output of 2+ units (from logits
  unless the output layer applies softmax), binary cross-entropy for one unit (from
  logits unless sigmoid), and ``--optimizer``/``--lr``;
- the labels the loss takes (class ids, one-hot rows, 0/1 or real targets), made by
  the general teacher (workloads.synth) from the synthetic inputs;
- ``dataset_fn(input_context)`` beside the function, if the module defines one: the
  pipeline ``--data tfdata`` reads instead of the teacher's pool.

What cannot be used raises ``UserModelError`` (a failed run, or exit 2 in the
preflight, bench.child.preflight) or ``Unsupported`` (inputs the teacher cannot make,
and no dataset_fn to read instead), with a message that names the value.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from bench.errors import BenchError, Unsupported
from bench.registry import Registry
from bench.spec import RunSpec
from workloads import UserWorkload, Workload, find_workload
from workloads.synth import InputSpec, LabelSpec, make_pool
from workloads.user import DATASET_FN, ModelRef, file_digest, locate


class UserModelError(BenchError):
    """A user's model that cannot be trained: it does not import or load, is not a
    Keras model, or does not take its parameters. The message names the value."""


def last_line(exc: BaseException) -> str:
    """``Type: the last meaningful line`` of an exception (TensorFlow's and Keras'
    messages end with what went wrong)."""
    lines = [ln.strip() for ln in str(exc).strip().splitlines() if ln.strip()]
    return f"{type(exc).__name__}: {lines[-1] if lines else ''}"[:500]


@dataclass
class TrainingTask:
    """A built model and optimizer (variables and slots made under the strategy) and
    how to feed and score them.

    ``per_example_loss(labels, outputs)``: one float32 loss per example (the custom
    loop averages it over the global batch); ``keras_loss``: what ``fit`` compiles
    with, the same loss. ``pool(examples, seed)``: host arrays of synthetic examples
    and labels (x is an array, or a dict by input name for several inputs), None where
    ``synth_problem`` says why they cannot be made. ``dataset_fn(ctx, batch)``: the
    user's pipeline, per-replica batches, or None.
    """

    model: Any
    optimizer: Any
    inputs: tuple[InputSpec, ...]
    labels: LabelSpec | None
    per_example_loss: Callable[[Any, Any], Any]
    keras_loss: Any
    pool: Callable[[int, int], tuple[Any, np.ndarray]] | None
    flops: str = "analytic"
    synth_problem: str | None = None
    dataset_fn: Callable[[Any, int], Any] | None = None
    # What the run fed and how it scored the model, for the result (ModelInfo).
    record: dict[str, Any] = field(default_factory=dict)

    def make_pool(self, examples: int, seed: int) -> tuple[Any, np.ndarray]:
        """The teacher's pool; Unsupported when it cannot be made for this model."""
        if self.pool is None:
            raise Unsupported(self.synth_problem or "no synthetic data for this model")
        return self.pool(examples, seed)


def harness_optimizer(spec: RunSpec) -> Any:
    """``--optimizer`` at ``--lr``: SGD with momentum 0.9, or Adam."""
    import keras

    if spec.optimizer == "sgd":
        return keras.optimizers.SGD(spec.learning_rate, momentum=0.9)
    return keras.optimizers.Adam(spec.learning_rate)


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
        record=_record([s.describe() for s in inputs], labels,
                       "sparse categorical cross-entropy on float32 logits",
                       _optimizer_text(spec, None), "synthetic (teacher)"))


# -- a user's model ----------------------------------------------------------------------
def import_user_module(ref: ModelRef) -> Any:
    """The module of a ``module:function`` or ``file.py:function`` spelling, imported.

    A file is imported under its own name with its directory on the import path (its
    sibling modules import as they do when it runs as a script); a module is found
    from the current directory first, as the parent found it. Whatever the import
    raises becomes a UserModelError with its own last line.
    """
    try:
        if ref.kind == "file":
            path = locate(ref)
            directory = str(path.parent)
            if directory not in sys.path:
                sys.path.insert(0, directory)
            name = path.stem
            found = importlib.util.spec_from_file_location(name, path)
            if found is None or found.loader is None:
                raise UserModelError(f"{path} cannot be imported as a Python module. "
                                     f"Received: workload={ref.text!r}")
            module = importlib.util.module_from_spec(found)
            sys.modules[name] = module
            found.loader.exec_module(module)
            return module
        if os.getcwd() not in sys.path:
            sys.path.insert(0, os.getcwd())
        return importlib.import_module(ref.source)
    except UserModelError:
        raise
    except BaseException as exc:  # SystemExit and KeyboardInterrupt of a script, too
        if isinstance(exc, KeyboardInterrupt):
            raise
        raise UserModelError(f"{ref.source} does not import: {last_line(exc)}. "
                             f"Received: workload={ref.text!r}") from None


def load_user_model(spec: RunSpec, ref: ModelRef) -> tuple[Any, Any]:
    """``(model, module)``: the user's model built by its function (module None for a
    ``.keras`` file, loaded with its compile() state). Call inside the strategy's scope.
    UserModelError naming the value for anything that is not a Keras model."""
    import keras

    path = locate(ref)
    if spec.workload_digest and file_digest(path) != spec.workload_digest:
        raise UserModelError(f"{path} changed after the sweep was planned (digest "
                             f"{spec.workload_digest[:8]}, now {file_digest(path)[:8]}): "
                             f"run the command again to measure the new version. "
                             f"Received: workload={ref.text!r}")
    module = None
    if ref.kind == "keras":
        try:
            model = keras.saving.load_model(path)
        except Exception as exc:
            raise UserModelError(f"{path.name} does not load as a Keras model: "
                                 f"{last_line(exc)}. Received: workload={ref.text!r}") from None
        what = path.name
    else:
        module = import_user_module(ref)
        fn = getattr(module, ref.function, None)
        what = ref.display
        if fn is None:
            raise UserModelError(f"module {ref.source} has no function {ref.function}. "
                                 f"Received: workload={ref.text!r}")
        if not callable(fn):
            raise UserModelError(f"{what} is a {type(fn).__name__}, not a function. "
                                 f"Received: workload={ref.text!r}")
        params = spec.workload_params()
        try:
            inspect.signature(fn).bind(**params)
        except TypeError as exc:
            raise UserModelError(f"{what} does not take these parameters: {exc}. "
                                 f"Received: params={params!r}") from None
        except ValueError:  # no signature to read (a builtin): the call will say
            pass
        try:
            model = fn(**params)
        except Exception as exc:
            raise UserModelError(f"{what} raised {last_line(exc)}. "
                                 f"Received: workload={ref.text!r}") from None
    if not isinstance(model, keras.Model):
        raise UserModelError(f"{what} gave a {type(model).__module__}.{type(model).__name__}, "
                             f"not a Keras model (keras.Model). Received: workload={ref.text!r}")
    return model, module


def _dtype_name(dtype: Any) -> str:
    return str(getattr(dtype, "name", dtype))


def _embeddings(model: Any) -> list[Any]:
    import keras

    layers = (model._flatten_layers(include_self=False)
              if hasattr(model, "_flatten_layers") else model.layers)
    return [layer for layer in layers if isinstance(layer, keras.layers.Embedding)]


def _token_range(model: Any, tensor: Any) -> int | None:
    """Ids an integer input may take: below the smallest ``input_dim`` of the Embedding
    layers it feeds directly, or, where the graph does not say, of all the model's."""
    embeddings = _embeddings(model)
    fed = [e for e in embeddings
           for node in (getattr(e, "_inbound_nodes", None) or [])
           if any(t is tensor for t in (getattr(node, "input_tensors", None) or []))]
    chosen = fed or embeddings
    return min(int(e.input_dim) for e in chosen) if chosen else None


_WITHOUT_PIPELINE = ("define dataset_fn(input_context) in the module, beside the function, "
                     "returning a tf.data.Dataset of (inputs, label) examples, and run "
                     "with --data tfdata")


def _input_specs(model: Any, ref: ModelRef
                 ) -> tuple[tuple[InputSpec, ...], list[str], list[Any], list[str]]:
    """``(specs, problems, tensors, declared)``: what each input takes, why the teacher
    cannot make one (strings, ragged or sparse, an unknown dimension, integers without
    an embedding), the symbolic inputs (empty for a subclassed model), and every input
    as the model declares it (``name dtype[shape]``, for the record)."""
    try:
        tensors = list(getattr(model, "inputs", None) or [])
    except (AttributeError, ValueError):  # an unbuilt Sequential has none
        tensors = []
    entries: list[tuple[str, tuple[Any, ...], str, Any]] = []
    if tensors:
        struct = getattr(model, "_inputs_struct", None)
        names = (list(struct) if isinstance(struct, dict) and len(struct) == len(tensors)
                 else [str(getattr(t, "name", f"input_{i}")) for i, t in enumerate(tensors)])
        for name, t in zip(names, tensors, strict=True):
            entries.append((name, tuple(t.shape), _dtype_name(t.dtype), t))
    else:
        built = (getattr(model, "_build_shapes_dict", None)
                 or ({"input_shape": model._build_input_shape}
                     if getattr(model, "_build_input_shape", None) is not None else None))
        shapes = list(built.values()) if built else []
        if len(shapes) != 1 or not isinstance(shapes[0], (tuple, list)) \
                or not all(d is None or isinstance(d, int) for d in shapes[0]):
            raise UserModelError(
                f"{ref.display} returned a model whose inputs the harness cannot read (a "
                f"subclassed model that was never built, or built with several inputs): "
                f"build it in your function (model.build(input_shape) or one call on a "
                f"batch), or wrap it in a functional model, keras.Model(inputs, "
                f"model(inputs)), which also declares integer and several inputs. "
                f"Received: workload={ref.text!r}")
        entries.append(("x", tuple(shapes[0]), "float32", None))
    specs, problems, declared = [], [], []
    for name, shape, dtype, tensor in entries:
        example = shape[1:]
        declared.append(f"{name} {dtype}[{','.join(str(d) for d in example)}]")
        if getattr(tensor, "ragged", False) or getattr(tensor, "sparse", False):
            kind = "ragged" if getattr(tensor, "ragged", False) else "sparse"
            problems.append(f"input {name!r} is {kind}")
            continue
        if dtype in ("string", "bool") or not all(isinstance(d, int) for d in example):
            problems.append(f"input {name!r} is {dtype}{list(example)}"
                            + (" (a dimension of unknown length)"
                               if not all(isinstance(d, int) for d in example) else ""))
            continue
        vocab = None
        if "int" in dtype:
            vocab = _token_range(model, tensor)
            if vocab is None:
                problems.append(f"integer input {name!r} feeds no Embedding layer, so the "
                                f"range of its ids is unknown")
                continue
        specs.append(InputSpec(name, tuple(int(d) for d in example), dtype, vocab))
        declared[-1] = specs[-1].describe()
    return tuple(specs), problems, [t for *_, t in entries if t is not None], declared


def _output_layer(model: Any) -> Any:
    outputs = getattr(model, "outputs", None) or []
    history = getattr(outputs[0], "_keras_history", None) if len(outputs) == 1 else None
    if history is not None:
        return history[0]
    return model.layers[-1] if getattr(model, "layers", None) else None


def _final_activation(model: Any) -> str:
    """The name of the activation the output layer applies (``softmax``, ``sigmoid``,
    ``linear``...), read from the layer that makes the output."""
    import keras

    layer = _output_layer(model)
    if isinstance(layer, keras.layers.Softmax):
        return "softmax"
    return str(getattr(getattr(layer, "activation", None), "__name__", "linear"))


@dataclass(frozen=True)
class LossKind:
    """Which labels a compiled loss takes (a LABEL_MAKERS kind)."""

    labels: str


# Compiled losses the teacher can make labels for, by name with case and underscores
# ignored (a string, a Loss class, or the function a LossFunctionWrapper wraps).
LOSS_LABELS: Registry[LossKind] = Registry("loss")
for _names, _kind in (
        (("sparsecategoricalcrossentropy",), "class_ids"),
        (("categoricalcrossentropy", "categoricalfocalcrossentropy", "kldivergence",
          "kld", "kullbackleiblerdivergence", "categoricalhinge"), "one_hot"),
        (("binarycrossentropy", "binaryfocalcrossentropy", "hinge", "squaredhinge"),
         "binary"),
        (("meansquarederror", "mse", "meanabsoluteerror", "mae", "huber", "logcosh",
          "cosinesimilarity"), "real")):
    for _name in _names:
        LOSS_LABELS.register(_name, LossKind(_kind))


def _loss_name(loss: Any) -> str:
    import keras

    if isinstance(loss, str):
        return loss
    fn = getattr(loss, "fn", None)  # a LossFunctionWrapper names the function it wraps
    if isinstance(loss, keras.losses.Loss) and type(loss).__name__ != "LossFunctionWrapper":
        return type(loss).__name__
    return str(getattr(fn or loss, "__name__", type(loss).__name__))


def _per_example(loss: Any) -> Callable[[Any, Any], Any]:
    """One float32 loss per example from a Keras loss (string, function or Loss):
    its unreduced value, averaged over any axes after the batch (as Keras' own
    sum-over-batch-size reduction weighs them)."""
    import keras
    import tensorflow as tf

    fn = loss.call if isinstance(loss, keras.losses.Loss) else keras.losses.get(loss)

    def per_example(y: Any, out: Any) -> Any:
        value = tf.cast(fn(y, tf.cast(out, tf.float32)), tf.float32)
        rank = value.shape.rank or 0
        return tf.reduce_mean(value, axis=list(range(1, rank))) if rank > 1 else value
    return per_example


def _user_task(spec: RunSpec, workload: UserWorkload) -> TrainingTask:
    """Import or load the user's model (inside the scope) and read what it needs."""
    import keras
    import tensorflow as tf

    ref = workload.ref
    model, module = load_user_model(spec, ref)
    inputs, problems, tensors, declared = _input_specs(model, ref)
    # A subclassed model makes its variables at its first call: here, in the scope
    # (a variable made inside strategy.run would be a replica's own).
    outputs = list(getattr(model, "outputs", None) or [])
    if not tensors:
        batch = np.zeros((2, *inputs[0].shape), np.float32)
        out = model(batch, training=False)
        if not isinstance(out, tf.Tensor):
            raise UserModelError(f"{ref.display}'s model returned {type(out).__name__}, not "
                                 f"one tensor: the harness trains models with one output. "
                                 f"Received: workload={ref.text!r}")
        out_shape: tuple[Any, ...] = tuple(out.shape)
    elif len(outputs) != 1:
        raise UserModelError(f"{ref.display}'s model has {len(outputs)} outputs: the "
                             f"harness trains models with one output. "
                             f"Received: workload={ref.text!r}")
    else:
        out_shape = tuple(outputs[0].shape)
    compiled = getattr(model, "loss", None)
    if isinstance(compiled, (list, tuple)) and len(compiled) == 1:
        compiled = compiled[0]
    if isinstance(compiled, dict) and len(compiled) == 1:
        compiled = next(iter(compiled.values()))
    width = int(out_shape[-1]) if len(out_shape) == 2 and out_shape[-1] is not None else 0
    activation = _final_activation(model)
    labels: LabelSpec | None = None
    if compiled is not None:
        if isinstance(compiled, (list, tuple, dict)):
            raise UserModelError(f"{ref.display}'s model compiles several losses: the "
                                 f"harness trains models with one output and one loss. "
                                 f"Received: workload={ref.text!r}")
        keras_loss = compiled
        name = _loss_name(compiled)
        loss_text = f"{name} (the model's compile())"
        kind = name.lower().replace("_", "")
        if kind in LOSS_LABELS and width:
            labels = LabelSpec(LOSS_LABELS.get(kind).labels, width)
        else:
            problems.append(f"the teacher cannot make labels for the loss {name} with "
                            f"outputs of shape {list(out_shape)}")
    elif width >= 2:
        logits = activation != "softmax"
        keras_loss = keras.losses.SparseCategoricalCrossentropy(from_logits=logits)
        labels = LabelSpec("class_ids", width)
        loss_text = (f"sparse categorical cross-entropy from "
                     f"{'logits' if logits else 'softmax'} (harness default)")
    elif width == 1:
        logits = activation != "sigmoid"
        keras_loss = keras.losses.BinaryCrossentropy(from_logits=logits)
        labels = LabelSpec("binary", 1)
        loss_text = (f"binary cross-entropy from {'logits' if logits else 'sigmoid'} "
                     f"(harness default)")
    else:
        keras_loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        loss_text = "sparse categorical cross-entropy from logits (harness default)"
        problems.append(f"the teacher makes labels for outputs of shape (batch, units); "
                        f"this model's is {list(out_shape)}")
    optimizer = getattr(model, "optimizer", None)
    uses_own = optimizer is not None and compiled is not None
    fn = getattr(module, DATASET_FN, None) if module is not None else None
    dataset_fn = _pipeline(fn) if callable(fn) else None
    synth_problem = None
    if problems:
        wanted = ", ".join(s.describe() for s in inputs) or "its inputs"
        synth_problem = (f"{ref.display}: the harness cannot synthesise data for this model "
                         f"({'; '.join(problems)}). "
                         + ("Run with --data tfdata to read the module's dataset_fn"
                            if dataset_fn else
                            f"To feed it, {_WITHOUT_PIPELINE}: a dataset whose elements "
                            f"are (inputs, label) with inputs as model.inputs declare them "
                            f"({_declared(model, tensors)}; readable ones: {wanted})")
                         + f". Received: workload={ref.text!r}")
    pool = None
    if labels is not None and not problems:
        chosen_labels = labels

        def pool(n: int, seed: int) -> tuple[Any, np.ndarray]:
            return make_pool(inputs, chosen_labels, n, seed)
    data = ("the module's dataset_fn" if dataset_fn and spec.data == "tfdata"
            else "synthetic (teacher)")
    return TrainingTask(
        model=model, optimizer=optimizer if uses_own else harness_optimizer(spec),
        inputs=inputs, labels=labels, per_example_loss=_per_example(keras_loss),
        keras_loss=keras_loss, pool=pool, flops="graph", synth_problem=synth_problem,
        dataset_fn=dataset_fn,
        record=_record(declared, labels, loss_text,
                       _optimizer_text(spec, optimizer if uses_own else None), data))


def _declared(model: Any, tensors: list[Any]) -> str:
    if not tensors:
        return "one float input"
    return ", ".join(f"{getattr(t, 'name', '?')}: {_dtype_name(t.dtype)} "
                     f"{list(tuple(t.shape)[1:])}" for t in tensors)


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


def _optimizer_text(spec: RunSpec, own: Any) -> str:
    if own is None:
        return f"{spec.optimizer} lr={spec.learning_rate:g} (harness)"
    lr: Any = getattr(own, "learning_rate", None)
    try:
        rate = f"{float(lr):g}"
    except (TypeError, ValueError):
        rate = type(lr).__name__
    return (f"{type(own).__name__} lr={rate} (the model's compile(); --optimizer and --lr "
            f"do not apply)")


def _record(inputs: list[str], labels: LabelSpec | None, loss: str,
            optimizer: str, data: str) -> dict[str, Any]:
    return {"inputs": inputs,
            "labels": labels.describe() if labels is not None else None,
            "loss": loss, "optimizer": optimizer, "data": data}


def check_data(task: TrainingTask, spec: RunSpec) -> None:
    """Unsupported when the run's data source cannot feed this model: synthetic data it
    cannot have (its reason says what dataset_fn must provide)."""
    if spec.data == "tfdata" and task.dataset_fn is not None:
        return
    if task.pool is None:
        raise Unsupported(task.synth_problem or "no synthetic data for this model")

