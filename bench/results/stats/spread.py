"""Run-level noise as evidence: a spread of log figures with its degrees of freedom,
the F test that finds two noises different, and the guarded pool a configuration
borrows its noise from."""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np

from bench.results.stats.distributions import f_cdf, f_ppf, f_sf

H = TypeVar("H", bound=Hashable)


# -- run-level noise as evidence: pooled spreads, their homogeneity, Welch --------------------
# Level of the F test that finds two noise estimates different (sides, configurations,
# stored runs). Two-sided: a quieter estimate pooled in would make the others' noise look
# smaller (false alarms), a noisier one theirs larger (lost power).
NOISE_DIFFERS_ALPHA = 0.05


def groups_of(n: int, labels: Sequence[Hashable] | None, what: str) -> list[list[int]]:
    if labels is None:
        return [list(range(n))]
    if len(labels) != n:
        raise ValueError(f"{what} needs one label per run. Received: {len(labels)} labels "
                         f"for {n} runs")
    order: dict[Hashable, list[int]] = {}
    for i, label in enumerate(labels):
        order.setdefault(label, []).append(i)
    return list(order.values())


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
        return spread_of(a, groups_of(a.size, groups, "LogSpread.of"))


def spread_of(values: np.ndarray, groups: list[list[int]]) -> LogSpread:
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
