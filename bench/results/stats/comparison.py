"""Two groups of runs compared: the interval, p-value and minimum detectable change of
current / baseline from the run-to-run noise measured at the level runs vary at
(``compare_runs``)."""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, replace

import numpy as np
from scipy import stats as sps

from bench.results.levels import DEFAULT_ALPHA, DEFAULT_POWER
from bench.results.stats.distributions import (
    BOOTSTRAP_SEED,
    log_sd_to_cv,
    t_ppf,
    t_sf,
    welch_satterthwaite,
)
from bench.results.stats.power import detectable_log_change
from bench.results.stats.runs import Runs, RunSummary, log_windows, summarize_runs
from bench.results.stats.spread import (
    NOISE_DIFFERS_ALPHA,
    LogSpread,
    groups_of,
    noise_differs_p,
    spread_of,
)

FLOOR_RESAMPLES = 500  # window resamples per run for the run's own precision
STUDENT, WELCH = "student", "welch"  # RunComparison.test: which t test decided


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
    - group level (optional ``*groups_of`` labels, e.g. the nightly each run came
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
    _check_compare_args(baseline, current, alpha, power)
    sides = _Sides.of(baseline, current, baseline_groups, current_groups)
    noise = noise or RunNoise(sides.runs[0], sides.runs[1], sides.runs[0] + sides.runs[1])
    floor_var = _window_floor_var(sides.logs, seed)
    chosen, unit = _chosen_noise(sides, noise, floor_var, welch)
    run_var = None if noise.common.var is None else max(noise.common.var, floor_var)
    group_var = (sides.group_spreads[0] + sides.group_spreads[1]).var
    undecided = RunComparison(
        ratio=math.exp(sides.delta), low=math.nan, high=math.nan, p_value=None,
        significant=False, mde=math.inf, alpha=alpha, power=power, noise_cv=None, unit=unit,
        df=0.0 if chosen is None else chosen.df,
        run_cv=None if run_var is None else log_sd_to_cv(math.sqrt(run_var)),
        group_cv=None if group_var is None else log_sd_to_cv(math.sqrt(group_var)),
        window_floor_cv=log_sd_to_cv(math.sqrt(floor_var)),
        baseline=summarize_runs(baseline), current=summarize_runs(current),
        test=STUDENT if chosen is None else chosen.test)
    return _decided(undecided, chosen, sides.delta, len(baseline), len(current))


def _check_compare_args(baseline: Runs, current: Runs, alpha: float, power: float) -> None:
    if not 0 < alpha < 1 or not 0 < power < 1:
        raise ValueError(f"alpha and power must be between 0 and 1. Received: "
                         f"alpha={alpha!r}, power={power!r}")
    if not baseline or not current:
        raise ValueError(f"compare_runs needs runs on both sides. Received: {len(baseline)} "
                         f"baseline and {len(current)} current run(s)")


@dataclass(frozen=True)
class _Sides:
    """Both sides' runs as ``compare_runs`` reads them: every run's log windows
    (``logs``), the difference of the sides' centres (``delta``: log current - log
    baseline), and per side (baseline, current) the run-level and group-level spreads
    and the weights that turn one unit's variance into its centre's: sum(1/n_g) / G^2
    for runs, 1 / G for group means."""

    logs: list[np.ndarray]
    delta: float
    runs: tuple[LogSpread, LogSpread]
    group_spreads: tuple[LogSpread, LogSpread]
    run_w: tuple[float, float]
    group_w: tuple[float, float]

    @classmethod
    def of(cls, baseline: Runs, current: Runs, baseline_groups: Sequence[Hashable] | None,
           current_groups: Sequence[Hashable] | None) -> _Sides:
        b_logs = [log_windows(r, "compare_runs") for r in baseline]
        c_logs = [log_windows(r, "compare_runs") for r in current]
        b_fig = np.array([float(np.median(w)) for w in b_logs])
        c_fig = np.array([float(np.median(w)) for w in c_logs])
        sides = [(b_fig, groups_of(len(b_fig), baseline_groups, "baseline_groups")),
                 (c_fig, groups_of(len(c_fig), current_groups, "current_groups"))]
        centers, runs, group_spreads, run_w, group_w = [], [], [], [], []
        for fig, groups in sides:
            means = np.array([fig[g].mean() for g in groups])
            centers.append(float(means.mean()))
            runs.append(spread_of(fig, groups))
            group_spreads.append(spread_of(means, [list(range(means.size))]))
            run_w.append(sum(1.0 / len(g) for g in groups) / len(groups) ** 2)
            group_w.append(1.0 / len(groups))
        return cls(b_logs + c_logs, centers[1] - centers[0], (runs[0], runs[1]),
                   (group_spreads[0], group_spreads[1]), (run_w[0], run_w[1]),
                   (group_w[0], group_w[1]))


def _chosen_noise(sides: _Sides, noise: RunNoise, floor_var: float, welch: bool
                  ) -> tuple[_Difference | None, str]:
    """The noise that decides, and its unit: the run level (``noise``, floored by the
    runs' own precision), or the group level where it is the larger."""
    chosen = _difference(noise.baseline, noise.current, noise.common, sides.run_w[0],
                         sides.run_w[1], floor_var, welch)
    groups = sides.group_spreads
    by_group = _difference(groups[0], groups[1], groups[0] + groups[1], sides.group_w[0],
                           sides.group_w[1], 0.0, welch)
    if by_group is not None and (chosen is None or by_group.var > chosen.var):
        return by_group, "group"
    return chosen, "run"


def _decided(undecided: RunComparison, chosen: _Difference | None, delta: float,
             n_baseline: int, n_current: int) -> RunComparison:
    """``undecided`` with the interval, p-value and minimum detectable change of the
    chosen noise; unchanged, with a note, where a side has one run or no noise is
    measured."""
    alpha, power = undecided.alpha, undecided.power
    if min(n_baseline, n_current) < 2:
        return replace(undecided, note=(
            f"{n_baseline} baseline and {n_current} current run(s): a side of one "
            f"run has no run-to-run noise of its own, and none is lent to it (2+ runs on "
            f"each side needed)"))
    if chosen is None:
        return replace(undecided, note=(
            f"{n_baseline} baseline and {n_current} current run(s): the run-to-run "
            f"noise cannot be measured without 2+ runs on a side"))
    df, se = chosen.df, math.sqrt(chosen.var)
    noise_cv = log_sd_to_cv(math.sqrt(chosen.var / chosen.weight))
    if se < 1e-12:  # identical runs everywhere (e.g. a deterministic memory figure)
        p = 1.0 if abs(delta) < 1e-12 else 0.0
        return replace(undecided, low=math.exp(delta), high=math.exp(delta), p_value=p,
                       significant=p < alpha, mde=0.0, noise_cv=0.0)
    p = min(1.0, 2.0 * t_sf(abs(delta) / se, df))
    half = t_ppf(1.0 - alpha / 2.0, df) * se
    return replace(undecided, low=math.exp(delta - half), high=math.exp(delta + half),
                   p_value=p, significant=p < alpha, noise_cv=noise_cv,
                   mde=math.expm1(detectable_log_change(se, df, alpha, power)))
