"""Why a configuration is slow: a registry of rules, each reading stored figures only.

Each rule looks at one configuration (all its runs, with the sweep around it, for
baselines) and returns a ``Verdict`` or None. Thresholds are named constants with where
they come from, so a reader can check a verdict by hand from the numbers in the report.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from bench.answers.basis import Basis
from bench.answers.configs import ConfigView, Ratio, ratio_of
from bench.answers.runs import BASELINES, IDEAL_BASELINE, ONE_DEVICE_BASELINES
from bench.hardware import clock_mismatch, sustained_clock, throttle_findings
from reports.breakdown import profiled
from reports.explain import because

# Share of step time in collectives; the TensorBoard profiler's overview page uses the
# same cut-offs for its "communication" recommendation.
COMM_MODERATE, COMM_HIGH = 0.03, 0.15
# Share of step time waiting for input: the profiler's infeed-bound thresholds
# (kModeratelyInfeedBoundThresholdInPercent = 5, kHighly... = 20).
INPUT_MODERATE, INPUT_HIGH = 0.05, 0.20
# Distribution overhead (step time beyond the ideal) is graded like communication,
# since on a healthy system that is where the extra time goes.
OVERHEAD_MODERATE, OVERHEAD_HIGH = COMM_MODERATE, COMM_HIGH
# Fixed (batch-independent) share of the step above which adding devices cannot pay.
FIXED_SHARE_HIGH = 0.5
# Peak memory as a share of the device's capacity.
MEMORY_MODERATE, MEMORY_HIGH = 0.80, 0.90
NOISY_CV = 0.10

SEVERITIES = ("high", "moderate", "info")

THRESHOLDS_TEXT = (
    f"communication-bound: collectives >= {COMM_MODERATE:.0%} of step time (moderate), "
    f">= {COMM_HIGH:.0%} (high), the TensorBoard profiler's thresholds; input-bound: input "
    f"wait >= {INPUT_MODERATE:.0%} / {INPUT_HIGH:.0%} of the profiled step (the profiler's "
    f"infeed thresholds; without a profile, the throughput gap to data on the devices), "
    f"below it the input keeps up; "
    f"distribution overhead (no profile): time beyond the ideal step >= "
    f"{OVERHEAD_MODERATE:.0%} / {OVERHEAD_HIGH:.0%}; model too small: batch-independent "
    f"fixed cost >= {FIXED_SHARE_HIGH:.0%} of the step; memory-bound: peak >= "
    f"{MEMORY_MODERATE:.0%} / {MEMORY_HIGH:.0%} of capacity; noisy: runs (or, with one "
    f"run, windows) vary by >= {NOISY_CV:.0%} (coefficient of variation); super-ideal: an "
    f"efficiency above 100% (a speed-up above the device count), flagged with what it means; "
    f"MFU above 100% is suspicious.")


@dataclass(frozen=True)
class Verdict:
    kind: str  # rule name, e.g. "communication-bound"
    severity: str  # one of SEVERITIES
    text: str


Rule = Callable[[ConfigView, Basis], "Verdict | None"]
RULES: dict[str, Rule] = {}


def rule(name: str) -> Callable[[Rule], Rule]:
    def register(fn: Rule) -> Rule:
        RULES[name] = fn
        return fn
    return register


def _grade(value: float, moderate: float, high: float) -> str | None:
    return "high" if value >= high else "moderate" if value >= moderate else None


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3g} ms" if seconds < 1 else f"{seconds:.3g} s"


@rule("not measured")
def _status(run: ConfigView, ctx: Basis) -> Verdict | None:
    if run.ok:
        return None
    return Verdict("not measured", "info" if run.status == "unsupported" else "high",
                   f"{run.status}: {run.reason_line or 'no reason recorded'}")


@rule("communication-bound")
def _communication(run: ConfigView, ctx: Basis) -> Verdict | None:
    frac = run.comm_fraction
    if frac is None:
        return None
    grade = _grade(frac, COMM_MODERATE, COMM_HIGH)
    if grade is None:
        return None
    comm = run.communication
    assert comm is not None  # comm_fraction comes from it
    detail = f" ({ms(comm.collective_s)} of a {ms(comm.step_s)} step" if comm.step_s else " ("
    steps = comm.profiled_steps
    detail += f", profiled over {steps} steps)" if steps else ", profiled)"
    return Verdict("communication-bound", grade,
                   f"collectives take {frac:.1%} of step time{detail}")


def ideal_baseline(run: ConfigView, ctx: Basis) -> tuple[ConfigView, float] | None:
    """The baseline that sets this configuration's ideal, and the factor on it.

    The reference is the preferred single-device baseline (registry order) on 1 device.
    With real accelerators, N replicas could do N times its work; with logical CPU
    devices sharing the cores, the same cores do the same work, so the ideal is the
    1-device throughput itself.
    """
    factor = 1.0 if ctx.machine.cpu_only else float(run.replicas)
    # Strong scaling compares at the same global batch, weak scaling at the same
    # per-replica batch; the sweep's batch_mode says which the user is asking about.
    batches = [run.global_batch, run.per_replica_batch]
    if run.batch_mode == "per_replica":
        batches.reverse()
    elif run.replicas > 1:
        batches = batches[:1]
    for batch in batches:
        one = ctx.index.one_device(run.variant, batch)
        if one is not None:
            return one, factor
    return None


def ideal_throughput(run: ConfigView, ctx: Basis) -> tuple[float, str] | None:
    """What this configuration would reach with zero distribution overhead, and from
    which baseline."""
    found = ideal_baseline(run, ctx)
    if found is None or found[0].throughput is None:
        return None
    one, factor = found
    return (one.throughput or 0.0) * factor, (f"{one.strategy} on 1 device, batch "
                                              f"{one.global_batch}")


def to_ideal(run: ConfigView, ctx: Basis) -> Ratio | None:
    """T / T_ideal with its interval from the runs (1.0: no overhead at all)."""
    # Baselines have no distribution to be overhead of (independent copies do not talk).
    if run.throughput is None or run.base_strategy in (*ONE_DEVICE_BASELINES, *BASELINES):
        return None
    found = ideal_baseline(run, ctx)
    return ratio_of(run, found[0], found[1]) if found is not None else None


def overhead_share(run: ConfigView, ctx: Basis) -> float | None:
    """Share of the step beyond the ideal step time: 1 - T / T_ideal."""
    r = to_ideal(run, ctx)
    return 1 - r.value if r is not None else None


@rule("distribution overhead")
def _overhead(run: ConfigView, ctx: Basis) -> Verdict | None:
    if run.comm_fraction is not None:  # the profile says it better
        return None
    share = overhead_share(run, ctx)
    ideal = ideal_throughput(run, ctx)
    if share is None or ideal is None or run.step_s is None:
        return None
    grade = _grade(share, OVERHEAD_MODERATE, OVERHEAD_HIGH)
    if grade is None:
        return None
    where = ("all logical devices share the same cores, so this is the strategy's own cost"
             if ctx.machine.cpu_only else "communication, synchronisation and dispatch")
    return Verdict("distribution overhead", grade,
                   f"{share:.0%} of each step ({ms(run.step_s * share)} of "
                   f"{ms(run.step_s)}) is beyond the ideal set by {ideal[1]} (not profiled; "
                   f"{where})")


def measured_cause(run: ConfigView, ctx: Basis) -> str | None:
    """A measurement of ``run`` alone that bears on why it is slow, or None.

    Only two things count: a profile's communication share at or above the profiler's
    moderate threshold, and the distribution-overhead model when its share of the step
    is at or above its moderate threshold and beyond the noise of the runs (T / T_ideal
    significantly below 1). Either describes one side; the cause of a difference
    between two configurations comes from both profiles (``reports.explain``), and a
    strategy's trait is never a cause.
    """
    frac = run.comm_fraction
    if frac is not None and frac >= COMM_MODERATE:
        return f"collectives take {frac:.0%} of its step (profiled)"
    r = to_ideal(run, ctx)
    ideal = ideal_throughput(run, ctx)
    if (r is None or ideal is None or frac is not None or 1 - r.value < OVERHEAD_MODERATE
            or not r.significant or r.high is None or r.high >= 1.0):
        return None
    return (f"{1 - r.value:.0%} [{(1 - r.high) * 100:.0f}-{1 - (r.low or r.value):.0%}] of its "
            f"step is beyond the ideal set by {ideal[1]}")


@rule("input-bound")
def _input(run: ConfigView, ctx: Basis) -> Verdict | None:
    """With a real input pipeline: whether it limits throughput. The profile decides
    (the share of the step spent waiting for the iterator while no op runs); without
    one, the gap to the same configuration with data on the devices stands in for it.
    The gap is stated either way: it is the real-data cost a user sees."""
    if run.variant.data == "synthetic" or run.throughput is None:
        return None
    synthetic = ctx.index.get(run.variant.with_data("synthetic"), run.strategy,
                              run.replicas, run.global_batch)
    twin = synthetic.throughput if synthetic is not None else None
    gap = (f"{run.throughput:,.0f} examples/s with data={run.variant.data} vs {twin:,.0f} "
           f"with data on the devices" if twin else "")
    # Where both were profiled, the gap is explained like any other difference: a
    # pipeline that never makes the step wait can still slow its ops (its threads run
    # on the same cores), which shows as compute.
    cause = because(run, synthetic) if synthetic is not None and twin \
        and run.throughput < twin else None
    gap += f", because {cause}" if cause else ""
    p = profiled(run)
    share = p.share("input") if p is not None else None
    if p is not None and share is not None:
        waited = ", ".join(f"{name} {ms(s)}" for name, s in
                           list(p.ops.get("input", {}).items())[:2] if s > 0)
        gap = f"; the real-data gap: {gap}" if gap else ""
        grade = _grade(share, INPUT_MODERATE, INPUT_HIGH)
        if grade is None:
            return Verdict("input keeps up", "info",
                           f"only {share:.1%} of the profiled step ({ms(p.parts['input'])} of "
                           f"{ms(p.step_s)}) waits for the input pipeline: the step does not "
                           f"wait for its input{gap}")
        return Verdict("input-bound", grade,
                       f"the input pipeline, not the strategy, limits throughput: "
                       f"{share:.0%} of the profiled step ({ms(p.parts['input'])} of "
                       f"{ms(p.step_s)}) waits for its iterator"
                       + (f" ({waited})" if waited else "") + gap)
    if not twin:
        return None
    share = 1 - run.throughput / twin
    grade = _grade(share, INPUT_MODERATE, INPUT_HIGH)
    if grade is None:
        return None
    return Verdict("input-bound", grade,
                   f"{share:.0%} of step time waits for input (not profiled: the gap to data "
                   f"on the devices): {gap}")


def fixed_cost(run: ConfigView, ctx: Basis) -> float | None:
    """Batch-independent seconds per step, fitted over the batch sizes of this config.

    Least squares of step time = a + b x global batch over runs of the same variant,
    strategy and replica count; needs two or more batch sizes.
    """
    points = [(r.global_batch, r.step_s) for r in ctx.runs
              if r.ok and r.step_s is not None and r.variant == run.variant
              and r.strategy == run.strategy and r.replicas == run.replicas]
    if len({b for b, _ in points}) < 2:
        return None
    n = len(points)
    mx = sum(b for b, _ in points) / n
    my = sum(s for _, s in points) / n
    sxx = sum((b - mx) ** 2 for b, _ in points)
    slope = sum((b - mx) * (s - my) for b, s in points) / sxx
    return max(0.0, my - slope * mx)


@rule("model too small")
def _too_small(run: ConfigView, ctx: Basis) -> Verdict | None:
    if run.step_s is None:
        return None
    fixed = fixed_cost(run, ctx)
    if fixed is None or fixed / run.step_s < FIXED_SHARE_HIGH:
        return None
    share = fixed / run.step_s
    if run.replicas > 1:
        return Verdict("model too small", "high",
                       f"{share:.0%} of the step ({ms(fixed)} of {ms(run.step_s)}) is fixed "
                       f"cost that does not shrink with the batch: too little work per step "
                       f"for {run.replicas} replicas; use fewer devices or a larger batch")
    return Verdict("model too small", "moderate",
                   f"{share:.0%} of the step ({ms(fixed)} of {ms(run.step_s)}) is fixed "
                   f"per-step cost (dispatch, optimizer); a larger batch or steps_per_call "
                   f"would amortise it")


@rule("memory-bound")
def _memory(run: ConfigView, ctx: Basis) -> Verdict | None:
    if not run.ok:
        return None
    m = ctx.machine
    limit_mb = run.result.spec.gpu_memory_limit_mb
    if m.cpu_only:
        peak = max(run.device_peak_bytes or 0, run.host_peak_bytes or 0)
        capacity, what = m.memory_bytes, "of the machine's memory (CPU: host RSS)"
    else:
        peak = run.device_peak_bytes or 0
        capacity = limit_mb * 2**20 if limit_mb else m.gpu_memory_bytes
        what = "of the device memory limit" if limit_mb else "of the device memory"
    if not peak or not capacity:
        return None
    share = peak / capacity
    grade = _grade(share, MEMORY_MODERATE, MEMORY_HIGH)
    if grade is None:
        return None
    return Verdict("memory-bound", grade,
                   f"peak {peak / 2**20:,.0f} MiB is {share:.0%} {what}; a larger batch "
                   f"would likely run out of memory")


_EFF_NAMES = {"strong_eff": "strong-scaling efficiency", "weak_eff": "weak-scaling efficiency",
              "weak_eff_vs_one": f"weak-scaling efficiency vs {ONE_DEVICE_BASELINES[0]}",
              "vs_independent": f"efficiency vs {IDEAL_BASELINE} replicas"}


@rule("super-ideal")
def _super_ideal(run: ConfigView, ctx: Basis) -> Verdict | None:
    """An efficiency above 100%: a speed-up above the device count. Flagged with what it
    can mean, never discarded. (A speed-up over one device on logical CPU devices is not
    one: one process may use the cores worse than several, and more than 1.0x is
    possible there.)"""
    sc = ctx.scaling.get(run.key)
    if sc is None:
        return None
    effs = sc.efficiencies()
    if run.replicas == 1:  # against itself by construction
        effs.pop("strong_eff", None)
        effs.pop("weak_eff", None)
    if run.base_strategy in ONE_DEVICE_BASELINES:
        # One single-device baseline against another: neither is an efficiency.
        effs.pop("weak_eff_vs_one", None)
    over = {k: v for k, v in effs.items() if v.value > 1.0}
    if not over:
        return None
    name, r = max(over.items(), key=lambda kv: kv[1].value)
    label = _EFF_NAMES.get(name, name)
    meaning = ("on logical devices sharing the same cores this cannot come from the "
               "hardware: the baseline ran slowed (warm-up, a noisy neighbour) or uses the "
               "cores far worse" if ctx.machine.cpu_only else
               "a super-linear gain (each device's share of the work fits caches or memory "
               "better) or a baseline that ran slowed (warm-up, a noisy neighbour)")
    if r.above(1.0) and r.decided:
        return Verdict("super-ideal", "high",
                       f"{label} is {r.value:.0%} (interval {r.low:.0%}-{r.high:.0%}, all "
                       f"above 100%): beyond the noise, more than the devices' ideal; it means "
                       f"{meaning}; re-run both before trusting either")
    why = (f"its interval {r.low:.0%}-{r.high:.0%} includes 100%: within the noise of the "
           f"ideal" if r.decided else
           "one run a side, so the noise is not measured: possibly noise")
    return Verdict("super-ideal", "moderate",
                   f"{label} is {r.value:.0%} (above 100%), {why}; beyond the noise it would "
                   f"mean {meaning}")


@rule("suspicious MFU")
def _mfu(run: ConfigView, ctx: Basis) -> Verdict | None:
    if run.mfu is None or run.mfu <= 1.0:
        return None
    f = run.result.figures
    peak = f.peak_flops_per_s if f is not None else None
    achieved = f.achieved_flops_per_s if f is not None else None
    detail = (f" (achieved {achieved / 1e9:,.1f} GFLOP/s vs peak {peak / 1e9:,.1f} GFLOP/s)"
              if peak and achieved else "")
    return Verdict("suspicious MFU", "high",
                   f"model FLOPs utilisation is {run.mfu:.0%}{detail}: above 100% is "
                   f"impossible, so the peak it is measured against is too low; do not use "
                   f"this MFU")


@rule("noisy")
def _noisy(run: ConfigView, ctx: Basis) -> Verdict | None:
    if run.cv is None or run.cv < NOISY_CV:
        return None
    what = (f"its {run.n_runs} runs vary by {run.cv:.0%} (run-to-run coefficient of "
            f"variation)" if run.between_cv is not None else
            f"window throughputs vary by {run.cv:.0%} (coefficient of variation)")
    return Verdict("noisy", "moderate",
                   f"{what}; compare with care or measure more runs")


@rule("did not learn")
def _learned(run: ConfigView, ctx: Basis) -> Verdict | None:
    stuck = [r.result.figures for r in run.ok_runs
             if r.result.figures is not None and not r.result.figures.learned]
    if not stuck:
        return None
    f = stuck[0]
    return Verdict("did not learn", "moderate",
                   f"loss went from {f.loss_start:.4g} to {f.loss_end:.4g}: the run may not "
                   f"be training correctly")


@rule("GPU throttled")
def _throttled(run: ConfigView, ctx: Basis) -> Verdict | None:
    # From the GPU state the measuring process sampled as its windows opened and
    # closed (bench.hardware.GpuRun). Idle and application-clock reasons are settings,
    # not slowdowns, and throttle_findings leaves them out.
    throttled = []
    for r in run.ok_runs:
        state = r.result.environment.get("gpu_state") or {}
        found = throttle_findings(state.get("start") or [], state.get("end") or [],
                                  state.get("during"))
        if found:
            throttled.append((r.result.replicate, found))
    if not throttled:
        return None
    replicate, found = throttled[0]
    more = f", and {len(found) - 1} more" if len(found) > 1 else ""
    where = (f"its run ({found[0]}{more})" if len(run.ok_runs) == 1 else
             f"{len(throttled)} of {len(run.ok_runs)} runs (run {replicate}: {found[0]}{more})")
    return Verdict("GPU throttled", "high",
                   f"the GPU slowed itself down in {where}: these figures are those of a "
                   f"slower GPU than the one fingerprinted, so do not compare them (check "
                   f"cooling and power limits, then re-run)")


@rule("GPU clocks differ")
def _clocks_differ(run: ConfigView, ctx: Basis) -> Verdict | None:
    # The power cap is how a loaded GPU runs, not a fault; what moves a comparison is
    # the clock the windows ran at. Runs of this configuration, and those of the
    # configurations an answer compares it with (same workload and batch), are held
    # to one another's sustained SM clock.
    place = (run.variant, run.global_batch)
    clocks = {f"{v.strategy} on {v.devices} run {r.result.replicate}": c
              for v in ctx.runs if (v.variant, v.global_batch) == place
              for r in v.ok_runs
              if (c := sustained_clock(r.result.environment.get("gpu_state") or {}))}
    mismatch = clock_mismatch(clocks)
    if mismatch is None:
        return None
    return Verdict("GPU clocks differ", "high",
                   f"{mismatch}: throughput compared across these runs mixes the clocks "
                   f"with the strategies; re-run them at one clock (nvidia-smi "
                   f"--lock-gpu-clocks) or on one GPU")


def verdicts_for(run: ConfigView, ctx: Basis) -> list[Verdict]:
    """Every verdict of ``run``, most severe first."""
    found = [v for fn in RULES.values() if (v := fn(run, ctx)) is not None]
    return sorted(found, key=lambda v: SEVERITIES.index(v.severity))
