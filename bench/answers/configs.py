"""A configuration and all its runs: the unit every ranking, ratio and verdict is about.

A configuration (``RunResult.key``) may have been measured several times, in separate
processes at different times (``RunResult.replicate``). Each run contributes one
figure, its own headline (the median of its windows); the configuration's headline is
the median of its runs' figures. The spread between runs (run-to-run noise, what a
re-run would see) and inside runs (window to window) are kept apart, and every ratio
between two configurations carries an interval from ``bench.results.stats.comparison.compare_runs``,
which measures the noise at the run level.
"""

from __future__ import annotations

import functools
import math
import statistics
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass, field

from bench.answers.noise import Measured, NoisePool, session_levels
from bench.answers.runs import RunView, Variant
from bench.results.combination import ran_concurrently
from bench.results.levels import DEFAULT_ALPHA
from bench.results.pairs import session_pairs
from bench.results.schema import Communication, Figures, RunResult, TaskFigures
from bench.results.stats.comparison import RunComparison, compare_runs
from bench.results.stats.runs import RunSummary, run_figure, summarize_runs
from bench.results.stats.settlement import (
    DEFAULT_MARGIN,
    RoundsEvidence,
    Settlement,
    settle_pairs,
    settle_runs,
)
from bench.results.stats.spread import LogSpread
from bench.strategies import STRATEGIES

StatsRuns = tuple[tuple[float, ...], ...]  # one tuple of window values per run

RUNS_DEFINITION = (
    "a configuration (one result key) is measured in one or more runs, separate processes "
    "at different times. A run's figure is its headline (the median of its windows); the "
    "configuration's throughput is the median of its runs' figures. run-to-run cv = std / "
    "mean of the runs' figures (what a re-run would see); window cv = median over runs of "
    "the window-to-window spread. [low-high] after a ratio is its 95% interval from the "
    "runs of both configurations (bench.results.stats.compare_runs: Student's t on the "
    "run-level noise pooled over both, never below what the runs' own windows allow); with "
    "one run a side no noise is measured and no interval is given.")
ANSWER_DEFINITION = (
    "no answer, settled or for now, is a configuration the data shows slower: a "
    "configuration that another is shown faster than beyond the noise (their ratio's "
    "p-value survives Holm's correction over the place's comparisons at 5%, so that a "
    "place sets any configuration aside wrongly at most 5% of the time) is set aside, and "
    "said so with its 95% interval; where every configuration is shown slower than "
    "another, the evidence runs in a circle and the place is NOT SETTLED, the circle "
    "named. Configurations are ranked by their levels fitted over their answer's "
    "sessions where they sat in sessions, else by their runs' median. Of those "
    "left, every answer is one of four: FASTER: one is left, faster beyond the noise than "
    "every other; the report says whether by more than the margin (default +-5%: the "
    "whole interval beyond it), by less (shown within it) or not yet shown either way; "
    "EQUIVALENT: those left are each shown to lie within +-5% of the simplest of them (an "
    "equivalence test, TOST: their 90% interval lies inside the margin), which is chosen "
    "(fewest devices, then processes, then the plainest strategy); STANDS: some "
    "comparison is open, but every open configuration is no simpler than the answer and "
    "is shown not to beat it by more than the margin (its 90% interval's upper end), so "
    "no outcome can change the answer; NOT SETTLED at this precision: some configuration "
    "left is neither shown apart from the simplest nor within the margin and could change "
    "the answer; the simplest of those left is shown for now, with the runs a "
    "configuration that would settle it at the noise measured (90% power). Intervals between "
    "configurations come from the processes that measured both as arms, windows "
    "interleaved (paired t on one log ratio a process), else from their runs (Welch's t on "
    "the log run figures, never below what the runs' own windows allow; a side of one run "
    "measures no noise and settles nothing). Either borrows the noise pooled over the "
    "machine's configurations (the sessions' two-way ANOVA residual; the runs' spread "
    "around each configuration's mean) where that has more degrees of freedom and is not "
    "below the comparison's own variance (else it keeps its own, with its own degrees of "
    "freedom); a configuration whose noise differs from the pool's (F test), or has too "
    "few degrees of freedom for that test to tell, keeps its own. "
    "A speed-up above the device count (super-ideal) is flagged with what it means and "
    "kept. Baselines (a ceiling, not a way to train one model) are never recommended. A "
    "configuration with a batch per worker (asynchronous) is ranked apart and compared at "
    "equal work per device. A cause (\"because\") is given only for a difference beyond the "
    "noise, and only from both configurations' profiles: the profiled step-time difference "
    "attributed to the parts of the step and to the op types that added the most time "
    "(see breakdown); a strategy's description is never a cause.")


def _run_windows(result: RunResult) -> tuple[float, ...] | None:
    """A run's window throughputs, scaled so that their median is the run's headline.

    The stored headline is what the run says it did (for combined multi-process runs
    it is not the median of the windows stored beside it: independent copies store
    the first copy's windows and sum the copies' throughputs), so the windows keep
    their relative spread around it.
    """
    f = result.figures
    if result.status != "ok" or f is None or not f.global_throughput > 0:
        return None
    values = [w.global_throughput for w in f.windows if w.global_throughput > 0]
    if not values:
        return (f.global_throughput,)
    mid = math.exp(statistics.median(math.log(v) for v in values))
    return tuple(v * f.global_throughput / mid for v in values)


@dataclass(frozen=True)
class Ratio:
    """current / baseline of two configurations' headlines, with its interval.

    ``low``/``high`` come from the runs (``compare_runs``, 95%); None when the runs
    cannot tell (one run a side: no run-to-run noise measured). ``significant``: the
    interval excludes 1 (the two configurations differ beyond the noise).
    """

    value: float
    low: float | None
    high: float | None
    significant: bool
    mde: float | None  # smallest relative change this comparison could have detected
    note: str = ""

    @property
    def decided(self) -> bool:
        return self.low is not None and self.high is not None

    def scaled(self, by: float) -> Ratio:
        """The same comparison divided by ``by`` (speed-up -> efficiency)."""
        return Ratio(self.value / by, None if self.low is None else self.low / by,
                     None if self.high is None else self.high / by, self.significant,
                     self.mde, self.note)

    def above(self, limit: float) -> bool:
        """The whole interval lies above ``limit`` (no interval: the value does)."""
        return (self.low if self.low is not None else self.value) > limit


@dataclass
class ConfigView:
    """Every run of one configuration and the figures they give together."""

    key: str
    runs: list[RunView]  # every replicate, any status, in replicate order
    ok_runs: list[RunView] = field(init=False)
    first: RunView = field(init=False)  # the run that stands for the configuration's spec
    stats_runs: StatsRuns = field(init=False)
    summary: RunSummary | None = field(init=False)
    # The machine's pooled noise (``bench.answers.noise``), set once its configurations are
    # grouped: what this configuration's comparisons borrow.
    pool: NoisePool | None = field(default=None, compare=False)
    # Its level fitted over its answer's sessions (``bench.answers.noise.session_levels``),
    # examples/s; None where it sat in no session.
    level: float | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        self.runs = sorted(self.runs, key=lambda r: r.result.replicate)
        self.ok_runs = [r for r in self.runs if r.ok]
        self.first = (self.ok_runs or self.runs)[0]
        windows = [w for r in self.ok_runs if (w := _run_windows(r.result)) is not None]
        self.stats_runs = tuple(windows)
        self.summary = summarize_runs(windows) if windows else None

    # -- what the configuration is (the same in every run) ------------------------
    @property
    def result(self) -> RunResult:
        return self.first.result

    @property
    def machine(self) -> str:
        return self.first.machine

    @property
    def variant(self) -> Variant:
        return self.first.variant

    @property
    def strategy(self) -> str:
        return self.first.strategy

    @property
    def base_strategy(self) -> str:
        return self.first.base_strategy

    @property
    def replicas(self) -> int:
        return self.first.replicas

    @property
    def devices(self) -> int:
        return self.first.devices

    @property
    def global_batch(self) -> int:
        return self.first.global_batch

    @property
    def per_replica_batch(self) -> int:
        return self.first.per_replica_batch

    @property
    def batch_mode(self) -> str:
        return self.first.batch_mode

    @property
    def batch_setting(self) -> int:
        return self.first.batch_setting

    @property
    def batch_per_worker(self) -> bool:
        """Each of several replicas steps on a whole batch of its own (asynchronous
        training): the batch is per worker, so the work grows with the replicas (weak
        scaling) whatever the batch mode says."""
        return self.replicas > 1 and self.global_batch == self.per_replica_batch

    @property
    def processes(self) -> int:
        tasks = self.tasks
        return len(tasks) if tasks else 1

    @property
    def run_family(self) -> Hashable:
        """How its runs were measured: as arms of shared processes or in their own, and
        by how many processes (the noise pool pools runs measured alike)."""
        shared = any(v.result.interleaved is not None for v in self.ok_runs)
        return ("arm" if shared else "own", self.processes)

    def measured(self) -> Measured:
        """What the machine's noise pool reads of this configuration (``bench.answers.noise``)."""
        sessions = {r.interleaved.session: r for v in self.ok_runs
                    if (r := v.result).interleaved is not None and r.figures is not None}
        return Measured(self.key, self.run_family,
                        tuple(math.log(run_figure(w)) for w in self.stats_runs), sessions,
                        rounds_pool=self.result.spec.workload if self.shared_arm else None)

    @property
    def shared_arm(self) -> bool:
        """Measured as an arm of its sessions' shared process (not a member in processes
        of its own): its process's luck is its session's, shared with the other arms."""
        name = self.base_strategy
        return (self.run_family == ("arm", 1) and name in STRATEGIES
                and STRATEGIES.get(name).no_shared_process_reason is None)

    @property
    def plainness(self) -> int:
        name = self.base_strategy
        return STRATEGIES.get(name).plainness if name in STRATEGIES else 99

    @property
    def simplicity(self) -> tuple[int, int, int, str]:
        """Sort key among configurations not shown apart: fewest devices, then processes,
        then the plainest strategy (registry ``plainness``)."""
        return (self.devices, self.processes, self.plainness, self.strategy)

    @property
    def choice(self) -> str:
        """What a user would pick: ``mirrored on 2 devices``."""
        n = self.replicas
        return f"{self.strategy} on {n} device{'' if n == 1 else 's'}"

    # -- how it went ---------------------------------------------------------------
    @property
    def ok(self) -> bool:
        return bool(self.ok_runs) and self.summary is not None

    @property
    def concurrent(self) -> bool:
        """Every run's figure is of its processes running together (see
        ``bench.results.combination.ran_concurrently``)."""
        return all(r.result.figures is None or ran_concurrently(r.result.figures)
                   for r in self.ok_runs)

    @property
    def status(self) -> str:
        if not self.ok_runs:
            return self.first.status
        bad = len(self.runs) - len(self.ok_runs)
        return "ok" if not bad else f"ok ({bad} of {len(self.runs)} runs without figures)"

    @property
    def reason_line(self) -> str:
        return next((r.reason_line for r in self.runs if not r.ok and r.reason_line), "")

    @property
    def n_runs(self) -> int:
        """Runs with figures."""
        return len(self.stats_runs)

    @property
    def throughput(self) -> float | None:
        """Median of the runs' headline throughputs (examples/s)."""
        return self.summary.median if self.summary is not None else None

    @property
    def speed(self) -> float:
        """What rankings order by: the level fitted over its answer's sessions where it
        sat in sessions (which sessions it sat in then does not decide its rank), else
        its throughput (0 without one)."""
        return self.level if self.level is not None else (self.throughput or 0.0)

    @property
    def between_cv(self) -> float | None:
        """Run-to-run spread of the runs' figures (std/mean); None below 2 runs."""
        return self.summary.between_cv if self.summary is not None else None

    @property
    def within_cv(self) -> float | None:
        """Median over runs of the window-to-window spread."""
        return self.summary.within_cv if self.summary is not None else None

    @property
    def cv(self) -> float | None:
        """The noise a re-run would see: run-to-run where measured, else windows'."""
        between = self.between_cv
        return between if between is not None else self.within_cv

    @property
    def run_range(self) -> tuple[float, float] | None:
        if not self.stats_runs:
            return None
        heads = [r.result.figures.global_throughput for r in self.ok_runs
                 if r.result.figures is not None]
        return (min(heads), max(heads)) if heads else None

    @property
    def window_range(self) -> tuple[float, float] | None:
        every = [v for run in self.stats_runs for v in run]
        return (min(every), max(every)) if every else None

    def median_of(self, value: Callable[[Figures], float | None]) -> float | None:
        """Median over the runs with figures of ``value(figures)`` (Nones left out)."""
        values = [v for r in self.ok_runs if r.result.figures is not None
                  and (v := value(r.result.figures)) is not None]
        return float(statistics.median(values)) if values else None

    def absence(self, why: Callable[[Figures], str | None]) -> str | None:
        """Why the runs with figures lack one, as ``why(figures)`` says for each (the
        distinct reasons, joined); None where no run gives a reason."""
        reasons = dict.fromkeys(a for r in self.ok_runs if r.result.figures is not None
                                and (a := why(r.result.figures)))
        return "; ".join(reasons) or None

    @property
    def step_s(self) -> float | None:
        return self.median_of(lambda f: f.step_time.median_s)

    @property
    def device_peak_bytes(self) -> int | None:
        peaks = [p for r in self.ok_runs if (p := r.device_peak_bytes) is not None]
        return max(peaks) if peaks else None

    @property
    def host_peak_bytes(self) -> int | None:
        peaks = [p for r in self.ok_runs if (p := r.host_peak_bytes) is not None]
        return max(peaks) if peaks else None

    @property
    def memory_scope(self) -> str | None:
        return self.first.memory_scope

    @property
    def communication(self) -> Communication | None:
        return next((c for r in self.ok_runs if (c := r.communication) is not None), None)

    @property
    def comm_fraction(self) -> float | None:
        return self.median_of(
            lambda f: f.communication.comm_fraction if f.communication else None)

    @property
    def mfu(self) -> float | None:
        return self.median_of(lambda f: f.mfu)

    @property
    def tasks(self) -> list[TaskFigures]:
        return self.first.tasks

    @property
    def learned(self) -> bool | None:
        runs = [r.result.figures.learned for r in self.ok_runs if r.result.figures]
        return all(runs) if runs else None


def group_configs(runs: Iterable[RunView]) -> list[ConfigView]:
    """One ConfigView per result key, in order of first appearance."""
    by_key: dict[str, list[RunView]] = {}
    for run in runs:
        by_key.setdefault(run.key, []).append(run)
    return [ConfigView(key, rs) for key, rs in by_key.items()]


def pool_noise(configs: Sequence[ConfigView]) -> NoisePool:
    """Pool the noise of one machine's ``configs`` (``bench.answers.noise``) and give each the
    pool that its comparisons borrow, and its level fitted over its sessions."""
    measured = [c.measured() for c in configs]
    pool = NoisePool.of(measured)
    levels = session_levels(measured)
    for config in configs:
        config.pool = pool
        config.level = levels.get(config.key)
    return pool


@functools.lru_cache(maxsize=4096)  # the same pairs come back in scaling, ranking, verdicts
def _compare(baseline: StatsRuns, current: StatsRuns) -> RunComparison:
    return compare_runs(baseline, current)


def compare(current: ConfigView, baseline: ConfigView) -> RunComparison:
    """``current`` against ``baseline`` from their runs (see ``compare_runs``)."""
    return _compare(baseline.stats_runs, current.stats_runs)


def ratio_of(current: ConfigView, baseline: ConfigView, per: float = 1.0) -> Ratio | None:
    """current / baseline headline throughput (divided by ``per``), with its interval."""
    if current.throughput is None or not baseline.throughput:
        return None
    c = compare(current, baseline)
    # The point is the ratio of the printed headlines (a reader can check it); the
    # interval is compare_runs' (geometric means of the runs, t on run-level noise).
    decided = not (math.isnan(c.low) or math.isnan(c.high))
    return Ratio(current.throughput / baseline.throughput,
                 c.low if decided else None, c.high if decided else None,
                 c.significant, c.mde if math.isfinite(c.mde) else None,
                 c.note).scaled(per)


def settle_of(candidate: ConfigView, reference: ConfigView,
              margin: float = DEFAULT_MARGIN, alpha: float = DEFAULT_ALPHA
              ) -> Settlement | None:
    """candidate / reference settled from their runs (``stats.settlement.settle_runs``): faster,
    slower, equivalent within +-``margin`` or not settled; None without figures.

    Where the sweep measured both as arms of one process in two or more processes
    (``bench run --interleave``), those processes are the evidence: one log ratio
    each from its interleaved windows (``bench.results.pairs``), settled as pairs
    (``stats.settlement.settle_pairs``), free of the drift between separate processes. Else
    their runs, independent processes at different times (``stats.settlement.settle_runs``).
    Either borrows the noise pooled over the machine's configurations
    (``ConfigView.pool``, ``bench.answers.noise``) where that has more degrees of freedom;
    pairs of two arms of the sessions' shared process that borrow nothing read their
    rounds instead, guarded by their workload's session-noise ratio
    (``stats.settlement.RoundsEvidence``).
    """
    if not candidate.stats_runs or not reference.stats_runs:
        return None
    pool = candidate.pool or reference.pool
    pairs = session_pairs([r.result for r in reference.ok_runs],
                          [r.result for r in candidate.ok_runs])
    if len(pairs) >= 2:
        ratio = pool.for_rounds(candidate.key, reference.key) if pool else None
        predicted = [p.predicted for p in pairs]
        rounds = RoundsEvidence(statistics.fmean(p.var for p in predicted if p),
                                sum(p.df for p in predicted if p), ratio) \
            if ratio is not None and all(predicted) else None
        return settle_pairs([p.log_ratio for p in pairs], margin=margin, alpha=alpha,
                            pooled=pool.for_pairs(candidate.key, reference.key) if pool
                            else None, rounds=rounds)
    return _settle(reference.stats_runs, candidate.stats_runs, margin, alpha,
                   pool.for_runs(candidate.key, reference.key) if pool else None)


@functools.lru_cache(maxsize=4096)  # one answer asks for the same pairs in several places
def _settle(reference: StatsRuns, candidate: StatsRuns, margin: float, alpha: float,
            pooled: LogSpread | None) -> Settlement:
    floor_cv = _compare(reference, candidate).window_floor_cv
    return settle_runs([run_figure(w) for w in reference], [run_figure(w) for w in candidate],
                       margin=margin, alpha=alpha,
                       floor_sd_log=math.sqrt(math.log1p(floor_cv * floor_cv)), pooled=pooled)


@dataclass(frozen=True)
class Noise:
    """The noise behind a comparison, as figures: the fewest and most runs of its
    configurations, their lowest and highest run-to-run cv (None: no configuration has
    two runs), and the median window cv (None: no window spread measured)."""

    runs: tuple[int, int]
    between: tuple[float, float] | None
    windows: float | None

    @property
    def _runs(self) -> str:
        lo, hi = self.runs
        return f"{lo} run{'s' if lo > 1 else ''} each" if lo == hi else f"{lo}-{hi} runs each"

    @property
    def cv(self) -> str | None:
        """``4%`` or ``2%-5%``: the run-to-run cv, one figure where both ends round alike."""
        if self.between is None:
            return None
        lo, hi = (f"{v:.0%}" for v in self.between)
        return hi if lo == hi else f"{lo}-{hi}"

    @property
    def text(self) -> str:
        """``run-to-run cv 4% (3 runs each); windows 2%``."""
        parts = [f"run-to-run cv {self.cv} ({self._runs})" if self.cv is not None
                 else f"run-to-run noise not measured ({self._runs})"]
        if self.windows is not None:
            parts.append(f"windows {self.windows:.0%}")
        return "; ".join(parts)

    @property
    def short(self) -> str:
        """``cv 4%``, for a table cell (``1 run each`` where no cv is measured)."""
        return f"cv {self.cv}" if self.cv is not None else self._runs


def noise_of(configs: Sequence[ConfigView]) -> Noise | None:
    """The noise of ``configs``' successful runs (None: no successful one)."""
    ok = [c for c in configs if c.ok]
    if not ok:
        return None
    counts = [c.n_runs for c in ok]
    between = [c.between_cv for c in ok if c.between_cv is not None]
    within = [c.within_cv for c in ok if c.within_cv is not None]
    return Noise((min(counts), max(counts)), (min(between), max(between)) if between else None,
                 statistics.median(within) if within else None)

