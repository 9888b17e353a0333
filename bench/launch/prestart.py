"""Child processes forked from a pre-imported starter instead of started afresh.

A CPU sweep starts about fifty TensorFlow processes, each importing TensorFlow and
Keras again (about 2 s of one core alone, 6.5 s each when a session pair's six
processes start at once on 2 cores). ``start_child`` asks a starter
(``bench.child.starter``, which imported them once) to fork the child instead, where
that gives the child exactly what a fresh process would get:

- no GPU or TPU on the machine: CUDA must never be forked, and there the start-up
  is small beside the windows;
- this interpreter (not another side's ``--candidate-python``);
- the TensorFlow backend with Keras 3, the lane the starter imported (``lane_ok``);
- the environment the starter was started with, but for variables read only after
  the import (``PER_TASK``: the cluster, the task's own STRATBENCH_ variables):
  TF_ENABLE_ONEDNN_OPTS and the like are read as TensorFlow loads, so another value
  gets another starter.

Anything else, ``STRATBENCH_PRESTART=0``, or a starter that failed once starts the
child as before (``subprocess.Popen``). A forked child is adopted by this process (a
child subreaper, Linux's ``PR_SET_CHILD_SUBREAPER``), so ``Forked`` waits on it, kills
its process group and reads its exit code as ``Popen`` does. Every exchange with a
starter has a deadline; a starter that misses one is killed and not asked again.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import IO, Any, Protocol

from bench.hardware import detect
from bench.lanes import LANES
from bench.spec import RunSpec

PRESTART_VAR = "STRATBENCH_PRESTART"
# Variables a child reads after TensorFlow's import, so one starter serves them all.
PER_TASK = ("TF_CONFIG",)
PER_TASK_PREFIX = "STRATBENCH_"
STARTER_MODULE = "bench.child.starter"
# The starter imports TensorFlow and Keras (3-6 s here; under load, more).
READY_S = 180.0
# A fork answered within this or the starter is broken.
FORK_S = 30.0
PR_SET_CHILD_SUBREAPER = 36
# Starters kept alive at once (each holds TensorFlow's ~0.5 GB): one environment's
# sweep needs one; an A/B of environments, a test suite's variations, a few.
MAX_STARTERS = 2


class ChildProcess(Protocol):
    """What the launcher uses of a child: ``subprocess.Popen``'s or ``Forked``'s."""

    pid: int
    returncode: int | None

    def poll(self) -> int | None: ...

    def wait(self, timeout: float | None = None) -> int: ...


class Forked:
    """A child forked by a starter and adopted by this process: ``Popen``'s ``pid``,
    ``returncode``, ``poll`` and ``wait`` (negative codes for signals, as Popen's)."""

    def __init__(self, pid: int, args: Sequence[str]) -> None:
        self.pid, self.args = pid, list(args)
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:  # reaped elsewhere: gone, its code unknown
                self.returncode = -signal.SIGKILL
                return self.returncode
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        end = None if timeout is None else time.monotonic() + timeout
        delay = 0.001
        while self.poll() is None:
            if end is not None and time.monotonic() >= end:
                raise subprocess.TimeoutExpired(self.args, timeout or 0.0)
            time.sleep(delay)
            delay = min(delay * 2, 0.05)
        assert self.returncode is not None
        return self.returncode


class StarterError(RuntimeError):
    """A starter that cannot serve: the child then starts afresh."""


@dataclass
class _Starter:
    env: dict[str, str]
    proc: subprocess.Popen[Any] | None = None
    sock: socket.socket | None = None
    preimported_s: float | None = None
    broken: str | None = None
    preload: bool = True  # False: the protocol without TensorFlow (tests)
    said: bool = False  # its failure was said (once)
    log: Any = None  # its output: a temporary file, removed with it
    lock: threading.Lock = field(default_factory=threading.Lock)

    def _start(self) -> None:
        ours, theirs = socket.socketpair()
        # Kept open while the starter lives, removed as it closes (close()).
        self.log = tempfile.NamedTemporaryFile(  # noqa: SIM115
            prefix="stratbench-starter-", suffix=".log")
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", STARTER_MODULE, "--socket", str(theirs.fileno()),
                 *([] if self.preload else ["--no-preload"])],
                stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.STDOUT,
                env=self.env, pass_fds=(theirs.fileno(),), start_new_session=True)
        finally:
            theirs.close()
        self.sock = ours
        doc = self._answer(READY_S, "import TensorFlow")
        self.preimported_s = float(doc["ready"])

    def _answer(self, within: float, what: str) -> dict[str, Any]:
        assert self.sock is not None
        self.sock.settimeout(within)
        buf = b""
        try:
            while b"\n" not in buf:
                data = self.sock.recv(1 << 16)
                if not data:
                    raise StarterError(f"the starter ended before it could {what}: "
                                       f"{self._tail()}")
                buf += data
        except TimeoutError:
            raise StarterError(f"the starter did not {what} within {within:.0f} s") from None
        doc = json.loads(buf.partition(b"\n")[0])
        if "error" in doc:
            raise StarterError(f"the starter could not {what}: {doc['error']}")
        return dict(doc)

    def _tail(self) -> str:
        if self.log is None:
            return ""
        with open(self.log.name, "rb") as fh:
            return fh.read()[-2000:].decode(errors="replace").strip()

    def fork(self, cmd: Sequence[str], log: str, env: Mapping[str, str],
             pass_fds: Sequence[int]) -> Forked:
        """Ask the starter for ``cmd``'s child; StarterError (and this starter broken)
        when it cannot."""
        with self.lock:
            if self.broken:
                raise StarterError(self.broken)
            try:
                if self.proc is None:
                    self._start()
                assert self.sock is not None
                req = {"argv": list(cmd), "env": dict(env), "cwd": os.getcwd(), "log": log,
                       "fds": list(pass_fds)}
                self.sock.settimeout(FORK_S)
                socket.send_fds(self.sock, [json.dumps(req).encode() + b"\n"],
                                list(pass_fds))
                return Forked(int(self._answer(FORK_S, "fork a child")["pid"]), cmd)
            except (OSError, ValueError, KeyError, StarterError) as exc:
                pid = self.proc.pid if self.proc else None
                self.broken = f"the starter (pid {pid}) cannot fork: {exc}"
                self.close()
                raise StarterError(self.broken) from exc
            except BaseException:
                # Interrupted halfway (the launcher's callers defer Ctrl-C around a
                # start, so only a direct caller sees this): its state is unknown.
                self.broken = "the starter was interrupted while it started or forked"
                self.close()
                raise

    def close(self) -> None:
        if self.sock is not None:
            with contextlib.suppress(OSError):
                self.sock.close()
            self.sock = None
        if self.proc is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=5)
        if self.log is not None:
            self.log.close()
            self.log = None


_starters: dict[tuple[tuple[str, str], ...], _Starter] = {}
_subreaper: list[bool] = []


def _import_env(env: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """The part of ``env`` a starter must have been started with."""
    return tuple(sorted((k, v) for k, v in env.items()
                        if k not in PER_TASK and not k.startswith(PER_TASK_PREFIX)))


def _become_subreaper() -> bool:
    if not _subreaper:
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            _subreaper.append(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)
        except (OSError, AttributeError):
            _subreaper.append(False)
    return _subreaper[0]


def starter_lane(specs: Sequence[RunSpec]) -> bool:
    """Whether ``specs`` train in the lane a starter imported: TensorFlow, Keras 3
    (``Lane.prestarted_keras``)."""
    return bool(specs) and all(s.keras in LANES.get(s.backend).prestarted_keras
                               for s in specs)


def forkable(cmd: Sequence[str], env: Mapping[str, str], *, lane_ok: bool) -> bool:
    """Whether ``cmd`` (``python -m module ...``) may be forked from a starter."""
    if os.environ.get(PRESTART_VAR, "1") == "0" or env.get(PRESTART_VAR, "1") == "0":
        return False
    if not lane_ok or len(cmd) < 3 or cmd[0] != sys.executable or cmd[1] != "-m":
        return False
    if not cmd[2].startswith("bench.child") or cmd[2] == STARTER_MODULE:
        return False
    hw = detect()
    return not (hw.gpus or hw.machine_gpus or hw.tpu) and sys.platform == "linux"


def start_child(cmd: Sequence[str], *, log: IO[bytes], env: Mapping[str, str],
                pass_fds: Sequence[int] = (), lane_ok: bool = False) -> ChildProcess:
    """``cmd`` started in a session of its own, output to ``log``, stdin empty: forked
    from a pre-imported starter where ``forkable``, else by ``subprocess.Popen``."""
    if forkable(cmd, env, lane_ok=lane_ok) and _become_subreaper():
        key = _import_env(env)
        starter = _starters.get(key)
        if starter is None:
            while len(_starters) >= MAX_STARTERS:  # the oldest goes: its memory back
                _starters.pop(next(iter(_starters))).close()
            starter = _starters[key] = _Starter(dict(key))
        try:
            return starter.fork(cmd, os.path.abspath(log.name), env, pass_fds)
        except StarterError as exc:
            if not starter.said:  # said once; the children start afresh from here on
                starter.said = True
                print(f"stratbench: child processes start afresh from now on: {exc}",
                      file=sys.stderr, flush=True)
    return subprocess.Popen(list(cmd), stdout=log, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, env=dict(env), pass_fds=tuple(pass_fds),
                            start_new_session=True)


def starters_status() -> list[dict[str, Any]]:
    """Each starter of this process: its pid, import time and whether it broke (why)."""
    return [{"pid": s.proc.pid if s.proc else None, "preimported_s": s.preimported_s,
             "broken": s.broken} for s in _starters.values()]


@atexit.register
def close_starters() -> None:
    """End every starter (they also end with this process: ``PR_SET_PDEATHSIG``)."""
    for starter in _starters.values():
        starter.close()
    _starters.clear()
