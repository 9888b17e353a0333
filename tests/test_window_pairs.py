"""A/B pairs measured in one process (bench.regress.window_pairs), with fake processes."""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from bench.exits import Exit
from bench.launch.interpreter import Interpreter
from bench.regress import window_pairs as wp
from bench.regress.interleave import BASELINE, CANDIDATE, Side
from bench.results import pairs
from bench.results.schema import Interleaving, RunResult
from bench.spec import RunSpec
from tests.helpers import fake_figures, fake_result

SPEC = RunSpec(workload="mlp", strategy="one_device", devices=1, batch=64, size="tiny")


def test_sides_differing_only_in_parameters_share_a_process() -> None:
    base = Side(BASELINE)
    assert wp.sharing_reason(SPEC, base, Side(CANDIDATE, params={"widths": (550, 550)})) \
        is None
    assert "environment variables" in (wp.sharing_reason(
        SPEC, base, Side(CANDIDATE, env={"TF_ENABLE_ONEDNN_OPTS": "0"})) or "")
    other = Interpreter(path="/opt/venv/bin/python", tensorflow="2.20.0", python="3.11.7")
    assert "interpreters" in (wp.sharing_reason(SPEC, base, Side(CANDIDATE, python=other))
                              or "")
    mwm = SPEC.replace(strategy="multi_worker_mirrored", devices=2)
    assert "processes" in (wp.sharing_reason(mwm, base, Side(CANDIDATE)) or "")


def _arm(spec: RunSpec, throughputs: Sequence[float]) -> RunResult:
    result = fake_result("ok")
    result.spec = spec
    result.figures = fake_figures(tuple(throughputs))
    return result


def test_a_burst_in_one_window_moves_one_round_and_not_the_pair() -> None:
    base = _arm(SPEC, [1000.0] * 9)
    cand = _arm(SPEC, [900.0] * 8 + [300.0])  # one window hit by a neighbour's burst
    ratios = pairs.round_log_ratios(base, cand)
    assert len(ratios) == 9
    assert sorted(ratios)[len(ratios) // 2] == pytest.approx(math.log(0.9))


class FakeProcesses:
    """Stands in for run_interleaved: the candidate's true ratio, with window noise."""

    def __init__(self, ratio: float, noise: float = 0.05) -> None:
        self.ratio, self.noise = ratio, noise
        self.rng = random.Random(0)
        self.calls: list[tuple[list[str], int]] = []

    def __call__(self, specs: Sequence[RunSpec], log: Path, *, rounds: int, seed: int,
                 env: Any = None, python: Any = None) -> list[RunResult]:
        self.calls.append(([str(s.params.get("widths", "")) for s in specs], rounds))
        process = self.rng.lognormvariate(0, 0.2)  # shared by both arms of the process
        out = []
        for k, spec in enumerate(specs):
            true = 1000.0 * process * (self.ratio if spec.params.get("widths") else 1.0)
            out.append(_arm(spec, [true * self.rng.lognormvariate(0, self.noise)
                                   for _ in range(rounds)]))
            out[-1].interleaved = Interleaving("s", ["a", "b"], k, rounds, seed)
        return out


@pytest.mark.parametrize("ratio,code,verdict", [(1 / 1.105, Exit.REGRESSION, "REGRESSED"),
                                                (1.0, Exit.OK, "SAME")])
def test_bench_ab_puts_parameter_sides_in_one_process_and_decides(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        ratio: float, code: Exit, verdict: str) -> None:
    from bench.cli.main import main

    fake = FakeProcesses(ratio)
    monkeypatch.setattr(wp, "run_interleaved", fake)
    rc = main(["ab", "--workload", "mlp", "--strategy", "one_device", "--size", "tiny",
               "--candidate-param", "widths=550,550", "--budget", "10m", "--rounds", "6",
               "--order-seed", "1", "--out", str(tmp_path / "ab")])
    out = capsys.readouterr().out
    assert rc == code, out
    assert "both sides in one process, windows interleaved (6 rounds a pair)" in out
    assert f": {verdict} after" in out
    assert fake.calls and all(rounds == 6 for _, rounds in fake.calls)
    # Both orders of the arms occur (AB / BA pairs), each process holding both sides.
    assert {tuple(names) for names, _ in fake.calls} == {("", "[550, 550]"),
                                                         ("[550, 550]", "")}
    stored = {p.parent.parent.name for p in (tmp_path / "ab").rglob("*.json")
              if p.parent.name == "results"}
    assert stored == {BASELINE, CANDIDATE}


def test_windows_mode_refuses_sides_that_cannot_share_a_process(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from bench.cli.main import main

    rc = main(["ab", "--workload", "mlp", "--strategy", "one_device", "--size", "tiny",
               "--candidate-env", "TF_ENABLE_ONEDNN_OPTS=0", "--pairs", "windows",
               "--out", str(tmp_path / "ab")])
    assert rc == Exit.USAGE
    assert "environment variables" in capsys.readouterr().err


def test_rounds_must_be_at_least_two(capsys: pytest.CaptureFixture[str]) -> None:
    from bench.cli.main import main

    with pytest.raises(SystemExit) as exc:
        main(["ab", "--workload", "mlp", "--rounds", "1"])
    assert exc.value.code == Exit.USAGE
    assert "--rounds must be a whole number >= 2. Received: '1'" in capsys.readouterr().err


def _with_cpu(result: RunResult, use: Sequence[float]) -> RunResult:
    assert result.figures is not None
    for w, u in zip(result.figures.windows, use, strict=True):
        w.cpu_s = u * w.wall_s
    return result


def test_rounds_whose_window_lost_cpu_to_a_neighbour_are_left_out() -> None:
    base = _with_cpu(_arm(SPEC, [1000.0] * 6), [1.9, 1.9, 1.9, 1.9, 1.9, 1.9])
    cand = _with_cpu(_arm(SPEC, [950.0, 950.0, 500.0, 950.0, 950.0, 950.0]),
                     [1.9, 1.9, 1.0, 1.9, 1.9, 1.9])
    assert pairs.undisturbed_rounds(base, cand) == [0, 1, 3, 4, 5]
    # A mirrored arm's own lower level of CPU use is its median, not a disturbance.
    low = _with_cpu(_arm(SPEC, [950.0] * 6), [1.2] * 6)
    assert pairs.undisturbed_rounds(base, low) == list(range(6))


def test_when_most_rounds_look_disturbed_every_round_is_kept() -> None:
    base = _with_cpu(_arm(SPEC, [1000.0] * 4), [1.9, 1.0, 1.0, 1.9])
    cand = _with_cpu(_arm(SPEC, [950.0] * 4), [1.0, 1.9, 1.9, 1.0])
    assert pairs.undisturbed_rounds(base, cand) == [0, 1, 2, 3]
    no_cpu = _arm(SPEC, [1000.0] * 4)  # results stored before cpu_s existed
    assert pairs.undisturbed_rounds(no_cpu, cand) == [0, 1, 2, 3]


def test_a_session_disturbed_throughout_is_left_out_when_later_ones_hold_fewer_arms() -> None:
    """Two sessions of three arms, then two of the two still open. Each arm is judged
    against its own median over the sessions that measured it: the fourth session, its
    arm b at half its CPU for every window, goes; arm c's lower use (a mirrored arm) is
    its own level, not a disturbance."""
    def arm(use: float) -> RunResult:
        return _with_cpu(_arm(SPEC, [1000.0] * 4), [use] * 4)

    sessions = [{"a": arm(1.9), "b": arm(1.9), "c": arm(1.2)},
                {"a": arm(1.9), "b": arm(1.9), "c": arm(1.2)},
                {"a": arm(1.9), "b": arm(1.9)},
                {"a": arm(1.9), "b": arm(1.0)}]
    assert pairs.undisturbed_sessions(sessions) == [0, 1, 2]
    sessions[3]["b"] = arm(1.9)
    assert pairs.undisturbed_sessions(sessions) == [0, 1, 2, 3]


def test_each_pair_mode_is_taken_where_the_sides_allow_it() -> None:
    base = Side(BASELINE)
    by_param = Side(CANDIDATE, params={"widths": (550, 550)})
    by_env = Side(CANDIDATE, env={"TF_ENABLE_ONEDNN_OPTS": "0"})
    assert wp.pair_mode("auto", SPEC, base, by_param)[0] == "windows"
    mode, why = wp.pair_mode("auto", SPEC, base, by_env)
    assert mode == "duet" and "environment variables" in why
    mwm = SPEC.replace(strategy="multi_worker_mirrored", devices=2)
    assert wp.pair_mode("auto", mwm, base, by_env)[0] == "processes"
    assert wp.pair_mode("duet", SPEC, base, by_param)[0] == "duet"  # asked for: allowed
    assert wp.pair_mode("processes", SPEC, base, by_param)[0] == "processes"
    with pytest.raises(ValueError, match="runs 2 processes"):
        wp.pair_mode("duet", mwm, base, by_env)
    with pytest.raises(ValueError, match="environment variables"):
        wp.pair_mode("windows", SPEC, base, by_env)


class FakeDuets:
    """Stands in for run_duet: each side its own process (its own luck), the machine's
    state over the duet shared by both; the candidate's environment sets the ratio."""

    def __init__(self, ratio: float, noise: float = 0.03) -> None:
        self.ratio, self.noise = ratio, noise
        self.rng = random.Random(1)
        self.calls: list[tuple[list[str], int]] = []

    def __call__(self, specs: Sequence[RunSpec], logs: Sequence[Path], *, rounds: int,
                 seed: int, envs: Sequence[Any], pythons: Sequence[Any]) -> list[RunResult]:
        names = [(e or {}).get("STRATBENCH_SIDE", "") for e in envs]
        self.calls.append((names, rounds))
        machine = self.rng.lognormvariate(0, 0.2)  # drift: shared by both processes
        out = []
        for k, name in enumerate(names):
            own = self.rng.lognormvariate(0, 0.01)  # each process's own luck
            true = 1000.0 * machine * own * (self.ratio if name == "b" else 1.0)
            out.append(_arm(specs[k], [true * self.rng.lognormvariate(0, self.noise)
                                       for _ in range(rounds)]))
            out[-1].interleaved = Interleaving("s", ["a", "b"], k, rounds, seed, processes=2)
        return out


@pytest.mark.parametrize("ratio,code,verdict", [(1 / 1.105, Exit.REGRESSION, "REGRESSED"),
                                                (1.0, Exit.OK, "SAME")])
def test_bench_ab_measures_environment_sides_as_duets_and_decides(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        ratio: float, code: Exit, verdict: str) -> None:
    from bench.cli.main import main

    fake = FakeDuets(ratio)
    monkeypatch.setattr(wp, "run_duet", fake)
    rc = main(["ab", "--workload", "mlp", "--strategy", "one_device", "--size", "tiny",
               "--baseline-env", "STRATBENCH_SIDE=a", "--candidate-env",
               "STRATBENCH_SIDE=b", "--budget", "10m", "--rounds", "6",
               "--order-seed", "1", "--out", str(tmp_path / "ab")])
    out = capsys.readouterr().out
    assert rc == code, out
    assert "two live processes taking turns window by window" in out
    assert f": {verdict} after" in out
    # Both orders occur, each duet holding one process of each side with its own env.
    assert {tuple(names) for names, _ in fake.calls} == {("a", "b"), ("b", "a")}
    assert all(rounds == 6 for _, rounds in fake.calls)
    stored = {p.parent.parent.name for p in (tmp_path / "ab").rglob("*.json")
              if p.parent.name == "results"}
    assert stored == {BASELINE, CANDIDATE}


def test_duet_mode_refuses_a_strategy_of_several_processes(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from bench.cli.main import main

    rc = main(["ab", "--workload", "mlp", "--strategy", "multi_worker_mirrored",
               "--devices", "2", "--size", "tiny", "--candidate-env", "X=1",
               "--pairs", "duet", "--out", str(tmp_path / "ab")])
    assert rc == Exit.USAGE
    err = capsys.readouterr().err
    assert "--pairs duet" in err and "runs 2 processes" in err
