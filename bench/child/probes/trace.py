"""Split each profiled step's wall time into communication, compute and the rest.

Why the raw trace: on CPU the profiler's overview page files collectives under host
compute (its device-collective figure is always 0), so the split is computed here from
the trace events themselves. TensorFlow names an op's event ``<op_name>:<OpType>`` (on
GPUs the kernel events carry the same string in their ``tf_op`` stat).

Definitions (per step, the step being the span of its ``train`` trace annotation):

- collective: wall time during which at least one *communication* op ran, on any
  thread or device (union of intervals, clipped to the step);
- compute: wall time during which some other TensorFlow op ran and no communication op;
- other: the remainder (idle, Python, dispatch, waiting).

The three add up to the step time. An op is communication when its type is a
collective, NCCL or cross-device send/receive op, or when it is a gradient packing /
reduction op (``AddN``, ``ConcatV2``, ``SplitV``...) inside the optimizer's name scope,
where Keras all-reduces the gradients (``adam/concat``, ``adam/AddN``). Those types also
occur in models and backward passes (the tape sums a tensor's gradients with top-level
``AddN`` ops), so they are counted by scope. ``Classifier`` holds that rule;
``counted_types`` states it.

The pure functions here take plain events, so the rules are testable without
TensorFlow; ``read_xspace`` (TensorFlow's protobuf) turns a captured file into them.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

STEP_MARKER = "train"  # name of the trace annotation wrapped around each profiled step

# Types that are communication wherever they appear.
COLLECTIVE_PREFIXES = ("Collective", "Nccl")  # CollectiveReduceV2, NcclAllReduce, ...
TRANSFER_TYPES = frozenset({"_Send", "_Recv", "_HostSend", "_HostRecv", "_RecvTensor",
                            "Send", "Recv", "_ScopedAllocatorConcat", "_ScopedAllocatorSplit"})
# Types that pack or reduce gradients for the all-reduce, but also occur in models and in
# backward passes (AddN sums the gradients of a tensor with several consumers).
PACKING_TYPES = frozenset({"AddN", "ConcatV2", "Concat", "SplitV", "Split", "Pack", "Unpack"})
# Name scopes in which packing types belong to the gradient all-reduce: the optimizer's
# (Keras calls replica_context.all_reduce inside apply_gradients). Default names of the
# Keras optimizers; the harness passes the run's actual optimizer name.
DEFAULT_REDUCTION_SCOPES = ("adam", "adamw", "sgd", "rmsprop", "adagrad", "nadam",
                            "loss_scale_optimizer")

_OP_EVENT = re.compile(r"^(?P<name>[^:\s][^:]*):(?P<type>[A-Za-z_][A-Za-z0-9_]*)$")
_REPLICA_PREFIX = re.compile(r"^replica_\d+/")


@dataclass(frozen=True)
class OpEvent:
    """One execution of a TensorFlow op, in picoseconds on a common clock."""

    name: str
    op_type: str
    start_ps: int
    end_ps: int


@dataclass(frozen=True)
class StepSpan:
    step: int
    start_ps: int
    end_ps: int

    @property
    def seconds(self) -> float:
        return (self.end_ps - self.start_ps) / 1e12


@dataclass(frozen=True)
class Classifier:
    """Which op events count as communication (see the module docstring)."""

    reduction_scopes: tuple[str, ...] = DEFAULT_REDUCTION_SCOPES

    def is_communication(self, name: str, op_type: str) -> bool:
        if op_type.startswith(COLLECTIVE_PREFIXES) or op_type in TRANSFER_TYPES:
            return True
        if op_type in PACKING_TYPES and "/" in name:
            scope = _REPLICA_PREFIX.sub("", name).split("/", 1)[0]
            # TensorFlow suffixes repeated scopes ("adam_1"); names compare lower-case.
            base = re.sub(r"_\d+$", "", scope).lower()
            return base in {s.lower() for s in self.reduction_scopes}
        return False

    def counted_types(self) -> list[str]:
        """The rule, in words a result file can carry."""
        return ([f"{p}* (any scope)" for p in COLLECTIVE_PREFIXES]
                + [f"{t} (any scope)" for t in sorted(TRANSFER_TYPES)]
                + [f"{t} (inside scopes {', '.join(self.reduction_scopes)})"
                   for t in sorted(PACKING_TYPES)])


@dataclass
class StepBreakdown:
    step: int
    step_s: float
    collective_s: float
    compute_s: float
    other_s: float

    @property
    def comm_fraction(self) -> float:
        return self.collective_s / self.step_s if self.step_s > 0 else 0.0


@dataclass
class Breakdown:
    steps: list[StepBreakdown]
    op_types: dict[str, int] = field(default_factory=dict)  # communication types seen


def parse_op_name(text: str) -> tuple[str, str] | None:
    """``"adam/AddN:AddN"`` -> ``("adam/AddN", "AddN")``; None for other events."""
    if "::" in text:  # C++ scopes such as ThreadpoolListener::Record
        return None
    m = _OP_EVENT.match(text)
    return (m.group("name"), m.group("type")) if m else None


def union_length(intervals: Iterable[tuple[int, int]]) -> int:
    """Total length covered by possibly overlapping ``[start, end)`` intervals."""
    total, cur_start, cur_end = 0, None, None
    for start, end in sorted(intervals):
        if end <= start:
            continue
        if cur_end is None or start > cur_end:
            if cur_end is not None and cur_start is not None:
                total += cur_end - cur_start
            cur_start, cur_end = start, end
        else:
            cur_end = max(cur_end, end)
    if cur_end is not None and cur_start is not None:
        total += cur_end - cur_start
    return total


def _clip(ev: OpEvent, span: StepSpan) -> tuple[int, int] | None:
    start, end = max(ev.start_ps, span.start_ps), min(ev.end_ps, span.end_ps)
    return (start, end) if end > start else None


def breakdown(ops: Sequence[OpEvent], steps: Sequence[StepSpan],
              classifier: Classifier | None = None) -> Breakdown:
    """Per-step collective / compute / other seconds (they sum to the step time)."""
    rule = classifier or Classifier()
    comm_flags = [rule.is_communication(ev.name, ev.op_type) for ev in ops]
    seen: Counter[str] = Counter()
    out: list[StepBreakdown] = []
    for span in sorted(steps, key=lambda s: s.start_ps):
        comm: list[tuple[int, int]] = []
        busy: list[tuple[int, int]] = []
        for ev, is_comm in zip(ops, comm_flags, strict=True):
            clipped = _clip(ev, span)
            if clipped is None:
                continue
            busy.append(clipped)
            if is_comm:
                comm.append(clipped)
                seen[ev.op_type] += 1
        comm_ps = union_length(comm)
        compute_ps = union_length(busy) - comm_ps  # busy with something, but not comm
        step_ps = span.end_ps - span.start_ps
        out.append(StepBreakdown(step=span.step, step_s=step_ps / 1e12,
                                 collective_s=comm_ps / 1e12, compute_s=compute_ps / 1e12,
                                 other_s=(step_ps - comm_ps - compute_ps) / 1e12))
    return Breakdown(out, dict(sorted(seen.items())))


# -- reading a captured profile (needs TensorFlow's protobuf module) --------------------
def find_xspace(logdir: Path) -> Path:
    """The newest ``*.xplane.pb`` under ``logdir/plugins/profile``."""
    found = sorted((logdir / "plugins" / "profile").glob("*/*.xplane.pb"),
                   key=lambda p: p.stat().st_mtime)
    if not found:
        raise FileNotFoundError(f"no *.xplane.pb under {logdir}/plugins/profile: the "
                                f"profiler wrote nothing. Received: logdir={str(logdir)!r}")
    return found[-1]


def read_xspace(path: Path, marker: str = STEP_MARKER) -> tuple[list[OpEvent], list[StepSpan]]:
    """Op events and step spans of a captured ``.xplane.pb`` file."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    space = xplane_pb2.XSpace()
    space.ParseFromString(Path(path).read_bytes())
    ops: list[OpEvent] = []
    steps: list[StepSpan] = []
    for plane in space.planes:
        stat_names = {i: m.name for i, m in plane.stat_metadata.items()}
        tf_op_id = next((i for i, n in stat_names.items() if n == "tf_op"), None)
        step_num_id = next((i for i, n in stat_names.items() if n == "step_num"), None)
        for line in plane.lines:
            base_ps = line.timestamp_ns * 1000
            for ev in line.events:
                text = plane.event_metadata[ev.metadata_id].name
                start = base_ps + ev.offset_ps
                end = start + ev.duration_ps
                if text == marker:
                    num = next((s.int64_value or s.uint64_value for s in ev.stats
                                if s.metadata_id == step_num_id), len(steps))
                    steps.append(StepSpan(int(num), start, end))
                    continue
                parsed = parse_op_name(text)
                if parsed is None and tf_op_id is not None:  # GPU kernels carry tf_op
                    ref = next((s for s in ev.stats if s.metadata_id == tf_op_id), None)
                    if ref is not None:
                        # Strings are either inline or interned in the stat metadata.
                        value = ref.str_value or (plane.stat_metadata[ref.ref_value].name
                                                  if ref.ref_value else "")
                        parsed = parse_op_name(value)
                if parsed is not None:
                    ops.append(OpEvent(parsed[0], parsed[1], start, end))
    return ops, steps
