"""An arms session with multi-process members: the arms' process and each member's
worker processes take turns, window by window.

A configuration that trains in several processes (MultiWorkerMirrored: one worker
process a device) cannot be an arm of the in-process configurations' process. Run on
its own, minutes away from the arms' session, its comparison with them carries the
machine's drift between the two: the CNN's sessions at batch 64 moved 8-9% from one to
the next, every arm alike, and the comparison then waited on Welch's interval over a
few runs ("about 50 runs each would settle it"). Here the member's workers live beside
the arms' process for the whole session. Each round gives every arm one window (the
arms' process takes one turn a window, its arms in its own order) and each member one
(all its workers at once: they step together), the parties in an order that is random
and reversed every other round (``round_orders``). Window r of a member and window r
of an arm ran seconds apart, so their ratio is free of the drift. To the reports the
member is an arm of the session (``RunResult.interleaved``, the same session), its
comparisons settled as pairs; its own processes' luck stays in the session's
statistic, as an arm's build does.

The arms' process rebuilds its arms inside its own turns; a member builds once (its
workers must agree on everything they do). After the rounds every party in turn gets
end of file on its turns pipe and does its summaries and profiles alone. A member that
fails, hangs or dies is killed and recorded failed and the arms go on; the arms'
process failing ends the session, every configuration recording why. Every wait has a
deadline. Parent side: no TensorFlow.

Several sessions can be measured together (``run_sessions``): their processes start at
once, so that their start-ups, mostly one core's work each, overlap, and then every
party of every session takes its turns in the same rounds. Each session keeps its own
processes and session id; one whose arms' process fails ends alone.
"""

from __future__ import annotations

import contextlib
import random
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.env import now_iso
from bench.hardware import Hardware, detect
from bench.launch.arms import (
    arm_result,
    arms_task,
    check_arms,
    check_session,
    shareable_reason,
    write_arms,
)
from bench.launch.interrupts import interrupts_deferred
from bench.launch.launcher import (
    _combine,
    _Run,
    cluster_configs,
    make_result,
    unsupported_result,
)
from bench.launch.liveness import all_hung
from bench.launch.pacing import Paced, Stop, give_turn, hear, start_paced
from bench.launch.prestart import starter_lane
from bench.matrix import round_orders
from bench.results.pairs import builds_of
from bench.results.payload import TaskReport, read_arm_report, read_report, windows_name
from bench.results.schema import Interleaving, RunResult
from bench.spec import RunSpec
from bench.strategies import STRATEGIES

# A turn is one window, bounded by its spec's max_seconds (a rebuild of the arms comes
# inside the arms' turn): this many windows' time plus the allowance means a hang.
TURN_FACTOR = 10.0
TURN_ALLOWANCE_S = 60.0
# A session given a time for its windows to end by (``run_sessions``' ``windows_until``)
# still measures this many rounds: two give its rounds' variance, and its builds were
# paid for.
MIN_ROUNDS = 2


# Sessions a sweep on CPUs measures together (``run_sessions``): the first two of the
# opening's and of each answer, and the budget's next sessions two at a time. Start-ups
# run mostly on one core (two ResNet50 sessions reached their first windows at 25-27 s
# side by side, one alone at 25 s; a CNN session's arms at 6.8 s against 6.1 s); three
# ResNet50 sessions took 40-46 s, and the first sessions run before any is priced.
CPU_TOGETHER = 2


def together_on(hw: Hardware) -> int:
    """How many sessions a sweep on ``hw`` measures together: on GPUs one (a process
    waiting for its turn keeps its GPU memory), else ``CPU_TOGETHER``."""
    return 1 if hw.gpus else CPU_TOGETHER


class SessionError(ValueError):
    """The configurations cannot be measured as one session (the message says why)."""


@dataclass
class _Party:
    """The arms' process (``windows`` turns a round) or one member's workers (one)."""

    label: str
    indices: list[int]  # the specs it measures
    windows: int  # turns a round: one a window
    window_s: float  # the longest window it measures (max_seconds)
    is_arms: bool = False  # its failure ends its session
    procs: list[Paced] = field(default_factory=list)
    failure: Stop | None = None
    arms_party: _Party | None = None  # a member's session's arms
    members: list[_Party] = field(default_factory=list)  # the arms' session's members

    @property
    def live(self) -> bool:
        """Neither it nor, for a member, its session's arms' process has failed."""
        return self.failure is None and (self.arms_party is None or self.arms_party.live)

    def who(self, p: Paced) -> str:
        return f"{self.label}: process {p.proc.task.name}"

    def hear(self, deadline: float, what: str, *, starting: bool = False) -> list[bytes]:
        """Each process's next word; Stop when one dies or says nothing by ``deadline``
        (``starting``: or shows no progress in time, ``pacing.hear``)."""
        return [hear(p, self.who(p), deadline, what, starting=starting, peers=self.procs)
                for p in self.procs]

    def turn(self, deadline: float) -> list[bytes]:
        """One window: every process of the party at once, then each one's answer."""
        for p in self.procs:
            give_turn(p, self.who(p))
        return self.hear(deadline, "finish a window")

    def finish(self, deadline: float) -> None:
        """End of file on every turns pipe, then wait for every process to exit: for as
        long as the party shows signs of life (its summaries, peak probes and profiles
        say a phase each; bench.launch.liveness), ``deadline`` at most. Each process
        wrote its arms' windows first, so a Stop here loses none of them."""
        now = time.monotonic()
        for p in self.procs:
            p.close_turns()
            if p.watch is not None:
                p.watch.alive(now)  # its turns' waits were no silence
        for p in self.procs:
            while p.proc.proc.poll() is None:
                now = time.monotonic()
                if now >= deadline:
                    raise Stop("timeout", f"{self.who(p)} did not finish its peak probe and "
                                          f"profile by the session's deadline",
                               windows_done=True)
                live = [q.watch for q in self.procs
                        if q.watch is not None and q.proc.proc.poll() is None]
                if all_hung(live, now):
                    assert p.watch is not None
                    raise Stop("timeout", f"{self.who(p)} hung after its last window "
                                          f"({p.watch.why(now)})", windows_done=True)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    p.proc.proc.wait(timeout=min(1.0, max(0.01, deadline - now)))

    def close(self) -> None:
        for p in self.procs:
            p.close()

    def run(self) -> _Run:
        return _Run(self.procs[0].run_dir if self.procs else Path("."),
                    [p.proc for p in self.procs])


def members_of(specs: Sequence[RunSpec]) -> list[int]:
    """The indices of ``specs`` that join a session as members in processes of their
    own; raises SessionError for a spec that can be neither an arm nor a member."""
    members = []
    for i, spec in enumerate(specs):
        if shareable_reason(spec) is None:
            continue
        why = shareable_reason(spec, member=True)
        if why is not None:
            raise SessionError(f"{spec.label()} cannot join an arms session: {why}")
        members.append(i)
    return members


@dataclass(frozen=True)
class Copy:
    """One of the sessions ``run_sessions`` measures together: its configurations,
    where its log goes, its seed (its builds' order; the first session's also orders
    the rounds) and where each of ``specs`` is profiled (as ``run_session``'s
    ``profile_dirs``)."""

    specs: Sequence[RunSpec]
    log_path: Path
    seed: int = 0
    profile_dirs: Sequence[Path | None] = ()


def run_session(specs: Sequence[RunSpec], log_path: Path, *, rounds: int, seed: int = 0,
                rewarm_calls: int = 1, timeout_s: float | None = None,
                profile_dirs: Sequence[Path | None] = (), profile_steps: int = 0,
                builds: int = 1, rebuild_share: float | None = None) -> list[RunResult]:
    """Measure ``specs`` as one session: the in-process ones as arms of one process,
    each multi-process one (``members_of``) in its own processes, all taking turns
    window by window, ``rounds`` windows each. Arguments as ``run_interleaved``'s; a
    member's workers log beside ``log_path`` (``<stem>.m<i>.<task>.log``).

    Returns one result per spec, in order; never raises for a failed run.
    """
    return run_sessions([Copy(specs, log_path, seed, profile_dirs)], rounds=rounds,
                        rewarm_calls=rewarm_calls, timeout_s=timeout_s,
                        profile_steps=profile_steps, builds=builds,
                        rebuild_share=rebuild_share)[0]


def run_sessions(copies: Sequence[Copy], *, rounds: int, rewarm_calls: int = 1,
                 timeout_s: float | None = None, profile_steps: int = 0, builds: int = 1,
                 rebuild_share: float | None = None, windows_until: float | None = None
                 ) -> list[list[RunResult]]:
    """Measure ``len(copies)`` sessions at once, each as ``run_session`` measures one
    (the same answer's or others'): every session's processes start together and build
    side by side, then all of them take turns window by window, so that no window of
    one session overlaps another's. Each session keeps its own processes, builds and
    session id (its own pairs); ``Interleaving.together`` says how many were measured
    together. ``timeout_s`` bounds each session (None: its configurations' sum).
    ``windows_until`` (``time.monotonic``; None: no such time): no round starts that
    would end after it, as the longest round so far took, once ``MIN_ROUNDS`` are
    measured (a sweep's budget: a model whose windows are longer than its preset
    planned does not overrun it); ``Interleaving.rounds`` says how many ran.

    Why: a process's start-up (import, tracing, graph optimisation) runs mostly on
    one core. Two ResNet50 sessions started together on 2 cores reached their first
    windows at 25-27 s, one alone at 25 s; three at 40-46 s. A session whose arms'
    process fails ends alone (its members killed); the others go on. On GPUs a
    process waiting for its turn keeps its memory: there a session runs alone.

    Returns one list of results per copy, each in the order of its ``specs``; never
    raises for a failed run.
    """
    if not copies:
        raise SessionError("no session to measure. Received: copies=[]")
    hw = detect()
    if len(copies) > 1 and hw.gpus:
        raise SessionError(f"{len(copies)} sessions measured together: on GPUs a process "
                           f"waiting for its turn keeps its GPU memory, so each session "
                           f"runs alone")
    sessions = [_Session.plan(copy, rounds, hw, f" of session {c + 1}" if len(copies) > 1
                              else "") for c, copy in enumerate(copies)]
    timeout = sum(timeout_s if timeout_s is not None else s.timeout_s for s in sessions)
    started = now_iso()
    t0 = time.monotonic()
    deadline = t0 + timeout
    live = [s for s in sessions if s.arms.indices]
    parties = [p for s in live for p in s.parties]
    with tempfile.TemporaryDirectory(prefix="stratbench-session-") as tmp:
        root = Path(tmp)
        try:
            try:
                for c, s in enumerate(live):
                    s.start(root / f"s{c}", builds=builds,
                            rebuild_share=rebuild_share, rewarm_calls=rewarm_calls,
                            profile_steps=profile_steps, hw=hw)
                # Building and warming every arm takes what it takes (eight ResNet50
                # arms: minutes): a party is hung when its progress stops, and the
                # session's deadline bounds one that never gets ready.
                for party in parties:
                    _attempt(party, lambda p: _expect(
                        p.hear(deadline, "build and warm up", starting=True), b"R", p.label))
                done = _conduct(parties, rounds, copies[0].seed, deadline, windows_until)
                for s in live:
                    s.rounds = done
                for party in parties:  # one at a time: each finishes alone
                    _attempt(party, lambda p: p.finish(deadline))
            finally:
                for party in parties:
                    party.close()
                    party.run().kill_all()
        except BaseException:
            for party in parties:
                party.run().kill_all()
            raise
        wall = time.monotonic() - t0
        return [s.results(started, wall, len(copies), timeout) for s in sessions]


@dataclass
class _Session:
    """One of the sessions measured together: its configurations (``sized``: with the
    session's rounds), which are arms and which members, those that cannot run here
    (``pre``), its id, and its parties (``arms``, whose ``members`` are the members')."""

    id: str
    copy: Copy
    sized: list[RunSpec]
    order: list[int]  # arms, then members: the labels' order in Interleaving.arms
    pre: dict[int, RunResult]
    arms: _Party
    rounds: int

    @classmethod
    def plan(cls, copy: Copy, rounds: int, hw: Hardware, which: str) -> _Session:
        """Check ``copy``'s configurations (SessionError, ArmsError) and lay out its
        parties; an unsupported configuration gets its result and no process."""
        specs = list(copy.specs)
        members = members_of(specs)
        arms = [i for i in range(len(specs)) if i not in members]
        if not arms:
            raise SessionError("a session needs an in-process configuration for its arms' "
                               "process. Received: " + ", ".join(s.label() for s in specs))
        check_arms([specs[i] for i in arms])
        check_session(specs, rounds, copy.profile_dirs)
        pre = {i: r for i, spec in enumerate(specs)
               if (r := unsupported_result(spec, hw)) is not None}
        arms = [i for i in arms if i not in pre]
        members = [i for i in members if i not in pre]
        sized = [s.replace(repeats=rounds) for s in specs]
        party = _Party(f"the arms' process{which}", arms, len(arms),
                       max((sized[i].max_seconds for i in arms), default=0.0), is_arms=True)
        party.members = [_Party(sized[i].label(), [i], 1, sized[i].max_seconds,
                                arms_party=party) for i in members]
        return cls(uuid.uuid4().hex[:12], copy, sized, [*arms, *members], pre, party, rounds)

    @property
    def parties(self) -> list[_Party]:
        return [self.arms, *self.arms.members]

    @property
    def timeout_s(self) -> float:
        """Its configurations' timeouts, summed (each runs in its own windows)."""
        return sum(self.sized[i].timeout_s for i in self.order)

    def start(self, root: Path, *, builds: int, rebuild_share: float | None,
              rewarm_calls: int, profile_steps: int, hw: Hardware) -> None:
        """Start its arms' process and its members' workers, each logging beside its
        log."""
        log, given = self.copy.log_path, self.copy.profile_dirs
        log.parent.mkdir(parents=True, exist_ok=True)
        dirs = [Path(d) if (given and (d := given[i])) else None
                for i in range(len(self.sized))]
        _start_arms(self.arms, [self.sized[i] for i in self.arms.indices], root / "arms", log,
                    rounds=self.rounds, seed=self.copy.seed, builds=builds,
                    rebuild_share=rebuild_share, rewarm_calls=rewarm_calls,
                    dirs=[dirs[i] for i in self.arms.indices], profile_steps=profile_steps,
                    hw=hw)
        for m, party in enumerate(self.arms.members):
            i = party.indices[0]
            _start_member(party, self.sized[i], root / f"m{m}", log.with_name(f"{log.stem}.m{m}"),
                          rounds=self.rounds, seed=self.copy.seed, rewarm_calls=rewarm_calls,
                          profile_dir=dirs[i], profile_steps=profile_steps, hw=hw)

    def results(self, started: str, wall: float, together: int, timeout: float
                ) -> list[RunResult]:
        """One result per configuration, in its ``specs``' order."""
        specs = list(self.copy.specs)
        results = dict(self.pre)
        if not self.arms.indices:
            return [results.get(i) or make_result(specs[i], "unsupported", "no in-process "
                                                  "configuration of its session can run here")
                    for i in range(len(specs))]
        info = {"timeout_s": timeout, "log": str(self.copy.log_path), "session": self.id,
                "tasks": [{"task": p.proc.task.name, "pid": p.proc.proc.pid,
                           "returncode": p.proc.proc.returncode, "log": str(p.proc.log)}
                          for party in self.parties for p in party.procs]}
        processes = sum(len(party.procs) for party in self.parties)
        labels = [self.sized[i].label() for i in self.order]
        for party in self.parties:
            for i, result in zip(party.indices, _results(party, self.arms, specs, started,
                                                         wall, info), strict=True):
                result.interleaved = Interleaving(
                    session=self.id, arms=labels, arm=self.order.index(i),
                    rounds=self.rounds, seed=self.copy.seed, processes=processes,
                    builds=max(1, len(builds_of(result))), together=together)
                results[i] = result
        return [results[i] for i in range(len(specs))]


def _attempt(party: _Party, step: Callable[[_Party], None]) -> None:
    """Run ``step(party)`` for a live party. A failure is recorded and the party's
    processes killed; the arms' failure ends its session (its members killed too),
    and every other session goes on."""
    if not party.live:
        return
    try:
        step(party)
    except Stop as stop:
        party.failure = stop
        party.run().dump_stacks()
        party.run().kill_all()
        for member in party.members:
            member.run().kill_all()


def _expect(words: list[bytes], expected: bytes, label: str) -> None:
    if any(w != expected for w in words):
        raise Stop("failed", f"{label}: said {b''.join(words)!r} where {expected!r} was "
                             f"expected")


def _conduct(parties: list[_Party], rounds: int, seed: int, deadline: float,
             until: float | None = None, clock: Callable[[], float] = time.monotonic
             ) -> int:
    """The rounds: a slot per arm (the arms' process's turns) and per member, in an
    order random and reversed every other round. After ``MIN_ROUNDS``, none starts
    that would end after ``until`` (``clock`` time; None: every one runs), as the
    longest so far took; the processes then see their rounds end as after the last.
    Returns the rounds measured."""
    slots = [party for party in parties for _ in range(party.windows)]
    done, longest = 0, 0.0
    for order in round_orders(len(slots), rounds, random.Random(seed + 1)):
        start = clock()
        if until is not None and done >= MIN_ROUNDS and start + longest > until:
            break
        for s in order:
            _attempt(slots[s], lambda p: _window(p, deadline))
        longest = max(longest, clock() - start)
        done += 1
    return done


def _window(party: _Party, deadline: float) -> None:
    """One turn of ``party``. An arm that failed answers "x" and its process goes on
    with the others; a member's worker that says so takes the member out."""
    turn_s = TURN_FACTOR * party.window_s + TURN_ALLOWANCE_S
    words = party.turn(min(deadline, time.monotonic() + turn_s))
    if not party.is_arms and b"x" in words:
        raise Stop("failed", f"{party.label}: its window failed")


def _start_arms(party: _Party, specs: Sequence[RunSpec], run_dir: Path, log: Path, *,
                rounds: int, seed: int, builds: int, rebuild_share: float | None,
                rewarm_calls: int, dirs: Sequence[Path | None], profile_steps: int,
                hw: Hardware) -> None:
    arms = write_arms(run_dir, specs, rounds=rounds, seed=seed, rewarm_calls=rewarm_calls,
                      builds=builds, rebuild_share=rebuild_share, dirs=dirs,
                      profile_steps=profile_steps)
    with interrupts_deferred():  # on the party's list before a Ctrl-C can land
        party.procs.append(start_paced(arms_task(specs, hw), arms, run_dir, log, hw,
                                       lane_ok=starter_lane(specs)))


def _start_member(party: _Party, spec: RunSpec, run_dir: Path, log_stem: Path, *,
                  rounds: int, seed: int, rewarm_calls: int, profile_dir: Path | None,
                  profile_steps: int, hw: Hardware) -> None:
    """Start a member's workers, each a paced process of its own with one arm: its
    share of the spec (``local_spec``), one build. Workers that step together make no
    re-warm calls (each would decide them on its own clock); a member of one process
    (another framework's lane) re-warms as the arms do."""
    factory = STRATEGIES.get(spec.strategy)
    tasks = factory.plan(spec, hw)
    rewarm = rewarm_calls if len(tasks) == 1 else 0
    for task, tf_config in zip(tasks, cluster_configs(tasks), strict=True):
        where = profile_dir / task.name if profile_dir is not None else None
        arms = write_arms(run_dir / task.name, [factory.local_spec(spec, task)],
                          rounds=rounds, seed=seed, rewarm_calls=rewarm, dirs=[where],
                          profile_steps=profile_steps if where else 0)
        log = log_stem.with_name(f"{log_stem.name}.{task.name}.log")
        with interrupts_deferred():
            party.procs.append(start_paced(task, arms, run_dir / task.name, log, hw,
                                           lane_ok=starter_lane([spec]),
                                           tf_config=tf_config))


def _late(result: RunResult, failure: Stop | None) -> RunResult:
    """``result`` with why its process did not finish after its windows, if it did not."""
    if failure is not None and failure.windows_done and result.status == "ok":
        result.reason = "; ".join(filter(None, [result.reason, failure.reason]))
    return result


def _results(party: _Party, arms_party: _Party, specs: Sequence[RunSpec], started: str,
             wall: float, info: dict[str, Any]) -> list[RunResult]:
    """The results of one party's configurations."""
    run = party.run()
    failure = party.failure or arms_party.failure
    blame = "" if party.failure else "its session's arms' process: "
    why = (failure.status, f"{blame}{failure.reason}\n--- log tail ---\n"
                           f"{(party if party.failure else arms_party).run().tails()}") \
        if failure is not None else None
    if failure is not None and failure.windows_done and failure.status == "timeout":
        # After the last window: the arms' windows stand, without their MFU or profile.
        why = None
    if party is arms_party:
        p = party.procs[0] if party.procs else None
        own = (run.report(p.proc) or read_report(p.run_dir, windows_name(-1))) if p else None
        return [_late(arm_result(specs[i], why, own,
                                 read_arm_report(p.run_dir, k) if p else None, run.tails,
                                 started_at=started, wall_s=wall, launcher=info), failure)
                for k, i in enumerate(party.indices)]
    spec = specs[party.indices[0]]
    main = next((p for p in party.procs if p.proc.task.main), None)
    if main is None:
        return [make_result(spec, why[0] if why else "failed",
                            why[1] if why else "its workers never started",
                            started_at=started, wall_s=wall, launcher=info)]
    arm_reports: dict[str, TaskReport | None] = {
        p.proc.task.name: read_arm_report(p.run_dir, 0) for p in party.procs}
    own = read_report(main.run_dir, main.proc.task.name) or \
        read_report(main.run_dir, windows_name(-1))
    result = _late(arm_result(spec, why, own, arm_reports[main.proc.task.name], run.tails,
                              started_at=started, wall_s=wall, launcher=info), failure)
    if result.figures is not None:
        result.figures = _combine(spec, result.figures, [p.proc for p in party.procs],
                                  arm_reports)
    return [result]
