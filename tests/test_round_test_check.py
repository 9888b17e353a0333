"""scripts/round_test_check: which test of fewer, longer sessions keeps its error rate,
checked both ways on seeded simulations (alpha 5% keeps the trials few)."""

from __future__ import annotations

import pytest

from scripts import round_test_check
from scripts.round_test_check import plan_rates, rates

KW = {"alpha": 0.05, "df_pool": 8, "trials": 20_000, "seed": 3}


def test_todays_test_holds_alpha_whatever_the_sessions_add() -> None:
    for ratio in (1.0, 6.6):
        assert rates(2, 10, ratio, 0.0, **KW)["sessions"] == pytest.approx(0.05, abs=0.006)


def test_the_plain_floor_holds_alpha_only_where_sessions_add_nothing() -> None:
    assert rates(2, 10, 1.0, 0.0, **KW)["floored"] <= 0.05
    assert rates(2, 10, 6.6, 0.0, **KW)["floored"] > 2 * 0.05  # it leaks


def test_the_guarded_floor_holds_alpha_and_settles_more_from_two_long_sessions() -> None:
    for ratio in (1.0, 2.0, 6.6):
        assert rates(2, 20, ratio, 0.0, **KW)["guarded"] <= 0.05
    power = rates(2, 20, 1.0, 3.0 / 3.6, **KW)
    assert power["guarded"] > 2 * power["sessions"]  # 79% against 32% at alpha 5%


def test_bad_input_names_the_value(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ValueError, match="Received: sessions=1"):
        rates(1, 10, 1.0, 0.0, **KW)
    assert round_test_check.main(["--alpha", "2"]) == 2
    assert "Received: --alpha 2.0" in capsys.readouterr().err


TWO = ((2, 0.01), (2, 0.04))  # two sessions, an interim look and the last


def test_the_rule_the_reports_use_holds_the_plans_alpha_where_borrowing_leaks() -> None:
    """One answer's sessions 4.4x noisier beyond their rounds than its workload's four
    others: the pool's variance borrowed unguarded leaks; the guarded rounds do not
    (two sessions, the plan's last look at 0.04 on top of an interim 0.01)."""
    odd = plan_rates(6.6, 1.5, 0.0, rounds=10, looks=TWO, others=4, trials=20_000, seed=1)
    assert odd["pooled"] > 0.065 and odd["guarded"] < 0.05
    same = plan_rates(1.0, 1.0, 0.0, rounds=10, looks=TWO, others=4, trials=20_000, seed=1)
    assert same["guarded"] < 0.05 and same["sessions"] < 0.05


def test_the_guarded_rounds_settle_more_from_two_long_sessions_than_their_own_t() -> None:
    power = plan_rates(1.0, 1.0, 3.0 / 3.6, rounds=20, looks=TWO, others=4, trials=20_000,
                       seed=1)
    assert power["guarded"] > 1.4 * power["sessions"]
    # Without a workload to pool (one answer of 2 df: under SESSION_RATIO_MIN_DF) the
    # rounds are not read: the answer's own t decides, as before.
    alone = plan_rates(1.0, 1.0, 3.0 / 3.6, rounds=20, looks=TWO, others=1, trials=20_000,
                       seed=1)
    assert alone["guarded"] == alone["sessions"]
