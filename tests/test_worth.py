"""What an answer is worth: one bound over every comparison of its place, held jointly
(``bench.answers.worth``, said by ``reports.worth``): constructed places both ways, and
the joint level by simulation."""

from __future__ import annotations

import math
import random
import statistics

import pytest

from bench.answers.worth import highest_ratio, worth
from bench.results.stats.distributions import t_ppf
from reports.report import build_from_results
from reports.worth import worth_sentence
from tests.helpers import fake_environment, replicated
from tests.test_answers import MWM, ONE, TWO, _place


def _worth(*configs: tuple[str, int, float, float]) -> str:
    results = _place(*configs)
    (mr,) = build_from_results(results, None).machines  # type: ignore[arg-type]
    (rec,) = mr.workloads[0].recommendations
    found = worth(rec)
    assert found is not None
    return worth_sentence(found)


def test_a_clearly_faster_answer_states_its_least_gain() -> None:
    text = _worth((ONE, 1, 1000.0, 0.01), (TWO, 2, 1500.0, 0.01), (MWM, 2, 1200.0, 0.01))
    assert text.startswith("use mirrored on 2 devices: faster than every other "
                           "configuration by at least ")
    gain = int(text.split("at least ")[1].split("%")[0])
    assert 15 <= gain < 25  # 1500 / 1200 = +25%, less its joint interval
    assert "its 2 comparisons together" in text


def test_equal_configurations_state_how_much_could_be_given_up() -> None:
    tight = _worth((ONE, 1, 1000.0, 0.01), (TWO, 2, 1000.0, 0.01))
    loose = _worth((ONE, 1, 1000.0, 0.10), (TWO, 2, 1000.0, 0.10))
    for text in (tight, loose):
        assert "no configuration is shown faster; none is more than " in text
    bound = [int(t.split("more than ")[1].split("%")[0]) for t in (tight, loose)]
    assert bound[0] <= 5 < bound[1]  # the precision reached, stated


def test_a_one_run_comparison_bounds_nothing_and_is_named() -> None:
    env = fake_environment("rows-box", gpus=2)
    results = [*replicated(ONE, 1, 8, 1000.0, env=env, run_cv=0.01, cv=0.01),
               *replicated(TWO, 2, 8, 900.0, env=env, run_cv=0.01, cv=0.01, runs=1)]
    (mr,) = build_from_results(results, None).machines  # type: ignore[arg-type]
    (rec,) = mr.workloads[0].recommendations
    found = worth(rec)
    assert found is not None and found.loss is None
    assert "not bounded against mirrored on 2 devices" in worth_sentence(found)


def test_the_bound_holds_jointly_at_its_level_and_not_comparison_by_comparison() -> None:
    """Four configurations equal to the answer: the bound "none is more than L faster"
    is wrong when every upper end lies below 1. Read jointly it is wrong at most alpha
    of the time; read at alpha each, more often than alpha."""
    rng = random.Random(7)
    se, df, k, places = 0.03, 5.0, 4, 4000

    def draws() -> list[tuple[float, float, float]]:
        # A t-distributed estimate around the true log ratio 0.
        return [(se * rng.gauss(0, 1) / math.sqrt(rng.gammavariate(df / 2, 2 / df)), se, df)
                for _ in range(k)]

    samples = [draws() for _ in range(places)]
    joint = sum(highest_ratio(d, 0.05) < 1.0 for d in samples) / places
    assert joint <= 0.05
    # The two-sided misses of the joint intervals, and of per-comparison ones:
    misses = sum(any(abs(e) > t_ppf(1 - 0.05 / k / 2, f) * s for e, s, f in d)
                 for d in samples) / places
    naive = sum(any(abs(e) > t_ppf(0.975, f) * s for e, s, f in d) for d in samples) / places
    assert misses <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / places)
    assert naive > 0.1  # comparison by comparison, four comparisons miss far more often


def test_the_bound_holds_jointly_over_the_budgets_looks() -> None:
    """A place read at every look of a budget's plan (each at its own alpha, as the
    budget reads it), a session more at each: the bound it states at any look is wrong
    in at most the sweep's 5% of places, whichever look stops it (the union bound
    over the looks); read at 5% at every look, far more often."""
    from bench.answers.sequential import LookPlan

    rng = random.Random(11)
    plan = LookPlan.for_budget(600.0)
    alphas = [plan.interim] * plan.max_interim + [plan.final]
    k, sd, places = 3, 0.05, 1500
    bound_wrong = joint_missed = naive_missed = 0
    for _ in range(places):
        # Each comparison's per-session log ratios (true ratio 1); its noise estimated
        # from them, as the runs give it.
        seen: list[list[float]] = [[rng.gauss(0, sd)] for _ in range(k)]
        wrong = missed = naive = False
        for n, alpha in enumerate(alphas, start=2):
            for xs in seen:
                xs.append(rng.gauss(0, sd))
            est = [(statistics.fmean(xs), statistics.stdev(xs) / math.sqrt(n), n - 1.0)
                   for xs in seen]
            wrong = wrong or highest_ratio(est, alpha) < 1.0
            # Every interval of the place, two-sided, at alpha / k (the bound's) and at 5%.
            missed = missed or any(abs(e) > t_ppf(1 - alpha / k / 2, f) * s for e, s, f in est)
            naive = naive or any(abs(e) > t_ppf(0.975, f) * s for e, s, f in est)
        bound_wrong += wrong
        joint_missed += missed
        naive_missed += naive
    assert bound_wrong / places <= 0.05
    assert joint_missed / places <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / places)
    assert naive_missed / places > 0.3  # every look at 5%: the misses add up


def test_a_configuration_shown_slower_than_another_is_bounded_through_it() -> None:
    """Its own comparison with the answer may rest on few sessions (here: df 1); the
    place shows it slower than another configuration, whose bound then stands for it,
    at the union bound's level. Without that claim its own comparison bounds the
    answer, however loosely."""
    import dataclasses

    results = _place((ONE, 1, 1000.0, 0.01), (TWO, 2, 1500.0, 0.01), (MWM, 2, 1200.0, 0.01))
    (mr,) = build_from_results(results, None).machines  # type: ignore[arg-type]
    (rec,) = mr.workloads[0].recommendations
    assert rec.best is not None and rec.best.strategy == TWO
    configs = {c.strategy: c for cs in rec.ranking.by_replicas.values() for c in cs}
    one, mwm = configs[ONE].key, configs[MWM].key
    loose = dataclasses.replace(rec.settlements[one], se=0.05, df=1.0)
    poor = dataclasses.replace(rec, settlements={**rec.settlements, one: loose}, beaten={})
    alone = worth(poor)
    assert alone is not None and alone.loss is not None and alone.loss > 1.0  # df 1: loose
    through = dataclasses.replace(poor, beaten={one: (configs[MWM], rec.settlements[mwm])})
    found = worth(through)
    assert found is not None and found.gain is not None and found.gain > 0.1
    assert found.level == pytest.approx(0.90)
    assert "(90%)" in worth_sentence(found)


@pytest.mark.parametrize(("unread", "said"), [(0, None), (1, "1 later run of"),
                                              (3, "3 later runs of")])
def test_a_settled_answer_says_how_many_runs_it_did_not_read(unread: int,
                                                              said: str | None) -> None:
    from bench.answers.worth import Worth

    sentence = worth_sentence(Worth("default on 1 device", True, 0.04, None, (), 2,
                                    unread=unread))
    assert sentence.startswith("use default on 1 device: faster than every other")
    assert ("not read" in sentence) == (said is not None)
    assert said is None or f"(as settled: {said} this place not read)" in sentence
