"""The run-level statistics on synthetic samples with known truth (no TensorFlow).

Every random draw is seeded, so these tests give the same answer on every run: the
rates they check are properties of the method, measured once on fixed samples, with
margins of several binomial standard deviations.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import ttest_ind

from bench.results.levels import DEFAULT_POWER
from bench.results.stats.comparison import compare_runs
from bench.results.stats.paired import paired_equivalence, paired_log_ratio
from bench.results.stats.power import (
    detectable_log_change,
    equivalence_power,
    minimum_detectable_change,
    pairs_for_equivalence,
)
from bench.results.stats.runs import (
    hierarchical_bootstrap_ratio,
    run_figure,
    summarize_runs,
    throughput_runs,
)

ALPHA = 0.05


def margin(p: float, n: int) -> float:
    """Four binomial standard deviations: a fixed sample this far off is a broken method."""
    return 4.0 * math.sqrt(p * (1.0 - p) / n)


def runs(rng: np.random.Generator, n: int, *, run_sd: float = 0.05, window_sd: float = 0.05,
         windows: int = 6, shift: float = 0.0, group: float = 0.0,
         level: float = 1000.0) -> list[list[float]]:
    """``n`` runs: each its own log-normal offset, then noisy windows around it."""
    return [list(level * np.exp(shift + group + rng.normal(0.0, run_sd)
                                + rng.normal(0.0, window_sd, windows))) for _ in range(n)]


def test_detectable_change_uses_the_t_quantiles_of_printed_tables() -> None:
    # (t[0.975] + t[0.9]) x SE: t[0.975, 2] = 4.302653, t[0.9, 2] = 1.885618,
    # t[0.975, 10] = 2.228139, t[0.9, 10] = 1.372184; normal 1.959964 + 1.281552.
    assert detectable_log_change(1.0, 2) == pytest.approx(4.302653 + 1.885618, abs=1e-5)
    assert detectable_log_change(0.5, 10) == pytest.approx(0.5 * (2.228139 + 1.372184),
                                                           abs=1e-5)
    assert detectable_log_change(1.0, math.inf) == pytest.approx(1.959964 + 1.281552, abs=1e-5)
    assert detectable_log_change(1.0, 0) == math.inf


def test_one_window_runs_are_students_two_sample_t_test_on_the_logs() -> None:
    # With one window a run there is no window floor: compare_runs is then exactly the
    # pooled two-sample t test of the log figures, as scipy computes it on its own.
    base, cur = [1000.0, 1020.0, 985.0, 1010.0], [1080.0, 1050.0, 1100.0]
    r = compare_runs([[v] for v in base], [[v] for v in cur])
    ref = ttest_ind(np.log(cur), np.log(base), equal_var=True)
    ci = ref.confidence_interval(0.95)
    assert r.p_value == pytest.approx(ref.pvalue, rel=1e-9) and r.significant
    assert (r.low, r.high) == pytest.approx((math.exp(ci.low), math.exp(ci.high)), rel=1e-9)
    assert (r.df, r.unit) == (5.0, "run")


def test_run_figure_and_summary() -> None:
    assert run_figure([1.0, 4.0]) == pytest.approx(2.0)  # geometric middle of an even count
    assert run_figure([3.0, 1.0, 2.0]) == pytest.approx(2.0)
    # Reciprocal windows give the reciprocal figure: throughput and step time agree.
    windows = [900.0, 1000.0, 1100.0, 1300.0]
    assert run_figure([1 / w for w in windows]) == pytest.approx(1 / run_figure(windows))
    s = summarize_runs([[100.0, 110.0, 90.0], [200.0, 220.0, 180.0]])
    assert (s.runs, s.windows, s.median) == (2, 6, pytest.approx(150.0))
    assert s.center == pytest.approx(math.sqrt(100.0 * 200.0))
    assert s.between_cv == pytest.approx(np.std([100, 200], ddof=1) / 150.0)
    assert s.within_cv == pytest.approx(0.1)
    assert summarize_runs([[5.0, 6.0]]).between_cv is None
    with pytest.raises(ValueError, match="Received"):
        run_figure([1.0, 0.0])


def test_one_run_a_side_cannot_measure_noise() -> None:
    r = compare_runs([[1000.0, 1010.0, 990.0]], [[500.0, 505.0, 495.0]])
    assert r.p_value is None and not r.significant and r.mde == math.inf
    assert "2+ runs" in r.note and r.ratio == pytest.approx(0.5)


@pytest.mark.parametrize("one_side", ["baseline", "current"])
def test_a_side_of_one_run_borrows_no_noise_either_way(one_side: str) -> None:
    """One run against three, as ``settle_runs``: the single run's noise is unknown, so
    nothing is decided, whichever side it is on, with or without Welch or a pool. Before,
    it was judged on the other side's noise: equal configurations, the single run 3x
    noisier, were called apart in 25% of draws (measured at 2,000)."""
    from bench.results.stats.comparison import RunNoise
    from bench.results.stats.spread import LogSpread

    rng = np.random.default_rng(4)
    pool = LogSpread(0.02**2 * 40, 40)  # a large, quiet pool: still not lent
    for _ in range(300):
        once = [[1000.0 * math.exp(rng.normal(0.0, 0.06))]]
        thrice = [[1000.0 * math.exp(v)] for v in rng.normal(0.0, 0.02, 3)]
        sides = (once, thrice) if one_side == "baseline" else (thrice, once)
        for r in (compare_runs(*sides), compare_runs(*sides, welch=True),
                  compare_runs(*sides, noise=RunNoise(pool, pool, pool))):
            assert r.p_value is None and not r.significant and r.mde == math.inf
            assert math.isnan(r.low) and math.isnan(r.high)
            assert "none is lent to it" in r.note
    # Two runs on that side: its own noise, measured and decided.
    two = compare_runs([[1000.0], [1010.0]], [[1200.0], [1190.0], [1205.0]])
    assert two.p_value is not None and two.significant


def test_identical_deterministic_runs() -> None:
    same = compare_runs([[5.0, 5.0], [5.0, 5.0]], [[5.0, 5.0], [5.0, 5.0]])
    assert same.p_value == 1.0 and not same.significant and same.mde == 0.0
    more = compare_runs([[5.0, 5.0], [5.0, 5.0]], [[6.0, 6.0], [6.0, 6.0]])
    assert more.significant and more.ratio == pytest.approx(1.2)


def test_false_alarm_rate_of_identical_pairs_is_at_most_alpha() -> None:
    """1,000 pairs of identical code: runs differ by 5%, windows by 5% around their run."""
    rng = np.random.default_rng(20261122)
    for n_base, n_cur in ((2, 2), (10, 2), (4, 4)):
        alarms = sum(compare_runs(runs(rng, n_base), runs(rng, n_cur), alpha=ALPHA).significant
                     for _ in range(1000))
        assert alarms / 1000 <= ALPHA + margin(ALPHA, 1000), (n_base, n_cur, alarms)


def test_night_to_night_drift_is_measured_when_runs_come_in_groups() -> None:
    """Runs of one night share the night: with groups the test stays at alpha."""
    rng = np.random.default_rng(7)
    grouped = naive = 0
    for _ in range(1000):
        nights = [runs(rng, 2, run_sd=0.02, group=rng.normal(0, 0.05)) for _ in range(6)]
        base = [r for night in nights[:5] for r in night]
        labels = [k for k in range(5) for _ in range(2)]
        grouped += compare_runs(base, nights[5], baseline_groups=labels).significant
        naive += compare_runs(base, nights[5]).significant
    assert grouped / 1000 <= ALPHA + margin(ALPHA, 1000)
    assert naive / 1000 > 2 * ALPHA  # why the nightly passes the nights along


def test_detection_at_three_times_the_stated_mde() -> None:
    """The MDE stated on unchanged pairs, then true slowdowns of 1x, 2x, 3x that size."""
    rng = np.random.default_rng(11)
    for n_base, n_cur in ((10, 2), (4, 4)):
        stated = float(np.median([compare_runs(runs(rng, n_base), runs(rng, n_cur)).mde
                                  for _ in range(200)]))
        # The planning formula agrees with what comparisons state (noise 5% + windows).
        planned = minimum_detectable_change(math.hypot(0.05, 0.05 * 1.25 / math.sqrt(6)),
                                            n_base, n_cur)
        assert stated == pytest.approx(planned, rel=0.35)
        rates = {}
        for k in (1, 2, 3):
            shift = math.log1p(k * stated)
            found = sum((r := compare_runs(runs(rng, n_base), runs(rng, n_cur, shift=shift)))
                        .significant and r.ratio > 1 for _ in range(300))
            rates[k] = found / 300
        assert rates[3] >= 0.9, rates
        assert rates[1] >= 0.6, rates  # near the nominal 90%; the MDE is not a wild guess


def test_hierarchical_bootstrap_is_deterministic_and_covers_a_known_ratio() -> None:
    rng = np.random.default_rng(3)
    base, cur = runs(rng, 8), runs(rng, 8, shift=math.log(1.2))
    lo, est, hi = hierarchical_bootstrap_ratio(base, cur, 0.95, seed=1)
    assert lo < est < hi and lo < 1.2 < hi and lo > 1.0
    assert hierarchical_bootstrap_ratio(base, cur, 0.95, seed=1) == (lo, est, hi)
    assert est == pytest.approx(summarize_runs(cur).center / summarize_runs(base).center)
    with pytest.raises(ValueError, match="Received"):
        hierarchical_bootstrap_ratio([], cur)
    with pytest.raises(ValueError, match="2\\+ runs on each side"):
        hierarchical_bootstrap_ratio(base[:1], cur)


def test_throughput_runs_reads_successful_results() -> None:
    from tests.helpers import fake_result

    ok, failed = fake_result(), fake_result(status="failed")
    assert throughput_runs([ok, failed]) == [[1000.0, 1100.0]]


def test_group_labels_must_match_the_runs() -> None:
    with pytest.raises(ValueError, match="one label per run"):
        compare_runs([[1.0], [1.1]], [[1.0], [1.2]], baseline_groups=["a"])


def test_minimum_detectable_change_for_planning() -> None:
    # More runs, smaller detectable change; no replication, nothing detectable.
    assert minimum_detectable_change(0.05, 10, 2) > minimum_detectable_change(0.05, 10, 5)
    assert minimum_detectable_change(0.05, 1, 1) == math.inf
    # Large samples: (1.96 + 1.28) x sigma x sqrt(2/n).
    assert math.log1p(minimum_detectable_change(0.05, 500, 500)) == pytest.approx(
        (1.95996 + 1.28155) * math.sqrt(math.log1p(0.0025)) * math.sqrt(2 / 500), rel=0.01)


# -- paired figures: ratio, equivalence, planning ----------------------------------------------
def pairs(rng: np.random.Generator, n: int, *, ratio: float = 1.0, pair_sd: float = 0.2,
          sd: float = 0.05) -> tuple[np.ndarray, np.ndarray]:
    """``n`` pairs: each pair its own shared level (``pair_sd``), then its own log noise."""
    base = 1000.0 * np.exp(rng.normal(0.0, pair_sd, n))
    return base, base * ratio * np.exp(rng.normal(0.0, sd, n))


def test_paired_log_ratio_known_values() -> None:
    logs = np.array([0.01, 0.02, 0.03, 0.04, 0.05])
    r = paired_log_ratio([100.0] * 5, list(100.0 * np.exp(logs)), seed=3)
    sd = float(np.std(logs, ddof=1))
    half = 2.776445 * sd / math.sqrt(5)  # t[0.975, 4] from a printed table
    assert (r.pairs, r.mean_log, r.sd_log) == (5, pytest.approx(0.03), pytest.approx(sd))
    assert r.ratio == pytest.approx(math.exp(0.03))
    assert (r.t_low, r.t_high) == pytest.approx((math.exp(0.03 - half), math.exp(0.03 + half)),
                                                abs=1e-6)
    # A mean of resampled pairs stays within the pairs' own extremes.
    assert math.exp(0.01) <= r.boot_low < r.ratio < r.boot_high <= math.exp(0.05)
    again = paired_log_ratio([100.0] * 5, list(100.0 * np.exp(logs)), seed=3)
    assert (again.boot_low, again.boot_high) == (r.boot_low, r.boot_high)
    point = paired_log_ratio([5.0, 7.0], [6.0, 8.4])  # identical ratios: no spread
    assert point.ratio == pytest.approx(1.2) and point.t_low == point.t_high == point.boot_low
    for baseline, current, needle in (([1.0, 2.0], [1.0], "one current value"),
                                      ([1.0], [1.0], "pairs=1"),
                                      ([1.0, 0.0], [1.0, 1.0], "positive")):
        with pytest.raises(ValueError, match=needle):
            paired_log_ratio(baseline, current)


def test_pairing_removes_the_noise_the_pair_shares() -> None:
    # Pairs 20% apart from each other, 1% noise inside a pair, 3% faster: the pairs see
    # it; the same figures taken as two independent groups of runs cannot.
    base, cur = pairs(np.random.default_rng(5), 8, ratio=1.03, sd=0.01)
    paired = paired_log_ratio(base, cur)
    assert 1.0 < paired.t_low < 1.03 < paired.t_high < 1.05
    assert paired.boot_low > 1.0 and paired.boot_high < 1.05
    assert not compare_runs([[v] for v in base], [[v] for v in cur]).significant


def test_paired_intervals_cover_the_true_ratio() -> None:
    rng = np.random.default_rng(20261123)
    for n, which in ((10, "t"), (30, "boot")):  # the bootstrap needs more pairs to be honest
        covered = 0
        for _ in range(500):
            r = paired_log_ratio(*pairs(rng, n, ratio=1.1))
            low, high = (r.t_low, r.t_high) if which == "t" else (r.boot_low, r.boot_high)
            covered += low < 1.1 < high
        assert covered / 500 >= 0.95 - margin(0.95, 500), (n, which, covered)


def test_equivalence_at_the_margin_is_shown_at_most_alpha_of_the_time() -> None:
    rng = np.random.default_rng(12)
    for true in (1.05, 1 / 1.05):
        shown = sum(paired_equivalence(*pairs(rng, 10, ratio=true), 0.05).equivalent
                    for _ in range(1000))
        assert shown / 1000 <= ALPHA + margin(ALPHA, 1000), (true, shown)


def test_equivalence_is_the_one_minus_two_alpha_interval_inside_the_margin() -> None:
    rng = np.random.default_rng(13)
    decisions = set()
    for _ in range(200):
        base, cur = pairs(rng, 6, ratio=float(rng.uniform(0.97, 1.03)), sd=0.02)
        eq = paired_equivalence(base, cur, 0.05)
        r = paired_log_ratio(base, cur, confidence=1 - 2 * ALPHA)
        assert eq.equivalent == (r.t_low > 1 / 1.05 and r.t_high < 1.05)
        assert eq.p_value == max(eq.p_lower, eq.p_upper)
        decisions.add(eq.equivalent)
    assert decisions == {True, False}  # both outcomes were exercised
    inside = paired_equivalence([5.0, 7.0], [5.1, 7.14], 0.05)  # identical 2% ratios
    assert inside.equivalent and inside.p_value == 0.0
    assert paired_equivalence([5.0, 7.0], [6.0, 8.4], 0.05).p_value == 1.0
    with pytest.raises(ValueError, match="margin=1.5"):
        paired_equivalence([5.0, 7.0], [5.1, 7.14], 1.5)


def test_pairs_for_equivalence_reaches_the_planned_power() -> None:
    n = pairs_for_equivalence(0.05, 0.05)  # 5% noise a pair, +-5% margin, 90% power
    # Normal approximation (z[0.95] + z[0.95])^2 (sd / log 1.05)^2 = 11.4; t adds a little.
    assert 12 <= n <= 14
    assert equivalence_power(n, 0.05, 0.05) >= DEFAULT_POWER > equivalence_power(n - 1, 0.05, 0.05)
    rng = np.random.default_rng(14)
    shown = sum(paired_equivalence(*pairs(rng, n), 0.05).equivalent for _ in range(1000))
    assert shown / 1000 >= DEFAULT_POWER - margin(DEFAULT_POWER, 1000)
    assert pairs_for_equivalence(0.1, 0.05) > n > pairs_for_equivalence(0.05, 0.1)
    assert pairs_for_equivalence(0.05, 0.05, true_ratio=1.02) > n
    assert pairs_for_equivalence(0.0, 0.05) == 2
    with pytest.raises(ValueError, match="true_ratio=1.05"):
        pairs_for_equivalence(0.05, 0.05, true_ratio=1.05)
