"""The t, F and chi-squared distributions as the statistics read them, and the two
helpers every comparison shares: Holm's adjusted p-values and Welch-Satterthwaite's
degrees of freedom."""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import numpy as np
from scipy import special
from scipy import stats as sps

# DEFAULT_ALPHA and DEFAULT_POWER are bench.results.levels' (command lines show them).
BOOTSTRAP_RESAMPLES = 4000
# Fixed: the same inputs must always give the same answer (and the same verdict).
BOOTSTRAP_SEED = 0


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


def cv_to_log_sd(cv: float) -> float:
    return math.sqrt(math.log1p(cv * cv))


def log_sd_to_cv(sd: float) -> float:
    return math.sqrt(math.expm1(sd * sd))
