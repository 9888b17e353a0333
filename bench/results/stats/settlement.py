"""One answer between two configurations: faster, slower, equivalent within the margin,
or not settled, from independent runs (``settle_runs``) or interleaved pairs
(``settle_pairs``), with what it would take to settle."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from bench.results.levels import DEFAULT_ALPHA, DEFAULT_POWER
from bench.results.stats.distributions import chi2_ppf, t_ppf, t_sf, welch_satterthwaite
from bench.results.stats.paired import log_margin, paired_test
from bench.results.stats.power import pairs_for_equivalence, pairs_to_detect
from bench.results.stats.runs import log_windows
from bench.results.stats.spread import LogSpread

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
    return log_margin(margin)


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
    ref = log_windows(reference, "settle_runs reference")
    cand = log_windows(candidate, "settle_runs candidate")
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
