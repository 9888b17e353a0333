"""Statistics of measured figures: numpy, and scipy for every distribution.

The distributions, tests and resampling are scipy's (the t, noncentral t and F
distributions through ``scipy.special``, the functions ``scipy.stats`` evaluates them
with; ``bootstrap``), the library every reviewer of statistics already trusts; what
is written here is only how benchmark runs map onto them. Parent
side only: the child summarises its own samples with ``bench.results.samples``.

Comparisons of *runs*. A run (one process) is the unit of replication: its
windows share the process's conditions (load, memory layout, thread placement),
so they describe how precisely that one run was measured, not how much another
run of the same code would differ. Each run contributes one figure (the median
of its windows); a group of runs is summarised by ``summarize_runs``; two groups
are compared by ``compare_runs`` (the decision: interval, p-value and minimum
detectable change from the measured run-to-run noise) or, for a distribution-
free interval with many runs a side, ``hierarchical_bootstrap_ratio``.
``minimum_detectable_change`` plans how many runs a given noise needs.

Comparisons of *pairs* (a baseline and a current figure measured under the same
conditions, e.g. back to back): ``paired_log_ratio`` (the ratio with a paired t
and a bootstrap interval), ``paired_equivalence`` (TOST: is the change shown to
be within +-margin?) and ``pairs_for_equivalence`` (how many pairs settle a
margin at a given noise; ``equivalence_power`` the other way round).

Everything is computed on the log scale, where a ratio is a difference and a
slowdown and the matching throughput loss are the same number seen both ways up.
Inputs are "runs": a sequence of runs, each a sequence of positive window values,
or two sequences of positive figures, one value a pair on each side.
"""

from __future__ import annotations

import contextlib
import functools
import math
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, TypeVar

import numpy as np
from scipy import special
from scipy import stats as sps

from bench.results.levels import DEFAULT_ALPHA, DEFAULT_POWER
from bench.results.samples import coefficient_of_variation
from bench.results.schema import RunResult

Runs = Sequence[Sequence[float]]
H = TypeVar("H", bound=Hashable)


# The t and F distributions through the functions scipy.stats itself evaluates them with
# (``scipy.special``'s ``stdtr``/``stdtrit``/``fdtr``/``fdtrc``): the same numbers without
# its argument checking and broadcasting, which took most of the time of the error-rate
# simulations (tens of thousands of decisions each). Quantiles are cached: a sweep and a
# simulation ask for a few (alpha, df) pairs over and over.
@functools.lru_cache(maxsize=4096)
def t_ppf(q: float, df: float) -> float:
    """The ``q`` quantile of Student's t with ``df`` degrees of freedom."""
    return float(special.stdtrit(df, q))


def t_sf(x: float, df: float) -> float:
    """P(T > x) for Student's t with ``df`` degrees of freedom."""
    return float(special.stdtr(df, -x))


def t_cdf(x: float, df: float) -> float:
    """P(T <= x) for Student's t with ``df`` degrees of freedom."""
    return float(special.stdtr(df, x))


@functools.lru_cache(maxsize=4096)
def f_ppf(q: float, dfn: float, dfd: float) -> float:
    """The ``q`` quantile of the F distribution with (``dfn``, ``dfd``) degrees of freedom."""
    return float(sps.f.ppf(q, dfn, dfd))


def f_sf(x: float, dfn: float, dfd: float) -> float:
    """P(F > x) for the F distribution with (``dfn``, ``dfd``) degrees of freedom."""
    return float(special.fdtrc(dfn, dfd, x))


def f_cdf(x: float, dfn: float, dfd: float) -> float:
    """P(F <= x) for the F distribution with (``dfn``, ``dfd``) degrees of freedom."""
    return float(special.fdtr(dfn, dfd, x))


@functools.lru_cache(maxsize=1024)
def chi2_ppf(q: float, df: float) -> float:
    """The ``q`` quantile of the chi-squared distribution with ``df`` degrees of freedom."""
    return float(sps.chi2.ppf(q, df))


def one_sample_t(d: np.ndarray, popmean: float) -> tuple[float, int]:
    """The one-sample t statistic of ``d`` against ``popmean`` and its degrees of freedom
    (``scipy.stats.ttest_1samp``'s); ``d`` has 2+ values with some spread."""
    n = int(d.size)
    return float((d.mean() - popmean) / (d.std(ddof=1) / math.sqrt(n))), n - 1

# DEFAULT_ALPHA and DEFAULT_POWER are bench.results.levels' (command lines show them).
BOOTSTRAP_RESAMPLES = 4000
# Fixed: the same inputs must always give the same answer (and the same verdict).
BOOTSTRAP_SEED = 0
FLOOR_RESAMPLES = 500  # window resamples per run for the run's own precision
STUDENT, WELCH = "student", "welch"  # RunComparison.test: which t test decided


def throughput_runs(results: Iterable[RunResult]) -> list[list[float]]:
    """The window throughputs (global examples/s) of each successful run, one list a run.

    The input ``summarize_runs``, ``compare_runs`` and ``hierarchical_bootstrap_ratio``
    take; runs without figures (failed, OOM, timed out) are left out.
    """
    return [[w.global_throughput for w in r.figures.windows] for r in results
            if r.status == "ok" and r.figures is not None and r.figures.windows]


# -- one group of runs --------------------------------------------------------------------
def _log_windows(run: Sequence[float], what: str) -> np.ndarray:
    a = np.asarray(run, dtype=np.float64)
    if a.size == 0 or not np.all(np.isfinite(a)) or np.any(a <= 0):
        raise ValueError(f"{what}: every run needs one or more positive, finite window values. "
                         f"Received: {list(run)!r}")
    return np.log(a)


def run_figure(windows: Sequence[float]) -> float:
    """A run's figure: the median of its window values.

    Taken on the log scale (an even count averages the two middle values
    geometrically), so the figure of reciprocal values is the reciprocal figure:
    throughput and time per step can never tell different stories.
    """
    return float(np.exp(np.median(_log_windows(windows, "run_figure"))))


@dataclass(frozen=True)
class RunSummary:
    """One group of runs of one configuration.

    ``median`` is the median of the run figures (for display); ``center`` their
    geometric mean (what ``compare_runs`` compares); ``between_cv`` the spread of
    the run figures (std/mean, None below 2 runs): the run-to-run noise;
    ``within_cv`` the median over runs of the window CV: how precisely a run is
    measured by its own windows (smaller than ``between_cv`` on a shared machine).
    """

    runs: int
    windows: int
    median: float
    center: float
    between_cv: float | None
    within_cv: float


def summarize_runs(runs: Runs) -> RunSummary:
    """Median of run medians, geometric centre, between-run CV and within-run CV."""
    if not runs:
        raise ValueError("summarize_runs needs at least one run. Received: []")
    figures = [run_figure(r) for r in runs]
    return RunSummary(
        runs=len(runs), windows=sum(len(r) for r in runs), median=float(np.median(figures)),
        center=float(np.exp(np.mean(np.log(figures)))),
        between_cv=coefficient_of_variation(figures) if len(figures) >= 2 else None,
        within_cv=float(np.median([coefficient_of_variation(r) for r in runs])))


# -- two groups of runs: the hierarchical bootstrap ------------------------------------------
def _log_center_of_picks(logs: list[np.ndarray], picks: np.ndarray,
                         rng: np.random.Generator) -> np.ndarray:
    """Log geometric mean of run medians for each row of drawn run indices.

    Every drawn run contributes the median of a fresh resample of its own windows:
    the second stage of the bootstrap, which ``scipy.stats.bootstrap`` (one level
    of resampling) cannot do itself.
    """
    picks = np.asarray(picks, dtype=np.intp)
    slot = np.empty(picks.shape)
    for j, w in enumerate(logs):
        drawn = picks == j
        if count := int(drawn.sum()):
            idx = rng.integers(0, w.size, size=(count, w.size))
            slot[drawn] = np.median(w[idx], axis=1)
    return slot.mean(axis=-1)


def hierarchical_bootstrap_ratio(baseline: Runs, current: Runs, confidence: float = 0.95, *,
                                 resamples: int = BOOTSTRAP_RESAMPLES,
                                 seed: int = BOOTSTRAP_SEED) -> tuple[float, float, float]:
    """``(low, estimate, high)`` of current / baseline, two-stage percentile bootstrap.

    Each side's figure is the geometric mean of its run medians; a resample draws
    runs with replacement (``scipy.stats.bootstrap``, each side on its own), then
    windows with replacement inside each drawn run, so both levels of noise are in
    the interval. Deterministic for a given ``seed``.

    A percentile bootstrap cannot know what it has not seen: with few runs a side
    (under ~5) the interval is too narrow, and with one run there is nothing to
    draw from (refused). ``compare_runs`` (t-based, run-level noise pooled over
    both sides) is the one to decide with.
    """
    if len(baseline) < 2 or len(current) < 2:
        raise ValueError(f"hierarchical_bootstrap_ratio needs 2+ runs on each side. Received: "
                         f"{len(baseline)} baseline and {len(current)} current run(s)")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be between 0 and 1. Received: {confidence!r}")
    b_logs = [_log_windows(r, "hierarchical_bootstrap_ratio") for r in baseline]
    c_logs = [_log_windows(r, "hierarchical_bootstrap_ratio") for r in current]
    rng = np.random.default_rng(seed)

    def log_ratio(b_picks: np.ndarray, c_picks: np.ndarray, axis: int = -1) -> np.ndarray:
        return _log_center_of_picks(c_logs, c_picks, rng) - _log_center_of_picks(
            b_logs, b_picks, rng)

    # Percentile interval: the statistic draws windows at random, which BCa's
    # jackknife (it assumes a fixed function of the drawn runs) would misread.
    ci = sps.bootstrap((np.arange(len(b_logs)), np.arange(len(c_logs))), log_ratio,
                       n_resamples=resamples, vectorized=True, confidence_level=confidence,
                       method="percentile", rng=rng).confidence_interval
    estimate = math.log(summarize_runs(current).center / summarize_runs(baseline).center)
    return float(np.exp(ci.low)), float(np.exp(estimate)), float(np.exp(ci.high))


# -- two groups of runs: the decision ----------------------------------------------------------
def _cv_to_log_sd(cv: float) -> float:
    return math.sqrt(math.log1p(cv * cv))


def _log_sd_to_cv(sd: float) -> float:
    return math.sqrt(math.expm1(sd * sd))


def detectable_log_change(se: float, df: float, alpha: float = DEFAULT_ALPHA,
                          power: float = DEFAULT_POWER) -> float:
    """Smallest true log change a two-sided t test at ``alpha`` finds with ``power``."""
    if df <= 0 or not math.isfinite(se):
        return math.inf
    return (t_ppf(1.0 - alpha / 2.0, df) + t_ppf(power, df)) * se


def minimum_detectable_change(run_cv: float, n_baseline: int, n_current: int, *,
                              alpha: float = DEFAULT_ALPHA, power: float = DEFAULT_POWER,
                              df: float | None = None) -> float:
    """Relative change (0.07 = 7%) found with ``power`` at ``alpha`` given the run CV.

    For planning: ``run_cv`` is the run-to-run CV of a run's figure, the runs are
    independent, and the noise is estimated from both sides (``df`` defaults to
    ``n_baseline + n_current - 2``). ``inf`` when no noise can be estimated.
    """
    if n_baseline < 1 or n_current < 1:
        raise ValueError(f"run counts must be >= 1. Received: n_baseline={n_baseline}, "
                         f"n_current={n_current}")
    df = n_baseline + n_current - 2 if df is None else df
    se = _cv_to_log_sd(run_cv) * math.sqrt(1.0 / n_baseline + 1.0 / n_current)
    return math.expm1(detectable_log_change(se, df, alpha, power))


@dataclass(frozen=True)
class RunComparison:
    """What two groups of runs say about current / baseline.

    ``ratio`` is current / baseline of the geometric means of run figures (of
    group means when runs come in groups); ``low``/``high`` its interval at
    ``1 - alpha``; ``p_value`` two-sided (None when no noise could be measured);
    ``mde`` the relative change (0.07 = 7%, either way on the log scale) this
    comparison detects with ``power`` at ``alpha``; ``noise_cv`` the noise that
    decided it: per run (``unit == "run"``) or per group of runs (``"group"``),
    as a CV (with Welch, the mean of the sides' variances); ``df`` its degrees of
    freedom (Welch-Satterthwaite's, fractional, with Welch); ``test`` which t test.
    """

    ratio: float
    low: float
    high: float
    p_value: float | None
    significant: bool
    mde: float
    alpha: float
    power: float
    noise_cv: float | None
    unit: str
    df: float
    run_cv: float | None  # run-to-run CV inside groups (pooled over both sides)
    group_cv: float | None  # CV of group means around their side's mean (2+ groups a side)
    window_floor_cv: float  # a run's own precision, from its windows (floor of run_cv)
    baseline: RunSummary
    current: RunSummary
    note: str = ""
    test: str = STUDENT  # STUDENT (one common noise) or WELCH (each side its own)


def _window_floor_var(logs: list[np.ndarray], seed: int) -> float:
    """Mean variance of a run's log median over resamples of its own windows."""
    rng = np.random.default_rng(seed)
    by_size: dict[int, list[np.ndarray]] = {}
    for w in logs:
        if w.size >= 2:
            by_size.setdefault(w.size, []).append(w)
    out: list[float] = []
    for _, runs in sorted(by_size.items()):  # one call for all runs of a window count
        res = sps.bootstrap((np.stack(runs),), np.median, n_resamples=FLOOR_RESAMPLES,
                            axis=-1, vectorized=True, method="percentile", rng=rng)
        out += list(np.square(res.standard_error))
    return float(np.mean(out)) if out else 0.0


def _groups(n: int, labels: Sequence[Hashable] | None, what: str) -> list[list[int]]:
    if labels is None:
        return [list(range(n))]
    if len(labels) != n:
        raise ValueError(f"{what} needs one label per run. Received: {len(labels)} labels "
                         f"for {n} runs")
    order: dict[Hashable, list[int]] = {}
    for i, label in enumerate(labels):
        order.setdefault(label, []).append(i)
    return list(order.values())


# -- run-level noise as evidence: pooled spreads, their homogeneity, Welch --------------------
# Level of the F test that finds two noise estimates different (sides, configurations,
# stored runs). Two-sided: a quieter estimate pooled in would make the others' noise look
# smaller (false alarms), a noisier one theirs larger (lost power).
NOISE_DIFFERS_ALPHA = 0.05


@dataclass(frozen=True)
class LogSpread:
    """Evidence about one run-to-run noise: the sum of squared deviations of log run
    figures around their group's mean (``ss``) and its degrees of freedom (``df``: runs
    minus groups).

    Spreads of independent groups add, and ``var`` (``ss / df``) is then the pooled
    variance: the within-group mean square of a one-way ANOVA, the unbiased estimate
    of a variance the groups share, carrying every group's degrees of freedom. Its
    groups may be sweeps, sides or other configurations, each around its own mean, so
    a difference of level between them never counts as noise.
    """

    ss: float = 0.0
    df: int = 0

    def __add__(self, other: LogSpread) -> LogSpread:
        return LogSpread(self.ss + other.ss, self.df + other.df)

    @property
    def var(self) -> float | None:
        """The pooled variance of a log run figure (None without degrees of freedom)."""
        return self.ss / self.df if self.df else None

    @classmethod
    def of(cls, logs: Sequence[float], groups: Sequence[Hashable] | None = None) -> LogSpread:
        """The spread of log figures around their group's mean (one group without labels)."""
        a = np.asarray(logs, dtype=np.float64)
        return _spread(a, _groups(a.size, groups, "LogSpread.of"))


def _spread(values: np.ndarray, groups: list[list[int]]) -> LogSpread:
    return sum((LogSpread(float(((values[g] - values[g].mean()) ** 2).sum()), len(g) - 1)
                for g in groups), LogSpread())


def noise_differs_p(a: LogSpread, b: LogSpread) -> float | None:
    """Two-sided p-value of the F test that ``a`` and ``b`` measure one variance.

    None when either has no degrees of freedom (nothing to test). Two spreads of
    exactly zero agree (p 1), zero against nonzero differ (p 0): deterministic figures.
    """
    if not a.df or not b.df:
        return None
    va, vb = a.ss / a.df, b.ss / b.df
    if min(va, vb) <= 1e-24:
        return 1.0 if max(va, vb) <= 1e-24 else 0.0
    f = va / vb
    return min(1.0, 2.0 * min(f_cdf(f, a.df, b.df), f_sf(f, a.df, b.df)))


# A group borrows a pool's noise only where the F test that guards the pool would catch a
# group this much noisier (SD ratio) with this power: with 1 degree of freedom a group
# whose SD is 3x the pool's passed the test 56% of the time and borrowed a noise it does
# not have. Below it (fewer than 4 degrees of freedom against a large pool) it keeps its own.
GUARD_SD_RATIO = 3.0
GUARD_POWER = 0.8


def noise_guard_power(df: int, pool_df: int, sd_ratio: float = GUARD_SD_RATIO,
                      alpha: float = NOISE_DIFFERS_ALPHA) -> float:
    """Power of ``noise_differs_p``'s two-sided F test at ``alpha`` to find a group of
    ``df`` degrees of freedom different from a pool of ``pool_df`` when its true SD is
    ``sd_ratio`` times the pool's (0 without degrees of freedom)."""
    if df < 1 or pool_df < 1:
        return 0.0
    r = sd_ratio * sd_ratio
    hi, lo = f_ppf(1.0 - alpha / 2.0, df, pool_df), f_ppf(alpha / 2.0, df, pool_df)
    return f_sf(hi / r, df, pool_df) + f_cdf(lo / r, df, pool_df)


def guarded_pool(groups: Mapping[H, LogSpread]) -> tuple[LogSpread, set[H]]:
    """The pool of ``groups``' spreads and the groups left out of it. A group the F test
    could not guard (``noise_guard_power`` below ``GUARD_POWER`` against the rest:
    too few degrees of freedom to show a 3x noisier group apart) keeps its own noise.
    Then, while some group's noise differs from the pool of the others still in (F test,
    two-sided), the one of those farthest from the groups' median variance (log scale)
    leaves, so that one very noisy group cannot push every quiet one out, nor the
    reverse: by smallest p-value, two loud groups of eight made each quiet one look the
    most different from a pool they dominated, and the quiet ones left instead."""
    total = sum(groups.values(), LogSpread())
    inside = {g: s for g, s in groups.items()
              if noise_guard_power(s.df, total.df - s.df) >= GUARD_POWER}
    while len(inside) > 1:
        center = float(np.median([_log_var(s) for s in inside.values()]))
        differing = []
        for g, spread in inside.items():
            rest = sum((s for h, s in inside.items() if h != g), LogSpread())
            p = noise_differs_p(spread, rest)
            if p is not None and p < NOISE_DIFFERS_ALPHA:
                differing.append((abs(_log_var(spread) - center), p, g))
        if not differing:
            break
        del inside[max(differing, key=lambda t: (t[0], -t[1]))[2]]
    return sum(inside.values(), LogSpread()), set(groups) - set(inside)


def _log_var(spread: LogSpread) -> float:
    return math.log(max(spread.var or 0.0, 1e-24))


def holm_adjusted(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the order given: a hypothesis is rejected
    at family-wise level alpha exactly where its adjusted p-value is at most alpha,
    whatever the tests' dependence (``max over the first j of (m - i + 1) p_(i)``)."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    out = [1.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[i]))
        out[i] = running
    return out


def welch_satterthwaite(parts: Sequence[tuple[float, float]]) -> float:
    """Degrees of freedom of a sum of independent variance estimates, each part given as
    (its term of the sum, its own df): ``(sum v)^2 / sum(v^2 / df)``."""
    total = sum(v for v, _ in parts)
    spread = sum(v * v / df for v, df in parts)
    return total * total / spread if spread > 0 else float(sum(df for _, df in parts))


@dataclass(frozen=True)
class RunNoise:
    """The run-level noise evidence of one comparison: each side's and both sides'
    together (``common``: a run on both sides counted once). ``compare_runs`` measures
    it on its own runs when not given one; a caller may pass more
    (``bench.regress.pooling``: other configurations, stored runs), these runs included.
    """

    baseline: LogSpread
    current: LogSpread
    common: LogSpread


@dataclass(frozen=True)
class _Difference:
    var: float  # variance of the difference of the sides' log means
    df: float
    test: str  # STUDENT or WELCH
    weight: float  # var / weight = the variance of one unit (a run, or a group mean)


def _difference(b: LogSpread, c: LogSpread, common: LogSpread, wb: float, wc: float,
                floor: float, welch: bool) -> _Difference | None:
    """Var(current mean - baseline mean), where a side's mean has variance ``w`` x the
    noise of one unit.

    Student's common variance when the design is balanced and the sides' noise agrees:
    the pooled t is then exact and has the most degrees of freedom. With ``welch``,
    each side's own variance and the Welch-Satterthwaite df when the counts differ
    (there, when the smaller side is the noisier, Student's t alarms above alpha) or
    the F test finds the noise different (balanced, both tests have the same standard
    error: the F test only decides whether the pooled df can be trusted). A side of
    several runs without degrees of freedom at this level (each run its own group) has
    the common variance stand for it; its group-level spread is weighed beside it
    (``compare_runs``). A side of one run never gets here: nothing stands for it."""
    differs = noise_differs_p(b, c)
    unequal = not math.isclose(wb, wc, rel_tol=1e-9) or (
        differs is not None and differs < NOISE_DIFFERS_ALPHA)
    if welch and unequal and b.var is not None and c.var is not None:
        vb, vc = wb * max(b.var, floor), wc * max(c.var, floor)
        return _Difference(vb + vc, welch_satterthwaite([(vb, b.df), (vc, c.df)]), WELCH,
                           wb + wc)
    if common.var is None:
        return None
    return _Difference((wb + wc) * max(common.var, floor), float(common.df), STUDENT, wb + wc)


def compare_runs(baseline: Runs, current: Runs, *, alpha: float = DEFAULT_ALPHA,
                 power: float = DEFAULT_POWER,
                 baseline_groups: Sequence[Hashable] | None = None,
                 current_groups: Sequence[Hashable] | None = None,
                 seed: int = BOOTSTRAP_SEED, noise: RunNoise | None = None,
                 welch: bool = False) -> RunComparison:
    """Compare two groups of runs (each run a list of window values); see RunComparison.

    The noise is measured at the level runs vary at, and never taken smaller than
    what each level can show:

    - run level: the spread of log run figures around their group's mean, pooled
      over both sides (same machine, same configuration: one noise), with
      ``df = runs - groups``. It is floored by each run's own precision, the
      variance of its median over resamples of its windows: two lucky runs cannot
      make a run more precise than its windows say;
    - group level (optional ``*_groups`` labels, e.g. the nightly each run came
      from): with 2+ groups on a side, the spread of group means. When it is
      larger than the run level predicts, something shared by the runs of a group
      (the night's load, a driver) varies too, and groups become the unit.

    ``noise`` replaces the run-level evidence measured on these runs by a larger one
    (pooled elsewhere, these runs included). ``welch``: at either level, each side
    keeps its own variance (Welch's t, Welch-Satterthwaite df) when the sides' counts
    differ or an F test finds their noise different (``NOISE_DIFFERS_ALPHA``);
    otherwise, and always without ``welch``, one common variance (Student's t).

    The change is the difference of the sides' log means (means of group means);
    its standard error follows from the chosen noise; the interval and the
    two-sided p-value use the t distribution of the chosen test, and the minimum
    detectable change is ``(t[1 - alpha/2] + t[power]) x SE``. A side of one run has no
    noise of its own and none is lent to it, as in ``settle_runs``: neither the other
    side's spread nor a pool (``noise``) says how its single figure varies, and where
    it is the noisier its borrowed interval is too narrow. Then nothing is decided:
    ``p_value`` None, ``mde`` inf.
    """
    if not 0 < alpha < 1 or not 0 < power < 1:
        raise ValueError(f"alpha and power must be between 0 and 1. Received: "
                         f"alpha={alpha!r}, power={power!r}")
    if not baseline or not current:
        raise ValueError(f"compare_runs needs runs on both sides. Received: {len(baseline)} "
                         f"baseline and {len(current)} current run(s)")
    b_logs = [_log_windows(r, "compare_runs") for r in baseline]
    c_logs = [_log_windows(r, "compare_runs") for r in current]
    b_fig = np.array([float(np.median(w)) for w in b_logs])
    c_fig = np.array([float(np.median(w)) for w in c_logs])
    sides = [(b_fig, _groups(len(b_fig), baseline_groups, "baseline_groups")),
             (c_fig, _groups(len(c_fig), current_groups, "current_groups"))]

    # Per side: its centre, the run-level and group-level spreads, and the weights
    # that turn one unit's variance into its centre's: sum(1/n_g) / G^2 for runs,
    # 1 / G for group means.
    centers, runs, group_spreads, run_w, group_w = [], [], [], [], []
    for fig, groups in sides:
        means = np.array([fig[g].mean() for g in groups])
        centers.append(float(means.mean()))
        runs.append(_spread(fig, groups))
        group_spreads.append(_spread(means, [list(range(means.size))]))
        run_w.append(sum(1.0 / len(g) for g in groups) / len(groups) ** 2)
        group_w.append(1.0 / len(groups))
    delta = centers[1] - centers[0]
    noise = noise or RunNoise(runs[0], runs[1], runs[0] + runs[1])

    floor_var = _window_floor_var(b_logs + c_logs, seed)
    run_var = None if noise.common.var is None else max(noise.common.var, floor_var)
    group_var = (group_spreads[0] + group_spreads[1]).var
    chosen = _difference(noise.baseline, noise.current, noise.common, run_w[0], run_w[1],
                         floor_var, welch)
    unit = "run"
    by_group = _difference(group_spreads[0], group_spreads[1],
                           group_spreads[0] + group_spreads[1], group_w[0], group_w[1], 0.0,
                           welch)
    if by_group is not None and (chosen is None or by_group.var > chosen.var):
        chosen, unit = by_group, "group"
    undecided = RunComparison(
        ratio=math.exp(delta), low=math.nan, high=math.nan, p_value=None, significant=False,
        mde=math.inf, alpha=alpha, power=power, noise_cv=None, unit=unit,
        df=0.0 if chosen is None else chosen.df,
        run_cv=None if run_var is None else _log_sd_to_cv(math.sqrt(run_var)),
        group_cv=None if group_var is None else _log_sd_to_cv(math.sqrt(group_var)),
        window_floor_cv=_log_sd_to_cv(math.sqrt(floor_var)),
        baseline=summarize_runs(baseline), current=summarize_runs(current),
        test=STUDENT if chosen is None else chosen.test)
    if min(len(baseline), len(current)) < 2:
        return replace(undecided, note=(
            f"{len(baseline)} baseline and {len(current)} current run(s): a side of one "
            f"run has no run-to-run noise of its own, and none is lent to it (2+ runs on "
            f"each side needed)"))
    if chosen is None:
        return replace(undecided, note=(
            f"{len(baseline)} baseline and {len(current)} current run(s): the run-to-run "
            f"noise cannot be measured without 2+ runs on a side"))
    df, se = chosen.df, math.sqrt(chosen.var)
    noise_cv = _log_sd_to_cv(math.sqrt(chosen.var / chosen.weight))
    if se < 1e-12:  # identical runs everywhere (e.g. a deterministic memory figure)
        p = 1.0 if abs(delta) < 1e-12 else 0.0
        return replace(undecided, low=math.exp(delta), high=math.exp(delta), p_value=p,
                       significant=p < alpha, mde=0.0, noise_cv=0.0)
    p = min(1.0, 2.0 * t_sf(abs(delta) / se, df))
    half = t_ppf(1.0 - alpha / 2.0, df) * se
    return replace(undecided, low=math.exp(delta - half), high=math.exp(delta + half),
                   p_value=p, significant=p < alpha, noise_cv=noise_cv,
                   mde=math.expm1(detectable_log_change(se, df, alpha, power)))


# -- paired samples: ratio, equivalence, planning --------------------------------------------
# A pair is one baseline and one current figure measured under the same conditions
# (back to back, same machine state): the noise the two share drops out of their ratio,
# so pairs settle a change with far fewer runs than two independent groups. The
# margin of an equivalence is symmetric on the log scale: 0.05 means the ratio lies
# in [1/1.05, 1.05], the same 5% either way up (throughput or time per step).
def _paired_log_ratios(baseline: Sequence[float], current: Sequence[float],
                       what: str) -> np.ndarray:
    b = np.asarray(baseline, dtype=np.float64)
    c = np.asarray(current, dtype=np.float64)
    if b.shape != c.shape or b.ndim != 1:
        raise ValueError(f"{what} needs one current value per baseline value. Received: "
                         f"{b.size} baseline and {c.size} current value(s)")
    if b.size < 2:
        raise ValueError(f"{what} needs 2+ pairs to measure their spread. Received: "
                         f"pairs={b.size}")
    both = np.concatenate([b, c])
    if not np.all(np.isfinite(both)) or np.any(both <= 0):
        raise ValueError(f"{what} needs positive, finite values. Received: "
                         f"baseline={list(baseline)!r}, current={list(current)!r}")
    return np.log(c) - np.log(b)


def _log_margin(margin: float) -> float:
    if not 0 < margin < 1:
        raise ValueError(f"margin is a relative change, 0 < margin < 1 (0.05 = 5%). "
                         f"Received: margin={margin!r}")
    return math.log1p(margin)


@dataclass(frozen=True)
class PairedRatio:
    """current / baseline from paired figures, with two intervals at ``confidence``.

    ``mean_log`` is the mean of the pairs' log ratios log(current_i / baseline_i),
    ``sd_log`` their standard deviation (n - 1), ``ratio`` = exp(mean_log) (the
    geometric mean of the pair ratios). ``t_low``/``t_high``: the ratio's interval
    from the paired t (``scipy.stats.t``, n - 1 degrees of freedom);
    ``boot_low``/``boot_high``: from a seeded BCa bootstrap of the pairs
    (``scipy.stats.bootstrap``), which assumes nothing about the shape of the
    noise but, like every bootstrap, is too narrow with few pairs (under ~10).
    """

    pairs: int
    mean_log: float
    sd_log: float
    ratio: float
    confidence: float
    t_low: float
    t_high: float
    boot_low: float
    boot_high: float


def paired_log_ratio(baseline: Sequence[float], current: Sequence[float],
                     confidence: float = 0.95, *, resamples: int = BOOTSTRAP_RESAMPLES,
                     seed: int = BOOTSTRAP_SEED) -> PairedRatio:
    """Mean log ratio of paired figures, as a ratio with its t and bootstrap intervals.

    ``baseline[i]`` and ``current[i]`` are one pair (e.g. the run figures of two
    configurations measured back to back). Deterministic for a given ``seed``.
    """
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be between 0 and 1. Received: "
                         f"confidence={confidence!r}")
    d = _paired_log_ratios(baseline, current, "paired_log_ratio")
    mean, sd = float(d.mean()), float(d.std(ddof=1))
    t_ci: tuple[float, float] = (mean, mean)
    boot_ci = t_ci
    if sd >= 1e-12:  # identical ratios (a deterministic figure): both intervals are the point
        half = t_ppf(0.5 + confidence / 2.0, d.size - 1) * sd / math.sqrt(d.size)
        t_ci = (mean - half, mean + half)
        boot = sps.bootstrap((d,), np.mean, n_resamples=resamples, vectorized=True,
                             confidence_level=confidence, method="BCa",
                             rng=np.random.default_rng(seed)).confidence_interval
        boot_ci = (float(boot.low), float(boot.high))
    return PairedRatio(pairs=int(d.size), mean_log=mean, sd_log=sd, ratio=math.exp(mean),
                       confidence=confidence, t_low=math.exp(t_ci[0]), t_high=math.exp(t_ci[1]),
                       boot_low=math.exp(boot_ci[0]), boot_high=math.exp(boot_ci[1]))


@dataclass(frozen=True)
class Equivalence:
    """Two one-sided t tests (TOST) of paired log ratios against +-``margin``.

    ``p_lower`` tests "ratio <= 1/(1 + margin)", ``p_upper`` "ratio >= 1 + margin"
    (``scipy.stats.ttest_1samp``, one-sided); ``p_value`` is the larger of the two;
    ``equivalent`` (p_value < alpha) means the change is shown to be smaller than
    the margin either way. The same decision as "the 1 - 2 alpha paired t interval
    lies inside the margin".
    """

    pairs: int
    ratio: float
    margin: float
    alpha: float
    p_lower: float
    p_upper: float
    p_value: float
    equivalent: bool


def paired_equivalence(baseline: Sequence[float], current: Sequence[float],
                       margin: float = 0.05, *, alpha: float = DEFAULT_ALPHA) -> Equivalence:
    """TOST equivalence of paired figures within +-``margin`` (0.05 = 5%), see Equivalence."""
    if not 0 < alpha < 0.5:
        raise ValueError(f"alpha must be between 0 and 0.5. Received: alpha={alpha!r}")
    bound = _log_margin(margin)
    d = _paired_log_ratios(baseline, current, "paired_equivalence")
    mean = float(d.mean())
    if d.std(ddof=1) < 1e-12:  # no spread: each one-sided test is decided by the mean alone
        p_lower, p_upper = float(mean <= -bound), float(mean >= bound)
    else:
        p_lower = t_sf(*one_sample_t(d, -bound))  # one-sided: mean > -bound
        p_upper = t_cdf(*one_sample_t(d, bound))  # one-sided: mean < bound
    p = max(p_lower, p_upper)
    return Equivalence(pairs=int(d.size), ratio=math.exp(mean), margin=margin, alpha=alpha,
                       p_lower=p_lower, p_upper=p_upper, p_value=p, equivalent=p < alpha)


def paired_test(log_ratios: Sequence[float], margin: float, alpha: float, *,
                resamples: int = BOOTSTRAP_RESAMPLES) -> tuple[PairedRatio, bool]:
    """Pairs given as their log ratios (log(candidate_i / reference_i)): the mean log
    ratio with its ``1 - alpha`` intervals (``paired_log_ratio``) and whether TOST at
    ``alpha`` shows it within +-``margin`` (``paired_equivalence``)."""
    reference, candidate = [1.0] * len(log_ratios), [math.exp(x) for x in log_ratios]
    ratio = paired_log_ratio(reference, candidate, 1.0 - alpha, resamples=resamples)
    return ratio, paired_equivalence(reference, candidate, margin, alpha=alpha).equivalent


def equivalence_power(pairs: int, sd_log: float, margin: float, *,
                      alpha: float = DEFAULT_ALPHA, true_ratio: float = 1.0) -> float:
    """Probability that ``paired_equivalence`` on ``pairs`` pairs shows equivalence.

    ``sd_log`` is the SD of the pairs' log ratios (``PairedRatio.sd_log``),
    ``true_ratio`` the ratio assumed true. Each one-sided test's power comes from
    the noncentral t (``scipy.stats.nct``); their sum minus one is the usual lower
    bound of both passing (tight once the power is useful, above ~0.5).
    """
    if pairs < 2:
        raise ValueError(f"equivalence needs 2+ pairs. Received: pairs={pairs}")
    if sd_log < 0:
        raise ValueError(f"sd_log must be >= 0. Received: sd_log={sd_log!r}")
    if not 0 < alpha < 0.5:
        raise ValueError(f"alpha must be between 0 and 0.5. Received: alpha={alpha!r}")
    if true_ratio <= 0:
        raise ValueError(f"true_ratio must be > 0. Received: true_ratio={true_ratio!r}")
    bound, mu = _log_margin(margin), math.log(true_ratio)
    if abs(mu) >= bound:
        return 0.0  # at or beyond the margin equivalence is shown at most alpha of the time
    if sd_log == 0:
        return 1.0
    df, se = pairs - 1, sd_log / math.sqrt(pairs)
    crit = t_ppf(1.0 - alpha, df)
    # The noncentral t's cdf (scipy.special.nctdtr, what scipy.stats.nct evaluates).
    power = (1.0 - special.nctdtr(df, (mu + bound) / se, crit)
             + special.nctdtr(df, (mu - bound) / se, -crit) - 1.0)
    return max(0.0, float(power))


def pairs_for_equivalence(sd_log: float, margin: float, *, alpha: float = DEFAULT_ALPHA,
                          power: float = DEFAULT_POWER, true_ratio: float = 1.0,
                          max_pairs: int = 100_000) -> int:
    """The fewest pairs for which ``paired_equivalence`` shows +-``margin`` with ``power``.

    For planning: at the measured SD of the log ratios (``PairedRatio.sd_log``) and
    the ratio assumed true (1: no change). Raises when even ``max_pairs`` would not
    do, e.g. when ``true_ratio`` is at or beyond the margin.
    """
    if not 0 < power < 1:
        raise ValueError(f"power must be between 0 and 1. Received: power={power!r}")

    def enough(n: int) -> bool:
        return equivalence_power(n, sd_log, margin, alpha=alpha, true_ratio=true_ratio) >= power

    if not enough(max_pairs):
        raise ValueError(f"no number of pairs up to {max_pairs} shows a {margin:.1%} margin "
                         f"with power {power}. Received: sd_log={sd_log!r}, "
                         f"true_ratio={true_ratio!r}")
    return _fewest(enough, max_pairs)


def _fewest(enough: Callable[[int], bool], most: int) -> int:
    """The smallest n in 2..``most`` with ``enough(n)``, for an ``enough`` that grows with n
    and holds at ``most`` (the caller checked): doubling, then bisection."""
    lo, hi = 1, 2  # not enough(lo) (a single pair never is), enough(hi) after the doubling
    while not enough(hi):
        lo, hi = hi, min(2 * hi, most)
    while hi - lo > 1:  # the power grows with the pairs: bisect
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if enough(mid) else (mid, hi)
    return hi


def pairs_to_detect(sd_log: float, log_change: float, *, alpha: float = DEFAULT_ALPHA,
                    power: float = DEFAULT_POWER, max_pairs: int = 100_000) -> int:
    """The fewest pairs whose paired t test at ``alpha`` finds ``log_change`` with ``power``.

    For planning, at the SD of the pairs' log ratios ``sd_log``; raises when even
    ``max_pairs`` would not do (a change of 0, or a tiny one in large noise).
    """
    if sd_log < 0:
        raise ValueError(f"sd_log must be >= 0. Received: sd_log={sd_log!r}")

    def enough(n: int) -> bool:
        return detectable_log_change(sd_log / math.sqrt(n), n - 1, alpha, power) <= abs(
            log_change)

    if log_change == 0 or not enough(max_pairs):
        raise ValueError(f"no number of pairs up to {max_pairs} detects this change with power "
                         f"{power}. Received: sd_log={sd_log!r}, log_change={log_change!r}")
    return _fewest(enough, max_pairs)


# -- one answer between two configurations: faster, equivalent, or not settled ---------------
# A comparison that decides something has three honest outcomes. A difference beyond the
# noise (and beyond the margin: a significant 1% gap is no reason to pay for a more complex
# configuration); a difference shown to be smaller than the margin (an equivalence test:
# "not significant" only says the runs could not tell, never that the two are the same);
# or neither, with what it would take. The decision is one pure function of an interval,
# so both kinds of evidence feed it: independent runs of each side (a Welch interval on
# the log run figures) and interleaved pairs (a paired t interval on the log ratios).
DEFAULT_MARGIN = 0.05
FASTER, SLOWER, EQUIVALENT, NOT_SETTLED = "faster", "slower", "equivalent", "not settled"
SETTLE_VERDICTS = (FASTER, SLOWER, EQUIVALENT, NOT_SETTLED)
RUNS, PAIRS = "runs", "pairs"  # the two kinds of evidence
# A plan beyond this many runs (or pairs) is reported as "more than": no sweep does it.
MAX_PLANNED = 10_000
# The decision reads the paired t interval only: the bootstrap beside it needs few resamples.
SETTLE_RESAMPLES = 100


@dataclass(frozen=True)
class Settlement:
    """What the evidence says about candidate / reference: one of ``SETTLE_VERDICTS``.

    ``verdict``: FASTER / SLOWER when the ``1 - alpha`` interval lies wholly beyond
    +-``margin`` (symmetric on the log scale, as ``paired_equivalence``); EQUIVALENT when
    the ``1 - 2 alpha`` interval lies inside
    +-``margin`` (TOST, which takes precedence: a change shown smaller than the margin
    is no reason to choose); NOT_SETTLED otherwise. ``ratio`` is exp(mean log ratio);
    ``low``/``high`` its ``1 - alpha`` interval and ``eq_low``/``eq_high`` the
    ``1 - 2 alpha`` one (NaN when no noise could be measured). ``evidence`` is RUNS
    (``sizes`` = runs of reference and candidate) or PAIRS (``sizes`` = (pairs,));
    ``sd_log`` the noise per run (pooled over both sides) or per pair, log scale
    (None: not measured); ``needed`` (NOT_SETTLED only) the runs per configuration,
    or pairs, that would settle it with ``power`` at that noise and the estimated
    ratio, counting those done (None when the noise is unmeasured or the plan exceeds
    ``MAX_PLANNED``); ``reason`` says it in words. ``pooled_df``: the noise came from a
    pool of comparisons like this one (a ``LogSpread`` over the sweep), with these
    degrees of freedom (None: from this comparison's own runs or pairs).
    """

    verdict: str
    ratio: float
    low: float
    high: float
    eq_low: float
    eq_high: float
    margin: float
    alpha: float
    power: float
    evidence: str
    sizes: tuple[int, ...]
    sd_log: float | None
    needed: int | None
    pooled_df: float | None = None
    # The noise is the sessions' rounds' prediction, guarded by the workload's
    # session-noise ratio (``RoundsEvidence``), with the rounds' degrees of freedom
    # (None: not).
    rounds_df: float | None = None
    # Two-sided p-value of "no difference" (None: no noise measured): what a correction
    # over several comparisons (Holm's, ``reports.recommend.beaten_by``) orders them by.
    p_value: float | None = None
    # The p-value of its claim against the margin (None: no noise measured): the level
    # below which ``verdict`` is FASTER / SLOWER (twice the one-sided p of a gap beyond
    # the margin: its 1 - alpha interval lies past it) or EQUIVALENT (TOST's p), the
    # smaller of the two (at alpha < 0.5 at most one of them can be claimed). What a
    # correction of the margin claims over a place's comparisons orders them by
    # (``reports.recommend.PlaceComparisons``).
    margin_p: float | None = None
    # The standard error of the log ratio and its degrees of freedom (None, 0: no noise
    # measured): what a comparison of two sweeps' estimates reads (``reports.stability``).
    se: float | None = None
    df: float = 0.0

    @property
    def decided(self) -> bool:
        """An interval was measured (two or more runs on a side, or pairs)."""
        return not (math.isnan(self.low) or math.isnan(self.high))

    @property
    def half_width(self) -> float | None:
        """The interval's relative half-width, sqrt(high / low) - 1 (0.05: about +-5%)."""
        return math.sqrt(self.high / self.low) - 1.0 if self.decided else None

    @property
    def settled(self) -> bool:
        return self.verdict != NOT_SETTLED

    @property
    def direction(self) -> str | None:
        """FASTER or SLOWER when the ``1 - alpha`` interval leaves out 1 (the candidate is
        shown faster or slower beyond the noise, whatever its size against the margin);
        None when it does not, or no noise was measured. Which is faster is settled by
        this, apart from whether it is faster by more than the margin (``verdict``)."""
        if not self.decided:
            return None
        return FASTER if self.low > 1.0 else SLOWER if self.high < 1.0 else None

    @property
    def beyond_noise_only(self) -> bool:
        """Shown apart beyond the noise, while its size against the margin is open."""
        return self.direction is not None and self.verdict == NOT_SETTLED

    @property
    def unit(self) -> str:
        """What ``needed`` counts."""
        return "runs a configuration" if self.evidence == RUNS else "pairs"

    @property
    def reason(self) -> str:
        """The decision in words: ``+2.0% is shown to lie within +-5% (...)``."""
        change, m = f"{self.ratio - 1:+.1%}", f"+-{self.margin:.0%}"
        if self.verdict in (FASTER, SLOWER):
            return f"{change} is beyond the noise and beyond {m} (its interval lies past it)"
        if self.verdict == EQUIVALENT:
            return (f"{change} is shown to lie within {m} (its {level(1 - 2 * self.alpha)} "
                    f"interval lies inside it)")
        return f"{change} is neither shown beyond the noise and {m} nor within {m}; {self.plan}"

    @property
    def plan(self) -> str:
        """What would settle it (empty once settled)."""
        if self.settled:
            return ""
        if self.sd_log is None:
            return f"the noise is not measured: 2 or more {self.unit} needed"
        if self.needed is None:
            return f"more than {MAX_PLANNED:,} {self.unit} would be needed at this noise"
        return f"about {self.needed:,} {self.unit} would settle it at this noise"

    def flipped(self) -> Settlement:
        """The same evidence read the other way round: reference / candidate (both
        intervals are symmetric on the log scale, so nothing else changes)."""
        swap = {FASTER: SLOWER, SLOWER: FASTER}
        return replace(self, verdict=swap.get(self.verdict, self.verdict), ratio=1 / self.ratio,
                       low=1 / self.high, high=1 / self.low, eq_low=1 / self.eq_high,
                       eq_high=1 / self.eq_low, sizes=self.sizes[::-1])


# The one decision rule of every comparison, the reports' answers and the gate's verdicts
# alike, as codes over a log-ratio interval: WITHIN when the equivalence test passed (it
# takes precedence: a change shown smaller than the margin is no reason to act), ABOVE /
# BELOW when the whole 1 - alpha interval lies past +-bound, OPEN otherwise. An estimate
# past the margin whose interval reaches inside it is open: "significant and beyond the
# threshold" called a true 3% change against a 5% threshold "regressed" 18% of the time.
OPEN_CODE, WITHIN_CODE, ABOVE_CODE, BELOW_CODE = range(4)


def interval_decision(low: Any, high: Any, same: Any, bound: float) -> np.ndarray:
    """Codes of the rule above for log intervals [``low``, ``high``] (arrays or scalars;
    NaN: no interval, never past the bound) and TOST outcomes ``same``."""
    low, high = np.asarray(low, dtype=np.float64), np.asarray(high, dtype=np.float64)
    codes = np.full(np.broadcast(low, high).shape, OPEN_CODE)
    codes[low > bound] = ABOVE_CODE
    codes[high < -bound] = BELOW_CODE
    codes[np.broadcast_to(np.asarray(same, dtype=bool), codes.shape)] = WITHIN_CODE
    return codes


def level(confidence: float) -> str:
    """A confidence level as people write it: ``90%``, ``99.8%`` (never a rounded 100%)."""
    return f"{confidence * 100:.3g}%"


def _check_settle_args(margin: float, alpha: float, power: float) -> float:
    if not 0 < alpha < 0.5 or not 0 < power < 1:
        raise ValueError(f"alpha must be in (0, 0.5) and power in (0, 1). Received: "
                         f"alpha={alpha!r}, power={power!r}")
    return _log_margin(margin)


def _settle(mean: float, se: float | None, df: float, sd_pair: float | None, *,
            margin: float, alpha: float, power: float, evidence: str,
            sizes: tuple[int, ...], sd_log: float | None,
            equivalent: bool | None = None, pooled_df: float | None = None,
            rounds_df: float | None = None) -> Settlement:
    """The decision on a log ratio ``mean`` with standard error ``se`` (``df`` degrees of
    freedom; None: no noise measured). ``sd_pair`` is the noise of one planned unit's
    log ratio (a pair's; for runs, a run a side), what ``needed`` is planned at.
    ``equivalent`` overrides the TOST computed here (the paired path takes
    ``paired_equivalence``'s, the same decision)."""
    bound = math.log1p(margin)
    nan = math.nan
    p_value: float | None = None
    margin_p: float | None = None
    if se is None:
        low = high = eq_low = eq_high = half = nan
        same = False
    else:
        p_value = (2.0 * t_sf(abs(mean) / se, df) if se > 0
                   else float(mean == 0.0))
        margin_p = (min(1.0, 2.0 * t_sf((abs(mean) - bound) / se, df),
                        t_sf((bound - abs(mean)) / se, df)) if se > 0
                    else float(abs(mean) == bound))
        half = t_ppf(1.0 - alpha / 2.0, df) * se
        eq_half = t_ppf(1.0 - alpha, df) * se
        low, high = math.exp(mean - half), math.exp(mean + half)
        eq_low, eq_high = math.exp(mean - eq_half), math.exp(mean + eq_half)
        same = (mean - eq_half > -bound and mean + eq_half < bound) if equivalent is None \
            else equivalent
    # Beyond the margin means the whole interval lies beyond it, as "within" means the
    # whole (90%) interval lies inside: a gap near the margin whose estimate happens to
    # fall past it is neither, and is not settled (two sweeps of a 5% gap against a +-5%
    # margin called it "slower" in one and "equivalent" in the other).
    code = int(interval_decision(mean - half, mean + half, same, bound))
    verdict = {OPEN_CODE: NOT_SETTLED, WITHIN_CODE: EQUIVALENT, ABOVE_CODE: FASTER,
               BELOW_CODE: SLOWER}[code]
    needed = None
    if verdict == NOT_SETTLED and sd_pair is not None:
        with contextlib.suppress(ValueError):  # beyond MAX_PLANNED: "more than"
            # Past the margin: enough to show the gap beyond it, i.e. to detect its
            # excess over the margin; inside it: enough to show it within.
            needed = (pairs_to_detect(sd_pair, abs(mean) - bound, alpha=alpha, power=power,
                                      max_pairs=MAX_PLANNED) if abs(mean) > bound else
                      pairs_for_equivalence(sd_pair, margin, alpha=alpha, power=power,
                                            true_ratio=math.exp(mean), max_pairs=MAX_PLANNED))
            # Planned for a fresh sample: the ones measured did not settle it, so one more
            # at least, whatever the power calculation says.
            needed = max(needed, max(sizes) + 1)
    return Settlement(verdict=verdict, ratio=math.exp(mean), low=low, high=high, eq_low=eq_low,
                      eq_high=eq_high, margin=margin, alpha=alpha, power=power,
                      evidence=evidence, sizes=sizes, sd_log=sd_log, needed=needed,
                      pooled_df=pooled_df, rounds_df=rounds_df, p_value=p_value,
                      margin_p=margin_p, se=se, df=df if se is not None else 0.0)


def settle_runs(reference: Sequence[float], candidate: Sequence[float], *,
                margin: float = DEFAULT_MARGIN, alpha: float = DEFAULT_ALPHA,
                power: float = DEFAULT_POWER, floor_sd_log: float = 0.0,
                pooled: LogSpread | None = None) -> Settlement:
    """candidate / reference from independent runs of each: one positive figure a run.

    Welch's interval on the log run figures (each side keeps its own noise; the
    Welch-Satterthwaite degrees of freedom). With one run on a side its noise is
    taken to be the other side's (``df`` of that side alone); with one run on both no
    noise is measured and nothing is settled. ``floor_sd_log``: no side's run-to-run
    SD is taken below it (a run's own precision from its windows: two lucky runs
    cannot be more alike than their windows allow). ``pooled``: a run's variance
    pooled over configurations of the sweep (``bench.answers.noise``), used instead of the
    two sides' own where it has more degrees of freedom. ``needed`` counts runs per
    configuration. See Settlement.
    """
    _check_settle_args(margin, alpha, power)
    ref = _log_windows(reference, "settle_runs reference")
    cand = _log_windows(candidate, "settle_runs candidate")
    mean = float(cand.mean() - ref.mean())
    floor = floor_sd_log * floor_sd_log
    sizes = (int(ref.size), int(cand.size))
    se: float | None = None
    df, sd, pooled_df = 0.0, None, None
    # A side of one run has no noise of its own, and none is lent to it: the other
    # side's spread, or the pool's, says nothing about how its single figure varies (a
    # multi-process configuration measured once was settled FASTER on the arms' noise).
    if min(sizes) >= 2:
        var = [max(float(x.var(ddof=1)), floor) for x in (ref, cand)]
        parts = [v / n for v, n in zip(var, sizes, strict=True)]
        se = math.sqrt(sum(parts))
        sd = math.sqrt(sum(var) / 2.0)
        df = welch_satterthwaite([(p, n - 1) for p, n in zip(parts, sizes, strict=True)])
        if (pooled is not None and pooled.var is not None and pooled.df > df
                and max(var) <= max(pooled.var, floor)):
            # The pool's variance and degrees of freedom, only where neither side's own
            # variance is the larger: a side noisier than the pool keeps its own with its
            # own (Welch-Satterthwaite) degrees of freedom. The pool's df beside a larger
            # own variance let a noisy configuration's interval cover 92% for 95%.
            v = max(pooled.var, floor)
            se = math.sqrt(v / sizes[0] + v / sizes[1])
            sd, df = math.sqrt(v), float(pooled.df)
            pooled_df = df
    # Planned as pairs of runs (one a side): a pair's log ratio has SD sqrt(2) x a run's.
    return _settle(mean, se, df, None if sd is None else sd * math.sqrt(2.0), margin=margin,
                   alpha=alpha, power=power, evidence=RUNS, sizes=sizes, sd_log=sd,
                   pooled_df=pooled_df)


# The session-noise ratio is read at the upper end of its one-sided 97.5% interval: the
# guard holds the rounds' prediction to what sessions could add, not to what they added
# on average. At 95% the budget's looks called a difference that is not there 5.6-6.0%
# of the time for 5% where one answer's sessions were 4.4x noisier beyond their rounds
# than the rest of its workload's (scripts.round_test_check --plan); at 97.5%, 5.1-5.4%,
# and 4.2-4.5% where they share one ratio or differ by 2x (docs/how-it-decides.md).
SESSION_RATIO_LEVEL = 0.975
# Below this many degrees of freedom the ratio's upper bound is too loose to narrow
# anything (its multiplier over the estimate, df / chi2(0.025, df), is 39.5 at 2 df and
# 8.3 at 4): the comparisons keep their own sessions' variance. A rule on the pool's
# size, fixed before any comparison's figures are read, not a choice of the narrower
# of two intervals (that choice would spend alpha twice).
SESSION_RATIO_MIN_DF = 4
# The rounds are read for a comparison of at most this many sessions: there its own
# sessions' t has 1 or 2 degrees of freedom (12.7 and 4.3 at 95%), against about 2.1
# for the rounds' with the guard's widening (its bound over the ratio, 1.8-2.9 in SD at
# 9-4 df). From 4 sessions (t 3.2 at 3 df) a comparison's own sessions are mostly the
# better evidence. A rule on the count of sessions, fixed before their figures are read.
ROUNDS_MAX_SESSIONS = 3


@dataclass(frozen=True)
class SessionRatio:
    """How much noisier a session's log ratio of two arms is than its rounds predict,
    over the answers of one workload: the sum of the answers' pair residual squares
    (``ss``, ``bench.answers.noise.pair_spread``) over the sum of each answer's residual df
    times what its rounds predict for one session's log ratio (``expected``), with the
    residuals' ``df``. Where the rounds see all the noise the ratio is about 1 (below 1:
    the rounds' prediction, a median's pi/2 included, is on the safe side); a session's
    own offsets (its builds', its process's) raise it. Ratios of answers add as
    ``LogSpread``s do."""

    ss: float = 0.0
    expected: float = 0.0
    df: int = 0

    def __add__(self, other: SessionRatio) -> SessionRatio:
        return SessionRatio(self.ss + other.ss, self.expected + other.expected,
                            self.df + other.df)

    @property
    def ratio(self) -> float | None:
        """The pooled ratio (None without degrees of freedom)."""
        return self.ss / self.expected if self.df and self.expected > 0 else None

    @property
    def bound(self) -> float | None:
        """The ratio's upper ``SESSION_RATIO_LEVEL`` bound (ss / expected is the true
        ratio times a chi-squared over its df). It may lie below 1: the rounds'
        prediction is a calibration, and on the 2-core machines it overstates what
        sessions vary by (ratios 0.1-0.7 for the CNN and MLP, a median's pi/2 and the
        drift within a session included). None without degrees of freedom."""
        if self.ratio is None:
            return None
        return self.ratio * self.df / chi2_ppf(1.0 - SESSION_RATIO_LEVEL, self.df)


@dataclass(frozen=True)
class RoundsEvidence:
    """What one comparison's rounds say of its sessions' noise: ``predicted``, the
    variance of one session's log ratio they predict (the mean over its sessions),
    with their ``df`` (the sum), and the ``ratio`` of its workload's answers."""

    predicted: float
    df: int
    ratio: SessionRatio

    @property
    def var(self) -> float | None:
        """The guarded variance of one session's log ratio: the rounds' prediction times
        the session-noise ratio's upper bound (None: no bound, or one from fewer than
        ``SESSION_RATIO_MIN_DF`` degrees of freedom)."""
        bound = self.ratio.bound
        if bound is None or self.df < 1 or self.ratio.df < SESSION_RATIO_MIN_DF:
            return None
        return bound * self.predicted


def settle_pairs(log_ratios: Sequence[float], *, margin: float = DEFAULT_MARGIN,
                 alpha: float = DEFAULT_ALPHA, power: float = DEFAULT_POWER,
                 pooled: LogSpread | None = None,
                 rounds: RoundsEvidence | None = None) -> Settlement:
    """candidate / reference from interleaved pairs: ``log_ratios[i]`` =
    log(candidate_i / reference_i), measured close in time so that the machine's drift
    drops out. The paired t interval (``paired_log_ratio``) and TOST
    (``paired_equivalence``); ``needed`` counts pairs. ``pooled``: a pair's variance
    pooled over the sweep's comparisons (``bench.answers.noise``), used instead of these
    pairs' own where it has more degrees of freedom (t intervals then). ``rounds``:
    where nothing is borrowed from the pool and there are at most
    ``ROUNDS_MAX_SESSIONS`` pairs, the variance the sessions' own rounds predict times
    the upper bound of the workload's session-noise ratio, with the rounds' degrees of
    freedom, used where the pairs' own variance is not the larger (``RoundsEvidence``;
    docs/how-it-decides.md, "Rounds"). See Settlement.
    """
    _check_settle_args(margin, alpha, power)
    d = np.asarray(log_ratios, dtype=np.float64)
    if d.ndim != 1 or d.size == 0 or not np.all(np.isfinite(d)):
        raise ValueError(f"log_ratios must be one finite value a pair. Received: "
                         f"log_ratios={list(log_ratios)!r}")
    n = int(d.size)
    own = float(d.var(ddof=1)) if n >= 2 else None
    if (pooled is not None and pooled.var is not None and pooled.df > n - 1
            and (own is None or own <= pooled.var)):
        # Borrowed only where its own variance is not the larger (as settle_runs): a
        # comparison noisier than the pool keeps its own variance and n - 1 df.
        sd = math.sqrt(pooled.var)
        return _settle(float(d.mean()), sd / math.sqrt(n), float(pooled.df), sd,
                       margin=margin, alpha=alpha, power=power, evidence=PAIRS, sizes=(n,),
                       sd_log=sd, pooled_df=float(pooled.df))
    if n < 2:
        return _settle(float(d.mean()), None, 0.0, None, margin=margin, alpha=alpha,
                       power=power, evidence=PAIRS, sizes=(n,), sd_log=None)
    guard = rounds.var if rounds is not None and n <= ROUNDS_MAX_SESSIONS else None
    if guard is not None and rounds is not None and own is not None and own <= guard:
        # The pairs' own variance, when larger, is kept with its n - 1 df: the guard
        # only ever widens what a comparison's own sessions show.
        sd = math.sqrt(guard)
        return _settle(float(d.mean()), sd / math.sqrt(n), float(rounds.df), sd,
                       margin=margin, alpha=alpha, power=power, evidence=PAIRS, sizes=(n,),
                       sd_log=sd, rounds_df=float(rounds.df))
    ratio, same = paired_test([float(x) for x in d], margin, alpha, resamples=SETTLE_RESAMPLES)
    return _settle(ratio.mean_log, ratio.sd_log / math.sqrt(n), float(n - 1), ratio.sd_log,
                   margin=margin, alpha=alpha, power=power, evidence=PAIRS, sizes=(n,),
                   sd_log=ratio.sd_log, equivalent=same)
