"""What a configuration costs on this machine, before it runs and after.

A sweep plans what its budget buys (DESIGN.md, principle 15), so every configuration
has a price: its process start-up, its build, its warm-up (tracing, graph
optimisation, the first steps), its measured windows and its evidence profile. The
first guess comes from the model's training FLOPs (``Workload.train_flops``) over the
card's datasheet peak (``bench.hardware.gpu_model``), and from the strategy's process
layout (``StrategyFactory.plan``: how many processes start, how many replicas one
process traces). Once the sweep has measured a configuration its stored figures
replace the guess, and the configurations not measured yet have their guess scaled by
how far the guesses of the measured ones were off, component by component.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, fields

from bench.hardware import Hardware, gpu_model
from bench.results.schema import RunResult
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
# Share of the datasheet peak a training step reaches. A first guess on the low side:
# a step priced too slow only lengthens the warm-up steps' share of the price (windows
# end on time, not steps).
FIRST_GUESS_MFU = 0.1
# A step of unknown FLOPs (a user's model, or a card not in the datasheet table).
UNKNOWN_STEP_S = 0.1
# Starting and writing a profile after the windows, besides the profiled steps.
PROFILE_CAPTURE_S = 3.0
# Which datasheet peak bounds a precision's matmuls (as the child's peak probe reads it).
_PRECISION_DTYPE = {"float32": "float32", "mixed_bfloat16": "bfloat16",
                    "mixed_float16": "float16"}


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


def windows_s(result: RunResult) -> float:
    """Seconds of ``result``'s measured windows (0 without figures)."""
    return sum(w.wall_s for w in result.figures.windows) if result.figures else 0.0


def measured_price(result: RunResult) -> Price | None:
    """What a stored run cost, from its figures (None: it has no figures)."""
    f = result.figures
    if result.status != "ok" or f is None:
        return None
    profile = f.breakdown.capture_s if f.breakdown is not None else 0.0
    return Price(f.startup.import_tf_s + f.startup.device_setup_s, f.startup.build_s,
                 f.warmup.total_s, windows_s(result), profile, source="measured")


class Pricer:
    """Prices configurations on ``hw``: measured where ``results`` hold a run of the
    configuration, else the first guess, scaled by how far the guesses of the measured
    ones were off. ``evidence_steps``: steps profiled after a first run's windows (0:
    none, ``--no-profile``)."""

    def __init__(self, hw: Hardware, results: Iterable[RunResult] = (),
                 evidence_steps: int = 0) -> None:
        self.hw = hw
        self.evidence_steps = evidence_steps
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
        card's peak at ``FIRST_GUESS_MFU``."""
        flops_of = find_workload(spec.workload).train_flops
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
        window = window_s(spec, step)
        profiled = (self.evidence_steps and spec.mode == "train"
                    and factory.no_profile_reason is None)
        return Price(
            STARTUP_S * (1 + EXTRA_PROCESS_SHARE * (len(tasks) - 1)),
            BUILD_S_PER_HINT * hint,
            TRACE_S_PER_HINT * hint * (1 + REPLICA_TRACE_SHARE * (local - 1))
            + spec.warmup_steps * step,
            spec.repeats * window,
            (self.evidence_steps * step + PROFILE_CAPTURE_S) if profiled else 0.0)


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
