"""The simulated server's model of a configuration: its step time and its memory per
card, from the profile's throughput anchors (``bench.sim.profile.Throughput``). The
stand-in child steps at this rate and the budget's first guesses on a simulated server
price with it. Shared root: no TensorFlow."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bench.errors import Unsupported
from bench.sim.profile import Profile
from bench.spec import OPTIMIZER_SLOTS, RunSpec
from bench.strategies import STRATEGIES
from workloads import Workload, find_workload
from workloads.formulas import ModelStats

# The anchor workload's parameters (its FLOPs scale the others' step time).
ANCHOR_PARAMS = {"image_size": 224, "classes": 1000}


def model_params(spec: RunSpec) -> tuple[Workload, dict[str, Any]]:
    workload = find_workload(spec.workload)
    if not isinstance(workload, Workload) or workload.train_flops is None or \
            workload.params is None:
        raise Unsupported(f"the simulated server models the built-in workloads whose FLOPs "
                          f"and parameters are known without building them. Received: "
                          f"workload={spec.workload}")
    return workload, spec.workload_params()


def convolutional(spec: RunSpec) -> bool:
    """Whether ``spec``'s model autotunes cuDNN's convolutions (``Workload.convolutional``;
    a model of the user's own is not inspected: no)."""
    workload = find_workload(spec.workload)
    return isinstance(workload, Workload) and workload.convolutional


def parameters(spec: RunSpec) -> int:
    """The model's parameters (``Workload.params``)."""
    workload, params = model_params(spec)
    assert workload.params is not None
    return workload.params(params)


def model_stats(spec: RunSpec) -> ModelStats:
    workload, params = model_params(spec)
    assert workload.train_flops is not None
    n = parameters(spec)
    train = float(workload.train_flops(params))
    return ModelStats(params=n, trainable_params=n, grad_bytes_per_step=4 * n,
                      forward_flops_per_example=train / 3, train_flops_per_example=train,
                      flops_method="simulated: analytic FLOPs",
                      optimizer=spec.optimizer, data="synthetic (simulated)")


@dataclass(frozen=True)
class StepModel:
    """One step of a process: its seconds and where they go."""

    compute_s: float
    allreduce_s: float
    host_s: float
    copies_s: float

    @property
    def seconds(self) -> float:
        return self.compute_s + self.allreduce_s + self.host_s + self.copies_s


def has_tf32(p: Profile) -> bool:
    """Ampere (8.0) and newer run float32 as TF32 by default."""
    return float(p.card.compute_capability) >= 8.0


def collective(spec: RunSpec) -> bool:
    """Whether ``spec``'s replicas all-reduce their gradients over NCCL."""
    return STRATEGIES.get(spec.strategy).all_reduces(spec)


def flops_over_anchor(p: Profile, spec: RunSpec) -> float:
    """``spec``'s training FLOPs per example over the profile's anchor workload's (its
    step time and its activations scale with them)."""
    workload, params = model_params(spec)
    anchor = find_workload(p.throughput.anchor_workload)
    assert workload.train_flops is not None
    assert isinstance(anchor, Workload) and anchor.train_flops is not None
    return workload.train_flops(params) / anchor.train_flops(
        anchor.resolve("default", ANCHOR_PARAMS))


def step_model(p: Profile, spec: RunSpec, local_replicas: int) -> StepModel:
    """The throughput model (``bench.sim.profile.Throughput``) for ``spec`` in a process
    holding ``local_replicas`` of its replicas."""
    tp = p.throughput
    best = tp.anchor_examples_s * (tp.anchor_batch + tp.half_batch) / tp.anchor_batch / \
        flops_over_anchor(p, spec)
    if spec.precision != "float32":
        best *= tp.mixed_factor
    elif not spec.tf32 and has_tf32(p):
        best /= 4.0  # CUDA cores instead of TF32 tensor cores
    b = spec.per_replica_batch
    compute = b / (best * b / (b + tp.half_batch))
    factory = STRATEGIES.get(spec.strategy)
    replicas = spec.replicas
    grad_bytes = 4 * parameters(spec)
    allreduce = 0.0
    if collective(spec):
        allreduce = grad_bytes * 2 * (replicas - 1) / replicas / p.busbw(replicas) * \
            (1 - tp.overlap)
    copies = 2 * grad_bytes * replicas / (tp.host_link_gbs * 1e9) \
        if factory.variables_on_host and replicas > 1 else 0.0
    host = tp.host_ms_per_replica / 1000 * max(0, local_replicas - 1)
    return StepModel(compute, allreduce, host, copies)


def device_memory_mib(p: Profile, spec: RunSpec, replicas: int) -> float:
    """What one card holds for ``spec``: the context, the weights with their gradients
    and optimizer slots, the activations of a replica's batch, NCCL's buffers."""
    tp = p.throughput
    per_example = tp.activation_mib_per_example * flops_over_anchor(p, spec)
    if spec.precision != "float32":
        per_example /= 2
    slots = OPTIMIZER_SLOTS.get(spec.optimizer, 2)
    weights = 4 * parameters(spec) * (2 + slots) / 2**20
    nccl = tp.nccl_mib if collective(spec) else 0.0
    return tp.context_mib + weights + per_example * spec.per_replica_batch + nccl


