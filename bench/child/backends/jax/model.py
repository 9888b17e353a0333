"""What the JAX lane trains: a built-in workload or a model of the user's own, with its
inputs, its synthetic pool and how its outputs are scored (Keras 3, no TensorFlow)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from bench.errors import Unsupported
from bench.spec import RunSpec
from workloads import UserWorkload, find_workload
from workloads.synth import InputSpec, LabelSpec, make_pool


@dataclass
class JaxTask:
    """A built model, its inputs and pool, and whether its outputs are logits."""

    model: Any
    inputs: tuple[InputSpec, ...]
    pool: Callable[[int, int], tuple[Any, np.ndarray]]
    from_logits: bool
    record: dict[str, Any]


def calls_tensorflow(before: set[str]) -> bool:
    """Whether TensorFlow was imported since ``before`` (the user's code did it: Keras
    on JAX never does)."""
    return "tensorflow" in sys.modules and "tensorflow" not in before


def build_task(spec: RunSpec) -> JaxTask:
    """The spec's model (call inside the distribution's scope), seeded by the spec."""
    workload = find_workload(spec.workload)
    if isinstance(workload, UserWorkload):
        return _user_task(spec, workload)
    params = spec.workload_params()
    labels = LabelSpec("class_ids", workload.num_classes(params))
    inputs = workload.input_specs(params)
    return JaxTask(workload.build(params), inputs,
                   lambda n, seed: workload.make_pool(params, n, seed), True,
                   _record(inputs, labels, "sparse categorical cross-entropy on float32 "
                                           "logits"))


def _record(inputs: tuple[InputSpec, ...], labels: LabelSpec, loss: str) -> dict[str, Any]:
    return {"inputs": [s.describe() for s in inputs], "labels": labels.describe(),
            "loss": loss, "data": "synthetic (teacher)"}


def _user_task(spec: RunSpec, workload: UserWorkload) -> JaxTask:
    # The TF lane's readers of a user's model (bench.child.task) are Keras-only at these
    # points: loading it and reading its inputs and output activation.
    from bench.child.task import _final_activation, _input_specs, load_user_model

    before = set(sys.modules)
    model, _ = load_user_model(spec, workload.ref)
    if calls_tensorflow(before):
        raise Unsupported(f"{workload.ref.display} imports TensorFlow, which the JAX backend "
                          f"does not run (Keras 3 on JAX needs a model of Keras layers and "
                          f"keras.ops only); train it with --backend tf. Received: "
                          f"workload={spec.workload!r}, backend='jax'")
    inputs, problems, _, _ = _input_specs(model, workload.ref)
    if problems:
        raise Unsupported("; ".join(problems))
    width = int(model.outputs[0].shape[-1]) if getattr(model, "outputs", None) else 0
    if width < 2:
        raise Unsupported(f"the JAX lane scores a model of your own with sparse categorical "
                          f"cross-entropy only so far, which needs 2+ output units. "
                          f"Received: outputs={width}")
    labels = LabelSpec("class_ids", width)
    from_logits = _final_activation(model) != "softmax"
    return JaxTask(model, inputs, lambda n, seed: make_pool(inputs, labels, n, seed),
                   from_logits, _record(inputs, labels, "sparse categorical cross-entropy"
                                        + (" on logits" if from_logits else "")))
