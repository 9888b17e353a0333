"""scripts/round_test_check: which test of fewer, longer sessions keeps its error rate,
checked both ways on seeded simulations (alpha 5% keeps the trials few)."""

from __future__ import annotations

import pytest

from scripts import round_test_check
from scripts.round_test_check import rates

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
