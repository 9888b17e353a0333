"""The budget's repeated looks at an answer keep their error rates (seeded, no TensorFlow).

The budget reads each open answer after every session and stops measuring it once it
settles. Replayed on seeded series of one comparison's session log ratios with the true
gap exactly at the +-5% margin (scripts/sequential_check.py prints the same at 1,000
series), the plan the budget uses (interim looks at 0.001, the last at 0.04) calls it
EQUIVALENT or "beyond the margin" at most about 5% of the time; every look at the full
alpha, stopping when settled, did so 3x as often.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from bench.answers.sequential import LookPlan, Looks, look_event, read_sequentially
from bench.results.stats.settlement import NOT_SETTLED, settle_pairs
from scripts.sequential_check import rates

SERIES = 400
SE = math.sqrt(0.05 * 0.95 / SERIES)


@pytest.mark.parametrize("plan", [LookPlan(), LookPlan.for_budget(600.0)],
                         ids=["10 looks", "a 10-minute budget's 4"])
def test_at_the_margin_the_plan_keeps_both_errors_near_alpha_and_full_looks_do_not(
        plan: LookPlan) -> None:
    new = rates(1.05, 0.03, 10, SERIES, 0, plan)
    old = rates(1.05, 0.03, 10, SERIES, 0, None)
    for wrong in ("equivalent", "beyond the margin"):
        assert new[wrong] <= 0.05 + 3 * SE, new
    assert old["equivalent"] > 0.05 + 3 * SE and old["equivalent"] > new["equivalent"] + 0.08
    assert new["shown faster"] > 0.9  # a 5% gap at 3% noise is still shown faster


def test_the_budget_plans_its_looks_and_the_journal_keeps_the_plan() -> None:
    """One interim look per 150 s of budget, 2 to 10, sharing 0.01: the last look reads at
    0.04 whatever the budget."""
    looks = {b: LookPlan.for_budget(b) for b in (60.0, 550.0, 600.0, 3600.0)}
    assert {b: p.max_interim for b, p in looks.items()} == {60.0: 2, 550.0: 3, 600.0: 4,
                                                            3600.0: 10}
    for plan in looks.values():
        assert plan.final == pytest.approx(0.04)
        assert plan.interim * plan.max_interim == pytest.approx(0.01)
        assert LookPlan.of_journal([{"event": "start"}, plan.event(),
                                    LookPlan().event()]) == plan  # the first one holds
    assert LookPlan.of_journal([{"event": "start"}]) is None


def test_the_first_look_at_a_comparison_is_after_its_second_session() -> None:
    """One session has no interval: the plan's looks start at the second, so that a
    plan of 2 reads at 2 and 3 sessions, then at the last."""
    plan = LookPlan(interim=0.005, max_interim=2)
    seen: list[tuple[int, float]] = []

    def settle(ratios: list[float], alpha: float) -> object:
        seen.append((len(ratios), alpha))
        return settle_pairs(ratios, alpha=alpha)

    read_sequentially([0.3, -0.2, 0.25, -0.3, 0.1], plan, settle)  # type: ignore[arg-type]
    assert seen == [(2, 0.005), (3, 0.005), (5, plan.final)]


def test_a_clear_gap_settles_at_an_interim_look_and_an_open_one_reads_at_the_last() -> None:
    clear = [math.log(1.5) + d for d in (0.01, -0.01, 0.012, -0.008, 0.0, 0.01)]

    def settle(ratios: list[float], alpha: float) -> object:
        return settle_pairs(ratios, alpha=alpha)

    s, n = read_sequentially(clear, LookPlan(), settle)  # type: ignore[arg-type]
    assert s.settled and n < len(clear) and s.alpha == LookPlan().interim
    noisy = [0.3, -0.2, 0.25, -0.3, 0.1, -0.15]
    s, n = read_sequentially(noisy, LookPlan(), settle)  # type: ignore[arg-type]
    assert s.verdict == NOT_SETTLED and n == len(noisy) and s.alpha == LookPlan().final
    with pytest.raises(ValueError, match="log_ratios=\\[\\]"):
        read_sequentially([], LookPlan(), settle)  # type: ignore[arg-type]


def test_the_plan_spends_alpha_and_the_journal_gives_each_place_its_last_look(
        tmp_path: Path) -> None:
    plan = LookPlan()
    assert plan.interim * plan.max_interim + plan.final == pytest.approx(plan.alpha)
    with pytest.raises(ValueError, match="interim=0.01"):
        LookPlan(interim=0.01, max_interim=10)
    events = [look_event("a", 0.001, False), look_event("b", 0.001, False),
              look_event("a", 0.04, True), {"event": "finished"}]
    looks = Looks.of_journal(events)
    assert looks.alpha("a") == 0.04 and looks.alpha("b") == 0.001
    assert looks.alpha("unrecorded") == 0.05  # a sweep without a budget: one look
