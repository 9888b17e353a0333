"""What an answer is worth: how much a user could give up by taking it, jointly held.

The bounds are computed here; ``reports.worth`` says them in a sentence.

A place's answer names a configuration; its rows compare it with every other one,
each at the level the place was read at. What a user acts on is one bound over all
of them: "no configuration is more than 4% faster than it" or "it is faster than
every other by at least 2%". Such a bound holds only if every comparison's interval
holds at once, so each comparison's interval here is read at the place's alpha
divided by its comparisons (Bonferroni), from the comparison's own estimate, standard
error and degrees of freedom (two-sided ``1 - alpha / k`` intervals: a margin read
from the data, not TOST's ``1 - 2 alpha``). The place's alpha is its look's: the
looks' alphas sum to the sweep's (``bench.answers.sequential``), so the bounds of every
look a place had hold together at that level whatever stopped it (repeated
confidence intervals under the union bound the looks already rely on).

A comparison without a measured noise (one run a side and no pool) bounds nothing:
it is named, never read as "within". A configuration the place shows slower than
another (not the answer) is bounded by that other, not by its own comparison with the
answer (often of fewer sessions); the sentence then rests on both families of claims,
at the union bound's level (90% where the sweep's alpha is 5%).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from bench.answers.recommend import Recommendation
from bench.results.levels import DEFAULT_ALPHA
from bench.results.stats.distributions import t_ppf
from bench.results.stats.settlement import Settlement


@dataclass(frozen=True)
class Worth:
    """The answer against every other configuration of its place, jointly.

    ``gain``: the answer is faster than every other by at least this fraction (None:
    not shown faster than all of them); ``loss``: no other is faster than it by more
    than this fraction (None: some comparison is unmeasured, so nothing bounds it);
    ``unmeasured``: the configurations compared without a measured noise;
    ``comparisons``: those with one; ``level``: the joint confidence (the sweep's).
    """

    answer: str
    settled: bool
    gain: float | None
    loss: float | None
    unmeasured: tuple[str, ...] = field(default_factory=tuple)
    comparisons: int = 0
    level: float = 1 - DEFAULT_ALPHA
    unread: int = 0  # the place's runs stored after the look that settled it


def worth(r: Recommendation, level: float = 1 - DEFAULT_ALPHA) -> Worth | None:
    """What ``r``'s answer is worth (None: the place has no answer)."""
    if r.best is None:
        return None
    choices = {c.key: c.choice for cs in r.ranking.by_replicas.values() for c in cs}
    # Shown slower than another configuration that is not the answer (Holm, at the
    # place's alpha): bounded by that other's bound, whatever its own comparison with
    # the answer measured. The sentence then rests on both families of claims: its
    # level is the union bound's, 1 - 2 alpha.
    through = {k for k, (other, _) in r.beaten.items() if other.key != r.best.key}
    measured = {k: s for k, s in r.settlements.items()
                if k != r.best.key and k not in through and measured_noise(s)}
    unmeasured = tuple(choices.get(k, k) for k in r.settlements
                       if k != r.best.key and k not in through and k not in measured)
    if through:
        level = 1 - 2 * (1 - level)
    if not measured:
        return Worth(r.best.choice, r.settled, None, None, unmeasured, 0, level, r.unread)
    highest = highest_ratio([(math.log(s.ratio), s.se or 0.0, s.df)
                             for s in measured.values()], r.alpha)
    return Worth(r.best.choice, r.settled, 1.0 / highest - 1.0,
                 None if unmeasured else highest - 1.0, unmeasured, len(measured), level,
                 r.unread)


def highest_ratio(estimates: Sequence[tuple[float, float, float]], alpha: float) -> float:
    """The largest upper end of the ``1 - alpha / k`` intervals of ``k`` log ratios
    (other / answer), each given as (estimate, standard error, degrees of freedom):
    with probability at least ``1 - alpha`` no other's true ratio lies above it."""
    each = alpha / len(estimates)
    return max(math.exp(est + t_ppf(1 - each / 2, df) * se) for est, se, df in estimates)


def measured_noise(s: Settlement) -> bool:
    """Whether ``s`` has a standard error to bound with."""
    return s.se is not None and s.se > 0 and s.df > 0 and s.ratio > 0
