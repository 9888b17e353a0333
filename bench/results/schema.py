"""The result schema: one JSON document per configuration.

Figures are typed dataclasses; each numeric field declares its unit in field
metadata, and the JSON carries a ``units`` table built from it, so a result
file describes itself. Files are written atomically and never overwritten.
A file of an earlier ``schema_version`` is brought to this one on load, one version
at a time (``MIGRATIONS``), so that every stored result still loads; a file of a later
or unknown version is refused loudly.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from bench.errors import SchemaError
from bench.spec import RunSpec
from bench.tasks import Task

T = TypeVar("T")

SCHEMA_VERSION = 2
STATUSES = ("ok", "failed", "oom", "timeout", "unsupported")

THROUGHPUT_DEFINITION = (
    "global throughput = examples processed by all replicas in the measured window / wall "
    "time of that window, with every device synchronised at both ends; warm-up excluded. "
    "per-replica throughput = global throughput / replicas. The headline figure is the "
    "median over the repeated windows."
)
STEP_TIME_DEFINITION = (
    "step = one optimizer update (grad_accum x global batch examples). Each timed sample is "
    "the interval between the ends of two calls of the compiled train function "
    "(steps_per_call steps) divided by steps_per_call; the host waits for the loss of the "
    "call two calls back (bench.child.windows.FETCH_LAG), so it keeps the device's pace "
    "without idling it each call. Every call's loss is fetched."
)
MEMORY_DEFINITION = (
    "device peak: tf.config.experimental.get_memory_info peak, reset before each window. On "
    "CPU every logical device shares one allocator, so the figure is process-wide (scope "
    "'process'). host peak RSS: VmHWM of the process, reset before each window where the "
    "kernel allows it (scope 'window'), else the lifetime peak (scope 'lifetime')."
)

COMMUNICATION_DEFINITION = (
    "from a profile of profile_steps steps taken after the throughput windows, per step: "
    "step_s = wall time of the step's trace annotation; collective_s = wall time during "
    "which at least one communication op ran (union of their trace events over all "
    "threads, clipped to the step; op types listed in op_types); compute_s = wall time "
    "during which another TensorFlow op ran and no communication op did; other_s = "
    "step_s - collective_s - compute_s (idle, Python, dispatch). comm_fraction = "
    "collective_s / step_s. profiler_overhead = median profiled step time / median "
    "unprofiled step time."
)
BREAKDOWN_DEFINITION = (
    "from the same profile, each profiled step's wall time split into five parts that add "
    "up to it: at each instant the first that applies takes the time. communication: a "
    "communication op runs (see communication); compute: another TensorFlow op runs, "
    "outside the input pipeline's threads; input: the step waits for its iterator "
    "(IteratorGetNext and GetNextFromShard waits, Iterator op types); host: the host works "
    "and no op runs (the training thread outside TensorFlow calls: Python, dispatch, "
    "function-call overhead; the executor between ops; ops that run Python, such as "
    "EagerPyFunc); idle: nothing recorded (inside a TensorFlow call, no op running). The "
    "input pipeline's own work runs on its threads beside the step and counts only as the "
    "wait it causes. Each part in s per step (means over the profiled steps, divided by "
    "steps_per_call) and as a share of the step; top: the op types (or host activities) "
    "with the most time in each part, time shared equally among what ran at once. The "
    "same parts for the custom loop and fit (a fit step runs from one batch's begin "
    "callback to the next's). capture_s = what taking and reading the profile added to "
    "the run's wall time."
)
ALLREDUCE_DEFINITION = (
    "as nccl-tests: bytes = size of the buffer each replica contributes; time = one "
    "all-reduce through the strategy's own cross-device path, devices synchronised around "
    "each timing, warm-up excluded; algbw = bytes / time; busbw = algbw x 2(n-1)/n for n "
    "replicas (the per-link traffic of an optimal ring, comparable across n)."
)
MFU_DEFINITION = (
    "mfu = train FLOPs per example (as executed: forward, weight gradients, input "
    "gradients except where the input is data) x global throughput / peak_flops_per_s, the "
    "achievable peak: the best rate of chained square matmuls of several sizes in the "
    "run's compute dtype inside one compiled function, synchronised once per call, times "
    "the number of physical devices used (logical CPU devices share one CPU: it counts "
    "once). A run whose achieved FLOP/s exceed it has the peak re-measured; if it still "
    "reads low, mfu is left empty and the result's reason names the fault of the peak. "
    "mfu_theoretical = the same achieved rate / theoretical_peak_flops_per_s (CPU: cores x "
    "clock x FLOPs per cycle of the vector units for the dtype, from /proc/cpuinfo; GPU: "
    "datasheet figure by model and dtype); empty where that peak cannot be known or reads "
    "below the measured one."
)


# Every definition a result file carries (and the reports print), by topic.
DEFINITIONS = {
    "throughput": THROUGHPUT_DEFINITION,
    "step_time": STEP_TIME_DEFINITION,
    "memory": MEMORY_DEFINITION,
    "communication": COMMUNICATION_DEFINITION,
    "breakdown": BREAKDOWN_DEFINITION,
    "allreduce": ALLREDUCE_DEFINITION,
    "mfu": MFU_DEFINITION,
}


# Which way a figure improves (``unit(..., better=...)``).
BETTER = ("higher", "lower")


def unit(u: str, default: Any = dataclasses.MISSING, *, label: str = "", define: str = "",
         detail: bool = False, better: str = "", window: str = "", compare: str = "",
         why_missing: str = "") -> Any:
    """A dataclass field carrying its unit in metadata.

    ``label`` (a short name, without the unit) makes the field a figure
    (``bench.results.figures``): its path is its one machine name in the CSV, ``bench
    show``, TensorBoard, ``bench compare`` and the pytest-benchmark output; the label
    heads the reports' columns, ``define`` joins their definitions. A figure says which
    way is ``better`` ("higher" or "lower"); ``window`` is the field of ``Window`` (a
    dotted path) holding each window's own value, where windows carry one; ``compare``
    names the family of ``bench compare`` whose verdict the figure takes part in.
    ``detail`` keeps it out of the ranking tables (CSV, ``bench show`` and definitions
    only). Every consumer reads these fields, so labelling one is all it takes to add a
    figure to them. ``why_missing`` names the sibling field (a ``str | None`` of the same
    dataclass) that says why the value is empty; the reports show that text where the
    figure would be (``bench.results.figures.why_missing``).
    """
    meta: dict[str, Any] = {"unit": u}
    if why_missing:
        meta["why_missing"] = why_missing
    if label:
        if better not in BETTER:
            raise SchemaError(f"unit(label={label!r}) needs better= one of "
                              f"{', '.join(BETTER)}. Received: better={better!r}")
        meta.update(label=label, define=define, detail=detail, better=better, window=window,
                    compare=compare)
    elif better or window or compare:
        raise SchemaError(f"unit(better=, window=, compare=) describe a figure, which needs a "
                          f"label. Received: better={better!r}, window={window!r}, "
                          f"compare={compare!r}")
    if default is dataclasses.MISSING:
        return field(metadata=meta)
    return field(default=default, metadata=meta)


@dataclass
class StepTimes:
    median_s: float = unit("s", label="step median", better="lower",
                           window="step_time.median_s",
                           define="median time of one optimizer step (see step time)")
    p90_s: float = unit("s", label="step p90", detail=True, better="lower",
                        window="step_time.p90_s", define="90th percentile of the step times")
    p99_s: float = unit("s")
    mean_s: float = unit("s")
    std_s: float = unit("s")
    min_s: float = unit("s")
    max_s: float = unit("s")
    samples: int = unit("timed calls")


@dataclass
class Window:
    index: int
    steps: int = unit("steps")
    examples: int = unit("examples")
    wall_s: float = unit("s")
    global_throughput: float = unit("examples/s")
    per_replica_throughput: float = unit("examples/s per replica")
    step_time: StepTimes = unit("s")
    loss_first: float = unit("nats (mean cross-entropy)")
    loss_last: float = unit("nats (mean cross-entropy)")
    device_peak_bytes: dict[str, int] = unit("bytes")
    host_peak_rss_bytes: int | None = unit("bytes")
    # Wall-clock edges of the window (after the synchronisations that open and close
    # it): windows of separate processes can then be matched in time. None in results
    # written before they were stored.
    start_ts: float | None = unit("s since the Unix epoch", None)
    end_ts: float | None = unit("s since the Unix epoch", None)
    # CPU time of the whole process during the window (user + system, every thread):
    # over wall_s it says how much of the machine the process got, so a window that
    # a neighbour's burst took cores from can be told apart. None before it was stored.
    cpu_s: float | None = unit("s", None)
    # The metered devices' energy over the window (bench.energy: NVML on GPUs, RAPL on
    # CPUs) and per example; None where there is no counter (Figures.energy_reason).
    energy_j: float | None = unit("J", None)
    joules_per_example: float | None = unit("J/example", None)
    # Which build of its arm the window measured (``bench.child.arms``: a session of
    # arms may build every arm afresh for each block of rounds); 0 for a run built once.
    build: int = 0


@dataclass
class Warmup:
    first_call_s: float = unit("s")  # tracing + graph optimisation + first step(s)
    steps: int = unit("steps")
    total_s: float = unit("s")
    # Of the first call, the driver's JIT of TensorFlow's kernels for a card its wheel
    # has no SASS for, where known (bench.gpu_build): paid once per cold CUDA cache, so
    # the budget prices it apart from the configuration's own warm-up.
    jit_s: float = unit("s", 0.0)


@dataclass
class Startup:
    """Where the time before the first measured step went, from process launch."""

    # The framework's import: TensorFlow's in its lane, JAX and Keras in the JAX lane.
    import_framework_s: float = unit("s")
    device_setup_s: float = unit("s")
    build_s: float = unit("s")  # strategy, model, optimizer, data on devices
    launch_to_first_step_s: float = unit(
        "s", label="launch to first step", detail=True, better="lower",
        define="process start until the first step returned (import, build, tracing); "
               "a process forked from the pre-imported starter counts from its fork, "
               "without the import (preimported_s)")
    # Set in a process forked from the pre-imported starter (bench.child.starter): the
    # starter's import of TensorFlow and Keras, paid once for every such process and
    # not in import_framework_s or launch_to_first_step_s. None: the process imported
    # them.
    preimported_s: float | None = unit("s", None)


@dataclass
class Memory:
    device_peak_bytes: dict[str, int] = unit(
        "bytes", label="peak device memory", better="lower", window="device_peak_bytes",
        compare="memory", why_missing="device_peak_reason",
        define="allocator peak in the measured windows, the largest over the devices; on "
               "CPU process-wide (all logical devices share one allocator); for an arm of "
               "a shared process its own share: what it holds once built plus its windows' "
               "peak above the use at their start")
    # "per_device", "process" (one allocator for all devices: CPU) or "arm" (this
    # configuration's share of an allocator that arms of one process share)
    device_scope: str = unit("")
    host_peak_rss_bytes: int | None = unit("bytes", label="peak host RSS", detail=True,
                                           better="lower", window="host_peak_rss_bytes",
                                           compare="memory",
                                           define="peak resident memory of the process")
    host_scope: str = unit("")  # "window" or "lifetime"
    # Why device_peak_bytes is empty (e.g. the allocator keeps no statistics on this
    # machine): a missing figure always says why, and the reports show the reason.
    device_peak_reason: str | None = None


@dataclass
class ModelInfo:
    params: int = unit("parameters")
    trainable_params: int = unit("parameters")
    grad_bytes_per_step: int = unit("bytes")
    forward_flops_per_example: float = unit("FLOP")
    train_flops_per_example: float = unit("FLOP")
    flops_method: str = unit("")
    # What the run fed the model and how it scored it (a user's model: inferred from the
    # model, bench.child.backends.tf.task). None in results written before they were recorded.
    inputs: list[str] | None = None  # one "name dtype[shape]" per input
    labels: str | None = None
    loss: str | None = None
    optimizer: str | None = None
    data: str | None = None


@dataclass
class Communication:
    """Where a profiled step's wall time went (see COMMUNICATION_DEFINITION)."""

    step_s: float = unit("s")  # mean over the profiled steps, as are the three below
    collective_s: float = unit("s", label="collective time", detail=True, better="lower",
                               define="wall time of a profiled step during which a "
                                      "communication op ran (see communication)")
    compute_s: float = unit("s")
    other_s: float = unit("s")
    comm_fraction: float = unit("ratio (collective_s / step_s)", label="collectives",
                                better="lower",
                                define="share of a profiled step during which a "
                                       "communication op ran (see communication)")
    op_types: dict[str, int] = unit("trace events per op type, all profiled steps")
    profile_dir: str = unit("")
    profiled_steps: int = unit("steps")
    profiler_overhead: float | None = unit("ratio (profiled / unprofiled median step)")
    counted_types: list[str] = field(default_factory=list)  # the rule, for the reader


# The parts of a profiled step, in the order reports show them (bench.child.probes.trace
# says which events claim each).
BREAKDOWN_PARTS = ("input", "compute", "communication", "host", "idle")


@dataclass
class PartTime:
    """Time per step one op type (or host activity) took within a part of the step."""

    part: str  # one of BREAKDOWN_PARTS
    name: str  # an op type ("MatMul", "CollectiveReduceV2") or a host activity
    s: float = unit("s per step")


@dataclass
class Breakdown:
    """Where a profiled step's wall time went, in five parts (see BREAKDOWN_DEFINITION)."""

    step_s: float = unit("s")  # mean over the profiled steps, as are the parts
    input_s: float = unit("s", label="input time", detail=True, better="lower",
                          define="time of a profiled step waiting for the input iterator "
                                 "(see breakdown)")
    compute_s: float = unit("s", label="compute time", detail=True, better="lower",
                            define="time of a profiled step in device ops other than "
                                   "communication (see breakdown)")
    communication_s: float = unit("s", label="communication time", detail=True,
                                  better="lower",
                                  define="time of a profiled step in collectives, sends and "
                                         "receives and gradient packing (see breakdown)")
    host_s: float = unit("s", label="host time", detail=True, better="lower",
                         define="time of a profiled step in Python, dispatch and function-"
                                "call overhead, no op running (see breakdown)")
    idle_s: float = unit("s", label="idle time", detail=True, better="lower",
                         define="time of a profiled step with nothing recorded running "
                                "(see breakdown)")
    input_share: float = unit("ratio (input_s / step_s)", label="input share", detail=True,
                              better="lower", define="input time / profiled step")
    compute_share: float = unit("ratio (compute_s / step_s)", label="compute share",
                                detail=True, better="higher",
                                define="compute time / profiled step")
    communication_share: float = unit("ratio (communication_s / step_s)",
                                      label="communication share", detail=True,
                                      better="lower",
                                      define="communication time / profiled step")
    host_share: float = unit("ratio (host_s / step_s)", label="host share", detail=True,
                             better="lower", define="host time / profiled step")
    idle_share: float = unit("ratio (idle_s / step_s)", label="idle share", detail=True,
                             better="lower", define="idle time / profiled step")
    # The op types (or host activities) with the most time per step in each part.
    top: list[PartTime] = field(default_factory=list)
    loop: str = "custom"  # the training loop profiled (RunSpec.loop)
    profile_dir: str = unit("", "")
    profiled_steps: int = unit("steps", 0)
    profiler_overhead: float | None = unit("ratio (profiled / unprofiled median step)", None)
    capture_s: float = unit("s", 0.0)

    def seconds(self, part: str) -> float:
        """The seconds per step of ``part`` (one of BREAKDOWN_PARTS)."""
        if part not in BREAKDOWN_PARTS:
            raise ValueError(f"Breakdown has no part {part!r}; parts: "
                             f"{', '.join(BREAKDOWN_PARTS)}. Received: part={part!r}")
        return float(getattr(self, f"{part}_s"))

    def ops(self, part: str) -> dict[str, float]:
        """Seconds per step by op type (or host activity) within ``part``."""
        return {t.name: t.s for t in self.top if t.part == part}


@dataclass
class AllReducePoint:
    label: str  # e.g. "64 MiB" or "gradients:resnet50"
    bytes: int = unit("bytes per replica")
    tensors: int = unit("tensors")
    time_median_s: float = unit("s")
    time_p90_s: float = unit("s")
    algbw: float = unit("bytes/s")
    busbw: float = unit("bytes/s")
    iterations: int = unit("timed all-reduces")


@dataclass
class AllReduceFigures:
    implementation: str  # the cross-device path used, e.g. "CollectiveAllReduce"
    replicas: int = unit("replicas")
    dtype: str = unit("")
    warmup_iterations: int = unit("all-reduces")
    points: list[AllReducePoint] = field(default_factory=list)


@dataclass
class TaskFigures:
    """One process of a multi-process run (None where the process cannot know)."""

    task: str  # e.g. "worker1", "ps0", "chief0", "replica2"
    role: str
    pid: int | None = None
    local_replicas: int | None = unit("replicas", None)
    examples: int | None = unit("examples", None)  # by this task's replicas, all windows
    throughput: float | None = unit("examples/s", None)  # this task's replicas, median window
    step_median_s: float | None = unit("s", None)
    launch_to_first_step_s: float | None = unit("s", None)
    host_peak_rss_bytes: int | None = unit("bytes", None)
    device_peak_bytes: dict[str, int] = field(
        default_factory=dict, metadata={"unit": "bytes", "why_missing": "device_peak_reason"})
    device_peak_reason: str | None = None  # why device_peak_bytes is empty (as Memory's)
    cores: list[int] = field(default_factory=list)
    threads: dict[str, int] = field(default_factory=dict)
    loss_end: float | None = unit("nats (mean cross-entropy)", None)
    # Sum of every trainable weight after training: synchronous workers must agree.
    weights_checksum: float | None = unit("sum of weights", None)
    # This task's own measured windows, as it measured them (empty for tasks that do
    # not measure, e.g. servers).
    windows: list[Window] = field(default_factory=list)


@dataclass
class Figures:
    # bench compare judges the time family on this figure alone: per-replica throughput,
    # step time, FLOP/s and MFU are the same measurement seen other ways up, and judging
    # each again would only multiply the chances of a false alarm.
    global_throughput: float = unit(
        "examples/s", label="throughput", better="higher", window="global_throughput",
        compare="time",
        define="examples by all replicas per second of the measured window, median of "
               "the windows (see throughput)")
    per_replica_throughput: float = unit("examples/s per replica", label="per replica",
                                         better="higher", window="per_replica_throughput",
                                         define="global throughput / replicas")
    step_time: StepTimes = unit("s")
    windows: list[Window] = unit("")
    warmup: Warmup = unit("s")
    startup: Startup = unit("s")
    memory: Memory = unit("bytes")
    model: ModelInfo = unit("")
    achieved_flops_per_s: float = unit("FLOP/s", label="achieved FLOP/s", detail=True,
                                       better="higher",
                                       define="train FLOPs per example x global throughput")
    loss_start: float = unit("nats (mean cross-entropy)", label="loss at start", detail=True,
                             better="lower",
                             define="loss of the first warm-up step, before any update")
    loss_end: float = unit("nats (mean cross-entropy)", label="loss at end", detail=True,
                           better="lower",
                           define="loss of the last measured step")
    learned: bool = unit("")  # loss_end < loss_start
    replica_divergence: float = unit("max |w_i - w_0| over variables and replicas")
    throughput_cv: float = unit("ratio (std/mean over windows)", label="window cv",
                                detail=True, better="lower",
                                define="std / mean of the window throughputs of one run "
                                       "(within-run noise)")
    # Probe figures: optional, absent from results of runs made without the probes.
    communication: Communication | None = unit("", None)
    breakdown: Breakdown | None = unit("", None)
    mfu: float | None = unit("ratio (achieved / achievable peak FLOP/s)", None, label="MFU",
                             better="higher",
                             define="model FLOPs utilisation (see mfu)")
    peak_flops_per_s: float | None = unit("FLOP/s", None)  # achievable (measured) peak
    # Against the hardware's theoretical peak (None where it cannot be known, or where
    # it reads below the measured achievable peak: then its inputs are wrong).
    mfu_theoretical: float | None = unit(
        "ratio (achieved / theoretical peak FLOP/s)", None, label="MFU theoretical",
        detail=True, better="higher",
        define="achieved FLOP/s over the hardware's theoretical peak (see mfu)")
    theoretical_peak_flops_per_s: float | None = unit("FLOP/s", None)
    # A GPU under load runs below its maximum clock (an H100 at its 700 W cap: 1335-1380
    # of 1980 MHz), so the datasheet peak overstates what it can sustain: the same peak
    # scaled to the SM clock its windows sustained (bench.hardware.sustained_clock).
    sustained_sm_clock_mhz: float | None = unit("MHz", None)
    mfu_at_clock: float | None = unit(
        "ratio (achieved / theoretical peak at the sustained clock)", None,
        label="MFU at clock", detail=True, better="higher",
        define="achieved FLOP/s over the theoretical peak scaled to the SM clock the "
               "windows sustained (GPUs: about the ceiling of a power-capped card; an "
               "estimate, not a bound: clocks sampled once a second miss brief boosts; "
               "see mfu)")
    # Why mfu is empty although the run was measured: it beat the achievable peak even
    # after the peak was measured again (a fault of the peak, not a fast run).
    peak_fault: str | None = None
    # Energy over the measured windows (bench.energy), None with the reason where this
    # machine has no counter (no GPU with NVML, no RAPL): as device memory on CPUs.
    joules_per_example: float | None = unit(
        "J/example", None, label="energy per example", better="lower",
        window="joules_per_example", compare="energy", why_missing="energy_reason",
        define="energy the metered devices used over the measured windows / the examples "
               "trained in them: NVML's counter of this run's GPUs, else the CPU packages' "
               "RAPL counter (whole sockets: other processes count too)")
    mean_power_w: float | None = unit(
        "W", None, label="mean power", detail=True, better="lower",
        why_missing="energy_reason",
        define="energy over the measured windows / their wall time (see energy per example)")
    energy_j: float | None = unit("J", None)  # over every measured window
    energy_source: str | None = None  # "nvml" or "rapl"
    energy_reason: str | None = None  # why the energy figures are empty
    # Per-process figures of multi-process runs, and how the global ones
    # were combined from them (None for single-process runs).
    tasks: list[TaskFigures] | None = unit("", None)
    combination: str | None = unit("", None)


@dataclass
class Interleaving:
    """How a run shared its process with other configurations (``bench.child.arms``).

    The arms of one session were built in one process and measured in rounds, one
    window of each arm per round: window r of two arms of one ``session`` ran
    seconds apart, a within-process pair.

    ``processes`` 2: a duet (``bench.launch.duet``), each arm its own live process
    (its own environment or interpreter), the two taking turns window by window; the
    session's pairs then hold each process's own luck, but not the machine's drift.
    """

    session: str  # shared by the arms of one process (of the two processes of a duet)
    arms: list[str]  # every arm's configuration label, in arm order
    arm: int  # this result's arm
    rounds: int = unit("windows")
    seed: int = 0  # of the build order and the rounds' orders
    processes: int = 1  # 1: the arms shared a process; 2: a duet
    builds: int = 1  # blocks of rounds, each on arms built afresh (``Window.build``)
    # Sessions measured together (``bench.launch.session.run_sessions``): their processes
    # built side by side, then took turns window by window; each keeps its own session.
    together: int = 1


@dataclass
class RunResult:
    key: str
    spec: RunSpec
    status: str
    reason: str | None
    replicas: int = unit("replicas")
    global_batch: int = unit("examples")
    per_replica_batch: int = unit("examples")
    figures: Figures | None = None
    environment: dict[str, Any] = field(default_factory=dict)
    started_at: str = ""
    finished_at: str = ""
    wall_s: float = unit("s", 0.0)
    launcher: dict[str, Any] = field(default_factory=dict)
    schema_version: int = SCHEMA_VERSION
    allreduce: AllReduceFigures | None = None  # mode "allreduce" only
    # Which process-level repetition of the configuration this is (1, 2, ...): the same
    # spec measured in separate processes at different times, so that run-to-run noise
    # is part of every answer. Results written before replication existed read as 1.
    replicate: int = 1
    # Set when the run shared its process with other configurations, windows interleaved.
    interleaved: Interleaving | None = None

    @property
    def session_wall_s(self) -> float:
        """The wall time its session cost: ``wall_s``, shared out where sessions were
        measured together (what another session of it is priced at)."""
        return self.wall_s / (self.interleaved.together if self.interleaved else 1)

    def __post_init__(self) -> None:
        check_outcome("RunResult", self.status, self.reason)

    # -- serialisation ---------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["spec"] = self.spec.to_dict()
        d["units"] = units_table(RunResult)
        d["definitions"] = dict(DEFINITIONS)
        return d

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunResult:
        data = migrate(data)
        data = {k: v for k, v in data.items() if k not in ("units", "definitions")}
        return load_strict(cls, data, "result document")


def _framework_import(doc: dict[str, Any]) -> dict[str, Any]:
    """1 -> 2: ``startup.import_tf_s`` is ``startup.import_framework_s`` (every lane's
    framework, not only TensorFlow's)."""
    figures = doc.get("figures")
    startup = figures.get("startup") if isinstance(figures, dict) else None
    if not isinstance(figures, dict) or not isinstance(startup, dict) \
            or "import_tf_s" not in startup:
        return doc
    startup = {("import_framework_s" if k == "import_tf_s" else k): v
               for k, v in startup.items()}
    return {**doc, "figures": {**figures, "startup": startup}}


# Version v -> what turns a stored document of version v into one of version v + 1 (the
# JSON as written, before it is loaded; the caller's document is never changed).
MIGRATIONS: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {
    1: _framework_import,
}


def migrate(data: dict[str, Any]) -> dict[str, Any]:
    """A stored result document brought to ``SCHEMA_VERSION``; raises SchemaError for a
    version this stratbench cannot read."""
    version = data.get("schema_version")
    readable = sorted({*MIGRATIONS, SCHEMA_VERSION})
    if isinstance(version, bool) or version not in readable:
        raise SchemaError(
            f"result schema_version {version!r} is not supported by this stratbench "
            f"(reads {', '.join(map(str, readable))}); re-run the sweep or use a "
            f"matching version")
    while version != SCHEMA_VERSION:
        data = {**MIGRATIONS[version](data), "schema_version": version + 1}
        version += 1
    return data


def check_outcome(owner: str, status: str, reason: str | None) -> None:
    """Refuse a status outside STATUSES, or one other than ok without a reason
    (raises SchemaError naming ``owner``'s field)."""
    if status not in STATUSES:
        raise SchemaError(f"{owner}.status must be one of {', '.join(STATUSES)}. "
                          f"Received: status={status!r}")
    if status != "ok" and not (reason or "").strip():
        # A failure without a reason is a lost result in disguise.
        raise SchemaError(f"{owner}.reason must explain a {status!r} status. "
                          f"Received: reason={reason!r}")


def load_strict(cls: type[T], data: Any, what: str) -> T:
    """``cls`` rebuilt from its ``asdict`` form, refusing what this version does not
    know: an unknown or missing field or a wrong shape raises SchemaError naming it
    (``what`` names the document in the message); so do the classes' own checks."""
    if not isinstance(data, dict):
        raise SchemaError(f"{what} must be a JSON object. Received: {data!r:.200}")
    try:
        return typing.cast(T, _build(cls, data))
    except (TypeError, KeyError, ValueError, AttributeError) as exc:
        raise SchemaError(f"{what} does not match schema {SCHEMA_VERSION}: {exc}") from exc


def units_table(cls: type, prefix: str = "") -> dict[str, str]:
    """Flattened ``path -> unit`` for every field that declares a unit."""
    hints = typing.get_type_hints(cls)
    table: dict[str, str] = {}
    for f in dataclasses.fields(cls):
        path = f"{prefix}{f.name}"
        sub = _dataclass_in(hints[f.name])
        if sub is not None:
            table.update(units_table(sub, path + "."))
        elif f.metadata.get("unit"):
            table[path] = f.metadata["unit"]
    return table


def _dataclass_in(tp: Any) -> type | None:
    """The dataclass inside ``X``, ``X | None`` or ``list[X]``, if any."""
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        return tp
    for arg in typing.get_args(tp):
        found = _dataclass_in(arg)
        if found is not None:
            return found
    return None


# Classes that load themselves (they validate, or convert lists back to tuples).
_OWN_LOADERS: dict[type, Callable[[Any], Any]] = {RunSpec: RunSpec.from_dict,
                                                  Task: Task.from_dict}


def _build(tp: Any, value: Any) -> Any:
    if value is None:
        return None
    if tp in _OWN_LOADERS:
        return _OWN_LOADERS[tp](value)
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        hints = typing.get_type_hints(tp)
        names = {f.name for f in dataclasses.fields(tp)}
        unknown = set(value) - names
        if unknown:
            got = ", ".join(f"{k}={value[k]!r:.80}" for k in sorted(unknown))
            raise ValueError(f"{tp.__name__} has no field(s) {', '.join(sorted(unknown))}. "
                             f"Received: {got}")
        return tp(**{k: _build(hints[k], v) for k, v in value.items()})
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in typing.get_args(tp) if a is not type(None)]
        return _build(inner[0], value) if len(inner) == 1 else value
    if origin is list:
        (item,) = typing.get_args(tp)
        return [_build(item, v) for v in value]
    return value
