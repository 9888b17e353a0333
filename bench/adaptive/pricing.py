"""What a configuration costs on this machine, before it runs and after.

A sweep plans what its budget buys, so every configuration has a price: its process
start-up, its build, its warm-up (tracing, graph optimisation, the first steps), its
measured windows and its evidence profile. The
first guess comes from the model's training FLOPs (``Workload.train_flops``) over the
card's datasheet peak (``bench.hardware.gpu_model``), and from the strategy's process
layout (``StrategyFactory.plan``: how many processes start, how many replicas one
process traces). Once the sweep has measured a configuration its stored figures
replace the guess, and the configurations not measured yet have their guess scaled by
how far the guesses of the measured ones were off, component by component.
"""

from __future__ import annotations

import math
import os
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, fields

from bench import gpu_build, sim
from bench.hardware import Hardware, gpu_model
from bench.results.schema import RunResult
from bench.sim.faults import FAULTS_VAR, Faults
from bench.sim_model import convolutional, step_model
from bench.spec import RunSpec
from bench.strategies import STRATEGIES
from workloads import find_workload

# -- first guesses (GPUs); each is replaced by what the sweep measures -------------------
# Python, `import tensorflow`, the CUDA context and its libraries (cuDNN, cuBLAS), per
# process.
STARTUP_S = 12.0
# Processes started together contend for the host's cores and disk while they import:
# each one more adds this share of a start-up.
EXTRA_PROCESS_SHARE = 0.1
# Building the model, optimizer and data on the devices, per unit of the workload's
# ``cost_hint`` (ResNet50: 4).
BUILD_S_PER_HINT = 1.5
# Tracing and optimising the step's graph once, per unit of ``cost_hint``; an
# in-process strategy traces the step once per replica it holds (on 2 cores ResNet50
# traced in 12 s on one device and 27 s on two), so each more replica in one process
# adds this share again.
TRACE_S_PER_HINT = 2.5
REPLICA_TRACE_SHARE = 0.75
# Share of the datasheet peak a training step reaches: NVIDIA's TensorFlow ResNet50
# reaches 909 img/s on an A100 with TF32 and XLA (13% of its TF32 peak), Keras 3
# without XLA less. Windows are priced at their time bound, so this prices only the
# warm-up and the profiled steps.
FIRST_GUESS_MFU = 0.07
# A step of unknown FLOPs (a user's model, or a card not in the datasheet table).
UNKNOWN_STEP_S = 0.1
# On a CPU: what a training step reaches per core (ResNet50 at 224x224 trained at ~105
# GFLOP/s a core on an Intel Xeon with AMX, a CNN at ~95; a Zen 4 without AMX less), low
# so that a session the budget cannot pay for is not opened; and a process's start-up,
# mostly `import tensorflow` (4-5 s cold on two cores).
CPU_FLOPS_PER_CORE = 50e9
CPU_STARTUP_S = 6.0
# Starting and writing a profile after the windows, besides the profiled steps.
PROFILE_CAPTURE_S = 3.0
# Which datasheet peak bounds a precision's matmuls (as the child's peak probe reads it).
_PRECISION_DTYPE = {"float32": "float32", "mixed_bfloat16": "bfloat16",
                    "mixed_float16": "float16"}


@dataclass(frozen=True)
class GpuCosts:
    """First guesses of what a GPU run pays besides its steps, in seconds. On a
    simulated server (``bench.sim``) the profile's own costs, which is how a profile
    answers "would this plan fit on that machine?"."""

    cudnn_autotune_s: float = 4.0  # a convolutional model's first step, per GPU
    nccl_init_s: float = 3.0  # a communicator over the run's GPUs (its first collective)
    cupti_s: float = 3.0  # the profiler's start and stop
    trace_parse_per_gpu_s: float = 2.0  # reading one GPU's trace of a profile
    # The driver's JIT of TensorFlow's PTX on a card its wheel has no SASS for, once per
    # cold CUDA cache: TensorFlow warns it "could take 30 minutes or longer"; with lazy
    # module loading only the kernels a model uses are compiled.
    jit_s: float = 300.0
    peak_probe_s: float = 8.0  # the achievable peak measured once per machine
    startup_s: float = STARTUP_S
    build_s_per_hint: float = BUILD_S_PER_HINT
    trace_s_per_hint: float = TRACE_S_PER_HINT
    replica_trace_share: float = REPLICA_TRACE_SHARE

    @classmethod
    def here(cls) -> GpuCosts:
        simulated = sim.active()
        if simulated is None:
            return cls()
        c = simulated.costs
        # A JIT asked for as a fault (STRATBENCH_GPU_SIM_FAULTS=jit=S) is the one priced.
        jit = Faults.parse(os.environ.get(FAULTS_VAR, ""), "").jit_s
        return cls(c.cudnn_autotune_s, c.nccl_init_s, c.cupti_s, c.trace_parse_per_gpu_s,
                   c.jit_s if jit is None else jit, c.peak_probe_s,
                   startup_s=c.process_start_s + c.import_tf_s + c.cuda_init_s,
                   build_s_per_hint=c.build_s, trace_s_per_hint=c.trace_s,
                   replica_trace_share=c.trace_per_replica_share)


class PriceError(ValueError):
    """A price that cannot be: a negative or non-finite duration."""


@dataclass(frozen=True)
class Price:
    """Seconds one run of a configuration costs, by where they go.

    ``startup_s`` is paid once per process start: configurations measured as arms of
    one process (``bench.launch.groups``) share it (``unit_price``).
    """

    startup_s: float
    build_s: float
    warmup_s: float
    windows_s: float
    profile_s: float = 0.0
    source: str = "first guess"

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name != "source" and (not isinstance(value, (int, float))
                                       or not math.isfinite(value) or value < 0):
                raise PriceError(f"Price.{f.name} must be a finite number of seconds >= 0. "
                                 f"Received: {f.name}={value!r}")

    @property
    def total_s(self) -> float:
        """The run alone, in its own process."""
        return self.startup_s + self.arm_s

    @property
    def arm_s(self) -> float:
        """The run as an arm of a process another configuration started."""
        return self.build_s + self.warmup_s + self.windows_s + self.profile_s

    def text(self) -> str:
        """``~61 s: start-up 12, build 6, warm-up 10, windows 30, profile 3 (first guess)``"""
        parts = [("start-up", self.startup_s), ("build", self.build_s),
                 ("warm-up", self.warmup_s), ("windows", self.windows_s),
                 ("profile", self.profile_s)]
        return (f"~{self.total_s:.0f} s: " + ", ".join(f"{n} {v:.0f}" for n, v in parts if v)
                + f" ({self.source})")

    def scaled(self, factors: dict[str, float], source: str) -> Price:
        """Each component times its factor (missing: 1)."""
        return Price(**{n: getattr(self, n) * factors.get(n, 1.0) for n in _COMPONENTS},
                     source=source)


_COMPONENTS = ("startup_s", "build_s", "warmup_s", "windows_s", "profile_s")


def window_s(spec: RunSpec, step_s: float) -> float:
    """How long one window of ``spec`` lasts at ``step_s`` a step: its ``max_seconds``,
    or ``min_steps`` steps where those take longer, ``max_steps`` at most."""
    return min(spec.max_steps * step_s, max(spec.max_seconds, spec.min_steps * step_s))


def priced_window_s(spec: RunSpec, step_s: float) -> float:
    """One window as a first guess prices it: its time bound (``max_seconds``, or
    ``min_steps`` steps where those take longer). A guessed step too fast must not cut
    the window short at ``max_steps``: the window then runs to its time bound."""
    return max(spec.max_seconds, spec.min_steps * step_s)


def windows_s(result: RunResult) -> float:
    """Seconds of ``result``'s measured windows (0 without figures)."""
    return sum(w.wall_s for w in result.figures.windows) if result.figures else 0.0


def measured_price(result: RunResult) -> Price | None:
    """What a stored run cost, from its figures (None: it has no figures)."""
    f = result.figures
    if result.status != "ok" or f is None:
        return None
    profile = f.breakdown.capture_s if f.breakdown is not None else 0.0
    # The JIT a cold CUDA cache cost is paid once per machine (``Pricer.one_time``),
    # not by this configuration's next run.
    return Price(f.startup.import_framework_s + f.startup.device_setup_s, f.startup.build_s,
                 max(0.0, f.warmup.total_s - f.warmup.jit_s), windows_s(result), profile,
                 source="measured")


class Pricer:
    """Prices configurations on ``hw``: measured where ``results`` hold a run of the
    configuration, else the first guess, scaled by how far the guesses of the measured
    ones were off. ``evidence_steps``: steps profiled after a first run's windows (0:
    none, ``--no-profile``)."""

    def __init__(self, hw: Hardware, results: Iterable[RunResult] = (),
                 evidence_steps: int = 0) -> None:
        self.hw = hw
        self.evidence_steps = evidence_steps
        self.costs = GpuCosts.here()
        # How the wheel runs on the card (nvidia-smi asked once): a JIT under a CUDA
        # cache too small to keep it (CUDA_CACHE_MAXSIZE set below what TensorFlow's
        # kernels take) is paid by every process, not the machine once.
        self.support = gpu_build.support_of(hw.gpus[0]) if hw.gpus else None
        children = {**os.environ, **gpu_build.cuda_cache_env(os.environ)}  # child_env's
        self.jit_every_process = self.support is not None and self.support.kind == "jit" \
            and not gpu_build.cache_keeps_jit(children)
        by_key: dict[str, list[Price]] = {}
        specs: dict[str, RunSpec] = {}
        for r in results:
            price = measured_price(r)
            if price is not None:
                by_key.setdefault(r.key, []).append(price)
                specs[r.key] = r.spec
        self.measured = {k: _median_price(v) for k, v in by_key.items()}
        self.factors = _factors([(self.first_guess(specs[k]), p)
                                 for k, p in self.measured.items()])

    def price(self, spec: RunSpec) -> Price:
        """One run of ``spec``."""
        if spec.key() in self.measured:
            return self.measured[spec.key()]
        guess = self.first_guess(spec)
        if not self.factors:
            return guess
        return guess.scaled(self.factors, f"first guess scaled to {len(self.measured)} "
                                          f"measured configuration(s)")

    def step_s(self, spec: RunSpec) -> float:
        """A first guess of one training step: the FLOPs of a replica's batch over the
        card's peak at ``FIRST_GUESS_MFU`` (on a simulated server, its model's step)."""
        simulated = sim.active()
        if simulated is not None and self.hw.gpus:
            try:
                return step_model(simulated, spec, spec.devices).seconds * spec.grad_accum
            except Exception:  # a model the simulation does not know: the plain guess
                pass
        flops_of = find_workload(spec.workload).train_flops
        if flops_of is not None and not self.hw.gpus:
            flops = flops_of(spec.workload_params()) * spec.global_batch * spec.grad_accum
            return flops / (CPU_FLOPS_PER_CORE * max(1, self.hw.cores))
        model = gpu_model(self.hw.gpus[0].name) if self.hw.gpus else None
        if flops_of is None or model is None:
            return UNKNOWN_STEP_S
        peak = model.peaks(spec.tf32).get(_PRECISION_DTYPE.get(spec.precision, "float32"))
        if not peak:
            return UNKNOWN_STEP_S
        flops = flops_of(spec.workload_params()) * spec.per_replica_batch * spec.grad_accum
        return flops / (peak * FIRST_GUESS_MFU)

    def first_guess(self, spec: RunSpec) -> Price:
        """The price from FLOPs, peak and the strategy's process layout alone."""
        factory = STRATEGIES.get(spec.strategy)
        tasks = factory.plan(spec, self.hw)
        local = max((t.local_devices for t in tasks), default=1)
        hint = find_workload(spec.workload).cost_hint
        step = self.step_s(spec) * spec.steps_per_call
        window = priced_window_s(spec, step) if self.hw.gpus else window_s(spec, step)
        profiled = (self.evidence_steps and spec.mode == "train"
                    and factory.no_profile_reason is None)
        gpu = self.gpu_fixed(spec, local)
        c = self.costs
        startup = c.startup_s if self.hw.gpus else CPU_STARTUP_S
        if self.jit_every_process:  # the cache cannot keep it: each process compiles
            startup += c.jit_s
        return Price(
            startup * (1 + EXTRA_PROCESS_SHARE * (len(tasks) - 1)) + gpu[2],
            c.build_s_per_hint * hint,
            c.trace_s_per_hint * hint * (1 + c.replica_trace_share * (local - 1))
            + spec.warmup_steps * step + gpu[0],
            spec.repeats * window,
            (self.evidence_steps * step + PROFILE_CAPTURE_S + gpu[1]) if profiled else 0.0)

    def gpu_fixed(self, spec: RunSpec, local: int) -> tuple[float, float, float]:
        """What a GPU run pays once besides its steps: in its warm-up, NCCL's set-up;
        in its profile, CUPTI and reading each GPU's trace; per process (with its
        start-up, which arms of one process share), cuDNN's autotuning on each GPU of a
        convolutional model (kept for the process's life). Zeros without GPUs."""
        if not self.hw.gpus:
            return 0.0, 0.0, 0.0
        c = self.costs
        autotune = c.cudnn_autotune_s * local if convolutional(spec) else 0.0
        return (c.nccl_init_s if STRATEGIES.get(spec.strategy).all_reduces(spec) else 0.0,
                c.cupti_s + c.trace_parse_per_gpu_s * local, autotune)

    def one_time(self) -> list[tuple[str, float]]:
        """What the first run on this machine pays once, before anything is measured
        (what, seconds): the driver's JIT of TensorFlow's kernels where the wheel has no
        SASS for the card and the CUDA cache does not hold them yet; the card's
        achievable peak where no run measured it yet."""
        if not self.hw.gpus or self.measured:
            return []
        out: list[tuple[str, float]] = []
        support = self.support
        if support is not None and support.kind == "jit" and not jit_cached() \
                and not self.jit_every_process:
            out.append((f"the first call's JIT ({support.reason}; kept in "
                        f"{gpu_build.cuda_cache_dir()} for later runs)", self.costs.jit_s))
        if not gpu_build.peak_cached():
            out.append(("the card's achievable peak, measured once per machine",
                        self.costs.peak_probe_s))
        return out


def unit_price(prices: Sequence[Price]) -> float:
    """Seconds of one unit of a sweep: configurations that share a process pay one
    start-up (the largest), each its own build, warm-up, windows and profile."""
    if not prices:
        return 0.0
    return max(p.startup_s for p in prices) + sum(p.arm_s for p in prices)


def _median_price(prices: Sequence[Price]) -> Price:
    return Price(**{n: statistics.median(getattr(p, n) for p in prices) for n in _COMPONENTS},
                 source="measured")


def _factors(pairs: Sequence[tuple[Price, Price]]) -> dict[str, float]:
    """Per component, the median of measured over guessed (components never guessed
    above zero keep their guess)."""
    out: dict[str, float] = {}
    for n in _COMPONENTS:
        ratios = [getattr(m, n) / getattr(g, n) for g, m in pairs if getattr(g, n) > 0]
        if ratios:
            out[n] = statistics.median(ratios)
    return out


def jit_cached() -> bool:
    """Whether a run has JIT-compiled TensorFlow's kernels into the CUDA cache already."""
    return gpu_build.jit_marker().exists()


def session_guess(unit: Sequence[RunSpec], hw: Hardware, rounds: int,
                  sessions: int = 1) -> float:
    """A first guess of ``sessions`` first sessions of ``unit`` measured together, before
    anything of its workload ran: each configuration at ``rounds`` windows, one start-up
    per session (the largest), every build and warm-up."""
    pricer = Pricer(hw)
    prices = [pricer.first_guess(s.replace(repeats=rounds)) for s in unit]
    one = unit_price(prices)
    fixed = one - sum(p.windows_s for p in prices)
    # Sessions measured together build side by side, each mostly on one core: more of
    # them than cores share the cores.
    return fixed * max(1.0, sessions / max(1, hw.cores)) + sessions * (one - fixed)
