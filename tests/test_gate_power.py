"""scripts/gate_power.py: its schedule, its verdict counts against the targets."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from bench.regress.ab import Decision, Verdict
from bench.regress.interleave import Session, Side
from bench.spec import RunSpec
from scripts import gate_power as gp


def row(kind: str, verdict: str, wall_s: float = 100.0) -> gp.Row:
    return gp.Row(1, kind, verdict, 10, 1.0, 0.95, 1.05, wall_s, 600.0, None)


def test_the_kinds_alternate_while_both_remain() -> None:
    assert gp.schedule(3, 2) == [gp.AA, gp.AB, gp.AA, gp.AB, gp.AA]
    assert gp.schedule(0, 2) == [gp.AB, gp.AB]


def test_the_targets_are_met_or_missed_by_the_counts() -> None:
    good = [row(gp.AA, "same")] * 8 + [row(gp.AA, "unknown"), row(gp.AA, "regressed")] + \
        [row(gp.AB, "regressed")] * 9 + [row(gp.AB, "unknown")]
    lines = gp.summary(good)
    assert "A/A: 10 comparisons: SAME 8, REGRESSED 1, UNKNOWN 1" in lines[0]
    assert lines[0].endswith("MET)") and lines[1].endswith("MET)")
    assert lines[2] == "every comparison within its budget"
    bad = [row(gp.AA, "same")] * 7 + [row(gp.AA, "improved")] * 2 + [row(gp.AA, "same")] + \
        [row(gp.AB, "regressed")] * 8 + [row(gp.AB, "same"), row(gp.AB, "regressed", 700.0)]
    lines = gp.summary(bad)
    assert lines[0].endswith("MISSED)") and "alarms <= 1" in lines[0]
    assert lines[1].endswith("MET)")  # 9 of 10 regressed, one of them late
    assert lines[2] == "over budget: comparison(s) 1"
    never = [row(gp.AB, "unknown")] * 10
    assert gp.summary(never)[0].endswith("MISSED)")


def test_the_true_change_pools_every_pair() -> None:
    ratio, low, high = gp.pooled_change([math.log(0.9)] * 5 + [math.log(0.92)] * 5) or (0, 0, 0)
    assert low < ratio < high and 0.89 < ratio < 0.93
    assert gp.pooled_change([0.1]) is None


def test_the_script_runs_every_comparison_through_bench_ab(monkeypatch: pytest.MonkeyPatch,
                                                          tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]
                                                          ) -> None:
    calls: list[dict[str, Any]] = []

    def fake_run_ab(specs: list[RunSpec], sides: tuple[Side, Side], out: Path,
                    **kw: Any) -> list[Session]:
        calls.append({"params": dict(sides[1].params), **kw})
        slower = bool(sides[1].params)
        s = Session(specs[0], *sides, log_ratios=[math.log(0.9 if slower else 1.0)] * 6)
        verdict = Verdict.REGRESSED if slower else Verdict.SAME
        s.decision = Decision(verdict, 6, 0.9 if slower else 1.0, 0.88, 1.02, 0.01, 0.05,
                              0.05, 0.01, None, "test")
        s.wall_s = 60.0
        return [s]

    monkeypatch.setattr(gp, "run_ab", fake_run_ab)
    rc = gp.main(["--aa", "2", "--ab", "2", "--budget", "5m", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert [c["params"] for c in calls] == [{}, gp.DEFAULT_CANDIDATE] * 2
    assert all(c["budget_s"] == 300.0 for c in calls)
    assert "A/B: 2 comparisons: REGRESSED 2" in out
    assert "every A/B pair pooled (12 pairs): throughput x0.900" in out
    stored = json.loads((tmp_path / "gate_power.json").read_text())
    assert [r["verdict"] for r in stored["rows"]] == ["same", "regressed"] * 2


def test_bad_counts_and_parameters_are_usage_errors(capsys: pytest.CaptureFixture[str]) -> None:
    assert gp.main(["--aa", "0", "--ab", "0"]) == 2
    assert "Received: --aa 0 --ab 0" in capsys.readouterr().err
    assert gp.main(["--candidate-param", "depth=3"]) == 2
    assert "depth" in capsys.readouterr().err
