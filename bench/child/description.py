"""What a model of the user's own trains with, read from the model once, for every lane.

Both lanes (TensorFlow's, bench.child.backends.tf.task, and Keras 3 on JAX,
bench.child.backends.jax) load the user's model here and train it from one
``ModelDescription``: Keras only, no TensorFlow, no JAX (the loss is written against an
``Ops`` of the lane's three tensor functions). What it reads:

- inputs from ``model.inputs`` (names, per-example shapes, dtypes; an integer input
  takes ids below the smallest ``input_dim`` of the Embedding layers it feeds), or,
  for a subclassed model, the shape it was built or first called with;
- outputs (heads) from ``model.outputs`` as the model nests them (one tensor, a list,
  or a dict), or, for a subclassed model, from one call on a batch of its built shape
  (which also makes its variables: call ``describe`` inside the strategy's scope or the
  distribution's);
- per head, the loss from the model's ``compile()`` where it has one (one loss for
  every head, a list, or a dict by output name, with its ``loss_weights``), else the
  harness's: sparse categorical cross-entropy for 2+ units (from logits unless the
  head applies softmax), binary cross-entropy for one unit (from logits unless
  sigmoid); the heads' losses are summed, each weighted, as Keras sums them;
- the labels each loss takes (class ids, one-hot rows, 0/1 or real targets), made by
  the teacher (workloads.synth; several heads: ``PackedLabels``, one float32 array);
- the optimizer: the model's own where its ``compile()`` gave a loss and an optimizer,
  else ``--optimizer``/``--lr``.

What cannot be used raises ``UserModelError`` (the TF lane's preflight makes it exit 2,
the JAX lane ``unsupported``); what the teacher cannot make is listed in
``ModelDescription.problems`` (the data source decides whether that matters).
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from bench.errors import BenchError
from bench.registry import Registry
from bench.spec import RunSpec
from workloads.synth import InputSpec, LabelSpec, PackedLabels, make_pool
from workloads.user import ModelRef, file_digest, locate


class UserModelError(BenchError):
    """A user's model that cannot be trained: it does not import or load, is not a
    Keras model, or does not take its parameters. The message names the value."""


def last_line(exc: BaseException) -> str:
    """``Type: the last meaningful line`` of an exception (TensorFlow's and Keras'
    messages end with what went wrong)."""
    lines = [ln.strip() for ln in str(exc).strip().splitlines() if ln.strip()]
    return f"{type(exc).__name__}: {lines[-1] if lines else ''}"[:500]


def harness_optimizer(spec: RunSpec) -> Any:
    """``--optimizer`` at ``--lr``: SGD with momentum 0.9, or Adam."""
    import keras

    if spec.optimizer == "sgd":
        return keras.optimizers.SGD(spec.learning_rate, momentum=0.9)
    return keras.optimizers.Adam(spec.learning_rate)


def optimizer_text(spec: RunSpec, own: Any) -> str:
    """The optimizer as the record says it: the harness's, or the model's own."""
    if own is None:
        return f"{spec.optimizer} lr={spec.learning_rate:g} (harness)"
    lr: Any = getattr(own, "learning_rate", None)
    try:  # a float, or a variable (under a tf.distribute strategy: read its value)
        rate = f"{float(lr.numpy() if hasattr(lr, 'numpy') else lr):g}"
    except (TypeError, ValueError, AttributeError, NotImplementedError):
        rate = type(lr).__name__
    return (f"{type(own).__name__} lr={rate} (the model's compile(); --optimizer and --lr "
            f"do not apply)")


def record(inputs: list[str], labels: LabelSpec | PackedLabels | None, loss: str,
           optimizer: str, data: str) -> dict[str, Any]:
    """What a run fed the model and how it scored it (ModelStats' fields)."""
    return {"inputs": inputs,
            "labels": labels.describe() if labels is not None else None,
            "loss": loss, "optimizer": optimizer, "data": data}


# -- loading -------------------------------------------------------------------------------
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


# -- inputs --------------------------------------------------------------------------------
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


WITHOUT_PIPELINE = ("define dataset_fn(input_context) in the module, beside the function, "
                    "returning a tf.data.Dataset of (inputs, label) examples, and run "
                    "with --data tfdata")


def input_specs(model: Any, ref: ModelRef
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


def declared_inputs(tensors: list[Any]) -> str:
    """The symbolic inputs as a user reads them (``name: dtype [shape]``)."""
    if not tensors:
        return "one float input"
    return ", ".join(f"{getattr(t, 'name', '?')}: {_dtype_name(t.dtype)} "
                     f"{list(tuple(t.shape)[1:])}" for t in tensors)


# -- outputs and losses --------------------------------------------------------------------
def _activation_of(layer: Any) -> str:
    """The name of the activation ``layer`` applies (``softmax``, ``sigmoid``,
    ``linear``...): a Softmax layer, or a layer's ``activation``."""
    import keras

    if isinstance(layer, keras.layers.Softmax):
        return "softmax"
    return str(getattr(getattr(layer, "activation", None), "__name__", "linear"))


def _layer_of(tensor: Any) -> Any:
    history = getattr(tensor, "_keras_history", None)
    return history[0] if history is not None else None


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
          "cosinesimilarity", "meansquaredlogarithmicerror", "msle",
          "meanabsolutepercentageerror", "mape"), "real")):
    for _name in _names:
        LOSS_LABELS.register(_name, LossKind(_kind))


def loss_name(loss: Any) -> str:
    """A Keras loss's name: the string, the Loss class, or the function it wraps."""
    import keras

    if isinstance(loss, str):
        return loss
    fn = getattr(loss, "fn", None)  # a LossFunctionWrapper names the function it wraps
    if isinstance(loss, keras.losses.Loss) and type(loss).__name__ != "LossFunctionWrapper":
        return type(loss).__name__
    return str(getattr(fn or loss, "__name__", type(loss).__name__))


@dataclass(frozen=True)
class Head:
    """One output of the model and how it is scored. ``key``: how the model's output
    structure holds it (None: the output itself; an int: a list's position; a str: a
    dict's key); ``weight``: its compile() loss weight (None: 1, as Keras)."""

    name: str
    key: str | int | None
    shape: tuple[Any, ...]  # with the batch dimension
    activation: str
    loss: Any  # a Keras loss: string, function or Loss (backend-neutral)
    loss_text: str
    labels: LabelSpec | None
    weight: float | None = None
    problem: str | None = None  # why the teacher cannot make its labels


@dataclass(frozen=True)
class Ops:
    """The three tensor functions the loss needs, from the lane's framework (TensorFlow's
    for tf.keras and Keras 2 models, keras.ops on JAX)."""

    cast: Callable[[Any, str], Any]
    mean: Callable[[Any, list[int]], Any]  # mean over the given axes
    rank: Callable[[Any], int]


def keras_ops() -> Ops:
    """``keras.ops`` (Keras 3, any backend)."""
    from keras import ops

    return Ops(cast=ops.cast, mean=lambda v, axes: ops.mean(v, axis=axes),
               rank=lambda v: len(v.shape))


def _loss_fn(loss: Any) -> Callable[[Any, Any], Any]:
    """The unreduced form of a Keras loss (its ``call``, or the function it names)."""
    import keras

    return loss.call if isinstance(loss, keras.losses.Loss) else keras.losses.get(loss)


@dataclass
class ModelDescription:
    """A model of the user's own as every lane trains it (see the module docstring)."""

    model: Any
    inputs: tuple[InputSpec, ...]
    declared: list[str]  # every input as the model declares it, for the record
    tensors: list[Any]  # the symbolic inputs (empty for a subclassed model)
    heads: tuple[Head, ...]
    structure: str  # "one", "list" or "dict": how the model returns its outputs
    compiled: bool  # its compile() gave a loss
    own_optimizer: Any  # the model's compile() optimizer (None: the harness's)
    input_problems: tuple[str, ...] = ()

    @property
    def problems(self) -> list[str]:
        """Why the teacher cannot make this model's data (its inputs, its labels)."""
        return [*self.input_problems, *(h.problem for h in self.heads if h.problem)]

    @property
    def labels(self) -> LabelSpec | PackedLabels | None:
        """What the teacher makes: one head's LabelSpec, or every head's packed."""
        if any(h.labels is None for h in self.heads) or not self.heads:
            return None
        if len(self.heads) == 1:
            return self.heads[0].labels
        return PackedLabels(tuple((h.name, h.labels) for h in self.heads
                                  if h.labels is not None))

    @property
    def loss_text(self) -> str:
        if len(self.heads) == 1:
            return self.heads[0].loss_text
        parts = [f"{h.name}: {'' if h.weight is None else f'{h.weight:g} x '}{h.loss_text}"
                 for h in self.heads]
        return f"sum over {len(self.heads)} heads ({'; '.join(parts)})"

    def optimizer(self, spec: RunSpec) -> Any:
        """The optimizer the run trains with: the model's own, or a new harness one."""
        return self.own_optimizer if self.own_optimizer is not None else \
            harness_optimizer(spec)

    def record(self, spec: RunSpec, data: str = "synthetic (teacher)") -> dict[str, Any]:
        return record(self.declared, self.labels, self.loss_text,
                      optimizer_text(spec, self.own_optimizer), data)

    def pool(self) -> Callable[[int, int], tuple[Any, np.ndarray]] | None:
        """The teacher's pool of this model, or None where it cannot be made."""
        labels = self.labels
        if labels is None or self.problems:
            return None
        inputs = self.inputs
        return lambda n, seed: make_pool(inputs, labels, n, seed)

    # -- the loss, one implementation for every lane ----------------------------------
    def keras_loss(self) -> tuple[Any, Any]:
        """``(loss, loss_weights)`` as ``model.compile`` takes them (Keras ``fit``):
        one loss, or a list or dict of them by head."""
        if len(self.heads) == 1:
            head = self.heads[0]
            return head.loss, head.weight
        weights = None
        if any(h.weight is not None for h in self.heads):
            weights = [1.0 if h.weight is None else h.weight for h in self.heads]
        if self.structure == "dict":
            names = [str(h.key) for h in self.heads]
            return (dict(zip(names, [h.loss for h in self.heads], strict=True)),
                    None if weights is None else dict(zip(names, weights, strict=True)))
        return [h.loss for h in self.heads], weights

    def split_labels(self, y: Any, ops: Ops) -> list[Any]:
        """Each head's labels: from the packed array (class ids back to int32), or
        from a list or dict the user's dataset_fn yields, by position or output name."""
        if isinstance(y, Mapping):
            return [y[h.key if isinstance(h.key, str) else h.name] for h in self.heads]
        if isinstance(y, (list, tuple)):
            return [y[h.key if isinstance(h.key, int) else i] for i, h in enumerate(self.heads)]
        if len(self.heads) == 1:
            return [y]
        labels = self.labels
        assert isinstance(labels, PackedLabels)
        out = []
        for (start, stop), head in zip(labels.spans(), self.heads, strict=True):
            if head.labels is not None and head.labels.kind == "class_ids":
                out.append(ops.cast(y[:, start], "int32"))
            else:
                out.append(y[:, start:stop])
        return out

    def unpack_labels(self, y: Any, ops: Ops) -> Any:
        """The labels in the model's output structure (what Keras ``fit`` matches
        against the compiled losses); the array itself for one head."""
        if len(self.heads) == 1:
            return y
        parts = self.split_labels(y, ops)
        if self.structure == "dict":
            return {str(h.key): p for h, p in zip(self.heads, parts, strict=True)}
        return tuple(parts)

    def per_example_loss(self, ops: Ops) -> Callable[[Any, Any], Any]:
        """One float32 loss per example: per head the loss's unreduced value, averaged
        over any axes after the batch (as Keras' sum-over-batch-size reduction weighs
        them), times its weight, summed over the heads (as Keras sums them)."""
        fns = [_loss_fn(h.loss) for h in self.heads]
        heads = self.heads

        def pick(out: Any, head: Head) -> Any:
            if isinstance(out, Mapping):
                return out[head.key if isinstance(head.key, str) else head.name]
            if isinstance(out, (list, tuple)):
                return out[head.key if isinstance(head.key, int) else 0]
            return out

        def per_example(y: Any, out: Any) -> Any:
            total: Any = None
            for head, fn, labels in zip(heads, fns, self.split_labels(y, ops), strict=True):
                value = ops.cast(fn(labels, ops.cast(pick(out, head), "float32")), "float32")
                rank = ops.rank(value)
                if rank > 1:
                    value = ops.mean(value, list(range(1, rank)))
                if head.weight is not None:
                    value = value * float(head.weight)
                total = value if total is None else total + value
            return total
        return per_example


def _outputs_of(model: Any, inputs: tuple[InputSpec, ...], tensors: list[Any],
                ref: ModelRef) -> tuple[str, list[tuple[str, str | int | None, Any, str]]]:
    """``(structure, [(name, key, shape, activation)])``: the model's outputs as it
    nests them, each with the activation of the layer that makes it. A subclassed model
    is called once on a batch of its built shape (which makes its variables)."""
    if not tensors:
        batch = np.zeros((2, *inputs[0].shape), np.float32) if inputs else None
        if batch is None:
            raise UserModelError(f"{ref.display}'s model takes an input the harness cannot "
                                 f"make a batch of. Received: workload={ref.text!r}")
        try:
            out = model(batch, training=False)
        except Exception as exc:
            raise UserModelError(f"{ref.display}'s model, called on a batch of its built "
                                 f"shape {list(batch.shape[1:])}, raised {last_line(exc)}. "
                                 f"Received: workload={ref.text!r}") from None
        last = model.layers[-1] if getattr(model, "layers", None) else None
        activation = _activation_of(last) if last is not None else "linear"
        if isinstance(out, Mapping):
            return "dict", [(str(k), str(k), tuple(v.shape), "linear")
                            for k, v in out.items()]
        if isinstance(out, (list, tuple)):
            return "list", [(f"output_{i}", i, tuple(v.shape), "linear")
                            for i, v in enumerate(out)]
        return "one", [("output", None, tuple(out.shape), activation)]
    struct = getattr(model, "_outputs_struct", None)
    if struct is None:  # Keras 2 (tf_keras): its nested outputs, else the flat list
        struct = getattr(model, "_nested_outputs", None)
    if struct is None:
        struct = list(model.outputs)
        if len(struct) == 1:
            struct = struct[0]
    names = list(getattr(model, "output_names", None) or [])
    if isinstance(struct, Mapping):
        return "dict", [(str(k), str(k), tuple(t.shape), _activation_of(_layer_of(t)))
                        for k, t in struct.items()]
    if isinstance(struct, (list, tuple)):
        return "list", [(names[i] if i < len(names) else f"output_{i}", i, tuple(t.shape),
                         _activation_of(_layer_of(t))) for i, t in enumerate(struct)]
    name = names[0] if names else "output"
    return "one", [(name, None, tuple(struct.shape), _activation_of(_layer_of(struct)))]


def _compiled(model: Any) -> tuple[Any, Any]:
    """``(loss, loss_weights)`` the model's compile() gave (None, None: not compiled)."""
    loss = getattr(model, "loss", None)
    holder = getattr(model, "_compile_loss", None) or getattr(model, "compiled_loss", None)
    weights = getattr(holder, "_user_loss_weights", None) if loss is not None else None
    return loss, weights


def _per_head(value: Any, name: str, key: str | int | None, index: int,
              count: int) -> tuple[bool, Any]:
    """``(given, value)``: the entry of a compile() argument for one head. A single
    value is every head's (as Keras broadcasts it); a list by position; a dict by
    output name."""
    if isinstance(value, Mapping):
        for k in (key, name):
            if k in value:
                return True, value[k]
        return False, None
    if isinstance(value, (list, tuple)):
        if len(value) == count:
            return True, value[index]
        if len(value) == 1:
            return True, value[0]
        return False, None
    return True, value


def _head(spec: tuple[str, str | int | None, Any, str], compiled: Any, weight: Any) -> Head:
    import keras

    name, key, shape, activation = spec
    units = int(shape[-1]) if len(shape) == 2 and isinstance(shape[-1], int) else 0
    where = f"outputs of shape {list(shape)}" if key is None else \
        f"output {name!r} of shape {list(shape)}"
    if compiled is not None:
        label = loss_name(compiled)
        kind = label.lower().replace("_", "")
        labels, problem = None, None
        if kind in LOSS_LABELS and units:
            labels = LabelSpec(LOSS_LABELS.get(kind).labels, units)
        else:
            problem = f"the teacher cannot make labels for the loss {label} with {where}"
        return Head(name, key, shape, activation, compiled,
                    f"{label} (the model's compile())", labels,
                    None if weight is None else float(weight), problem)
    if units >= 2:
        logits = activation != "softmax"
        return Head(name, key, shape, activation,
                    keras.losses.SparseCategoricalCrossentropy(from_logits=logits),
                    f"sparse categorical cross-entropy from "
                    f"{'logits' if logits else 'softmax'} (harness default)",
                    LabelSpec("class_ids", units))
    if units == 1:
        logits = activation != "sigmoid"
        return Head(name, key, shape, activation,
                    keras.losses.BinaryCrossentropy(from_logits=logits),
                    f"binary cross-entropy from {'logits' if logits else 'sigmoid'} "
                    f"(harness default)", LabelSpec("binary", 1))
    return Head(name, key, shape, activation,
                keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                "sparse categorical cross-entropy from logits (harness default)", None,
                problem="the teacher makes labels for outputs of shape (batch, units); "
                        + (f"this model's is {list(shape)}" if key is None else
                           f"output {name!r} is {list(shape)}"))


def describe(model: Any, ref: ModelRef) -> ModelDescription:
    """What ``model`` (the user's, loaded by ``load_user_model``) trains with. Call
    inside the strategy's scope or the distribution's: a subclassed model makes its
    variables here. UserModelError naming the value where it cannot be read."""
    inputs, problems, tensors, declared = input_specs(model, ref)
    structure, outputs = _outputs_of(model, inputs, tensors, ref)
    loss, weights = _compiled(model)
    names = [name for name, *_ in outputs]
    heads = []
    for i, out in enumerate(outputs):
        name, key = out[0], out[1]
        given, own = _per_head(loss, name, key, i, len(outputs)) \
            if loss is not None else (False, None)
        if loss is not None and (not given or own is None):
            continue  # the model's compile() gives this head no loss: Keras trains none
        _, weight = _per_head(weights, name, key, i, len(outputs)) \
            if weights is not None else (False, None)
        heads.append(_head(out, own if loss is not None else None,
                           weight if isinstance(weight, (int, float)) else None))
    if not heads:
        raise UserModelError(f"{ref.display}'s model compiles no loss for any of its outputs "
                             f"({', '.join(names)}). Received: workload={ref.text!r}")
    own = getattr(model, "optimizer", None) if loss is not None else None
    return ModelDescription(model, inputs, declared, tensors, tuple(heads), structure,
                            loss is not None, own, tuple(problems))


def synth_problem(desc: ModelDescription, ref: ModelRef, has_pipeline: bool,
                  lane: str = "tf") -> str | None:
    """Why the teacher cannot feed ``desc``'s model, and what to do instead (None: it
    can). ``has_pipeline``: the module defines dataset_fn (--data tfdata reads it);
    ``lane`` ``jax``: a lane that reads no dataset_fn (TensorFlow's does)."""
    problems = desc.problems
    if not problems:
        return None
    wanted = ", ".join(s.describe() for s in desc.inputs) or "its inputs"
    if lane == "jax":
        remedy = ("The JAX lane trains on the teacher's data only: train it with --backend "
                  "tf, where a dataset_fn in the module is read with --data tfdata")
    elif has_pipeline:
        remedy = "Run with --data tfdata to read the module's dataset_fn"
    else:
        remedy = (f"To feed it, {WITHOUT_PIPELINE}: a dataset whose elements are (inputs, "
                  f"label) with inputs as model.inputs declare them "
                  f"({declared_inputs(desc.tensors)}; readable ones: {wanted})")
    return (f"{ref.display}: the harness cannot synthesise data for this model "
            f"({'; '.join(problems)}). {remedy}. Received: workload={ref.text!r}")
