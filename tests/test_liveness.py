"""A starting process is hung when it stops making progress, not when its honest
build passes a constant (bench.launch.liveness, bench.progress).

The deadline logic is tested with constructed progress (sizes and times of our own,
then fake child processes that write a progress file and never import TensorFlow);
one test hangs a real arms process with the fault hook.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from bench.launch import launcher
from bench.launch.arms import run_interleaved
from bench.launch.launcher import _Proc, _Run, _supervise, checkout_pythonpath
from bench.launch.liveness import Deadlines, Liveness, ProgressWatch
from bench.launch.pacing import Paced, Stop, hear
from bench.progress import beat, last_phase, progress_path
from bench.spec import RunSpec
from bench.tasks import Task
from tests.helpers import child_processes

D = Deadlines(startup_s=10.0, silence_s=30.0)


@pytest.mark.parametrize("field,value", [("startup_s", 0), ("silence_s", -1.0),
                                         ("silence_s", float("inf")), ("startup_s", "5")])
def test_deadlines_name_the_field_and_the_value_they_refuse(field: str, value: object) -> None:
    kw: dict[str, object] = {"startup_s": 1.0, "silence_s": 1.0, field: value}
    with pytest.raises(ValueError, match=f"{field}.*Received: {field}={value!r}"):
        Deadlines(**kw)  # type: ignore[arg-type]


def test_progress_keeps_a_task_alive_far_past_any_one_deadline() -> None:
    # A phase every 25 s for an hour: the sum passes every constant, no gap does.
    live = Liveness(D, launched=100.0)
    live.observe(10, 105.0)  # process up
    size = 10
    for k in range(1, 145):
        now = 105.0 + 25.0 * k
        assert not live.hung(now - 0.001), k
        size += 40
        live.observe(size, now)
        assert not live.hung(now)
    assert live.changes == 145
    assert live.due == 105.0 + 25.0 * 144 + 30.0


def test_silence_kills_at_the_deadline_not_before() -> None:
    live = Liveness(D, launched=0.0)
    live.observe(50, 4.0)  # the first phase, within start-up
    live.observe(90, 30.0)  # the next, 26 s later
    live.observe(90, 59.0)  # the same size: no progress since 30.0
    assert not live.hung(60.0)
    assert live.hung(60.001)
    assert "no progress for 30 s" in live.silence(60.001)


def test_no_first_phase_is_a_start_up_hang() -> None:
    live = Liveness(D, launched=5.0)
    live.observe(0, 14.0)
    assert not live.hung(15.0)
    assert live.hung(15.5)
    assert "within 10 s of launch" in live.silence(15.5)


def test_any_change_of_size_is_progress() -> None:
    live = Liveness(D, launched=0.0)
    live.observe(100, 1.0)
    live.observe(20, 25.0)  # any change of size is something the child wrote
    assert live.due == 55.0


def test_the_watch_reads_the_childs_beats_and_names_its_last_phase(tmp_path: Path) -> None:
    watch = ProgressWatch.of(tmp_path, "single0", 0.0, D)
    assert not watch.poll(1.0)  # no file yet: start-up deadline
    assert watch.poll(10.5)
    assert "no phase finished" in watch.why(10.5)
    beat(tmp_path, "single0", "TensorFlow imported in 4.2s")
    beat(tmp_path, "single0", "arm 3 built\nand warm")  # one line whatever it is given
    assert not watch.poll(11.0)
    assert last_phase(progress_path(tmp_path, "single0")) == "arm 3 built and warm"
    assert watch.poll(41.5)
    assert "last phase: arm 3 built and warm" in watch.why(41.5)


# A fake child: beats every BEAT_S for BUILD_S, then is ready and leaves its report;
# or beats once and goes silent; or beats for ever and never gets ready.
_FAKE = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from bench.progress import beat
    from bench.results.payload import TaskReport
    run_dir, mode, build_s, beat_s = Path(sys.argv[1]), sys.argv[2], *map(float, sys.argv[3:])
    t0 = time.monotonic()
    beat(run_dir, "single0", "process up")
    if mode == "silent":
        time.sleep(3600)
    k = 0
    while mode == "forever" or time.monotonic() - t0 < build_s:
        time.sleep(beat_s)
        k += 1
        beat(run_dir, "single0", f"arm {k} built")
    (run_dir / "ready.single0").touch()
    TaskReport("ok").write(run_dir, "single0")
""")


def _supervised(tmp_path: Path, mode: str, *, build_s: float = 0.0, beat_s: float = 0.2,
                timeout: float = 60.0) -> tuple[str | None, str]:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    log = tmp_path / "fake.log"
    task = Task("single", 0, "train", main=True)
    cmd = [sys.executable, "-c", _FAKE, str(run_dir), mode, str(build_s), str(beat_s)]
    env = {**os.environ, "PYTHONPATH": checkout_pythonpath(os.environ)}
    t0 = time.monotonic()
    with open(log, "ab") as fh:
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    run = _Run(run_dir, [_Proc(task, proc, log)])
    try:
        status, reason, _ = _supervise(run, t0, timeout)
    finally:
        run.kill_all()
    return status, reason


@pytest.fixture
def short_deadlines(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(launcher, "STARTUP_TIMEOUT_S", 5.0)
    monkeypatch.setattr(launcher, "PROGRESS_SILENCE_S", 1.5)
    monkeypatch.setattr(launcher, "IDLE_TIMEOUT_S", 1.5)


@pytest.mark.usefixtures("short_deadlines")
def test_a_build_that_keeps_beating_outlives_the_deadlines(tmp_path: Path) -> None:
    # Ready after about four silence deadlines, a beat every 0.2 s: not a hang.
    status, reason = _supervised(tmp_path, "build", build_s=6.0)
    assert (status, reason) == (None, "")


@pytest.mark.usefixtures("short_deadlines")
def test_a_child_that_goes_silent_is_a_start_up_hang(tmp_path: Path) -> None:
    status, reason = _supervised(tmp_path, "silent")
    assert status == "timeout", reason
    assert "start-up hang" in reason and "single0" in reason
    assert "last phase: process up" in reason


@pytest.mark.usefixtures("short_deadlines")
def test_progress_that_never_ends_is_bounded_by_the_run_timeout(tmp_path: Path) -> None:
    status, reason = _supervised(tmp_path, "forever", timeout=4.0)
    assert status == "timeout", reason
    assert "4 s timeout" in reason and "still starting: single0" in reason


def test_an_arms_process_hung_at_start_is_caught_by_its_silence(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The real child with the fault hook: it says "process up", then never imports
    # TensorFlow. The silence deadline, not the run's 600 s timeout, ends it.
    monkeypatch.setenv("STRATBENCH_FAULT", "single0:hang_at_start")
    # The hung process can never beat again after "process up", so any silence
    # deadline catches it and only it (it is the only task): 1 s is as meaningful as
    # a longer one, and the start-up deadline (launch to "process up") stays default.
    monkeypatch.setattr(launcher, "PROGRESS_SILENCE_S", 1.0)
    monkeypatch.setattr(launcher, "IDLE_TIMEOUT_S", 1.0)
    spec = RunSpec(workload="mlp", strategy="one_device", devices=1, batch=16, size="tiny",
                   max_seconds=0.2, min_steps=3, max_steps=10, warmup_steps=1)
    results = run_interleaved([spec, spec.replace(strategy="default")], tmp_path / "a.log",
                              rounds=2)
    for r in results:  # a start-up hang, not the arms' 1200 s timeout
        assert r.status == "timeout", r.reason
        assert "start-up hang" in (r.reason or "")
        assert "last phase: process up" in (r.reason or "")
    assert "most recent call first" in (tmp_path / "a.log").read_text()  # its stacks
    assert not child_processes(tmp_path)


def _paced_sleeper(tmp_path: Path, deadlines: Deadlines) -> Paced:
    """A paced process that never answers (a sleep), its progress watched."""
    turn_r, turn_w = os.pipe()
    done_r, done_w = os.pipe()
    os.close(turn_r)
    proc = subprocess.Popen(["sleep", "60"], pass_fds=(done_w,), start_new_session=True)
    os.close(done_w)  # the sleeper holds the write end: no EOF while it lives
    task = Task("single", 0, "arms", main=True)
    return Paced(_Proc(task, proc, tmp_path / "x.log"), tmp_path, turn_w, done_r,
                 ProgressWatch.of(tmp_path, task.name, time.monotonic(), deadlines))


def test_a_paced_process_that_goes_silent_while_starting_is_stopped_as_hung(
        tmp_path: Path) -> None:
    beat(tmp_path, "single0", "process up")
    p = _paced_sleeper(tmp_path, Deadlines(startup_s=30.0, silence_s=1.0))
    try:
        with pytest.raises(Stop, match="hung.*last phase: process up") as stop:
            hear(p, "the arms' process", time.monotonic() + 60, "build and warm up",
                 starting=True)
        assert stop.value.status == "timeout"
    finally:
        p.close()
        launcher.kill_group(p.proc.proc)


def test_a_paced_process_that_keeps_beating_is_bounded_by_the_overall_deadline(
        tmp_path: Path) -> None:
    p = _paced_sleeper(tmp_path, Deadlines(startup_s=30.0, silence_s=1.0))
    end = time.monotonic() + 3.0
    try:
        while time.monotonic() < end - 0.5:  # beats every 0.2 s, as a build would
            beat(tmp_path, "single0", "arm built")
            with pytest.raises(Stop, match="in time"):
                hear(p, "the arms' process", time.monotonic() + 0.2, "build and warm up",
                     starting=True)
        with pytest.raises(Stop, match="did not build and warm up in time"):
            hear(p, "the arms' process", end, "build and warm up", starting=True)
    finally:
        p.close()
        launcher.kill_group(p.proc.proc)


# -- busy CPU is a sign of life, an idle process is not --------------------------------
IDLE = Deadlines(startup_s=10.0, silence_s=300.0, idle_s=30.0)


def test_a_busy_cpu_keeps_a_silent_task_alive_however_long() -> None:
    # One phase, then a 400 s compile: no progress, one core busy all along.
    live = Liveness(IDLE, launched=0.0)
    live.observe(10, 1.0, cpu_s=0.5)
    for t in range(2, 402):
        live.observe(10, float(t), cpu_s=0.5 + (t - 1) * 0.9)
        assert not live.hung(float(t)), t
    assert live.last_busy == 401.0


def test_an_idle_task_is_hung_at_its_idle_deadline_not_the_silence_one() -> None:
    live = Liveness(IDLE, launched=0.0)
    live.observe(10, 1.0, cpu_s=2.0)  # up; then a collective that never returns
    for t in range(2, 32):
        live.observe(10, float(t), cpu_s=2.0 + 0.003 * t)  # a few ms a second
    assert not live.hung(31.0)
    assert live.hung(31.5)
    assert "idle and silent" in live.silence(31.5) and "never busy" in live.silence(31.5)


def test_a_compile_then_a_hang_is_ended_after_the_compile() -> None:
    live = Liveness(IDLE, launched=0.0)
    live.observe(10, 1.0, cpu_s=0.0)
    cpu = 0.0
    for t in range(2, 200):
        cpu += 1.0 if t < 100 else 0.0  # busy until 100 s, idle after
        live.observe(10, float(t), cpu_s=cpu)
    assert live.last_busy is not None and 99 <= live.last_busy <= 103
    assert live.hung(live.last_busy + 30.5) and not live.hung(live.last_busy + 29.5)


def test_without_cpu_readings_the_silence_deadline_holds() -> None:
    live = Liveness(IDLE, launched=0.0)
    live.observe(10, 1.0)
    assert not live.hung(300.0) and live.hung(301.5)


class _Seen:
    """A watch whose readings the test gives (``all_hung`` polls it)."""

    def __init__(self) -> None:
        self.liveness = Liveness(IDLE, launched=0.0)

    def poll(self, now: float) -> bool:
        return self.liveness.hung(now)


def test_a_run_is_hung_only_when_every_live_task_is() -> None:
    from bench.launch.liveness import all_hung

    waiting, compiling = _Seen(), _Seen()
    for w in (waiting, compiling):
        w.liveness.observe(10, 1.0, cpu_s=0.0)
    compiling.liveness.observe(10, 50.0, cpu_s=0.0)
    compiling.liveness.observe(10, 60.0, cpu_s=9.0)  # busy from 50 to 60
    # worker0 waits, idle, on its peer's compile: hung alone, alive through its peer.
    assert waiting.poll(65.0) and not compiling.poll(65.0)
    assert not all_hung([waiting, compiling], 65.0)  # type: ignore[list-item]
    assert all_hung([waiting, compiling], 91.0)  # type: ignore[list-item]
    assert not all_hung([], 91.0)
