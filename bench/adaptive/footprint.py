"""What a process of arms holds in host memory on a CPU, before it runs.

Sessions measured together on a CPU (``bench.launch.session.together_on``) start at
once and hold their arms side by side: two sessions of eight ResNet50 arms at 224x224
grew to about 10.5 GB each on a 24 GB machine. A process holds every arm's weights,
their gradients and the optimizer's slots, once per replica where the strategy keeps a
copy on each device (logical CPU devices share the host's memory), but only one arm's
activations at a time (the arms take turns). So the sweep measures together only the
sessions whose estimates fit ``SHARE`` of the machine's memory (``together_fitting``),
and says where one session alone may not. Parent side: no TensorFlow.
"""

from __future__ import annotations

from collections.abc import Sequence

from bench.hardware import Hardware
from bench.spec import OPTIMIZER_SLOTS, RunSpec
from bench.strategies import STRATEGIES
from workloads import Workload, find_workload

# A process that imported TensorFlow and set up its devices (~550 MiB bare).
PROCESS_BYTES = 600 * 2**20
# Activations a training step keeps for its backward pass, per forward FLOP of an
# example (float32): ResNet50 at 224x224 (7.7 GFLOP forward) keeps about 150 MB.
ACTIVATION_BYTES_PER_FLOP = 0.02
# Sessions measured together take at most this share of the machine's memory; a
# session alone above ``ALONE_SHARE`` is said before it starts.
SHARE = 0.6
ALONE_SHARE = 0.85


def arm_bytes(spec: RunSpec) -> tuple[int, int] | None:
    """(held, transient) bytes of one arm of ``spec``: its weights, gradients and
    slots on each copy it keeps; the activations of one step. None: unknown (a model
    of the user's own, a workload without a parameter count)."""
    workload = find_workload(spec.workload)
    if not isinstance(workload, Workload) or workload.params is None \
            or workload.train_flops is None:
        return None
    p = spec.workload_params()
    copies = 1 if STRATEGIES.get(spec.strategy).variables_on_host else spec.devices
    held = 4 * workload.params(p) * (2 + OPTIMIZER_SLOTS.get(spec.optimizer, 2)) * copies
    forward = workload.train_flops(p) / 3
    transient = ACTIVATION_BYTES_PER_FLOP * forward * spec.global_batch * spec.grad_accum
    return int(held), int(transient)


def process_bytes(specs: Sequence[RunSpec]) -> int | None:
    """A process of ``specs``' arms: itself, every arm held, one arm's step."""
    arms = [arm_bytes(s) for s in specs]
    if not arms or any(a is None for a in arms):
        return None
    known = [a for a in arms if a is not None]
    return PROCESS_BYTES + sum(h for h, _ in known) + max(t for _, t in known)


def together_fitting(units: Sequence[Sequence[RunSpec]], hw: Hardware, wanted: int) -> int:
    """How many sessions of ``units`` (up to ``wanted``, of one unit or several) can be
    measured at once on ``hw``'s memory: that many of the largest side by side within
    ``SHARE`` (1 at least; ``wanted`` where the memory or every estimate is unknown, or
    on GPUs, whose sessions keep their models on the cards)."""
    if wanted <= 1 or hw.gpus or not hw.memory_bytes:
        return wanted
    sizes = [b for u in units if (b := process_bytes(u)) is not None]
    if not sizes:
        return wanted
    return max(1, min(wanted, int(SHARE * hw.memory_bytes // max(sizes))))


def too_large(unit: Sequence[RunSpec], hw: Hardware) -> str | None:
    """Why one session of ``unit`` alone may not fit ``hw``'s memory (None: it should)."""
    size = process_bytes(unit)
    if size is None or not hw.memory_bytes or hw.gpus or size <= ALONE_SHARE * hw.memory_bytes:
        return None
    return (f"its process would hold about {size / 2**30:.1f} GiB of the machine's "
            f"{hw.memory_bytes / 2**30:.1f} GiB (every arm's weights, gradients and "
            f"optimizer slots, one step's activations)")
