"""SIGTERM takes the same path as Ctrl-C: the current run is killed, results kept."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from bench.cli.main import _sigterm_as_interrupt
from bench.launch.interrupts import interrupts_deferred
from bench.launch.launcher import process_group, run_isolated
from bench.launch.prestart import PRESTART_VAR, Forked, forkable
from tests.helpers import child_processes, tiny_spec

ROOT = Path(__file__).resolve().parent.parent

SCRIPT = """
import time
from bench.cli.main import _sigterm_as_interrupt
try:
    with _sigterm_as_interrupt():
        print("ready", flush=True)
        time.sleep(60)
except KeyboardInterrupt:
    print("interrupted", flush=True)
"""


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_during_a_command_raises_keyboard_interrupt(sig: signal.Signals) -> None:
    # SIGINT ignored on entry, as for a background job of a non-interactive shell.
    proc = subprocess.Popen([sys.executable, "-c", SCRIPT], cwd=ROOT, text=True,
                            stdout=subprocess.PIPE,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        proc.send_signal(sig)
        out, _ = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert out.strip() == "interrupted" and proc.returncode == 0


def test_the_previous_handler_is_restored() -> None:
    before = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    with _sigterm_as_interrupt():
        assert signal.getsignal(signal.SIGTERM) is not before[0]
    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)) == before


# -- a signal that lands while a child is being started ------------------------------
def _ctrl_c_as_popen_returns(monkeypatch: pytest.MonkeyPatch) -> list[subprocess.Popen[bytes]]:
    """Make every ``subprocess.Popen`` deliver a SIGINT to this process just after its
    child is started: the moment a Ctrl-C used to leave the child off the launcher's
    list. Returns the children started."""
    real = subprocess.Popen
    started: list[subprocess.Popen[bytes]] = []

    def popen(*args: Any, **kwargs: Any) -> subprocess.Popen[bytes]:
        proc = real(*args, **kwargs)
        started.append(proc)
        os.kill(os.getpid(), signal.SIGINT)
        return proc

    monkeypatch.setattr(subprocess, "Popen", popen)
    return started


def test_a_signal_inside_the_deferral_lands_as_it_ends() -> None:
    done = []
    with _sigterm_as_interrupt():
        before = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
        with pytest.raises(KeyboardInterrupt):
            with interrupts_deferred():
                os.kill(os.getpid(), signal.SIGTERM)
                with interrupts_deferred():  # nested: the outer one holds it again
                    os.kill(os.getpid(), signal.SIGINT)
                    done.append("inner")
                done.append("outer")
            done.append("after")  # never: the signal lands as the outer block ends
        assert done == ["inner", "outer"]
        assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)) == before


def test_an_ignored_signal_stays_ignored_and_other_threads_are_untouched() -> None:
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with interrupts_deferred():
            os.kill(os.getpid(), signal.SIGINT)
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, previous)
    seen = []
    thread = threading.Thread(target=lambda: seen.append(_deferral_in_thread()))
    thread.start()
    thread.join(timeout=10)
    assert seen == [signal.getsignal(signal.SIGINT)]  # no handler swapped off the main thread


def _deferral_in_thread() -> Any:
    with interrupts_deferred():
        return signal.getsignal(signal.SIGINT)


def test_a_ctrl_c_while_a_run_starts_leaves_no_child(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PRESTART_VAR, "0")  # started afresh: the next test forks it
    started = _ctrl_c_as_popen_returns(monkeypatch)
    try:
        # The CLI's handlers, whatever the test runner (a pytest-xdist worker) set.
        with _sigterm_as_interrupt(), pytest.raises(KeyboardInterrupt):
            run_isolated(tiny_spec(devices=1), tmp_path / "run.log")
        assert len(started) == 1 and started[0].poll() is not None
        assert not child_processes(tmp_path)
    finally:  # where the launcher lost it, the test does not leave it behind
        for proc in started:
            proc.kill()
            proc.wait(timeout=30)


def test_a_ctrl_c_as_a_forked_child_starts_leaves_no_child(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The same with the child forked from the pre-imported starter: the Ctrl-C lands
    # as the starter answers with the child's pid, before the run has it on its list.
    if not forkable([sys.executable, "-m", "bench.child"], {}, lane_ok=True):
        pytest.skip("nothing is forked here (a GPU, or STRATBENCH_PRESTART=0)")
    real = Forked.__init__
    forked: list[Forked] = []

    def init(self: Forked, pid: int, args: Any) -> None:
        real(self, pid, args)
        forked.append(self)
        os.kill(os.getpid(), signal.SIGINT)

    monkeypatch.setattr(Forked, "__init__", init)
    try:
        with _sigterm_as_interrupt(), pytest.raises(KeyboardInterrupt):
            run_isolated(tiny_spec(devices=1), tmp_path / "run.log")
        assert len(forked) == 1 and forked[0].poll() is not None
        assert not child_processes(tmp_path)
    finally:
        for child in forked:
            if child.poll() is None:
                os.killpg(child.pid, signal.SIGKILL)
                child.wait(timeout=30)


def test_a_ctrl_c_while_a_group_starts_kills_it(monkeypatch: pytest.MonkeyPatch) -> None:
    started = _ctrl_c_as_popen_returns(monkeypatch)
    body = []
    with _sigterm_as_interrupt(), pytest.raises(KeyboardInterrupt), \
            process_group(["sleep", "60"]):
        body.append("ran")  # never: the Ctrl-C lands as the child is kept
    assert body == [] and len(started) == 1
    assert started[0].returncode == -signal.SIGKILL
