"""Split each profiled step's wall time into input, compute, communication, host and idle.

Why the raw trace: on CPU the profiler's overview page files collectives under host
compute (its device-collective figure is always 0) and has no step breakdown for
host-only profiles, so the split is computed here from the trace events themselves.
TensorFlow names an op's event ``<op_name>:<OpType>`` (on GPUs the kernel events
carry the same string in their ``tf_op`` stat).

The step is the span of its ``train`` trace annotation, made on the thread that
drives training (the *stepping thread*). At each instant of the step the first of
these that applies takes the time (``PRIORITY``), so the five add up to the step:

- communication: a communication op runs, on any thread or device (``Classifier``);
- compute: another TensorFlow op runs, outside the input pipeline's threads;
- input: the step waits for its iterator (``IteratorGetNextOp::DoCompute`` and
  ``GetNextFromShard<i>`` events, the waits of the asynchronous get-next ops, and op
  types naming an ``Iterator``);
- host: the host works and no device does: the stepping thread outside TensorFlow
  calls (Python, argument handling, dispatch), executor threads between ops
  (``ExecutorState::Process`` outside its ops), and ops that run Python
  (``EagerPyFunc``: a ``tf.py_function`` is the host's time, not a device's);
- idle: nothing recorded: the stepping thread inside a TensorFlow call while no op,
  executor work or input wait shows anywhere (threads waiting or waking up).

The input pipeline's own work (``tf.data`` threads, whose map functions run real ops)
runs beside the step and counts only through the wait it causes, as input; counted as
compute it would hide a slow pipeline behind its own ops. Within a part, time during
which several events ran at once is shared equally among them, so each part's time
is also split by op type (or host activity): the ops that add the most time per step.

An op is communication when its type is a collective, NCCL or cross-device
send/receive op, or when it is a gradient packing / reduction op (``AddN``,
``ConcatV2``, ``SplitV``...) inside the optimizer's name scope, where Keras
all-reduces the gradients (``adam/concat``, ``adam/AddN``). Those types also occur in
models and backward passes (the tape sums a tensor's gradients with top-level
``AddN`` ops), so they are counted by scope. ``Classifier`` holds these rules;
``counted_types`` states the communication one.

The pure functions here take plain events, so the rules are testable without
TensorFlow; ``read_xspace`` (TensorFlow's protobuf) turns a captured file into them.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bench.results.schema import BREAKDOWN_PARTS

STEP_MARKER = "train"  # name of the trace annotation wrapped around each profiled step

# The parts of a step (the schema's names, in the order reports show them), and the
# order in which they claim an instant when several apply (idle takes what none claims).
PARTS = BREAKDOWN_PARTS
PRIORITY = ("communication", "compute", "input", "host")

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
# Ops that run Python inside the graph (tf.py_function, tf.numpy_function).
PYTHON_OP_TYPES = frozenset({"EagerPyFunc", "PyFunc", "PyFuncStateless"})
# Waits for the next element of an iterator. The get-next ops are asynchronous: their
# op event never appears, these do (the last is the multi-device iterator's per-shard
# wait, numbered by shard: GetNextFromShard0).
INPUT_WAIT_PREFIXES = ("IteratorGetNext", "MultiDeviceIteratorGetNext", "GetNextFromShard")
# Threads of the input pipeline (tf_data_iterator_resource, tf_data_private_threadpool...).
PIPELINE_LINE_PREFIX = "tf_data"
# The executor's work loop on its threads: ops run inside it, the rest is dispatch.
EXECUTOR_EVENT = "ExecutorState::Process"
# Events during which the stepping thread waits for TensorFlow to run a function or an
# op (eager execution of either goes through one of these).
BLOCKING_EVENTS = frozenset({"KernelAndDeviceFunc::Run", "KernelAndDeviceOp::Run"})
# What host and idle time is attributed to, where it is not an op.
PYTHON_LABEL = "Python and dispatch"
EXECUTOR_LABEL = "executor (between ops)"
IDLE_LABEL = "nothing recorded"
# Labels of events that envelop others of their part (see ``attribute``).
ENVELOPE_LABELS = frozenset({EXECUTOR_LABEL})

# Builds name one op's kernels differently: oneDNN's (on by default on CPUs with
# AVX-512 VNNI/BF16 or AMX) are `_MklMatMul`, `_MklNativeFusedMatMul`,
# `_MklNativeConv2DBackpropFilterWithBias`; grappler's remapper fuses a matmul or a
# convolution with its bias and activation (`_FusedMatMul`, `_FusedConv2D`). Rules and
# labels read the op's family, so that one model's breakdown names the same ops on any
# CPU and a rule written for `AddN` holds for `_MklAddN`.
_BUILD_PREFIX = re.compile(r"^_Mkl(?:Native)?")
_FUSION_PREFIX = re.compile(r"^_?Fused(?=MatMul|BatchMatMul|Conv|DepthwiseConv)")
_FUSION_SUFFIX = re.compile(r"WithBias$")
_OP_EVENT = re.compile(r"^(?P<name>[^:\s][^:]*):(?P<type>[A-Za-z_][A-Za-z0-9_]*)$")
_REPLICA_PREFIX = re.compile(r"^replica_\d+/")
_SHARD_NUMBER = re.compile(r"\d+$")


@dataclass(frozen=True)
class TraceEvent:
    """One event of a captured trace, in picoseconds on a common clock.

    ``text`` is the event's name (``"adam/AddN:AddN"`` for an op, else a runtime
    event such as ``"IteratorGetNextOp::DoCompute"``); ``line`` the thread or device
    stream it ran on (``"tf_Compute/123"``, ``"python"``), which says whether it is
    the input pipeline's.
    """

    text: str
    line: str
    start_ps: int
    end_ps: int


@dataclass(frozen=True)
class StepSpan:
    """One profiled step: its annotation's span and the thread that made it."""

    step: int
    start_ps: int
    end_ps: int
    line: str = ""

    @property
    def seconds(self) -> float:
        return (self.end_ps - self.start_ps) / 1e12


@dataclass(frozen=True)
class Part:
    """Where an event's time goes: one of ``PARTS`` and what within it (an op type, or
    a host activity)."""

    part: str
    label: str


@dataclass(frozen=True)
class Classifier:
    """Which events count as what (see the module docstring)."""

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

    def part_of(self, event: TraceEvent) -> Part | None:
        """The part ``event`` claims while it runs; None for events that claim none
        (annotations, the pipeline's own work, runtime bookkeeping)."""
        pipeline = event.line.startswith(PIPELINE_LINE_PREFIX)
        op = parse_op_name(event.text)
        if op is None:
            if event.text.startswith(INPUT_WAIT_PREFIXES):
                return Part("input", _SHARD_NUMBER.sub("", event.text.split("Op::", 1)[0]))
            return Part("host", EXECUTOR_LABEL) if (event.text == EXECUTOR_EVENT
                                                    and not pipeline) else None
        name, op_type = op[0], op_family(op[1])
        if pipeline:
            return None
        if op_type in PYTHON_OP_TYPES:
            return Part("host", op_type)
        if "Iterator" in op_type:
            return Part("input", op_type)
        if self.is_communication(name, op_type):
            return Part("communication", op_type)
        return Part("compute", op_type)

    def counted_types(self) -> list[str]:
        """The communication rule, in words a result file can carry."""
        return ([f"{p}* (any scope)" for p in COLLECTIVE_PREFIXES]
                + [f"{t} (any scope)" for t in sorted(TRANSFER_TYPES)]
                + [f"{t} (inside scopes {', '.join(self.reduction_scopes)})"
                   for t in sorted(PACKING_TYPES)])


@dataclass
class StepSplit:
    """One step's seconds per part (they add up to ``step_s``) and per (part, label)."""

    step: int
    step_s: float
    parts: dict[str, float]
    labels: dict[Part, float]

    @property
    def comm_fraction(self) -> float:
        return self.parts["communication"] / self.step_s if self.step_s > 0 else 0.0


@dataclass
class Split:
    steps: list[StepSplit]
    op_types: dict[str, int] = field(default_factory=dict)  # communication types seen


def parse_op_name(text: str) -> tuple[str, str] | None:
    """``"adam/AddN:AddN"`` -> ``("adam/AddN", "AddN")``; None for other events."""
    if "::" in text:  # C++ scopes such as ThreadpoolListener::Record
        return None
    m = _OP_EVENT.match(text)
    return (m.group("name"), m.group("type")) if m else None


def op_family(op_type: str) -> str:
    """The op an op type computes, whatever kernel a build runs it with:
    ``_MklMatMul``, ``_MklNativeFusedMatMul``, ``_FusedMatMul`` -> ``MatMul``;
    ``_MklNativeConv2DBackpropFilterWithBias`` -> ``Conv2DBackpropFilter``; ``_MklAddN``
    -> ``AddN``. Stock names are their own family (``FusedBatchNormV3`` stays)."""
    family = _FUSION_PREFIX.sub("", _BUILD_PREFIX.sub("", op_type))
    return _FUSION_SUFFIX.sub("", family) if family != op_type else op_type


def union_length(intervals: Iterable[tuple[int, int]]) -> int:
    """Total length covered by possibly overlapping ``[start, end)`` intervals."""
    return sum(end - start for start, end in merged(intervals))


def merged(intervals: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """``intervals`` as disjoint sorted ``[start, end)`` intervals (empty ones dropped)."""
    out: list[tuple[int, int]] = []
    for start, end in sorted(intervals):
        if end <= start:
            continue
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


def outside(span: tuple[int, int], covered: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """The parts of ``span`` that no interval of ``covered`` overlaps."""
    gaps, cursor = [], span[0]
    for start, end in merged(covered):
        if start > cursor:
            gaps.append((cursor, min(start, span[1])))
        cursor = max(cursor, end)
        if cursor >= span[1]:
            break
    if cursor < span[1]:
        gaps.append((cursor, span[1]))
    return [(s, e) for s, e in gaps if e > s]


def attribute(claims: Sequence[tuple[int, int, Part]], span: tuple[int, int]
              ) -> dict[Part, int]:
    """Picoseconds of ``span`` per (part, label): at each instant the first part of
    ``PRIORITY`` with a running claim takes it, shared equally among that part's
    claims running then (an enveloping claim, ``ENVELOPE_LABELS``, only where no other
    of its part runs); an instant no claim covers is idle."""
    edges: list[tuple[int, int, Part]] = []
    for start, end, part in claims:
        start, end = max(start, span[0]), min(end, span[1])
        if end > start:
            edges += [(start, 1, part), (end, -1, part)]
    edges.sort(key=lambda e: (e[0], e[1]))
    running: dict[str, Counter[str]] = {p: Counter() for p in PRIORITY}
    out: Counter[Part] = Counter()
    cursor = span[0]

    def settle(until: int) -> None:
        if until <= cursor:
            return
        owner = next((p for p in PRIORITY if running[p].total() > 0), None)
        if owner is None:
            out[Part("idle", IDLE_LABEL)] += until - cursor
            return
        active = running[owner]
        # The executor's own event holds the ops it runs: it takes only instants where
        # none of them runs (an EagerPyFunc is the host's time, not shared with it).
        inner = {k: v for k, v in active.items() if v > 0 and k not in ENVELOPE_LABELS}
        shares = inner or active
        total = sum(shares.values())
        for label, count in shares.items():
            if count > 0:
                out[Part(owner, label)] += (until - cursor) * count // total

    for t, delta, part in edges:
        settle(t)
        cursor = max(cursor, t)
        running[part.part][part.label] += delta
        if running[part.part][part.label] <= 0:
            del running[part.part][part.label]
    settle(span[1])
    # Integer shares may leave a few picoseconds: they go to the largest entry, so
    # that the parts add up to the step exactly.
    rest = (span[1] - span[0]) - sum(out.values())
    if rest and out:
        out[max(out, key=lambda k: out[k])] += rest
    return dict(out)


def split(events: Sequence[TraceEvent], steps: Sequence[StepSpan],
          classifier: Classifier | None = None) -> Split:
    """Per-step seconds of every part (they sum to the step time) and per op type."""
    rule = classifier or Classifier()
    # A trace repeats few names many times (a ResNet50 step has ~80k events): each name
    # is classified once, on a pipeline thread or not.
    known: dict[tuple[str, bool], Part | None] = {}

    def part_of(ev: TraceEvent) -> Part | None:
        key = (ev.text, ev.line.startswith(PIPELINE_LINE_PREFIX))
        if key not in known:
            known[key] = rule.part_of(ev)
        return known[key]

    claimed = [(ev.start_ps, ev.end_ps, part) for ev in events
               if (part := part_of(ev)) is not None]
    seen: Counter[str] = Counter()
    out: list[StepSplit] = []
    for span in sorted(steps, key=lambda s: s.start_ps):
        window = (span.start_ps, span.end_ps)
        claims = [c for c in claimed if c[1] > span.start_ps and c[0] < span.end_ps]
        seen.update(p.label for _, _, p in claims if p.part == "communication")
        # The stepping thread outside TensorFlow calls is the host's (Python, dispatch).
        calls = [(ev.start_ps, ev.end_ps) for ev in events
                 if ev.line == span.line and ev.text in BLOCKING_EVENTS]
        claims += [(s, e, Part("host", PYTHON_LABEL)) for s, e in outside(window, calls)]
        labels = attribute(claims, window)
        parts = dict.fromkeys(PARTS, 0.0)
        for p, ps in labels.items():
            parts[p.part] += ps / 1e12
        out.append(StepSplit(step=span.step, step_s=span.seconds, parts=parts,
                             labels={p: ps / 1e12 for p, ps in labels.items()}))
    return Split(out, dict(sorted(seen.items())))


def _may_claim(text: str) -> bool:
    """Whether an event of this name can claim time or bound a TensorFlow call."""
    return (parse_op_name(text) is not None or text.startswith(INPUT_WAIT_PREFIXES)
            or text == EXECUTOR_EVENT or text in BLOCKING_EVENTS)


# -- reading a captured profile (needs TensorFlow's protobuf module) --------------------
def find_xspace(logdir: Path) -> Path:
    """The newest ``*.xplane.pb`` under ``logdir/plugins/profile``."""
    found = sorted((logdir / "plugins" / "profile").glob("*/*.xplane.pb"),
                   key=lambda p: p.stat().st_mtime)
    if not found:
        raise FileNotFoundError(f"no *.xplane.pb under {logdir}/plugins/profile: the "
                                f"profiler wrote nothing. Received: logdir={str(logdir)!r}")
    return found[-1]


def read_xspace(path: Path, marker: str = STEP_MARKER
                ) -> tuple[list[TraceEvent], list[StepSpan]]:
    """Events and step spans of a captured ``.xplane.pb`` file."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    space = xplane_pb2.XSpace()
    space.ParseFromString(Path(path).read_bytes())
    events: list[TraceEvent] = []
    steps: list[StepSpan] = []
    for plane in space.planes:
        stat_names = {i: m.name for i, m in plane.stat_metadata.items()}
        tf_op_id = next((i for i, n in stat_names.items() if n == "tf_op"), None)
        step_num_id = next((i for i, n in stat_names.items() if n == "step_num"), None)
        device = plane.name.startswith("/device:")
        # Host events whose name no rule reads (thread-pool and allocation records, the
        # pipeline's iterator stages) are most of a trace: dropped by name, once per name.
        names = {i: m.name for i, m in plane.event_metadata.items()
                 if device or m.name == marker or _may_claim(m.name)}
        for line in plane.lines:
            base_ps = line.timestamp_ns * 1000
            line_name = line.display_name or line.name
            if device:  # GPU streams: keep the device in the name
                line_name = f"{plane.name}/{line_name}"
            for ev in line.events:
                text = names.get(ev.metadata_id)
                if text is None or (ev.duration_ps <= 0 and text != marker):
                    continue
                start = base_ps + ev.offset_ps
                end = start + ev.duration_ps
                if text == marker:
                    num = next((s.int64_value or s.uint64_value for s in ev.stats
                                if s.metadata_id == step_num_id), len(steps))
                    steps.append(StepSpan(int(num), start, end, line_name))
                    continue
                if device and parse_op_name(text) is None and tf_op_id is not None:
                    # GPU kernels name their op in the tf_op stat; strings are either
                    # inline or interned in the stat metadata.
                    ref = next((s for s in ev.stats if s.metadata_id == tf_op_id), None)
                    if ref is not None:
                        text = ref.str_value or (plane.stat_metadata[ref.ref_value].name
                                                 if ref.ref_value else text)
                events.append(TraceEvent(text, line_name, start, end))
    return events, steps
