"""Two-sample tests on per-window measurements (numpy only, no TensorFlow).

A configuration measures a handful of windows, so the tests here are built for
small samples: Mann-Whitney U with its exact null distribution when there are no
ties (the normal approximation is poor below ~10 samples a side), and a
percentile bootstrap interval of the ratio of medians. Both are registered in
``TESTS``; ``bench.regress.compare`` picks one by name.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from bench.registry import Registry

BOOTSTRAP_RESAMPLES = 4000
# Fixed: the same two samples must always get the same verdict.
BOOTSTRAP_SEED = 0
EXACT_MAX_SIDE = 60  # exact U distribution up to this many samples a side


@dataclass(frozen=True)
class Outcome:
    """What a test says about two samples.

    ``p_value`` is two-sided (None for tests without one); ``possible`` is False
    when the samples are too few for the test ever to reach ``alpha``.
    """

    significant: bool
    p_value: float | None
    possible: bool
    note: str = ""


def _u_null_counts(m: int, n: int) -> np.ndarray:
    """Number of orderings of m + n distinct values giving each U in 0..m*n."""
    # counts[j][u] for a first sample of size i (rolled) and a second of size j.
    prev = [np.zeros(1, dtype=np.float64) + 1.0 for _ in range(n + 1)]  # i = 0: U = 0 only
    for i in range(1, m + 1):
        cur = [np.ones(1, dtype=np.float64)]  # j = 0: U = 0 only
        for j in range(1, n + 1):
            # The largest value is in sample 1 (it beats all j of sample 2) or in sample 2.
            a = np.zeros(i * j + 1)
            a[j:j + prev[j].size] += prev[j]
            a[:cur[j - 1].size] += cur[j - 1]
            cur.append(a)
        prev = cur
    return prev[n]


def min_p_value(m: int, n: int) -> float:
    """Smallest two-sided Mann-Whitney p-value possible with samples of m and n."""
    return min(1.0, 2.0 / math.comb(m + n, m)) if m and n else 1.0


def mann_whitney(a: Sequence[float], b: Sequence[float]) -> float:
    """Two-sided Mann-Whitney U p-value (exact without ties, else normal with tie correction)."""
    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    m, n = x.size, y.size
    if not m or not n:
        raise ValueError(f"mann_whitney needs two non-empty samples. Received: sizes {m}, {n}")
    both = np.concatenate([x, y])
    ranks = _midranks(both)
    u = float(ranks[:m].sum() - m * (m + 1) / 2)
    _, tie_counts = np.unique(both, return_counts=True)
    ties = bool((tie_counts > 1).any())
    if not ties and max(m, n) <= EXACT_MAX_SIDE:
        counts = _u_null_counts(m, n)
        total = counts.sum()
        k = round(u)
        lower, upper = counts[:k + 1].sum() / total, counts[k:].sum() / total
        return float(min(1.0, 2.0 * min(lower, upper)))
    big_n = m + n
    tie_term = float((tie_counts ** 3 - tie_counts).sum()) / (big_n * (big_n - 1))
    var = m * n / 12.0 * ((big_n + 1) - tie_term)
    if var <= 0:  # every value identical: no evidence of any difference
        return 1.0
    z = (abs(u - m * n / 2.0) - 0.5) / math.sqrt(var)
    return float(min(1.0, math.erfc(max(z, 0.0) / math.sqrt(2.0))))


def _midranks(values: np.ndarray) -> np.ndarray:
    order = np.argsort(values, kind="mergesort")
    ranks = np.empty(values.size, dtype=np.float64)
    sorted_vals = values[order]
    i = 0
    while i < values.size:
        j = i
        while j + 1 < values.size and sorted_vals[j + 1] == sorted_vals[i]:
            j += 1
        ranks[order[i:j + 1]] = (i + j) / 2.0 + 1.0
        i = j + 1
    return ranks


def bootstrap_ratio_interval(baseline: Sequence[float], current: Sequence[float],
                             confidence: float = 0.95) -> tuple[float, float]:
    """Percentile bootstrap interval of median(current) / median(baseline)."""
    x, y = np.asarray(baseline, dtype=np.float64), np.asarray(current, dtype=np.float64)
    if not x.size or not y.size:
        raise ValueError("bootstrap_ratio_interval needs two non-empty samples. "
                         f"Received: sizes {x.size}, {y.size}")
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    bx = np.median(rng.choice(x, size=(BOOTSTRAP_RESAMPLES, x.size)), axis=1)
    by = np.median(rng.choice(y, size=(BOOTSTRAP_RESAMPLES, y.size)), axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = by / bx
    ratios = ratios[np.isfinite(ratios)]
    if not ratios.size:
        return (math.nan, math.nan)
    tail = (1.0 - confidence) / 2.0 * 100.0
    lo, hi = np.percentile(ratios, [tail, 100.0 - tail])
    return float(lo), float(hi)


# -- the registry ---------------------------------------------------------------------
TestFn = Callable[[Sequence[float], Sequence[float], float], Outcome]


@dataclass(frozen=True)
class SignificanceTest:
    name: str
    description: str
    run: TestFn


def _mann_whitney_test(baseline: Sequence[float], current: Sequence[float],
                       alpha: float) -> Outcome:
    floor = min_p_value(len(baseline), len(current))
    p = mann_whitney(baseline, current)
    if floor > alpha:
        return Outcome(False, p, False,
                       f"{len(baseline)} vs {len(current)} windows: the smallest p-value "
                       f"possible is {floor:.3g} > alpha {alpha:g}; measure more windows "
                       f"(--repeats 5 or more)")
    return Outcome(p < alpha, p, True)


def _bootstrap_test(baseline: Sequence[float], current: Sequence[float],
                    alpha: float) -> Outcome:
    if min(len(baseline), len(current)) < 3:
        return Outcome(False, None, False, "the bootstrap needs 3+ windows a side")
    lo, hi = bootstrap_ratio_interval(baseline, current, 1.0 - alpha)
    return Outcome(not (lo <= 1.0 <= hi), None, True)


TESTS: Registry[SignificanceTest] = Registry("significance test")
TESTS.register("mannwhitney", SignificanceTest(
    "mannwhitney", "two-sided Mann-Whitney U on per-window values, significant if p < alpha",
    _mann_whitney_test))
TESTS.register("bootstrap", SignificanceTest(
    "bootstrap", f"percentile bootstrap ({BOOTSTRAP_RESAMPLES} resamples) of the ratio of "
    "medians, significant if its (1 - alpha) interval excludes 1", _bootstrap_test))
