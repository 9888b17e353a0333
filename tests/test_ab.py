"""The sequential A/B decision on seeded synthetic pair series with drift and known truth.

No TensorFlow. Every draw is seeded, so the rates are fixed properties of the method,
checked with margins of four binomial standard deviations. The same harness that
accepts the real decision rejects stubs that never alarm, always say UNKNOWN or
always alarm: the rates it checks are the ones a useless gate cannot meet.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest

from bench.errors import UnknownNameError
from bench.exits import Exit
from bench.regress.ab import (
    CODES,
    Plan,
    Verdict,
    decide,
    exit_code,
    pairs_for_budget,
    sequential_verdicts,
)
from bench.results.stats import pairs_for_equivalence

ALPHA = 0.05
SERIES = 1000
SLOWER_10 = 1.0 / 1.10  # the candidate does ~10% more work per example: throughput / 1.1
# Per-pair log-ratio SD measured here between adjacent separate processes (MLP, one_device),
# and a quieter machine's.
SD_MEASURED, SD_QUIET = 0.196, 0.08
BUDGET_PAIRS = pairs_for_budget(600.0, 9.0)  # the default 10 min at ~9 s a run: 33 pairs
# At the measured noise the budget's 33 pairs catch a 10% slowdown only about half the
# time; these many pairs (about 23 minutes at 9 s a run) catch it 90% of the time.
PAIRS_FOR_10_AT_MEASURED = 80

Decider = Callable[[np.ndarray, Plan], tuple[np.ndarray, np.ndarray]]
_REGRESSED, _IMPROVED = CODES.index(Verdict.REGRESSED), CODES.index(Verdict.IMPROVED)


def margin(p: float, n: int) -> float:
    """Four binomial standard deviations."""
    return 4.0 * math.sqrt(p * (1.0 - p) / n)


def interleaved_log_ratios(rng: np.random.Generator, *, sd: float, ratio: float, pairs: int,
                           series: int = SERIES, trend: float = 0.01,
                           walk: float = 0.02) -> np.ndarray:
    """log(candidate / baseline) of ``pairs`` pairs of runs in randomized AB/BA order.

    Each run's log throughput = the session's drift at its position (a linear trend
    of ``trend`` a run plus a random walk of ``walk`` a step: tens of percent over a
    session) + its own noise + log(``ratio``) on the candidate. The run noise is set
    so that a pair's log ratio has SD ``sd`` drift included, the noise it was measured
    with.
    """
    runs = 2 * pairs
    drift = trend * np.arange(runs) + np.cumsum(rng.normal(0.0, walk, (series, runs)), axis=1)
    run_sd = math.sqrt((sd * sd - trend * trend - walk * walk) / 2.0)
    log_run = drift + rng.normal(0.0, run_sd, (series, runs))
    first, second = log_run[:, 0::2], log_run[:, 1::2]
    ab = rng.random((series, pairs)) < 0.5  # baseline first (AB) or candidate first (BA)
    base = np.where(ab, first, second)
    cand = np.where(ab, second, first) + math.log(ratio)
    return cand - base


def rates(decider: Decider, *, sd: float, ratio: float, max_pairs: int,
          seed: int = 0) -> dict[Verdict, float]:
    """Share of each verdict over ``SERIES`` seeded comparisons; checks the pairs used."""
    plan = Plan(max_pairs=max_pairs, alpha=ALPHA)
    d = interleaved_log_ratios(np.random.default_rng(seed), sd=sd, ratio=ratio, pairs=max_pairs)
    codes, used = decider(d, plan)
    assert np.all(used <= max_pairs), "a comparison used more pairs than its budget"
    return {v: float(np.mean(codes == i)) for i, v in enumerate(CODES)}


def check_gate(decider: Decider, *, sd: float, max_pairs: int) -> None:
    """A gate worth keeping: few false alarms on A/A, a 10% slowdown caught 90% of the time."""
    aa = rates(decider, sd=sd, ratio=1.0, max_pairs=max_pairs, seed=1)
    false_alarms = aa[Verdict.REGRESSED] + aa[Verdict.IMPROVED]
    assert false_alarms <= ALPHA + margin(ALPHA, SERIES), f"A/A false alarms: {false_alarms}"
    ab = rates(decider, sd=sd, ratio=SLOWER_10, max_pairs=max_pairs, seed=2)
    assert ab[Verdict.REGRESSED] >= 0.9, f"10% slowdown caught: {ab[Verdict.REGRESSED]}"


def test_false_alarms_stay_under_alpha_with_a_look_after_every_block() -> None:
    # Without spending, stopping at the first of ~15 looks at alpha each would alarm far
    # more often than alpha; with it, at most alpha (the union bound), drift included.
    for sd, pairs in ((SD_MEASURED, BUDGET_PAIRS), (SD_MEASURED, PAIRS_FOR_10_AT_MEASURED),
                      (SD_QUIET, BUDGET_PAIRS)):
        aa = rates(sequential_verdicts, sd=sd, ratio=1.0, max_pairs=pairs, seed=3)
        assert aa[Verdict.REGRESSED] + aa[Verdict.IMPROVED] <= ALPHA + margin(ALPHA, SERIES)


def test_the_same_looks_without_spending_would_alarm_too_often() -> None:
    # The harness can see the problem spending solves: every look at the full alpha.
    def unspent(d: np.ndarray, plan: Plan) -> tuple[np.ndarray, np.ndarray]:
        generous = Plan(max_pairs=plan.max_pairs, alpha=0.45, spending="pocock")
        return sequential_verdicts(d, generous)

    aa = rates(unspent, sd=SD_QUIET, ratio=1.0, max_pairs=BUDGET_PAIRS, seed=4)
    assert aa[Verdict.REGRESSED] + aa[Verdict.IMPROVED] > ALPHA + margin(ALPHA, SERIES)


def test_the_gate_holds_at_the_quiet_noise_within_the_budget() -> None:
    check_gate(sequential_verdicts, sd=SD_QUIET, max_pairs=BUDGET_PAIRS)


def test_the_gate_holds_at_the_measured_noise_with_the_pairs_it_needs() -> None:
    check_gate(sequential_verdicts, sd=SD_MEASURED, max_pairs=PAIRS_FOR_10_AT_MEASURED)


def test_a_quiet_machine_settles_most_unchanged_comparisons_as_same() -> None:
    aa = rates(sequential_verdicts, sd=SD_QUIET, ratio=1.0, max_pairs=BUDGET_PAIRS, seed=5)
    assert aa[Verdict.SAME] >= 0.5
    faster = rates(sequential_verdicts, sd=SD_QUIET, ratio=1.10, max_pairs=BUDGET_PAIRS, seed=6)
    assert faster[Verdict.IMPROVED] >= 0.9


@pytest.mark.parametrize("stub_verdict", [Verdict.SAME, Verdict.UNKNOWN, Verdict.REGRESSED])
def test_the_harness_rejects_a_gate_that_never_alarms_never_knows_or_always_alarms(
        stub_verdict: Verdict) -> None:
    def stub(d: np.ndarray, plan: Plan) -> tuple[np.ndarray, np.ndarray]:
        n = d.shape[0]
        return np.full(n, CODES.index(stub_verdict)), np.full(n, plan.max_pairs)

    with pytest.raises(AssertionError):
        check_gate(stub, sd=SD_QUIET, max_pairs=BUDGET_PAIRS)


def test_drift_shared_by_a_pair_cancels_exactly() -> None:
    rng = np.random.default_rng(8)
    plain = interleaved_log_ratios(rng, sd=SD_QUIET, ratio=SLOWER_10, pairs=BUDGET_PAIRS,
                                   trend=0.0, walk=0.0)
    # A night-to-night level (+-35%) and a steep trend, the same for both runs of a pair.
    shared = rng.normal(0.0, 0.35, (SERIES, 1)) + 0.05 * np.arange(BUDGET_PAIRS)
    base = rng.normal(0.0, 0.05, plain.shape)
    drifted = (base + plain + shared) - (base + shared)
    plan = Plan(max_pairs=BUDGET_PAIRS)
    for got, want in zip(sequential_verdicts(drifted, plan), sequential_verdicts(plain, plan),
                         strict=True):
        np.testing.assert_array_equal(got, want)


def test_strong_drift_between_runs_leaves_the_rates_intact() -> None:
    # 3% a run of trend plus a random walk: over 66 runs the machine drifts by ~200%,
    # yet randomized AB/BA pairs keep the false alarms under alpha and the power.
    plan = Plan(max_pairs=BUDGET_PAIRS)
    rng = np.random.default_rng(9)
    aa = interleaved_log_ratios(rng, sd=SD_QUIET, ratio=1.0, pairs=BUDGET_PAIRS,
                                trend=0.03, walk=0.03)
    codes, _ = sequential_verdicts(aa, plan)
    assert np.mean((codes == _REGRESSED) | (codes == _IMPROVED)) <= ALPHA + margin(ALPHA, SERIES)
    ab = interleaved_log_ratios(rng, sd=SD_QUIET, ratio=SLOWER_10, pairs=BUDGET_PAIRS,
                                trend=0.03, walk=0.03)
    codes, _ = sequential_verdicts(ab, plan)
    assert np.mean(codes == _REGRESSED) >= 0.9


def test_decide_look_by_look_gives_the_vectorised_verdicts() -> None:
    plan = Plan(max_pairs=BUDGET_PAIRS)
    d = interleaved_log_ratios(np.random.default_rng(10), sd=SD_MEASURED, ratio=SLOWER_10,
                               pairs=BUDGET_PAIRS, series=30)
    codes, used = sequential_verdicts(d, plan)
    seen = set()
    for row, code, n in zip(d, codes, used, strict=True):
        decision = next(x for x in (decide(row[:k], plan) for k in plan.looks)
                        if x.verdict is not Verdict.CONTINUE)
        assert (decision.verdict, decision.pairs) == (CODES[code], n)
        seen.add(decision.verdict)
        if decision.verdict is Verdict.UNKNOWN:
            assert decision.pairs_needed is not None and decision.pairs_needed > 0
            assert f"about {decision.pairs_needed} more pairs" in decision.reason
        else:
            assert decision.pairs_needed is None
        assert decision.low <= decision.ratio <= decision.high
    assert {Verdict.REGRESSED, Verdict.UNKNOWN} <= seen  # both branches were exercised


def test_unknown_says_how_many_more_pairs_the_noise_needs() -> None:
    plan = Plan(max_pairs=BUDGET_PAIRS)
    # No change at the measured noise: showing SAME within 5% needs 177 pairs in all.
    x = np.random.default_rng(11).normal(size=BUDGET_PAIRS)
    flat = (x - x.mean()) / x.std(ddof=1) * SD_MEASURED  # mean 0, SD exactly the noise
    decision = decide(flat, plan)
    assert decision.verdict is Verdict.UNKNOWN
    assert decision.sd_log == pytest.approx(SD_MEASURED, rel=1e-6)
    assert decision.pairs_needed == pairs_for_equivalence(SD_MEASURED, 0.05) - BUDGET_PAIRS
    # A 10% change beyond the threshold, not yet significant: the pairs that find it.
    shifted = decide(flat - math.log(1.1), plan)
    assert shifted.verdict is Verdict.UNKNOWN  # t = 2.8 misses the last look's share
    z = 1.959964 + 1.281552
    assert shifted.pairs_needed == math.ceil((z * SD_MEASURED / math.log(1.1)) ** 2) \
        - BUDGET_PAIRS


def test_the_plan_spends_exactly_alpha_over_its_looks() -> None:
    for spending in ("obrien-fleming", "pocock"):
        plan = Plan(max_pairs=33, spending=spending)
        assert plan.looks[0] == 4 and plan.looks[-1] == 33
        assert sum(plan.look_alphas) == pytest.approx(ALPHA)
        assert all(a > 0 for a in plan.look_alphas)
    plan = Plan(max_pairs=33)
    obf = plan.look_alphas
    assert plan.final_alpha(33) == pytest.approx(obf[-1])
    # A budget spent after the look at 10 pairs (looks 4, 6, 8, 10): the rest of alpha.
    assert plan.final_alpha(11) == pytest.approx(ALPHA - sum(obf[:4]))
    assert decide([-0.3, -0.1, -0.2, -0.25, -0.15] * 2 + [-0.2], plan, final=True).verdict \
        is Verdict.REGRESSED
    assert obf[0] < 1e-3 < obf[-1]  # O'Brien-Fleming keeps alpha for the later looks


def test_an_early_look_of_a_long_plan_decides_nothing_and_says_so() -> None:
    plan = Plan(max_pairs=400)
    assert plan.look_alpha(4) < 1e-12  # O'Brien-Fleming at t = 1%
    decision = decide([-0.5, -0.4, -0.6, -0.5], plan)
    assert decision.verdict is Verdict.CONTINUE
    assert (decision.low, decision.high) == (0.0, math.inf)


def test_plan_and_decide_refuse_bad_inputs_by_name() -> None:
    with pytest.raises(ValueError, match="max_pairs=3"):
        Plan(max_pairs=3)
    with pytest.raises(ValueError, match="threshold=5"):
        Plan(max_pairs=10, threshold=5)
    with pytest.raises(UnknownNameError, match="sometimes"):
        Plan(max_pairs=10, spending="sometimes")
    with pytest.raises(ValueError, match="pairs=5"):
        decide([0.0] * 5, Plan(max_pairs=10))
    with pytest.raises(ValueError, match="budget_s=0"):
        pairs_for_budget(0, 9.0)


def test_each_final_verdict_has_one_exit_code() -> None:
    assert pairs_for_budget(600.0, 9.0) == 33
    assert exit_code(Verdict.SAME) == exit_code(Verdict.IMPROVED) == Exit.OK == 0
    assert exit_code(Verdict.REGRESSED) == Exit.REGRESSION == 4
    assert exit_code(Verdict.UNKNOWN) == Exit.CANNOT_TELL == 5
    with pytest.raises(ValueError, match="verdict="):
        exit_code(Verdict.CONTINUE)
