"""The sweep's pooled noise: sessions' two-way residual, the guard, and answers it settles.

Constructed sessions with exactly known levels (no TensorFlow): the pooled variance is
the two-way ANOVA residual whatever the sessions' luck and the arms' levels; a group
whose noise differs from the rest's keeps its own; and in a report, an answer with two
sessions of its own is settled by the noise its machine's other answers measured, while
a noisy answer among quiet ones stays not settled.
"""

from __future__ import annotations

import dataclasses
import math
import random
import statistics
from pathlib import Path

import numpy as np
import pytest
from scipy import stats as sps

from bench.answers.noise import Measured, NoisePool, pair_spread
from bench.answers.recommend import Recommendation
from bench.results.schema import Interleaving, RunResult
from bench.results.stats.settlement import (
    EQUIVALENT,
    NOT_SETTLED,
    SESSION_RATIO_MIN_DF,
    RoundsEvidence,
    SessionRatio,
    settle_pairs,
    settle_runs,
)
from bench.results.stats.spread import GUARD_POWER, LogSpread, guarded_pool, noise_guard_power
from reports.recommend import evidence_of
from reports.report import build_from_results
from tests.helpers import fake_environment, measured

GPU = fake_environment("gpu-box", gpus=2)
ARMS = (("one_device", 1), ("mirrored", 2), ("central_storage", 2))


def _session(levels: list[float], batch: int, name: str, replicate: int) -> list[RunResult]:
    """One process measuring ``ARMS`` (the first ``len(levels)``) at those levels."""
    out = []
    labels = [s for s, _ in ARMS[:len(levels)]]
    for k, ((strategy, devices), level) in enumerate(zip(ARMS, levels, strict=False)):
        r = measured(strategy, devices, batch, level, env=GPU, cv=0.01)
        r.replicate = replicate
        r.interleaved = Interleaving(name, labels, k, 3, 0)
        out.append(r)
    return out


def _by_key(results: list[RunResult]) -> dict[str, RunResult]:
    return {r.key: r for r in results}


def test_the_pair_noise_is_the_two_way_residual_free_of_luck_and_levels() -> None:
    rng = random.Random(4)
    e = np.array([[rng.gauss(0, 0.02) for _ in range(3)] for _ in range(4)])
    mu = np.log([1000.0, 1400.0, 700.0])

    def spread(luck: list[float]) -> LogSpread:
        y = mu[None, :] + np.array(luck)[:, None] + e
        return pair_spread([_by_key(_session(list(np.exp(row)), 8, f"s{i}", i + 1))
                            for i, row in enumerate(y)])

    quiet, lucky = spread([0.0] * 4), spread([0.0, 0.3, -0.25, 0.1])  # sessions 30% apart
    resid = e - e.mean(axis=1, keepdims=True) - e.mean(axis=0, keepdims=True) + e.mean()
    assert quiet.df == lucky.df == (4 - 1) * (3 - 1)
    # A pair's log ratio carries two arms' noise: 2 var(e).
    assert quiet.ss == pytest.approx(2 * float((resid ** 2).sum()), rel=1e-9)
    assert lucky.ss == pytest.approx(quiet.ss, rel=1e-9)


def _table(y: np.ndarray, arms_in: list[int]) -> list[dict[str, RunResult]]:
    """Sessions measuring ``y``'s levels (session x arm), session i the first
    ``arms_in[i]`` arms."""
    return [_by_key(_session(list(np.exp(row[:k])), 8, f"s{i}", i + 1))
            for i, (row, k) in enumerate(zip(y, arms_in, strict=True))]


def test_sessions_that_hold_only_the_open_arms_still_give_the_additive_residual() -> None:
    """Three sessions of three arms, then four of the two still open: the residual of
    the additive model, at N - S - K + 1 = 17 - 7 - 3 + 1 = 8 degrees of freedom. Exactly
    additive levels leave none, whatever the sessions' luck; and over seeded tables the
    mean square is 2 var(e), which the balanced (S-1)(K-1) = 12 would put at 2/3 of it."""
    mu = np.log([1000.0, 1400.0, 700.0])
    arms_in = [3, 3, 3, 2, 2, 2, 2]
    rng = np.random.default_rng(5)
    luck = rng.normal(0, 0.2, size=(7, 1))
    exact = pair_spread(_table(mu[None, :] + luck, arms_in))
    assert exact.df == 8 and exact.ss == pytest.approx(0.0, abs=1e-12)
    sd = 0.02
    mean_square = np.mean([pair_spread(_table(mu[None, :] + luck + rng.normal(0, sd, (7, 3)),
                                              arms_in)).var for _ in range(300)])
    assert mean_square == pytest.approx(2 * sd ** 2, rel=0.1)


def test_an_answer_whose_later_sessions_hold_fewer_arms_is_one_group_of_the_pool() -> None:
    """Grouped by their exact arms, two sessions of three and four of two were two
    groups of 2 and 3 degrees of freedom, each below the guard's power: the answer kept
    its own noise. As one answer (sessions sharing arms) they give 6 and join."""
    answers = _answers(1.02, narrowed=True)
    rec = answers[128]
    s = rec.settlements[next(c.key for c in rec.ranking.ok_configs()
                             if c.base_strategy == "mirrored")]
    assert s.evidence == "pairs" and s.sizes == (6,) and s.pooled_df == 24 + 6, s


def test_a_group_whose_noise_differs_keeps_its_own_in_both_directions() -> None:
    quiet, noisy = LogSpread(6 * 1e-4, 6), LogSpread(6 * 4e-2, 6)
    pool, odd = guarded_pool({"a": quiet, "b": quiet, "c": quiet, "loud": noisy})
    assert odd == {"loud"} and pool.df == 18 and pool.var == pytest.approx(1e-4)
    pool, odd = guarded_pool({"a": noisy, "b": noisy, "c": noisy, "hush": quiet})
    assert odd == {"hush"} and pool.var == pytest.approx(4e-2)
    pool, odd = guarded_pool({"a": LogSpread(12 * 1e-4, 12), "b": LogSpread(12 * 1.3e-4, 12)})
    assert odd == set() and pool.df == 24  # alike: pooled


def test_a_group_the_guard_cannot_judge_keeps_its_own() -> None:
    """With 1 degree of freedom the F test would miss a group 3x noisier than the pool
    more often than not (power 0.43): such a group neither borrows nor joins, even when
    its estimate looks like the pool's; with 6 it is judged (power 0.90)."""
    quiet = LogSpread(6 * 1e-4, 6)
    pool, odd = guarded_pool({"a": quiet, "b": quiet, "c": quiet,
                              "thin": LogSpread(1e-4, 1)})
    assert odd == {"thin"} and pool.df == 18
    assert noise_guard_power(1, 18) < GUARD_POWER <= noise_guard_power(6, 18)
    assert noise_guard_power(4, 16) < GUARD_POWER <= noise_guard_power(5, 16)


def test_pooled_noise_is_used_only_where_it_has_more_degrees_of_freedom() -> None:
    pairs = [math.log(1.02) + d for d in (0.01, -0.01)]  # own SD 0.0141
    alone = settle_pairs(pairs)
    assert alone.verdict == NOT_SETTLED and alone.pooled_df is None  # t at 1 df
    # A pool at least as noisy as the comparison lends its variance and its df.
    pooled = settle_pairs(pairs, pooled=LogSpread(20 * 2.5e-4, 20))
    assert pooled.verdict == EQUIVALENT and pooled.pooled_df == 20
    assert pooled.sd_log == pytest.approx(math.sqrt(2.5e-4))
    # A quieter pool lends nothing: the comparison's own variance is the larger, and it
    # keeps its own degrees of freedom with it (the pool's df beside a larger own
    # variance let a noisier configuration's intervals cover 92% for 95%).
    quieter = settle_pairs(pairs, pooled=LogSpread(20 * 0.5e-4, 20))
    assert quieter.pooled_df is None and quieter.verdict == NOT_SETTLED
    assert quieter.sd_log == pytest.approx(0.01 * math.sqrt(2))
    fewer = settle_pairs(pairs * 3, pooled=LogSpread(1.0, 1))
    assert fewer.pooled_df is None  # its own 5 df beat the pool's 1


def test_pooled_runs_never_get_an_interval_below_either_sides_own() -> None:
    """3 runs at 1% against 2 at 5%, with a much quieter pool: each side keeps its own
    variance, and with it its own (Welch-Satterthwaite) degrees of freedom; a pool
    noisier than both sides lends its variance and its df."""
    quiet = [1000 * math.exp(0.01 * z) for z in (-1.0, 0.0, 1.0)]
    loud = [1000 * math.exp(0.05 * z / math.sqrt(2)) for z in (-1.0, 1.0)]
    s = settle_runs(quiet, loud, pooled=LogSpread(40 * 1e-6, 40))
    parts = [0.01 ** 2 / 3, 0.05 ** 2 / 2]
    welch_se = math.sqrt(sum(parts))
    df = sum(parts) ** 2 / (parts[0] ** 2 / 2 + parts[1] ** 2 / 1)
    half = (math.log(s.high) - math.log(s.low)) / 2
    assert s.pooled_df is None
    assert half / float(sps.t.ppf(0.975, df)) == pytest.approx(welch_se, rel=1e-6)
    loud_pool = settle_runs(quiet, loud, pooled=LogSpread(40 * 0.06 ** 2, 40))
    half = (math.log(loud_pool.high) - math.log(loud_pool.low)) / 2
    assert loud_pool.pooled_df == 40
    assert half / float(sps.t.ppf(0.975, 40)) == pytest.approx(
        0.06 * math.sqrt(1 / 3 + 1 / 2), rel=1e-6)


def _answers(noisy_gap: float, narrowed: bool = False) -> dict[int, Recommendation]:
    """Five answers (batches 8..128) of three arms, four sessions each; mirrored 0.5%
    ahead of one_device everywhere (not shown beyond the noise: the simplest wins); the
    arms' noise 1% in every answer but batch 128's, which is 20% (a gap of
    ``noisy_gap`` there). ``narrowed``: batch 128 at the others' noise instead, in two
    sessions of three arms and four of the first two."""
    rng = random.Random(7)
    results: list[RunResult] = []
    for b, batch in enumerate((8, 16, 32, 64, 128)):
        noise, gap = (0.2, noisy_gap) if batch == 128 and not narrowed else (0.01, 1.005)
        arms = [3, 3, 2, 2, 2, 2] if batch == 128 and narrowed else [3] * 4
        for s, k in enumerate(arms):
            c = (1.0, -1.0, 0.5, -0.5)[s % 4] * (1 if s < 4 else 0.5)
            luck = rng.uniform(0.7, 1.3)  # the session's own luck: cancels in its pairs
            # The arms' noise sums to nought over the sessions: the arms' means over them
            # are exactly their levels, and every pair of arms varies.
            # The pair the tests read (one_device, mirrored) varies less than the
            # answer's average pair, so its own variance never exceeds the pool's.
            levels = [1000.0 * luck * math.exp(noise * c * w) for w in (1, 0.5, -1)]
            levels[1] *= gap
            results += _session(levels[:k], batch, f"b{b}s{s}", s + 1)
    report = build_from_results(results, Path("/nonexistent/sweep"))
    recs = report.machines[0].workloads[0].recommendations
    return {r.ranking.batch: r for r in recs}


@pytest.mark.parametrize("noisy_gap", [1.02, 1 / 1.02])
def test_an_answer_borrows_its_machines_noise_and_a_noisy_one_keeps_its_own(
        noisy_gap: float) -> None:
    answers = _answers(noisy_gap)
    for batch in (8, 16, 32, 64):
        rec = answers[batch]
        s = rec.settlements[next(c.key for c in rec.ranking.ok_configs()
                                 if c.base_strategy == "mirrored")]
        # Four sessions alone: t at 3 degrees of freedom; pooled over the machine's
        # answers (4 x (4-1) x (3-1) = 24 df, each answer's 6 enough for the guard) the
        # 0.5% gap is shown within +-5% (mirrored against the answer, one_device: no arm
        # is shown faster than it).
        assert s.evidence == "pairs" and s.pooled_df == 24, (batch, s)
        assert s.verdict == EQUIVALENT and rec.settled, (batch, rec.text)
        assert rec.best is not None and rec.best.base_strategy == "one_device"
    noisy = answers[128]
    assert not noisy.settled and noisy.kind == NOT_SETTLED, noisy.text
    assert all(s.pooled_df is None for s in noisy.settlements.values())


# -- the rounds, guarded by the workload's session-noise ratio --------------------------
ROUND_VAR = 1e-4  # what the rounds predict for one session's log ratio (1% SD)


def _rounds(ratio: float, df: int, rounds_df: int = 18) -> RoundsEvidence:
    return RoundsEvidence(ROUND_VAR, rounds_df, SessionRatio(df * ratio * ROUND_VAR,
                                                             df * ROUND_VAR, df))


def test_the_session_ratio_pools_answers_and_bounds_itself_from_above() -> None:
    a, b = SessionRatio(2e-4, 4e-4, 2), SessionRatio(6e-4, 8e-4, 4)
    assert (a + b).ratio == pytest.approx(8 / 12) and (a + b).df == 6
    assert (a + b).bound == pytest.approx(8 / 12 * 6 / sps.chi2.ppf(0.025, 6))
    assert SessionRatio().ratio is None and SessionRatio().bound is None
    # Below SESSION_RATIO_MIN_DF the bound (19.5x at 2 df for 95%) guards nothing.
    assert _rounds(0.5, SESSION_RATIO_MIN_DF).var is not None
    assert _rounds(0.5, SESSION_RATIO_MIN_DF - 1).var is None


def test_two_sessions_read_their_rounds_and_their_own_variance_only_widens_it() -> None:
    pairs = [0.002, 0.018]  # 1% from nought, the sessions 1.6% apart
    plain = settle_pairs(pairs)  # t at 1 df: 12.7 standard errors at 95%
    read = settle_pairs(pairs, rounds=_rounds(0.5, 6))
    guard = 0.5 * 6 / sps.chi2.ppf(0.025, 6) * ROUND_VAR
    assert plain.verdict == NOT_SETTLED and plain.rounds_df is None
    assert read.verdict == EQUIVALENT and read.rounds_df == 18 and read.pooled_df is None
    assert math.log(read.high / read.ratio) == pytest.approx(
        sps.t.ppf(0.975, 18) * math.sqrt(guard / 2))
    # Sessions further apart than the guard allows keep their own variance and df.
    apart = [0.0, 0.2]
    assert settle_pairs(apart, rounds=_rounds(0.5, 6)) == settle_pairs(apart)
    # Four sessions read their own; a ratio from too few df guards nothing.
    assert settle_pairs(pairs * 2, rounds=_rounds(0.5, 6)) == settle_pairs(pairs * 2)
    assert settle_pairs(pairs, rounds=_rounds(0.5, 3)) == plain
    # A noisier workload's ratio widens the same sessions' interval: not settled.
    assert settle_pairs(pairs, rounds=_rounds(20.0, 6)).verdict == NOT_SETTLED


def _arm(strategy: str, devices: int, session: str, logs: list[float]) -> RunResult:
    """An arm of session ``session`` whose windows are exp(``logs``) x 1000."""
    r = measured(strategy, devices, 8, 1000.0, env=GPU)
    assert r.figures is not None
    r.figures.windows = [dataclasses.replace(r.figures.windows[0], index=i,
                                             global_throughput=1000.0 * math.exp(x))
                         for i, x in enumerate(logs)]
    r.interleaved = Interleaving(session, ["one_device", "mirrored", "mwm"], 0, len(logs), 0)
    return r


def test_the_ratio_comes_from_the_shared_process_arms_and_members_keep_their_own() -> None:
    """Two sessions of two arms (rounds alternating +-2%) and a member whose sessions
    differ by 40%: the pool's ratio reads the arms only, and only arms borrow it."""
    rng = random.Random(3)
    measures = {"one": {}, "two": {}, "member": {}}
    for s, offset in (("s1", 0.01), ("s2", -0.01)):
        base = [rng.gauss(0.0, 0.03) for _ in range(6)]
        measures["one"][s] = _arm("one_device", 1, s, base)
        measures["two"][s] = _arm("mirrored", 2, s, [x + offset + 0.02 * (-1) ** i
                                                     for i, x in enumerate(base)])
        measures["member"][s] = _arm("multi_worker_mirrored", 2, s,
                                     [x + (0.2 if s == "s1" else -0.2) for x in base])
    pool = NoisePool.of([
        Measured("one", ("arm", 1), (), measures["one"], rounds_pool="mlp"),
        Measured("two", ("arm", 1), (), measures["two"], rounds_pool="mlp"),
        Measured("member", ("arm", 2), (), measures["member"])])
    ratio = pool.session_ratios["mlp"]
    # One df (2 sessions x 2 arms); ss / df: the variance of the arms' two session log
    # ratios, 0.02 apart.
    predicted = math.pi / 2 * statistics.variance([0.02 * (-1) ** i for i in range(6)]) / 6
    assert ratio.df == 1 and ratio.ss == pytest.approx(0.02 ** 2 / 2, rel=1e-6)
    assert ratio.expected == pytest.approx(predicted)
    assert pool.for_rounds("one", "two") == ratio
    assert pool.for_rounds("one", "member") is None


def test_an_answer_says_when_its_noise_is_its_rounds() -> None:
    read = settle_pairs([0.002, 0.018], rounds=_rounds(0.5, 6))
    assert evidence_of(read) == ("2 sessions measuring both, windows interleaved; noise "
                                 "their rounds predict, guarded by the workload's sessions, "
                                 "18 degrees of freedom")
    assert "rounds" not in evidence_of(settle_pairs([0.002, 0.018]))
