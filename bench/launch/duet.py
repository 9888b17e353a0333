"""Two live processes, one a side, taking turns window by window (a "duet").

Sides that differ in environment variables or interpreter cannot be arms of one
process: TensorFlow reads its variables at start-up. Run each in a process of its
own, one after the other, and every pair holds whatever the machine did between
them (a neighbour's load over seconds) besides each process's own luck. A duet
starts both processes at once (their start-ups overlap: nothing is measured yet),
lets each build and warm up, then gives the turn back and forth: one window of one
side while the other blocks on a pipe, spending no CPU, then one of the other, in
an order that is random and reversed every other round (``round_orders``). Window
r of the two sides ran a fraction of a second apart, so the machine's drift falls
on both; each process's own luck (its layout, its kernels) stays in the session's
statistic, which is why the A/B decision treats the duets, not the windows, as its
pairs.

The child is ``bench.child.arms`` with one arm and ``--pace``. Every wait has a
deadline; a side that fails, hangs or dies ends the duet with both processes killed
and both results saying why. Parent side: no TensorFlow.
"""

from __future__ import annotations

import random
import subprocess
import tempfile
import time
import uuid
from collections.abc import Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, replace
from pathlib import Path

from bench.env import now_iso
from bench.hardware import Hardware, detect
from bench.launch.arms import arm_result, arms_task, check_arms, write_arms
from bench.launch.interrupts import interrupts_deferred
from bench.launch.launcher import (
    _Run,
    make_result,
    unsupported_result,
)
from bench.launch.pacing import Paced, Stop, give_turn, hear, start_paced
from bench.matrix import round_orders
from bench.results.payload import arm_name, read_report
from bench.results.schema import Interleaving, RunResult
from bench.spec import RunSpec

SIDES = 2
# A window is bounded by its spec's max_seconds (and max_steps); a turn that takes
# this many times longer, plus the allowance, means the process is stuck.
TURN_FACTOR = 10.0
TURN_ALLOWANCE_S = 30.0
# After the last window each process summarises and measures its peak for the MFU.
FINISH_S = 120.0


class DuetError(ValueError):
    """The configurations cannot be sides of a duet (the message names which and why)."""


class _Stop(Exception):
    """The duet ends early: (status, reason, the side to blame)."""

    def __init__(self, status: str, reason: str, culprit: int) -> None:
        super().__init__(reason)
        self.status, self.reason, self.culprit = status, reason, culprit


@dataclass
class _Side:
    index: int
    spec: RunSpec
    run_dir: Path
    log: Path
    paced: Paced | None = None

    @property
    def who(self) -> str:
        return f"side {self.index} ({self.spec.label()})"


def duet_reason(spec: RunSpec) -> str | None:
    """Why ``spec`` cannot be a side of a duet (None: it can): the same rule as an arm."""
    try:
        check_arms([spec], alone=True)
    except ValueError as exc:
        return str(exc)
    return None


def _hear(side: _Side, deadline: float, what: str, *, starting: bool = False) -> bytes:
    """The side's next word, or _Stop when it dies or says nothing by ``deadline``
    (``starting``: or shows no progress in time, ``pacing.hear``)."""
    assert side.paced is not None
    try:
        return hear(side.paced, side.who, deadline, what, starting=starting)
    except Stop as stop:
        raise _Stop(stop.status, stop.reason, side.index) from None


def _give_turn(side: _Side) -> None:
    """Tell the side to measure its next window; _Stop when its process has gone."""
    assert side.paced is not None
    try:
        give_turn(side.paced, side.who)
    except Stop as stop:
        raise _Stop(stop.status, stop.reason, side.index) from None


def run_duet(specs: Sequence[RunSpec], log_paths: Sequence[Path], *, rounds: int,
             seed: int = 0, envs: Sequence[Mapping[str, str] | None] = (None, None),
             pythons: Sequence[str | None] = (None, None), rewarm_calls: int = 1,
             timeout_s: float | None = None) -> list[RunResult]:
    """Measure ``specs[0]`` and ``specs[1]`` in two live processes taking turns,
    ``rounds`` windows each; side i starts under ``pythons[i]`` with ``envs[i]``.

    Returns one result per side, in order; never raises for a failed run (both then
    carry the reason: a duet is measured whole or not at all).
    """
    _check_duet(specs, log_paths, rounds)
    hw = detect()
    pre = [unsupported_result(s, hw) for s in specs]
    if any(pre):
        why = "; ".join(r.reason or "" for r in pre if r is not None)
        return [r or make_result(s, "unsupported", f"its duet partner cannot run: {why}")
                for r, s in zip(pre, specs, strict=True)]
    sides_specs = [s.replace(repeats=rounds) for s in specs]
    timeout = timeout_s if timeout_s is not None else max(s.timeout_s for s in sides_specs)
    session, started = uuid.uuid4().hex[:12], now_iso()
    t0 = time.monotonic()
    with ExitStack() as stack:
        sides = []
        for i, spec in enumerate(sides_specs):
            run_dir = Path(stack.enter_context(
                tempfile.TemporaryDirectory(prefix=f"stratbench-duet{i}-")))
            log_paths[i].parent.mkdir(parents=True, exist_ok=True)
            sides.append(_Side(i, spec, run_dir, log_paths[i]))
        failure = _play(sides, rounds=rounds, seed=seed, rewarm_calls=rewarm_calls, envs=envs,
                        pythons=pythons, hw=hw, deadline=t0 + timeout)
        wall = time.monotonic() - t0
        runs = {s.index: _Run(s.run_dir, [s.paced.proc]) for s in sides if s.paced is not None}
        interleaving = Interleaving(session=session, arms=[s.label() for s in sides_specs],
                                    arm=0, rounds=rounds, seed=seed, processes=SIDES)
        return [_side_result(side, specs[side.index], failure, runs,
                             replace(interleaving, arm=side.index), timeout=timeout,
                             started=started, wall=wall) for side in sides]


def _check_duet(specs: Sequence[RunSpec], log_paths: Sequence[Path], rounds: int) -> None:
    """DuetError unless ``specs`` can be the two sides of a duet of ``rounds`` rounds."""
    if len(specs) != SIDES or len(log_paths) != SIDES:
        raise DuetError(f"a duet has two sides. Received: {len(specs)} configurations, "
                        f"{len(log_paths)} logs")
    if rounds < 2:
        raise DuetError(f"a duet needs at least 2 rounds. Received: rounds={rounds}")
    for spec in specs:
        why = duet_reason(spec)
        if why:
            raise DuetError(why)


def _play(sides: list[_Side], *, rounds: int, seed: int, rewarm_calls: int,
          envs: Sequence[Mapping[str, str] | None], pythons: Sequence[str | None],
          hw: Hardware, deadline: float) -> _Stop | None:
    """Start both sides, take the turns, let them finish; what ended the duet early
    (None: nothing did). Both processes are gone on return."""
    failure: _Stop | None = None
    try:
        for side in sides:
            _start(side, seed, rewarm_calls, envs[side.index], pythons[side.index], hw)
        # A side is hung when its build stops making progress; the duet's own
        # timeout bounds one that keeps going and never gets ready.
        for side in sides:
            if _hear(side, deadline, "build and warm up", starting=True) != b"R":
                raise _Stop("failed", f"side {side.index} said something other than "
                                      f"ready", side.index)
        _take_turns(sides, rounds, seed, deadline)
        _finish(sides)
    except _Stop as stop:
        failure = stop
        _Run(sides[0].run_dir, [s.paced.proc for s in sides if s.paced]).dump_stacks()
    finally:
        for side in sides:
            if side.paced is not None:
                side.paced.close()
        run = _Run(sides[0].run_dir, [s.paced.proc for s in sides if s.paced])
        run.kill_all()
    return failure


def _take_turns(sides: list[_Side], rounds: int, seed: int, deadline: float) -> None:
    """One window of each side per round, in ``round_orders``' order; _Stop when a side
    fails its window or does not finish it in time."""
    for order in round_orders(SIDES, rounds, random.Random(seed)):
        for i in order:
            side = sides[i]
            _give_turn(side)
            turn_s = TURN_FACTOR * side.spec.max_seconds + TURN_ALLOWANCE_S
            word = _hear(side, min(deadline, time.monotonic() + turn_s), "finish a window")
            if word != b"d":
                raise _Stop("failed", f"side {side.index} ({side.spec.label()}) "
                                      f"failed during its window", side.index)


def _finish(sides: list[_Side]) -> None:
    """End the rounds (end of file on the turns) and wait for both processes to finish
    their summaries; _Stop for one that does not within ``FINISH_S``."""
    for side in sides:  # end of file on the turns: the rounds are over
        assert side.paced is not None
        side.paced.close_turns()
    for side in sides:
        assert side.paced is not None
        try:
            side.paced.proc.proc.wait(timeout=FINISH_S)
        except subprocess.TimeoutExpired:
            raise _Stop("timeout", f"side {side.index} did not finish within "
                                   f"{FINISH_S:g} s of its last window",
                        side.index) from None


def _side_result(side: _Side, spec: RunSpec, failure: _Stop | None, runs: dict[int, _Run],
                 interleaving: Interleaving, *, timeout: float, started: str,
                 wall: float) -> RunResult:
    """``side``'s result (``spec``: as asked, before the duet's rounds were set), with
    the reason of the ``failure`` that ended the duet, if one did."""
    assert side.paced is not None
    proc = side.paced.proc
    own_run = runs[side.index]
    info = {"timeout_s": timeout, "log": str(side.log), "duet": interleaving.session,
            "tasks": [{"task": proc.task.name, "pid": proc.proc.pid,
                       "returncode": proc.proc.returncode, "log": str(side.log)}]}
    reason = None
    if failure is not None:
        blame = "" if failure.culprit == side.index else "its duet partner: "
        culprit = runs.get(failure.culprit, own_run)
        reason = (failure.status, f"{blame}{failure.reason}\n--- log tail ---\n"
                                  f"{culprit.tails()}")
    result = arm_result(spec, reason, own_run.report(proc),
                        read_report(side.run_dir, arm_name(0)), own_run.tails,
                        started_at=started, wall_s=wall, launcher=info)
    result.interleaved = interleaving
    return result


def _start(side: _Side, seed: int, rewarm_calls: int, env: Mapping[str, str] | None,
           python: str | None, hw: Hardware) -> None:
    """Start one side's process with its two pipes (the launcher keeps the other ends)."""
    arms = write_arms(side.run_dir, [side.spec], rounds=side.spec.repeats, seed=seed,
                      rewarm_calls=rewarm_calls)
    with interrupts_deferred():  # kept before a Ctrl-C can land
        side.paced = start_paced(arms_task([side.spec], hw), arms, side.run_dir, side.log,
                                 hw, env=env, python=python)
