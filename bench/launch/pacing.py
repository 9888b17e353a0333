"""The launcher's end of a paced ``bench.child.arms`` process (``--pace R,W``).

A paced process blocks on its turns pipe before each window and answers on its
answers pipe: ``R`` once built and warm, ``d`` after a window, ``x`` where its arm
failed. The duet (``bench.launch.duet``) and the session with multi-process members
(``bench.launch.session``) conduct such processes; this module starts one, gives it
a turn and hears its answer, every wait with a deadline. Parent side: no TensorFlow.
"""

from __future__ import annotations

import json
import os
import select
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.hardware import Hardware
from bench.launch.launcher import _Proc, child_command, child_env, startup_deadlines
from bench.launch.liveness import ProgressWatch, all_hung
from bench.launch.prestart import start_child
from bench.tasks import Task


class Stop(Exception):
    """A paced process failed, died or missed a deadline: the status and why."""

    def __init__(self, status: str, reason: str, *, windows_done: bool = False) -> None:
        super().__init__(reason)
        self.status, self.reason = status, reason
        # It came after the process's last window: what its windows measured stands.
        self.windows_done = windows_done


@dataclass
class Paced:
    """One paced process and the launcher's ends of its two pipes (-1 once closed)."""

    proc: _Proc
    run_dir: Path
    turn_w: int
    done_r: int
    # Its progress file, watched while it builds and warms up (``hear(..., starting=True)``).
    watch: ProgressWatch | None = field(default=None, repr=False)

    def close_turns(self) -> None:
        """End of file on the turns: the process ends its rounds and finishes."""
        if self.turn_w >= 0:
            os.close(self.turn_w)
            self.turn_w = -1

    def close(self) -> None:
        self.close_turns()
        if self.done_r >= 0:
            os.close(self.done_r)
            self.done_r = -1


def start_paced(task: Task, arms: Path, run_dir: Path, log: Path, hw: Hardware, *,
                tf_config: dict[str, Any] | None = None,
                env: Mapping[str, str] | None = None, python: str | None = None,
                lane_ok: bool = False) -> Paced:
    """Start ``bench.child.arms`` for ``task`` on ``arms``, paced through two pipes (the
    child holds one end of each; with ours of its ends closed, its death is our EOF).
    ``lane_ok``: its specs train in the lane a pre-imported starter holds, so it may
    be forked from one (``bench.launch.prestart.start_child``, which closes the
    starter's copies of the pipe ends: the child's death is still our EOF)."""
    turn_r, turn_w = os.pipe()
    done_r, done_w = os.pipe()
    cmd = child_command("bench.child.arms", "--arms", str(arms), "--run-dir", str(run_dir),
                        "--task", json.dumps(task.to_dict()), "--launch-ts",
                        repr(time.time()), "--pace", f"{turn_r},{done_w}", python=python)
    try:
        with open(log, "ab") as fh:
            proc = start_child(cmd, log=fh, pass_fds=(turn_r, done_w), lane_ok=lane_ok,
                               env={**child_env(task, tf_config, hw), **(env or {})})
    except BaseException:
        os.close(turn_w)
        os.close(done_r)
        raise
    finally:
        os.close(turn_r)
        os.close(done_w)
    return Paced(_Proc(task, proc, log), run_dir, turn_w, done_r,
                 ProgressWatch.of(run_dir, task.name, time.monotonic(), startup_deadlines(),
                                  pid=proc.pid))


def hear(p: Paced, who: str, deadline: float, what: str, *, starting: bool = False,
         peers: Sequence[Paced] = ()) -> bytes:
    """``p``'s next word; Stop when it dies or says nothing by ``deadline`` (``who``
    names it in the reason). ``starting``: ``p`` is building and warming up, and is
    also stopped as soon as it and every one of ``peers`` (the processes it waits on:
    its run's other workers) show no sign of life past their deadlines
    (``bench.launch.liveness``): the overall ``deadline`` then bounds only a process
    that keeps making progress."""
    while True:
        now = time.monotonic()
        left = deadline - now
        if left <= 0:
            raise Stop("timeout", f"{who} did not {what} in time")
        if starting and p.watch is not None and all_hung(
                [p.watch, *(q.watch for q in peers if q is not p and q.watch is not None
                            and q.proc.proc.poll() is None)], now):
            raise Stop("timeout", f"{who} did not {what}: hung ({p.watch.why(now)})")
        ready, _, _ = select.select([p.done_r], [], [], min(left, 1.0))
        if ready:
            word = os.read(p.done_r, 1)
            if word:
                return word
            p.proc.proc.wait(timeout=5)
            raise Stop("failed", f"{who} exited with code {p.proc.proc.returncode} "
                                 f"before it could {what}")


def give_turn(p: Paced, who: str) -> None:
    """Tell ``p`` to measure its next window; Stop when its process has gone (the pipe
    is then broken: a dead process must end its party, never raise past it)."""
    try:
        os.write(p.turn_w, b"g")
    except BrokenPipeError:
        p.proc.proc.wait(timeout=5)
        raise Stop("failed", f"{who} exited with code {p.proc.proc.returncode} before "
                             f"its window") from None
