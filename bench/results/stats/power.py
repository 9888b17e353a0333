"""Planning: the smallest change a test finds with a given power, and how many runs
or pairs settle a change or a margin at a given noise."""

from __future__ import annotations

import math
from collections.abc import Callable

from scipy import special

from bench.results.levels import DEFAULT_ALPHA, DEFAULT_POWER
from bench.results.stats.distributions import cv_to_log_sd, t_ppf
from bench.results.stats.paired import log_margin


# -- two groups of runs: the decision ----------------------------------------------------------
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
    se = cv_to_log_sd(run_cv) * math.sqrt(1.0 / n_baseline + 1.0 / n_current)
    return math.expm1(detectable_log_change(se, df, alpha, power))


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
    bound, mu = log_margin(margin), math.log(true_ratio)
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
