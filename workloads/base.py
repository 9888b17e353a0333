"""Workload definitions: a model builder, its parameters, and a learnable synthetic task.

Importing this module does not import TensorFlow; building a model does.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from bench.errors import SpecError
from workloads.synth import InputSpec, LabelSpec
from workloads.synth import make_pool as synth_pool


@dataclass(frozen=True)
class Workload:
    """A parameterised model family with a ``default`` and a ``tiny`` variant.

    ``build(params)`` returns an uncompiled Keras model that maps inputs to
    *logits* (float32 even under mixed precision).
    """

    name: str
    description: str
    defaults: Mapping[str, Any]
    tiny: Mapping[str, Any]
    build: Callable[[Mapping[str, Any]], Any]
    input_shape: Callable[[Mapping[str, Any]], tuple[int, ...]]
    # Edge of the average-pooled view the synthetic teacher labels images from
    # (None: label from the raw features).
    teacher_pool: int | None = None
    # Extra rule on resolved parameters: returns an error message or None.
    check: Callable[[Mapping[str, Any]], str | None] | None = None
    # Rough wall time of one configuration relative to the MLP's; only used to
    # estimate the time left in a sweep before this workload has run once.
    cost_hint: float = 1.0
    # Token inputs: the vocabulary (ids in [0, vocab)); None: float inputs. A token
    # workload's pool comes from the general teacher (workloads.synth).
    vocab: Callable[[Mapping[str, Any]], int] | None = None
    # How the child counts its FLOPs: "analytic" (workloads.flops, Dense and
    # convolution layers) or "graph" (TensorFlow's op statistics of the traced step,
    # bench.child.backends.tf.flops: attention's einsums are no Dense layer).
    flops: str = "analytic"
    # Training FLOPs per example from the parameters, without building the model: the
    # first guess of a configuration's step time when a sweep prices its plan before
    # anything ran (bench.adaptive.pricing). None: unknown until a run counts them.
    train_flops: Callable[[Mapping[str, Any]], float] | None = None
    # Its parameters from the same arguments (weights, gradients and optimizer slots:
    # the memory a configuration holds, priced before it runs). None: unknown.
    params: Callable[[Mapping[str, Any]], int] | None = None
    # Model parallelism on the JAX backend (strategy model_parallel): how its weights
    # lie on a ``batch x model`` mesh, ``{variable path regex: one axis name or None per
    # dimension}`` from the parameters. Plain data, so the parent can tell whether a
    # workload has one; the child builds Keras 3's LayoutMap from it. None: no layout.
    layout: Callable[[Mapping[str, Any]], Mapping[str, tuple[str | None, ...]]] | None = None
    # The model has BatchNormalization layers: their moving statistics are variables
    # updated inside each replica's step, which some strategies cannot aggregate
    # (``StrategyFactory.batch_norm_limit``). A model of the user's own is not
    # inspected before it runs: its run finds out.
    batch_norm: bool = False
    # The model has convolutions: its first step on a GPU has cuDNN try their algorithms
    # (autotuning), once per GPU and process, a cost a sweep prices.
    convolutional: bool = False

    def resolve(self, size: str, overrides: Mapping[str, Any]) -> dict[str, Any]:
        """Parameters for a variant with overrides applied; unknown keys are errors."""
        if size not in ("default", "tiny"):
            raise SpecError(f"RunSpec.size must be default or tiny. Received: size={size!r}")
        base = dict(self.defaults if size == "default" else self.tiny)
        unknown = sorted(set(overrides) - set(base))
        if unknown:
            raise SpecError(
                f"workload {self.name} has no parameter(s) {', '.join(unknown)}; valid: "
                f"{', '.join(sorted(base))}. Received: params={dict(overrides)!r}")
        for k, v in overrides.items():
            expected = type(base[k])
            if expected is tuple and isinstance(v, list):
                v = tuple(v)
            if not isinstance(v, expected) or isinstance(v, bool) != isinstance(base[k], bool):
                raise SpecError(f"workload {self.name} parameter {k} must be "
                                f"{expected.__name__}. Received: {k}={v!r}")
            base[k] = v
        problem = self.check(base) if self.check else None
        if problem:
            raise SpecError(
                f"workload {self.name}: {problem}. Received: params={dict(overrides)!r}")
        return base

    def num_classes(self, params: Mapping[str, Any]) -> int:
        return int(params["classes"])

    def input_specs(self, params: Mapping[str, Any]) -> tuple[InputSpec, ...]:
        """The model's one input, as the general teacher describes inputs."""
        shape = tuple(self.input_shape(params))
        if self.vocab is not None:
            return (InputSpec("tokens", shape, "int32", self.vocab(params)),)
        return (InputSpec("x", shape),)

    def make_pool(self, params: Mapping[str, Any], examples: int,
                  seed: int) -> tuple[np.ndarray, np.ndarray]:
        """``examples`` synthetic examples with labels from a fixed random teacher.

        The labels are a deterministic function of the inputs (argmax of a random
        linear map of the, possibly pooled, inputs), so the task is learnable and
        the loss after training is lower than at the start. Generated once per
        run on the host, then placed on the devices (see bench.data).
        Token workloads label with the general teacher (workloads.synth).
        """
        if self.vocab is not None:
            return synth_pool(self.input_specs(params),
                              LabelSpec("class_ids", self.num_classes(params)), examples, seed)
        rng = np.random.default_rng(seed)
        shape = self.input_shape(params)
        x = rng.standard_normal((examples, *shape), dtype=np.float32)
        feats = x
        if self.teacher_pool and len(shape) == 3:
            h, w, c = shape
            p = max(1, min(self.teacher_pool, h, w))
            feats = x[:, : h - h % p, : w - w % p, :].reshape(
                examples, p, (h - h % p) // p, p, (w - w % p) // p, c).mean(axis=(2, 4))
        feats = feats.reshape(examples, -1)
        teacher = np.random.default_rng(seed + 1).standard_normal(
            (feats.shape[1], self.num_classes(params)), dtype=np.float32)
        y = np.argmax(feats @ teacher, axis=1).astype(np.int32)
        return x, y
