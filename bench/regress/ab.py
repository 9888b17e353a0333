"""The sequential A/B decision on interleaved pairs: REGRESSED, IMPROVED, SAME or UNKNOWN.

A pair is one baseline and one candidate run measured back to back (in randomized
AB/BA order), and its statistic is the log ratio log(candidate / baseline) of a
figure: whatever the machine's drift adds to both runs of a pair drops out of it.
The pairs arrive in blocks; after each block the decision looks at all pairs so far:

- REGRESSED / IMPROVED: the whole paired t interval at 1 - this look's alpha lies
  beyond the threshold, in the figure's worse / better direction (the reports' rule,
  ``bench.results.stats.settlement.interval_decision``: an estimate beyond the threshold whose
  interval reaches inside it is not a regression yet);
- SAME: the paired t interval at 1 - 2 x this look's alpha lies inside
  +-threshold (two one-sided tests, TOST, ``bench.results.stats.paired.paired_equivalence``);
- otherwise another block, until the plan's last look, which says UNKNOWN with the
  further pairs the noise measured so far says a decision needs.

**Alpha spending.** Looking after every block and stopping at the first significant
look would raise the false-alarm rate far above alpha. The plan fixes its looks
in advance (a pair count each, the last one at ``max_pairs``, from the time
budget) and gives each look a share of alpha from a Lan-DeMets spending function
of the information fraction ``t = pairs / max_pairs``; the shares add up to alpha
and each look's test has exactly its share as size (Student's t on the pairs seen
so far), so by the union bound (Bonferroni) the chance of any false alarm over
all looks is at most alpha, whatever the correlation between the looks. The same
shares bound the chance of a false SAME when the true change is at the threshold.
The default shape is O'Brien-Fleming's (``2 - 2 Phi(z[1 - alpha/2] / sqrt(t))``):
it spends almost nothing on the first, noisy looks and keeps most of alpha for the
later ones, where the power is (Pocock's ``alpha ln(1 + (e - 1) t)`` spends evenly
and stops earlier on large changes; both are in ``SPENDING``). The union bound is
conservative: the exact group-sequential boundaries would be a little narrower.
A budget that ends before ``max_pairs`` (runs slower than planned) takes one last
look with all the alpha the earlier looks left (``Plan.final_alpha``).

Vectorised over series (numpy), so a thousand simulated comparisons take
milliseconds: ``sequential_verdicts`` is the decision the CLI applies one look at a
time with ``decide``. Parent side: no TensorFlow.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum

import numpy as np
from scipy import stats as sps

from bench.exits import Exit
from bench.registry import Registry
from bench.regress.options import AB_ALPHA, AB_BUDGET_S, AB_THRESHOLD
from bench.results.stats.paired import paired_test
from bench.results.stats.power import pairs_for_equivalence
from bench.results.stats.settlement import ABOVE_CODE, BELOW_CODE, WITHIN_CODE, interval_decision

# Defined in bench.regress.options, which bench ab's parser reads without scipy.
DEFAULT_THRESHOLD = AB_THRESHOLD
DEFAULT_ALPHA = AB_ALPHA
DEFAULT_BUDGET_S = AB_BUDGET_S
# The fewest pairs any verdict rests on, however small the budget (2 degrees of freedom).
MIN_VERDICT_PAIRS = 3
DEFAULT_MIN_PAIRS = 4  # the first look: 3 degrees of freedom, fewer would spend alpha for nothing
DEFAULT_BLOCK_PAIRS = 2  # one AB and one BA run order a block: order effects cancel within it
RUNS_PER_PAIR = 2
PLANNING_POWER = 0.9
# paired_log_ratio's bootstrap interval is not used by the decision (at an early look's tiny
# alpha no bootstrap could resolve it): the fewest resamples keep a look cheap.
DECIDE_RESAMPLES = 100
MIN_DECIDING_ALPHA = 1e-12


class Verdict(str, Enum):
    """What a look (or the whole comparison) says about candidate against baseline."""

    REGRESSED = "regressed"
    IMPROVED = "improved"
    SAME = "same"
    CONTINUE = "continue"  # a look before the last that settles nothing: another block
    UNKNOWN = "unknown"  # the last look settles nothing: the budget is spent


# One place maps a verdict to the process's exit code (CONTINUE never ends a command).
VERDICT_EXIT: dict[Verdict, Exit] = {
    Verdict.SAME: Exit.OK, Verdict.IMPROVED: Exit.OK, Verdict.REGRESSED: Exit.REGRESSION,
    Verdict.UNKNOWN: Exit.CANNOT_TELL,
}


def exit_code(verdict: Verdict) -> Exit:
    """The exit code of a finished comparison's verdict."""
    if verdict not in VERDICT_EXIT:
        raise ValueError(f"only a final verdict has an exit code. Received: verdict={verdict!r}")
    return VERDICT_EXIT[verdict]


# -- alpha spending --------------------------------------------------------------------------
Spending = Callable[[float, float], float]  # (information fraction t in (0, 1], alpha) -> spent


def _obrien_fleming(t: float, alpha: float) -> float:
    return float(2.0 - 2.0 * sps.norm.cdf(sps.norm.ppf(1.0 - alpha / 2.0) / math.sqrt(t)))


def _pocock(t: float, alpha: float) -> float:
    return alpha * math.log1p((math.e - 1.0) * t)


SPENDING: Registry[Spending] = Registry("spending")
SPENDING.register("obrien-fleming", _obrien_fleming)
SPENDING.register("pocock", _pocock)


@dataclass(frozen=True)
class Plan:
    """The looks of one sequential comparison, fixed before the first pair.

    ``looks`` are the pair counts the decision looks at (the first at
    ``min_pairs``, then every ``block_pairs``, the last at ``max_pairs``);
    ``look_alphas`` each look's share of ``alpha`` (they add up to ``alpha``).
    """

    max_pairs: int
    threshold: float = DEFAULT_THRESHOLD
    alpha: float = DEFAULT_ALPHA
    min_pairs: int = DEFAULT_MIN_PAIRS
    block_pairs: int = DEFAULT_BLOCK_PAIRS
    spending: str = "obrien-fleming"

    def __post_init__(self) -> None:
        if self.min_pairs < 2:
            raise ValueError(f"a look needs 2+ pairs to measure their spread. Received: "
                             f"min_pairs={self.min_pairs}")
        if self.max_pairs < self.min_pairs:
            raise ValueError(f"max_pairs must be >= min_pairs ({self.min_pairs}). Received: "
                             f"max_pairs={self.max_pairs}")
        if self.block_pairs < 1:
            raise ValueError(f"block_pairs must be >= 1. Received: block_pairs={self.block_pairs}")
        if not 0 < self.threshold < 1:
            raise ValueError(f"threshold is a relative change, 0 < threshold < 1 (0.05 = 5%). "
                             f"Received: threshold={self.threshold!r}")
        if not 0 < self.alpha < 0.5:
            raise ValueError(f"alpha must be between 0 and 0.5. Received: alpha={self.alpha!r}")
        SPENDING.get(self.spending)  # an unknown shape is refused by name here

    @property
    def looks(self) -> tuple[int, ...]:
        return (*range(self.min_pairs, self.max_pairs, self.block_pairs), self.max_pairs)

    @property
    def look_alphas(self) -> tuple[float, ...]:
        spend = SPENDING.get(self.spending)
        spent = [0.0] + [spend(n / self.max_pairs, self.alpha) for n in self.looks]
        return tuple(b - a for a, b in itertools.pairwise(spent))

    def look_alpha(self, pairs: int) -> float:
        """The share of alpha of the look at ``pairs`` pairs (one of ``looks``)."""
        looks = self.looks
        if pairs not in looks:
            raise ValueError(f"the plan looks at {list(looks)} pairs only. Received: "
                             f"pairs={pairs}")
        return self.look_alphas[looks.index(pairs)]

    def final_alpha(self, pairs: int) -> float:
        """The alpha of a last look at ``pairs`` pairs, taken after every earlier look.

        What the looks before it left unspent: a comparison whose budget ends before
        ``max_pairs`` (slower runs than planned) decides with all that is left, and
        the shares still add up to at most ``alpha``. At ``max_pairs`` it is that
        look's own share.
        """
        if not self.min_pairs <= pairs <= self.max_pairs:
            raise ValueError(f"a last look needs {self.min_pairs} to {self.max_pairs} pairs. "
                             f"Received: pairs={pairs}")
        earlier = sum(a for n, a in zip(self.looks, self.look_alphas, strict=True) if n < pairs)
        return self.alpha - earlier


def pairs_for_budget(budget_s: float, run_s: float, runs_per_pair: int = RUNS_PER_PAIR) -> int:
    """How many pairs fit a time budget at ``run_s`` seconds a run (600 s / 9 s: 33)."""
    if budget_s <= 0 or run_s <= 0:
        raise ValueError(f"budget and run time must be > 0 s. Received: budget_s={budget_s!r}, "
                         f"run_s={run_s!r}")
    return int(budget_s // (runs_per_pair * run_s))


# -- one look, vectorised over series ----------------------------------------------------------
# Verdict codes of the vectorised decision (a numpy array cannot hold the enum).
CODES: tuple[Verdict, ...] = (Verdict.CONTINUE, Verdict.SAME, Verdict.REGRESSED,
                              Verdict.IMPROVED, Verdict.UNKNOWN)
_CONTINUE, _SAME, _REGRESSED, _IMPROVED, _UNKNOWN = range(len(CODES))


def _verdict_codes(low: np.ndarray, high: np.ndarray, same: np.ndarray,
                   threshold: float, higher_is_better: bool) -> np.ndarray:
    """The rule of one look (``interval_decision``) on the log interval [low, high]:
    SAME, REGRESSED / IMPROVED with the whole interval past the threshold, or CONTINUE."""
    decided = interval_decision(low, high, same, math.log1p(threshold))
    worse, better = (BELOW_CODE, ABOVE_CODE) if higher_is_better else (ABOVE_CODE, BELOW_CODE)
    codes = np.full(decided.shape, _CONTINUE)
    codes[decided == WITHIN_CODE] = _SAME
    codes[decided == worse] = _REGRESSED
    codes[decided == better] = _IMPROVED
    return codes


def _look_codes(mean: np.ndarray, sd: np.ndarray, n: int, look_alpha: float, threshold: float,
                higher_is_better: bool) -> np.ndarray:
    """Each series' verdict code at one look of ``n`` pairs (CONTINUE when undecided).

    The paired t interval and TOST of ``paired_log_ratio`` / ``paired_equivalence``
    from running sums, for thousands of series at once (``decide`` calls those two
    and ``tests/test_ab.py`` checks that both give the same verdicts).
    """
    se = sd / math.sqrt(n)
    bound = math.log1p(threshold)
    t_sig = float(sps.t.ppf(1.0 - look_alpha / 2.0, n - 1))
    t_eq = float(sps.t.ppf(1.0 - look_alpha, n - 1))
    same = (mean - t_eq * se > -bound) & (mean + t_eq * se < bound)
    return _verdict_codes(mean - t_sig * se, mean + t_sig * se, same, threshold,
                          higher_is_better)


def sequential_verdicts(log_ratios: np.ndarray, plan: Plan, *,
                        higher_is_better: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """The sequential decision on many series at once: (verdict codes, pairs used).

    ``log_ratios`` is (series, pairs) with at least ``plan.max_pairs`` columns
    (more are ignored); codes index ``CODES``. Each series stops at the first look
    that decides; UNKNOWN for those the last look leaves undecided.
    """
    d = np.atleast_2d(np.asarray(log_ratios, dtype=np.float64))
    if d.shape[1] < plan.max_pairs:
        raise ValueError(f"the plan needs {plan.max_pairs} pairs a series. Received: "
                         f"{d.shape[1]} pairs")
    d = d[:, :plan.max_pairs]
    cum = np.cumsum(d, axis=1)
    cum2 = np.cumsum(d * d, axis=1)
    codes = np.full(d.shape[0], _UNKNOWN)
    used = np.full(d.shape[0], plan.max_pairs)
    open_ = np.ones(d.shape[0], dtype=bool)
    for n, a in zip(plan.looks, plan.look_alphas, strict=True):
        mean = cum[:, n - 1] / n
        var = np.maximum(cum2[:, n - 1] - n * mean * mean, 0.0) / (n - 1)
        look = _look_codes(mean, np.sqrt(var), n, a, plan.threshold, higher_is_better)
        stop = open_ & (look != _CONTINUE)
        codes[stop], used[stop] = look[stop], n
        open_ &= ~stop
    return codes, used


# -- one comparison, one look at a time ----------------------------------------------------------
@dataclass(frozen=True)
class Decision:
    """One look at a comparison's pairs.

    ``ratio`` = exp(mean log ratio), candidate / baseline of the figure;
    ``low``/``high`` its paired t interval at 1 - ``look_alpha`` (the one the
    significance test used); ``sd_log`` the SD of the pairs' log ratios (the
    noise); ``pairs_needed`` (UNKNOWN only) the further pairs a decision needs at
    that noise (see ``further_pairs``); ``reason`` the decision in words.
    """

    verdict: Verdict
    pairs: int
    ratio: float
    low: float
    high: float
    sd_log: float
    threshold: float
    alpha: float
    look_alpha: float
    pairs_needed: int | None
    reason: str

    @property
    def exit_code(self) -> Exit:
        return exit_code(self.verdict)


def further_pairs(sd_log: float, mean_log: float, pairs: int, plan: Plan) -> int:
    """Further pairs the measured noise says a decision needs, beyond ``pairs``.

    Planned as one look at the plan's full ``alpha`` with 90% power, at the noise
    ``sd_log``: when the estimate is beyond the threshold, the pairs whose interval
    clears the threshold (its excess over the threshold found with that power);
    otherwise the pairs that show an unchanged candidate SAME within the threshold
    (``pairs_for_equivalence`` at ratio 1; an estimate close to the threshold would
    need more, without bound, and says nothing about the truth). A fresh sequential
    plan needs somewhat more: its looks share alpha.
    """
    if sd_log <= 0:
        return 0
    excess = abs(mean_log) - math.log1p(plan.threshold)
    if excess > 0:  # the interval must clear the threshold, not 1: its excess is the effect
        z = float(sps.norm.ppf(1.0 - plan.alpha / 2.0) + sps.norm.ppf(PLANNING_POWER))
        total = math.ceil((z * sd_log / excess) ** 2)
    else:
        total = pairs_for_equivalence(sd_log, plan.threshold, alpha=plan.alpha,
                                      power=PLANNING_POWER)
    return max(0, total - pairs)


def decide(log_ratios: Sequence[float], plan: Plan, *, higher_is_better: bool = True,
           final: bool = False) -> Decision:
    """The look at ``len(log_ratios)`` pairs (one of ``plan.looks``), see Decision.

    ``final``: the budget is spent, this is the last look whatever its pair count
    (``Plan.final_alpha``): UNKNOWN instead of CONTINUE. The look at ``max_pairs``
    is always final.

    ``log_ratios[i]`` = log(candidate_i / baseline_i) of pair i. The same rule as
    ``sequential_verdicts``: a comparison that calls ``decide`` after every block and
    stops at the first verdict other than CONTINUE gets the verdict it gets.
    """
    d = np.asarray(log_ratios, dtype=np.float64)
    if d.ndim != 1 or not np.all(np.isfinite(d)):
        raise ValueError(f"log_ratios must be one finite value a pair. Received: "
                         f"log_ratios={list(log_ratios)!r}")
    n = int(d.size)
    final = final or n == plan.max_pairs
    a = plan.final_alpha(n) if final else plan.look_alpha(n)
    if a < MIN_DECIDING_ALPHA:
        # An early look of a long plan (O'Brien-Fleming's shares vanish as t -> 0): no
        # data could pass a test at this level, and no interval can be computed at it.
        mean, sd = float(d.mean()), float(d.std(ddof=1))
        low, high, same = 0.0, math.inf, False
    else:
        ratio, same = paired_test([float(x) for x in d], plan.threshold, a,
                                  resamples=DECIDE_RESAMPLES)
        mean, sd, low, high = ratio.mean_log, ratio.sd_log, ratio.t_low, ratio.t_high
    with np.errstate(divide="ignore"):
        code = int(_verdict_codes(np.log(low), np.log(high), np.array(same),
                                  plan.threshold, higher_is_better))
    verdict = CODES[code]
    if n < MIN_VERDICT_PAIRS:
        # Two pairs can agree by luck that is not the noise a t test allows for: a burst
        # of load that slowed both baseline runs gave an A/A "IMPROVED 1.407" with a
        # log-ratio SD of 0.001. No verdict rests on fewer than MIN_VERDICT_PAIRS.
        verdict = Verdict.UNKNOWN if final else Verdict.CONTINUE
    if verdict is Verdict.CONTINUE and final:
        verdict = Verdict.UNKNOWN
    change = math.expm1(mean)
    needed = (max(further_pairs(sd, mean, n, plan), MIN_VERDICT_PAIRS - n)
              if verdict is Verdict.UNKNOWN else None)
    thr = f"{plan.threshold:.0%}"
    reasons = {
        Verdict.REGRESSED: (f"{change:+.1%} is worse than the {thr} threshold: its whole "
                            f"interval lies past it"),
        Verdict.IMPROVED: (f"{change:+.1%} is better than the {thr} threshold: its whole "
                           f"interval lies past it"),
        Verdict.SAME: f"the change ({change:+.1%}) is shown to lie within +-{thr}",
        Verdict.CONTINUE: f"{change:+.1%} is neither shown beyond nor within {thr} yet",
        Verdict.UNKNOWN: (f"{change:+.1%} is neither shown beyond nor within {thr} after "
                          f"{n} pairs (the budget spent); at this noise (log-ratio SD {sd:.3f}) "
                          f"about {needed} more pairs would settle it"),
    }
    return Decision(verdict=verdict, pairs=n, ratio=math.exp(mean), low=low, high=high,
                    sd_log=sd, threshold=plan.threshold,
                    alpha=plan.alpha, look_alpha=a, pairs_needed=needed,
                    reason=reasons[verdict] + f" (look alpha {a:.2g} of {plan.alpha:g})")
