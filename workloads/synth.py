"""Learnable synthetic data for any model's inputs: several inputs, integer token ids.

The built-in image and vector workloads label random inputs with a fixed random
"teacher" (``Workload.make_pool``: the argmax of a random linear map of the, possibly
average-pooled, inputs). This is the same teacher for what a model says it takes
(``InputSpec``: one per input of ``model.inputs``) and what its loss wants
(``LabelSpec``): every input contributes features, float inputs their (pooled) values,
token inputs the mean of a fixed random vector per token id (a bag of tokens, which an
embedding followed by pooling can learn), and the labels are read from a random linear
map of all features, in the form the loss takes (class ids, one-hot rows, 0/1 targets
or real values). A model of several outputs (``PackedLabels``: one LabelSpec per head)
gets every head's labels from one teacher, packed side by side into one float32 array
(a class id takes one column), so that every loop, sharder and pipeline that moves one
label array moves them unchanged; the loss unpacks the columns (bench.child.description).
Numpy only: the parent side may import it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from bench.registry import Registry

# Width of the random vector the teacher gives each token id.
TOKEN_FEATURES = 16
# Edge of the average-pooled view of an image input (as the built-in CNN's teacher).
TEACHER_POOL = 4


@dataclass(frozen=True)
class InputSpec:
    """One input of a model: its name, shape per example, dtype, and for integer inputs
    the range of the ids (``vocab``: ids are drawn from ``[0, vocab)``)."""

    name: str
    shape: tuple[int, ...]
    dtype: str = "float32"
    vocab: int | None = None

    def describe(self) -> str:
        """``tokens int32[128] (ids < 30522)``."""
        dims = ",".join(str(d) for d in self.shape)
        ids = f" (ids < {self.vocab})" if self.vocab is not None else ""
        return f"{self.name} {self.dtype}[{dims}]{ids}"


@dataclass(frozen=True)
class LabelSpec:
    """What the loss takes: ``kind`` (a LABEL_MAKERS name) for an output of ``width``
    units (classes for class ids and one-hot rows)."""

    kind: str
    width: int

    def describe(self) -> str:
        return LABEL_MAKERS.get(self.kind).describe.format(width=self.width)


    @property
    def columns(self) -> int:
        """Columns this head's labels take in a packed array: 1 for a class id."""
        return 1 if self.kind == "class_ids" else self.width


@dataclass(frozen=True)
class PackedLabels:
    """The labels of a model of several outputs: ``heads`` (name, LabelSpec) in the
    model's order, packed side by side into one float32 array of ``width`` columns
    (``kind`` ``packed``: what a loop that shapes a label tensor reads)."""

    heads: tuple[tuple[str, LabelSpec], ...]
    kind: str = "packed"

    @property
    def width(self) -> int:
        return sum(spec.columns for _, spec in self.heads)

    def spans(self) -> list[tuple[int, int]]:
        """``(start, stop)`` columns of each head, in order."""
        out, at = [], 0
        for _, spec in self.heads:
            out.append((at, at + spec.columns))
            at += spec.columns
        return out

    def describe(self) -> str:
        return "; ".join(f"{name}: {spec.describe()}" for name, spec in self.heads)


@dataclass(frozen=True)
class LabelMaker:
    """Labels of one kind from the teacher's scores (examples x width)."""

    describe: str
    make: Callable[[np.ndarray], np.ndarray]


LABEL_MAKERS: Registry[LabelMaker] = Registry("label kind")
LABEL_MAKERS.register("class_ids", LabelMaker(
    "class ids in [0, {width}) (int32)",
    lambda s: np.argmax(s, axis=1).astype(np.int32)))
LABEL_MAKERS.register("one_hot", LabelMaker(
    "one-hot rows of {width} classes (float32)",
    lambda s: np.eye(s.shape[1], dtype=np.float32)[np.argmax(s, axis=1)]))
LABEL_MAKERS.register("binary", LabelMaker(
    "0/1 targets, {width} per example (float32)",
    lambda s: (s > 0).astype(np.float32)))
LABEL_MAKERS.register("real", LabelMaker(
    "real-valued targets, {width} per example (float32)",
    lambda s: s.astype(np.float32)))


def _features(x: np.ndarray, pool: int) -> np.ndarray:
    """The teacher's view of a float input: an image (H, W, C) average-pooled to a
    ``pool`` x ``pool`` grid, anything else as it is; flattened per example."""
    n = x.shape[0]
    if x.ndim == 4 and pool:
        _, h, w, c = x.shape
        p = max(1, min(pool, h, w))
        x = x[:, : h - h % p, : w - w % p, :].reshape(
            n, p, (h - h % p) // p, p, (w - w % p) // p, c).mean(axis=(2, 4))
    return x.reshape(n, -1)


def _numpy_dtype(dtype: str) -> Any:
    # numpy has no bfloat16: such inputs are made as float32 (Keras casts inputs to a
    # layer's compute dtype anyway).
    return np.float32 if dtype == "bfloat16" else np.dtype(dtype)


def make_pool(inputs: Sequence[InputSpec], labels: LabelSpec | PackedLabels, examples: int,
              seed: int, pool: int = TEACHER_POOL) -> tuple[Any, np.ndarray]:
    """``examples`` synthetic examples and their labels from the teacher.

    ``x`` is the array of the only input, or a dict of arrays by input name for several
    (a functional model takes a dict keyed by its inputs' names); ``y`` the labels, for
    ``PackedLabels`` every head's side by side (float32). Deterministic in ``seed``:
    every strategy and every process sees the same pool.
    """
    rng = np.random.default_rng(seed)
    xs: dict[str, np.ndarray] = {}
    feats = []
    for i, spec in enumerate(inputs):
        if spec.vocab is not None:
            ids = rng.integers(0, spec.vocab, (examples, *spec.shape))
            xs[spec.name] = ids.astype(_numpy_dtype(spec.dtype))
            table = np.random.default_rng(seed + 2 + i).standard_normal(
                (spec.vocab, TOKEN_FEATURES), dtype=np.float32)
            feats.append(table[ids.reshape(examples, -1)].mean(axis=1))
        else:
            x = rng.standard_normal((examples, *spec.shape), dtype=np.float32)
            xs[spec.name] = x.astype(_numpy_dtype(spec.dtype), copy=False)
            feats.append(_features(x, pool))
    features = np.concatenate(feats, axis=1)
    heads = labels.heads if isinstance(labels, PackedLabels) else (("", labels),)
    teacher = np.random.default_rng(seed + 1).standard_normal(
        (features.shape[1], sum(head.width for _, head in heads)), dtype=np.float32)
    # Scaled per example (not by the pool's statistics): an example's label must not
    # depend on how many examples the pool holds.
    scores = features @ teacher / np.float32(np.sqrt(features.shape[1]))
    parts, at = [], 0
    for _, head in heads:  # each head reads its own columns of the teacher's scores
        parts.append(LABEL_MAKERS.get(head.kind).make(scores[:, at:at + head.width]))
        at += head.width
    if isinstance(labels, PackedLabels):
        y = np.concatenate([p.reshape(examples, -1).astype(np.float32) for p in parts], axis=1)
    else:
        y = parts[0]
    return (xs[inputs[0].name] if len(inputs) == 1 else xs), y


def map_inputs(fn: Callable[[Any], Any], x: Any) -> Any:
    """``fn`` applied to every input array of ``x`` (an array, or a dict of them)."""
    if isinstance(x, Mapping):
        return {k: fn(v) for k, v in x.items()}
    return fn(x)


def first_input(x: Any) -> Any:
    """One input array of ``x`` (where only its rows or its placement matter)."""
    return next(iter(x.values())) if isinstance(x, Mapping) else x


def input_bytes(x: Any) -> int:
    """Bytes of all of ``x``'s input arrays."""
    return int(sum(a.nbytes for a in (x.values() if isinstance(x, Mapping) else [x])))
