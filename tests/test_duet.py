"""Two live processes taking turns window by window (bench.launch.duet)."""

from __future__ import annotations

import itertools
import random
import time
from pathlib import Path

import pytest

from bench.launch import launcher
from bench.launch.duet import DuetError, duet_reason, run_duet
from bench.matrix import round_orders
from bench.results.pairs import process_log_ratio
from bench.spec import RunSpec
from tests.helpers import child_processes

TINY = {"size": "tiny", "max_seconds": 0.2, "min_steps": 3, "max_steps": 10,
        "warmup_steps": 1}


def spec(**kw: object) -> RunSpec:
    return RunSpec(**{"workload": "mlp", "strategy": "one_device", "devices": 1,
                      "batch": 32, **TINY, **kw})  # type: ignore[arg-type]


def logs(tmp_path: Path) -> list[Path]:
    return [tmp_path / "a.log", tmp_path / "b.log"]


def no_children_left(tmp_path: Path) -> bool:
    """No live child process writes its output to a log under ``tmp_path`` (each side's
    log is there; their run directories are in the system's temporary directory)."""
    return not child_processes(tmp_path)


def test_the_sides_take_turns_in_the_mirrored_order_and_never_overlap(tmp_path: Path) -> None:
    rounds, seed = 4, 11
    a, b = run_duet([spec(), spec(params={"widths": [48, 48]})], logs(tmp_path),
                    rounds=rounds, seed=seed, envs=({"STRATBENCH_SIDE": "a"},
                                                   {"STRATBENCH_SIDE": "b"}))
    assert a.status == b.status == "ok", (a.reason, b.reason)
    assert a.interleaved is not None and b.interleaved is not None
    assert a.interleaved.session == b.interleaved.session
    assert (a.interleaved.processes, a.interleaved.arm, b.interleaved.arm) == (2, 0, 1)
    assert a.figures is not None and b.figures is not None
    assert len(a.figures.windows) == len(b.figures.windows) == rounds
    # Each side ran in its own process, with its own environment.
    assert a.launcher["tasks"][0]["pid"] != b.launcher["tasks"][0]["pid"]
    # Window r of each side in the order the launcher gave: every window ends before
    # the next one starts, whichever side it belongs to.
    windows = [a.figures.windows, b.figures.windows]
    given = [windows[side][r] for r, order in
             enumerate(round_orders(2, rounds, random.Random(seed))) for side in order]
    for before, after in itertools.pairwise(given):
        assert before.end_ts is not None and after.start_ts is not None
        assert before.end_ts <= after.start_ts
    assert process_log_ratio(a, b) == process_log_ratio(a, b)  # a number, not NaN


def test_a_side_that_exits_at_start_fails_both_at_once(tmp_path: Path) -> None:
    t0 = time.monotonic()
    a, b = run_duet([spec(), spec()], logs(tmp_path), rounds=3,
                    envs=({"STRATBENCH_FAULT": "single0:exit_at_start"}, None))
    assert a.status == b.status == "failed"
    assert "side 0" in (a.reason or "") and "exited with code 3" in (a.reason or "")
    assert (b.reason or "").startswith("its duet partner: side 0")
    assert time.monotonic() - t0 < 60
    assert no_children_left(tmp_path)


@pytest.mark.parametrize("seed,first", [(0, 1), (1, 0)])
def test_a_side_killed_after_its_warm_up_fails_both(tmp_path: Path, seed: int,
                                                    first: int) -> None:
    # The dead side's turn first (the launcher's write finds a broken pipe), or the
    # live side's (the dead one is found when its own turn comes).
    assert round_orders(2, 3, random.Random(seed))[0][0] == first
    a, b = run_duet([spec(), spec()], logs(tmp_path), rounds=3, seed=seed,
                    envs=(None, {"STRATBENCH_FAULT": "single0:kill_after_warmup"}))
    assert a.status == b.status == "failed"
    assert "side 1" in (b.reason or "") and "exited with code -9" in (b.reason or "")
    assert "its duet partner" in (a.reason or "")
    assert no_children_left(tmp_path)


def test_a_side_that_hangs_is_a_timeout_with_its_stacks(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A side hung at start ends the duet as a timeout of both, naming the side, with
    its Python stacks in its log and no process left."""
    # The hung side says "process up" (after its stack handler is registered), then
    # never beats again: its silence is caught as soon as the deadline passes, so a
    # 1 s deadline is as meaningful as the duet's 15 s timeout (kept as a backstop)
    # and the stacks are always there to dump. Side 0 is heard first: only it can be
    # named, whatever side 1 is doing meanwhile.
    monkeypatch.setattr(launcher, "PROGRESS_SILENCE_S", 1.0)
    monkeypatch.setattr(launcher, "IDLE_TIMEOUT_S", 1.0)
    t0 = time.monotonic()
    a, b = run_duet([spec(), spec()], logs(tmp_path), rounds=3, timeout_s=15,
                    envs=({"STRATBENCH_FAULT": "single0:hang_at_start"}, None))
    assert a.status == b.status == "timeout"
    assert "side 0" in (a.reason or "") and "build and warm up" in (a.reason or "")
    assert "hung" in (a.reason or "") and "last phase: process up" in (a.reason or "")
    assert time.monotonic() - t0 < 45
    assert "most recent call first" in (tmp_path / "a.log").read_text()
    assert no_children_left(tmp_path)


@pytest.mark.parametrize("change,why", [
    ({"strategy": "multi_worker_mirrored", "devices": 2}, "runs 2 processes"),
    ({"loop": "fit"}, "only the custom loop"),
])
def test_only_what_an_arm_can_be_is_a_side(change: dict[str, object], why: str) -> None:
    assert why in (duet_reason(spec(**change)) or "")
    assert duet_reason(spec()) is None
    with pytest.raises(DuetError, match=why):
        run_duet([spec(), spec(**change)], [Path("a"), Path("b")], rounds=3)


def test_a_duet_has_two_sides_and_two_rounds() -> None:
    with pytest.raises(DuetError, match="rounds=1"):
        run_duet([spec(), spec()], [Path("a"), Path("b")], rounds=1)
    with pytest.raises(DuetError, match="3 configurations"):
        run_duet([spec()] * 3, [Path("a")] * 3, rounds=3)
