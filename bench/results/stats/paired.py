"""Paired samples: a baseline and a current figure measured under the same conditions
(back to back, same machine state), their ratio with a paired t and a bootstrap
interval, and the equivalence test (TOST) against a margin."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats as sps

from bench.results.levels import DEFAULT_ALPHA
from bench.results.stats.distributions import (
    BOOTSTRAP_RESAMPLES,
    BOOTSTRAP_SEED,
    one_sample_t,
    t_cdf,
    t_ppf,
    t_sf,
)


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


def log_margin(margin: float) -> float:
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
    bound = log_margin(margin)
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
