"""SIGTERM takes the same path as Ctrl-C: the current run is killed, results kept."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

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
    from bench.cli.main import _sigterm_as_interrupt

    before = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    with _sigterm_as_interrupt():
        assert signal.getsignal(signal.SIGTERM) is not before[0]
    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)) == before
