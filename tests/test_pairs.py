"""Within-process pairs as an answer's evidence (bench.results.pairs, configs.settle_of)."""

from __future__ import annotations

import copy
import math
import random
import statistics

import pytest

from bench.answers.configs import group_configs, settle_of
from bench.answers.runs import views
from bench.results.pairs import (
    process_log_ratio,
    process_prediction,
    session_log_ratios,
    session_pairs,
    units,
)
from bench.results.schema import Interleaving, RunResult
from bench.results.stats.settlement import EQUIVALENT, FASTER, NOT_SETTLED
from bench.spec import RunSpec
from tests.helpers import fake_figures, fake_result, with_builds

ONE = RunSpec(workload="mlp", strategy="one_device", devices=1, batch=32, size="tiny")
TWO = ONE.replace(strategy="mirrored", devices=2)


def _run(spec: RunSpec, replicate: int, windows: list[float],
         session: str | None) -> RunResult:
    result = fake_result("ok")
    result.spec, result.key, result.replicate = spec, spec.key(), replicate
    result.replicas = spec.replicas
    result.figures = fake_figures(tuple(windows), replicas=spec.replicas)
    if session is not None:
        result.interleaved = Interleaving(session, [ONE.label(), TWO.label()],
                                          0 if spec is ONE else 1, len(windows), 0)
    return result


def _sweep(gap: float, round_noise: float, process_spread: float,
           shared: bool, sessions: int = 4, seed: int = 0) -> list[RunResult]:
    """Each process has its own level (process_spread, shared by its arms when they
    share it); ``gap`` = mirrored / one_device; ``round_noise`` per window."""
    rng = random.Random(seed)
    out = []
    for p in range(1, sessions + 1):
        level = 1000 * rng.lognormvariate(0, process_spread)
        other = level if shared else 1000 * rng.lognormvariate(0, process_spread)
        for spec, base, g in ((ONE, level, 1.0), (TWO, other, gap)):
            out.append(_run(spec, p, [base * g * rng.lognormvariate(0, round_noise)
                                      for _ in range(6)], f"s{p}" if shared else None))
    return out


def _settle(results: list[RunResult]) -> str:
    one, two = sorted(group_configs(views(results)), key=lambda c: c.replicas)
    s = settle_of(two, one)
    assert s is not None
    return s.verdict


def test_pairs_settle_what_independent_runs_cannot() -> None:
    # Processes differ by 25% from each other; inside a process the arms see the same.
    assert _settle(_sweep(1.5, 0.01, 0.25, shared=True)) == FASTER
    assert _settle(_sweep(1.02, 0.01, 0.25, shared=True)) == EQUIVALENT
    assert _settle(_sweep(1.02, 0.01, 0.25, shared=False)) == NOT_SETTLED


def test_a_small_gap_at_high_window_noise_is_not_settled_by_few_pairs() -> None:
    assert _settle(_sweep(1.02, 0.30, 0.25, shared=True, sessions=2)) == NOT_SETTLED


def test_one_process_statistic_is_the_median_round_ratio() -> None:
    a = _run(ONE, 1, [1000.0, 1000.0, 1000.0], "s")
    b = _run(TWO, 1, [1500.0, 300.0, 1500.0], "s")
    assert math.isclose(process_log_ratio(a, b), math.log(1.5))
    # Only processes both configurations were arms of count.
    lone = _run(TWO, 2, [1500.0] * 3, None)
    assert session_log_ratios([a], [b, lone]) == [process_log_ratio(a, b)]


def test_a_process_of_several_builds_gives_the_mean_of_their_medians() -> None:
    # One process, three builds of both arms: mirrored 10%, 0% and 4% ahead of one_device
    # (every round of a build alike but one outlier each, which the build's median drops).
    gaps = (1.10, 1.00, 1.04)
    a = with_builds(_run(ONE, 1, [1000.0] * 9, "s"), 3)
    b = with_builds(_run(TWO, 1, [1000.0 * g * (3.0 if i == 1 else 1.0)
                             for g in gaps for i in range(3)], "s"), 3)
    assert [len(u.figures.windows) for u in units(b) if u.figures] == [3, 3, 3]
    assert [u.interleaved.session for u in units(b) if u.interleaved] == ["s/0", "s/1", "s/2"]
    mean = statistics.fmean(math.log(g) for g in gaps)
    assert math.isclose(process_log_ratio(a, b), mean)
    # The process is one pair, however many builds it made: its builds share the
    # process's own offset (scripts.build_share), so they are not independent pairs.
    assert session_log_ratios([a], [b]) == [process_log_ratio(a, b)]
    # The median of all nine rounds would take the middle build's level instead.
    assert not math.isclose(mean, statistics.median(
        math.log(w.global_throughput / 1000.0) for w in b.figures.windows if b.figures))
    # A run of its own process has no builds to split: itself.
    lone = _run(TWO, 2, [1000.0] * 3, None)
    assert units(lone) == [lone]


def test_builds_average_an_arm_offset_that_one_build_per_process_keeps() -> None:
    # Six processes; each build draws the arm an offset (SD 4%), the windows are quiet.
    # Three builds a process shrink the spread of the process statistics by about
    # sqrt(3), so the same six processes settle what one build each leaves open.
    rng = random.Random(11)
    spreads = {}
    for builds in (1, 3):
        made, stats_ = [], []
        for p in range(1, 7):
            offsets = [rng.lognormvariate(0, 0.04) for _ in range(builds)]
            ref = [1000.0 * rng.lognormvariate(0, 0.003) for _ in range(9)]
            cand = [1.04 * x * offsets[i * builds // 9] for i, x in enumerate(ref)]
            one, two = _run(ONE, p, ref, f"s{p}"), _run(TWO, p, cand, f"s{p}")
            if builds > 1:
                one, two = with_builds(one, 3), with_builds(two, 3)
            made += [one, two]
            stats_.append(process_log_ratio(one, two))
        spreads[builds] = statistics.stdev(stats_)
        one_c, two_c = sorted(group_configs(views(made)), key=lambda c: c.replicas)
        s = settle_of(two_c, one_c)
        assert s is not None and s.sizes[0] == 6
        assert (s.direction == FASTER) == (builds == 3), (builds, s)
    assert spreads[3] < spreads[1] / 1.4


def _cpu(result: RunResult, share: float) -> RunResult:
    assert result.figures is not None
    for w in result.figures.windows:
        w.cpu_s = share * w.wall_s
    return result


def test_a_process_that_lost_cpu_for_its_whole_length_is_left_out() -> None:
    # Four processes, mirrored 2% ahead; the first shared the cores with another job
    # from start to end (both arms at 1.2 of 1.9 cores, the ratio thrown to 1.26).
    ref = [_cpu(_run(ONE, p, [1000.0 if p > 1 else 500.0] * 3, f"s{p}"), 1.9 if p > 1 else 1.2)
           for p in range(1, 5)]
    cand = [_cpu(_run(TWO, p, [1020.0 if p > 1 else 630.0] * 3, f"s{p}"), 1.9 if p > 1 else 1.2)
            for p in range(1, 5)]
    ratios = session_log_ratios(ref, cand)
    assert len(ratios) == 3 and all(math.isclose(r, math.log(1.02)) for r in ratios)
    # Without CPU figures (older results), or when fewer than 3 processes: all kept.
    plain = session_log_ratios([_run(ONE, p, [1000.0] * 3, f"s{p}") for p in (1, 2, 3)],
                               [_run(TWO, p, [1020.0] * 3, f"s{p}") for p in (1, 2, 3)])
    assert len(plain) == 3
    assert len(session_log_ratios(ref[:2], cand[:2])) == 2


# -- what a process's rounds predict of its statistic ----------------------------------
def test_the_rounds_predict_a_medians_variance_and_say_nothing_when_identical() -> None:
    ratios = [0.1, -0.1, 0.1, -0.1, 0.05, -0.05]
    ref = _run(ONE, 1, [1000.0] * 6, "s1")
    cand = _run(TWO, 1, [1000.0 * math.exp(x) for x in ratios], "s1")
    found = process_prediction(ref, cand)
    assert found is not None and found.df == 5
    assert found.var == pytest.approx(math.pi / 2 * statistics.variance(ratios) / 6)
    # Two builds of three rounds: each build's variance over its rounds, averaged as
    # the builds' medians are (their sum over the builds squared).
    two = process_prediction(with_builds(copy.deepcopy(ref), 3),
                             with_builds(copy.deepcopy(cand), 3))
    parts = [statistics.variance(ratios[:3]) / 3, statistics.variance(ratios[3:]) / 3]
    assert two is not None and two.df == 4
    assert two.var == pytest.approx(math.pi / 2 * sum(parts) / 4)
    # Rounds that repeat to float precision predict nothing; nor do windows that do not
    # pair round by round.
    assert process_prediction(ref, _run(TWO, 1, [1100.0] * 6, "s1")) is None
    assert process_prediction(ref, _run(TWO, 1, [1100.0] * 5, "s1")) is None
    pairs = session_pairs([ref], [cand])
    assert [p.log_ratio for p in pairs] == [process_log_ratio(ref, cand)]
    assert pairs[0].predicted == found
