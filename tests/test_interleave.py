"""The A/B session on a fake runner and a fake clock: pairs, order, budget, exit codes.

No TensorFlow and no processes: the runner returns canned results whose throughput
is drawn from a seeded model with a known candidate/baseline ratio.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from bench.exits import Exit
from bench.regress.ab import Verdict
from bench.regress.interleave import (
    BASELINE,
    CANDIDATE,
    Session,
    Side,
    run_session,
    session_exit,
)
from bench.results.schema import RunResult
from bench.results.store import SweepStore
from bench.spec import RunSpec
from tests.helpers import fake_figures, fake_result, tiny_spec


class FakeRuns:
    """A runner and its clock: each run takes ``run_s`` seconds of fake time."""

    def __init__(self, *, ratio: float = 1.0, sd: float = 0.02, run_s: float = 9.0,
                 fail_at: tuple[str, int] | None = None, seed: int = 0) -> None:
        self.rng = np.random.default_rng(seed)
        self.ratio, self.sd, self.run_s, self.fail_at = ratio, sd, run_s, fail_at
        self.now = 0.0
        self.calls: list[tuple[str, int, dict[str, object]]] = []

    def clock(self) -> float:
        return self.now

    def __call__(self, spec: RunSpec, side: Side, pair: int) -> RunResult:
        self.now += self.run_s
        self.calls.append((side.name, pair, dict(spec.params)))
        if self.fail_at == (side.name, pair):
            return fake_result("failed")
        level = 1000.0 * math.exp(self.rng.normal(0.0, self.sd / math.sqrt(2.0)))
        level *= self.ratio if side.name == CANDIDATE else 1.0
        result = fake_result("ok")
        result.figures = fake_figures((level, level))
        return result


def session(runs: FakeRuns, budget_s: float = 600.0, **sides: Side) -> Session:
    return run_session(tiny_spec(), sides.get("baseline", Side(BASELINE)),
                       sides.get("candidate", Side(CANDIDATE)), runs, budget_s=budget_s,
                       echo=lambda _: None, clock=runs.clock)


def test_a_slower_candidate_is_regressed_within_the_budget() -> None:
    runs = FakeRuns(ratio=1 / 1.10)
    s = session(runs)
    assert s.decision is not None and s.decision.verdict is Verdict.REGRESSED
    assert s.exit_code == Exit.REGRESSION
    assert s.plan is not None and s.plan.max_pairs == 33  # 600 s at 2 x 9 s a pair
    assert len(s.log_ratios) < s.plan.max_pairs  # settled early
    assert s.wall_s <= 600.0


def test_an_unchanged_candidate_is_same_and_exits_0() -> None:
    s = session(FakeRuns(ratio=1.0, sd=0.01))
    assert s.decision is not None and s.decision.verdict is Verdict.SAME
    assert s.exit_code == Exit.OK


def test_pairs_alternate_ab_and_ba_within_each_block() -> None:
    runs = FakeRuns(ratio=1.0, sd=0.3)  # noisy: the session runs to its budget
    s = session(runs)
    blocks = [s.orders[i:i + 2] for i in range(0, len(s.orders) - 1, 2)]
    assert all(sorted(b) == ["AB", "BA"] for b in blocks)
    firsts = [runs.calls[2 * i][0] for i in range(len(s.orders))]
    assert firsts == [BASELINE if o == "AB" else CANDIDATE for o in s.orders]
    assert {b[0] for b in blocks} == {"AB", "BA"}  # the start of a block is drawn


def test_the_budget_ends_the_session_with_unknown_and_the_pairs_needed() -> None:
    s = session(FakeRuns(ratio=1.0, sd=0.3))
    assert s.decision is not None and s.decision.verdict is Verdict.UNKNOWN
    assert s.exit_code == Exit.CANNOT_TELL
    assert s.decision.pairs_needed is not None and s.decision.pairs_needed > 0
    assert s.wall_s <= 600.0


def test_runs_slower_than_planned_still_end_within_the_budget() -> None:
    runs = FakeRuns(ratio=1.0, sd=0.3, run_s=9.0)
    original = runs.__call__

    def slowing(spec: RunSpec, side: Side, pair: int) -> RunResult:
        runs.run_s = 9.0 if pair <= 2 else 20.0  # the plan was made at 9 s a run
        return original(spec, side, pair)

    s = run_session(tiny_spec(), Side(BASELINE), Side(CANDIDATE), slowing, budget_s=600.0,
                    echo=lambda _: None, clock=runs.clock)
    assert s.plan is not None and len(s.log_ratios) < s.plan.max_pairs
    assert s.wall_s <= 600.0
    assert s.decision is not None and s.decision.verdict is Verdict.UNKNOWN


def test_a_budget_too_small_for_the_first_look_decides_on_what_it_has() -> None:
    s = session(FakeRuns(ratio=1 / 1.5, sd=0.01), budget_s=60.0)
    assert len(s.log_ratios) == 3 and s.plan is not None and s.plan.max_pairs == 3
    assert s.decision is not None and s.decision.verdict is Verdict.REGRESSED


def test_runs_slowing_down_before_the_first_look_decide_on_the_pairs_there_are() -> None:
    runs = FakeRuns(ratio=1 / 1.5, sd=0.01, run_s=9.0)
    original = runs.__call__

    def slowing(spec: RunSpec, side: Side, pair: int) -> RunResult:
        runs.run_s = 9.0 if pair <= 2 else 30.0  # planned 5 pairs, looks at 4 and 5
        return original(spec, side, pair)

    s = run_session(tiny_spec(), Side(BASELINE), Side(CANDIDATE), slowing, budget_s=100.0,
                    echo=lambda _: None, clock=runs.clock)
    assert len(s.log_ratios) == 3 and s.plan is not None and s.plan.looks == (3,)
    assert s.decision is not None and s.decision.look_alpha == pytest.approx(0.05)
    assert s.decision.verdict is Verdict.REGRESSED and s.wall_s <= 100.0


def test_a_failed_run_stops_the_session_with_exit_3() -> None:
    runs = FakeRuns(fail_at=(CANDIDATE, 3))
    s = session(runs)
    assert s.exit_code == Exit.RUNS_FAILED
    assert s.failed is not None and "candidate run of pair 3" in s.failed
    assert runs.calls[-1][:2] == (CANDIDATE, 3)


def test_each_side_runs_with_its_own_parameters() -> None:
    runs = FakeRuns(ratio=1 / 1.1)
    session(runs, candidate=Side(CANDIDATE, params={"widths": [550, 550]}))
    params = {name: p for name, _, p in runs.calls}
    assert params[CANDIDATE] == {"widths": [550, 550]}
    assert params[BASELINE] == {}


def test_several_configurations_exit_with_the_worst() -> None:
    def done(ratio: float, fail: bool = False) -> Session:
        return session(FakeRuns(ratio=ratio, sd=0.01,
                                fail_at=(BASELINE, 1) if fail else None))

    same, regressed, failed = done(1.0), done(1 / 1.2), done(1.0, fail=True)
    assert session_exit([same, same]) == Exit.OK
    assert session_exit([same, failed]) == Exit.RUNS_FAILED
    assert session_exit([failed, regressed]) == Exit.REGRESSION


def test_a_side_needs_a_positive_budget() -> None:
    with pytest.raises(ValueError, match="budget_s=0"):
        session(FakeRuns(), budget_s=0)


def test_bench_ab_runs_both_sides_with_their_options_and_exits_with_the_verdict(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from bench.cli import ab as ab_cli
    from bench.cli.main import main

    seen: list[tuple[str, tuple[int, ...], tuple[str, ...]]] = []

    def fake_replicate(store: SweepStore, spec: RunSpec, replicate: int = 1,
                       env: dict[str, str] | None = None, **_: object) -> RunResult:
        seen.append((store.root.name, tuple(spec.params.get("widths", ())), tuple(env or {})))
        slower = 1 / 1.2 if store.root.name == CANDIDATE else 1.0
        result = fake_result("ok")
        result.figures = fake_figures((1000.0 * slower, 1000.0 * slower))
        return result

    monkeypatch.setattr(ab_cli, "run_replicate", fake_replicate)
    rc = main(["ab", "--workload", "mlp", "--strategy", "one_device", "--size", "tiny",
               "--candidate-param", "widths=550,550", "--candidate-env", "TF_X=0",
               "--budget", "2m", "--threshold", "5%", "--order-seed", "3",
               "--pairs", "processes", "--out", str(tmp_path / "ab")])
    out = capsys.readouterr().out
    assert rc == Exit.REGRESSION, out
    assert "mlp[tiny] one_device n=1 b=64: REGRESSED after" in out  # the spec's label
    assert "exit code 4 (regression)" in out
    assert set(seen) == {
        (BASELINE, (), ()), (CANDIDATE, (550, 550), ("TF_X",))}
    assert (tmp_path / "ab" / BASELINE).is_dir() and (tmp_path / "ab" / CANDIDATE).is_dir()


@pytest.mark.parametrize("argv", [["--budget", "soon"], ["--threshold", "150%"],
                                  ["--candidate-env", "=1"]])
def test_bench_ab_refuses_bad_options_as_usage_errors(argv: list[str]) -> None:
    from bench.cli.main import main

    with pytest.raises(SystemExit) as exc:
        main(["ab", "--workload", "mlp", "--strategy", "one_device", *argv])
    assert exc.value.code == Exit.USAGE


def test_two_pairs_that_agree_by_luck_give_no_verdict() -> None:
    s = session(FakeRuns(ratio=1 / 1.5, sd=0.001), budget_s=40.0)
    assert len(s.log_ratios) == 2
    assert s.decision is not None and s.decision.verdict is Verdict.UNKNOWN
    assert s.decision.pairs_needed is not None and s.decision.pairs_needed >= 1
