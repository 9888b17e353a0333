"""One group of runs: each run's figure (the median of its windows), their summary,
and the distribution-free interval of two groups' ratio (the hierarchical
bootstrap)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats as sps

from bench.results.samples import coefficient_of_variation
from bench.results.schema import RunResult
from bench.results.stats.distributions import BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED

Runs = Sequence[Sequence[float]]


def throughput_runs(results: Iterable[RunResult]) -> list[list[float]]:
    """The window throughputs (global examples/s) of each successful run, one list a run.

    The input ``summarize_runs``, ``compare_runs`` and ``hierarchical_bootstrap_ratio``
    take; runs without figures (failed, OOM, timed out) are left out.
    """
    return [[w.global_throughput for w in r.figures.windows] for r in results
            if r.status == "ok" and r.figures is not None and r.figures.windows]


# -- one group of runs --------------------------------------------------------------------
def log_windows(run: Sequence[float], what: str) -> np.ndarray:
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
    return float(np.exp(np.median(log_windows(windows, "run_figure"))))


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
    b_logs = [log_windows(r, "hierarchical_bootstrap_ratio") for r in baseline]
    c_logs = [log_windows(r, "hierarchical_bootstrap_ratio") for r in current]
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
