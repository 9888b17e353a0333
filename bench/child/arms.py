"""Several in-process configurations ("arms") in one process, their windows interleaved.

    python -m bench.child.arms --arms ARMS.json --run-dir DIR --task TASK.json --launch-ts T

Comparing configurations run in separate processes puts each process's own luck
(its start-up, memory layout, the machine's drift between the processes) inside
the comparison. Here every arm is built once in one process, warmed up, and then
measured in rounds: each round runs one window of every arm, in an order that is
random and reversed in the next round, so that a trend over the session and the
position in a round fall on every arm alike. Window r of one arm and window r of
another ran seconds apart, so their ratio is a within-process pair.

The arms share the allocator, so each arm's device memory is its own share of it
(``memory.ArmMemory``: what it holds once built, plus its windows' peak above the use
at their start); the host's peak RSS is the process's and is left out. An arm's
start-up ("launch to first step") is the process's import and device set-up plus its
own build and first step, without the arms built before it. Only the custom loop of
in-process strategies can be an arm (the launcher checks).

ARMS.json holds ``{"specs": [...], "rounds": R, "builds": B, "rebuild_share": F,
"seed": S, "rewarm_calls": C,
"profile": {"dirs": [...], "steps": N}}``: after the rounds, arm i with a directory in
``dirs`` is profiled for up to N steps (a sweep's evidence), alone: the other arms
are idle then, so the profile shows this arm's step as its own process would.
The process leaves ``payload.arm<i>.json`` (arm i's ``TaskReport``) for every arm,
whatever happened to the others, then its own ``payload.<task>.json``; an arm
that fails is reported failed and leaves the rounds, the other arms go on.
``C`` untimed calls of an arm run before each of its windows whose call is short
(``rewarms``): the arm measured before it left its own weights in the caches, which
a call of a fraction of a millisecond feels and one of 50 ms does not.

``"builds": B`` (default 1) splits the rounds into at most B blocks and builds every
arm afresh before each block (``Window.build`` says which). An arm's level inside one
process depends on its build: two identical MLP arms differed by 4.5% (SD of their
log ratio over processes), by 1.3% (the windows' own noise) while the same builds
were measured again, and by 3.8% once rebuilt (``scripts.build_offset``). So the
process's statistic, the mean of its builds' (``bench.results.pairs.process_log_ratio``),
carries 1/B of that offset's variance. Rebuilding costs the arms' build and warm-up
again, so the process plans as many blocks as keep a rebuild within ``F`` (default
``REBUILD_SHARE``) of its smallest block's measuring (``planned_builds``, from the
first build's time), and rebuilds only while the last block measured still pays for
it (``rebuild_pays``): an MLP session makes 5 builds, a CNN's 1-2, a ResNet50's 26 s
of builds against 12 s of windows one.

``--pace R,W`` (two inherited pipe ends): the launcher paces the windows, so that
live processes take turns window by window: the two sides of an A/B comparison, each
its own environment or interpreter (``bench.launch.duet``), or a session's arms and a
multi-process configuration's workers (``bench.launch.session``). The process writes
``R`` on W once built and warm; before each window it blocks reading R (no CPU spent
while another process measures) and writes ``d`` on W when the window ends; an arm
that failed answers ``x``. A rebuild happens inside the turn of the block's first
window, so that no other process measures meanwhile. After the rounds the process
waits for one more turn, or end of file on R, before its summaries and profiles, so
that the launcher lets one process at a time do that work. End of file on R (the
launcher gone) also ends the rounds.

A multi-worker configuration (MultiWorkerMirrored: each worker process runs this
module with that one arm) windows on a step count its workers agree on, as in a run
of its own (``Trainer.agreed_window_steps``), and never decides anything on its own
clock that its peers must match: no re-warm calls, one build.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from bench.child.backends import lane_backend, simulated
from bench.child.backends.base import ArmsLane, Backend, DeviceSetup
from bench.child.main import (
    child_log,
    failure_report,
    finish_process,
    inject_fault,
    progress_log,
    start_process,
)
from bench.child.memory import ArmMemory
from bench.child.windows import (
    Rules,
    Warm,
    WindowRun,
    announce_slowdown,
    rewarms,
    run_window,
    summarize_runs,
    warm_up,
)
from bench.energy import energy_meter
from bench.errors import Unsupported
from bench.gpu_build import note_jit_kept
from bench.hardware import GpuRun, first_cards
from bench.matrix import block_rounds, round_orders
from bench.progress import beat
from bench.results.mfu import at_sustained_clock
from bench.results.payload import WINDOWS_ONLY, TaskReport, arm_name, windows_name
from bench.results.schema import Figures
from bench.spec import RunSpec
from bench.tasks import Task, gpu_run

# Rebuild the arms for another block only while their build and warm-up cost at most
# this share of a block's measuring time (the rest of the session's rounds then run
# on the builds at hand). The build offset of an A/A pair (3.3% SD: rebuilt blocks
# 3.55% against kept ones 1.37%, ``scripts.build_offset``) is as large as one round's
# window noise (about 3.6%), so another build removes more of a session's variance than
# its time spent on rounds would; but builds are not measuring, and at a whole block's
# time (share 1.0) a sweep measured 48% of its wall time, against 54-56% at half.
REBUILD_SHARE = 0.5


def rebuild_pays(set_up_s: float, block_s: float, share: float = REBUILD_SHARE) -> bool:
    """Whether building every arm again (``set_up_s``, as the last build took) costs
    at most ``share`` of measuring a block (``block_s``)."""
    return set_up_s <= share * block_s


def planned_builds(set_up_s: float, round_s: float, rounds: int, most: int,
                   share: float = REBUILD_SHARE) -> int:
    """How many blocks (builds) to split ``rounds`` into: the most, up to ``most``,
    whose smallest block measures (``round_s`` a round) at least ``set_up_s / share``,
    the time building every arm again takes; 1 when no split pays."""
    for builds in range(min(most, rounds // 2), 1, -1):
        if rebuild_pays(set_up_s, min(block_rounds(rounds, builds)) * round_s, share):
            return builds
    return 1


def multi_worker(trainer: Any) -> bool:
    """Whether ``trainer``'s replicas span several worker processes (their windows must
    end on a step count they agree on)."""
    return trainer is not None and trainer.local_replicas < trainer.replicas


@dataclass
class Arm:
    """One configuration of the session, its trainer once built, its windows.

    ``warm`` is its first build's (its start-up figures); ``current`` the build its
    windows run on now."""

    index: int
    spec: RunSpec
    memory: ArmMemory
    trainer: Any = None
    warm: Warm | None = None
    current: Warm | None = None
    call_s: float = 0.0  # one call, from its last window (0 before any: re-warmed)
    runs: list[WindowRun] = field(default_factory=list)
    report: TaskReport | None = None  # set once the arm failed (or at the end)

    @property
    def live(self) -> bool:
        return self.report is None


class Pacer:
    """Turns given by the launcher over two pipe ends (``--pace``); a process without
    one runs its rounds at once."""

    def __init__(self, read_fd: int, write_fd: int) -> None:
        self.read_fd, self.write_fd = read_fd, write_fd

    @classmethod
    def parse(cls, text: str) -> Pacer:
        """``"R,W"`` -> Pacer(R, W)."""
        read_fd, write_fd = (int(x) for x in text.split(","))
        return cls(read_fd, write_fd)

    def say(self, word: bytes) -> None:
        """One byte to the launcher: ``R`` ready, ``d`` window done, ``x`` arm failed."""
        os.write(self.write_fd, word)

    def wait_turn(self) -> bool:
        """Block until the launcher gives the turn; False when it has gone (EOF)."""
        return os.read(self.read_fd, 1) == b"g"


def _fail(arm: Arm, exc: BaseException) -> None:
    traceback.print_exc()
    arm.report = (TaskReport("unsupported", str(exc) or type(exc).__name__)
                  if isinstance(exc, Unsupported) else failure_report(exc))
    child_log(f"arm {arm.index} ({arm.spec.label()}) failed: {arm.report.reason}")


@dataclass
class _Session:
    """One process's arms and what they share: the lane that builds them, the process's
    phases, devices and environment, the GPU sampler, the random order, the launcher's
    turns (``pacer``) and how the windows run (``rewarm_calls``, ``slowdown``)."""

    task: Task
    run_dir: Path
    launch_ts: float
    say: Callable[[str], None]
    lane: ArmsLane
    phases: dict[str, float]
    devices: DeviceSetup
    env: dict[str, Any]
    gpu: GpuRun
    rng: random.Random
    arms: list[Arm]
    pacer: Pacer | None = None
    rewarm_calls: int = 0
    slowdown: float = 0.0

    @classmethod
    def start(cls, lane: ArmsLane, specs: list[RunSpec], task: Task, run_dir: Path, *,
              launch_ts: float, seed: int, pacer: Pacer | None, rewarm_calls: int
              ) -> _Session:
        """The process set up (its lane, devices, fingerprint), its arms not built yet."""
        say = progress_log(run_dir, task)
        # Every phase of the arms' build is a heartbeat: the launcher waits on progress,
        # not on the sum of the arms' builds (bench.launch.liveness).
        phases, devices, env, allocator = lane.start(task, say)
        gpu = gpu_run(task)  # one sampler for the process; each arm keeps its own windows'
        gpu.begin()
        env.update(gpu.environment())
        rng = random.Random(seed)
        arms = [Arm(i, s, ArmMemory(allocator)) for i, s in enumerate(specs)]
        return cls(task, run_dir, launch_ts, say, lane, phases, devices, env, gpu, rng, arms,
                   pacer, rewarm_calls)

    # -- building ----------------------------------------------------------------------
    def build_all(self, first: bool) -> float:
        """Build and warm every live arm in a random order (whatever the first-built
        arm gains or loses, allocator state or caches, is then noise over sessions,
        not a bias); returns the seconds it took."""
        set_up, t0 = time.time(), time.perf_counter()
        for arm in self.rng.sample(self.arms, len(self.arms)):
            if not arm.live:
                continue
            try:
                self._build_arm(arm, first, set_up)
            except BaseException as exc:
                _fail(arm, exc)
                self.say(f"arm {arm.index} failed to build")
        return time.perf_counter() - t0

    def _build_arm(self, arm: Arm, first: bool, set_up: float) -> None:
        """Build ``arm`` (again, unless ``first``) and warm it up."""
        say, task = self.say, self.task
        # Its start-up as its own process would have it: the process's import and
        # device set-up, then its own build and first step, not the arms built
        # before. A rebuild's start-up is not reported: the first build's is.
        own_launch = self.launch_ts + (time.time() - set_up)
        # A cluster worker's strategy (MultiWorkerMirrored) configures the
        # collective ops, which must come before anything starts the context:
        # reading the allocator does. Its own process holds nothing else yet.
        worker = task.cluster_job is not None
        if first and not worker:
            arm.memory.building()
        elif not first:
            arm.trainer = arm.current = None
            gc.collect()
        t = time.perf_counter()
        devices = self.devices
        own = DeviceSetup(devices.kind, devices.names[:arm.spec.devices], devices.logical)
        arm.trainer = self.lane.build(arm.spec, own, arm.memory.building
                                      if first and worker else lambda: None)
        arm_phases = {**self.phases, "build_s": time.perf_counter() - t}
        say(f"arm {arm.index} built in {arm_phases['build_s']:.1f}s: {arm.spec.label()}")
        # Several workers time a few warm-up calls, then agree on one step
        # count a window (as Trainer.measure does in a run of their own).
        agreeing = multi_worker(arm.trainer)
        arm.current = warm_up(
            arm.trainer.loop(), Rules.of(arm.spec), launch_ts=own_launch,
            phases=arm_phases, progress=say,
            warm_target=max(arm.spec.warmup_steps, 3 * arm.spec.steps_per_call)
            if agreeing else None,
            agree=arm.trainer.agreed_window_steps if agreeing else None)
        if first:
            arm.warm = arm.current
            arm.memory.built()
        say(f"arm {arm.index} built and warm: {arm.spec.label()}")

    # -- the rounds --------------------------------------------------------------------
    def measure(self, blocks: list[int], rounds: int, set_up_s: float,
                rebuild_share: float) -> None:
        """Every block's rounds, the arms rebuilt before each block while that pays."""
        pacer = self.pacer
        r, build, rebuilding, block_s = 0, 0, True, 0.0
        for b, block in enumerate(blocks):
            # Paced, the rebuild waits for the block's first turn: no other process of the
            # session measures while this one builds.
            if pacer is not None and b and rebuilding and not pacer.wait_turn():
                child_log(f"the launcher ended the rounds before round {r + 1}")
                break
            turn_held = pacer is not None and b > 0 and rebuilding
            if b and rebuilding:
                rebuilding = rebuild_pays(set_up_s, block_s, rebuild_share)
                if rebuilding:
                    set_up_s = self.build_all(first=False)
                    build = b
                else:
                    child_log(f"building the arms took {set_up_s:.1f} s against a block's "
                              f"{block_s:.1f} s of windows: the remaining rounds run on "
                              f"build {build}")
            t_block = time.perf_counter()
            r, stopped = self._block(block, r, rounds, build, turn_held)
            if stopped:
                break
            block_s = time.perf_counter() - t_block

    def _block(self, block: int, r: int, rounds: int, build: int, turn_held: bool
               ) -> tuple[int, bool]:
        """A block's rounds from round ``r``: the next round's index, and whether the
        launcher ended the rounds. ``turn_held``: the block's first turn was taken
        (for its rebuild)."""
        for order in round_orders(len(self.arms), block, self.rng):
            stopped, turn_held = self._round(order, r, build, turn_held)
            if stopped:
                return r, True
            child_log(f"round {r + 1}/{rounds} (build {build}): " + ", ".join(
                f"arm{a.index} {a.runs[-1].window.global_throughput:,.0f}"
                for a in self.arms if a.live and a.runs))
            r += 1
        return r, False

    def _round(self, order: list[int], r: int, build: int, turn_held: bool
               ) -> tuple[bool, bool]:
        """One window of every arm in ``order``: whether the launcher ended the rounds,
        and whether the turn is still held."""
        pacer = self.pacer
        for i in order:
            if turn_held:
                turn_held = False
            elif pacer is not None and not pacer.wait_turn():
                child_log(f"the launcher ended the rounds before round {r + 1}")
                return True, turn_held
            self._window(self.arms[i], r, build)
        return False, turn_held

    def _window(self, arm: Arm, r: int, build: int) -> None:
        """Window ``r`` of ``arm`` on build ``build`` (after its re-warm calls), said to
        the launcher when paced."""
        pacer = self.pacer
        if not arm.live or arm.current is None:
            if pacer is not None:
                pacer.say(b"x")
            return
        try:
            loop, rules = arm.trainer.loop(), Rules.of(arm.spec)
            out = (arm.runs[-1].out if arm.runs and arm.runs[-1].window.build == build
                   else arm.current.out)
            for _ in range(rewarms(arm.call_s, arm.spec.max_seconds, self.rewarm_calls)):
                out = loop.call()
                loop.fetch(out)
            run = run_window(loop, rules, r, out, memory=arm.memory,
                             fixed_steps=arm.current.fixed_steps, slowdown=self.slowdown,
                             host_memory=False, meter=energy_meter(arm.spec.devices))
            run.window.build = build
            arm.call_s = run.window.wall_s * loop.steps_per_call / max(1, run.window.steps)
            arm.runs.append(run)
        except BaseException as exc:
            _fail(arm, exc)
        if pacer is not None:
            pacer.say(b"d" if arm.live else b"x")

    # -- after the rounds --------------------------------------------------------------
    def summarise(self) -> dict[int, tuple[Figures, dict[str, Any]]]:
        """Every arm's windows first, each written as soon as it is summarised: a peak
        probe or profile that outlasts the launcher's patience then costs no measured
        window. Returns each summarised arm's figures and environment."""
        task, env = self.task, self.env
        summaries: dict[int, tuple[Figures, dict[str, Any]]] = {}
        for arm in self.arms:
            if arm.report is None and arm.warm is not None:
                try:
                    figures = summarize_runs(
                        arm.runs, arm.warm, arm.trainer.stats, replicas=arm.trainer.replicas,
                        memory=arm.memory,
                        replica_divergence=arm.trainer.replica_divergence())
                    # The GPU state over this arm's own windows and cards, as a run of its own.
                    own_gpu = self.gpu.environment_over(
                        [(w.window.start_ts, w.window.end_ts) for w in arm.runs],
                        first_cards(arm.spec.devices))
                    arm_env = {**env, **own_gpu, "devices": {
                        # The arm's own devices; "process": how many the shared process
                        # configured (its CPU split serves every arm).
                        **env["devices"], "names": arm.trainer.devices.names,
                        "process": len(self.devices.names)}}
                    summaries[arm.index] = figures, arm_env
                    replace(TaskReport("ok", WINDOWS_ONLY, figures=figures,
                                       environment=arm_env,
                                       local_replicas=arm.trainer.local_replicas),
                            task=task, pid=os.getpid()).write(self.run_dir,
                                                              windows_name(arm.index))
                except BaseException as exc:
                    _fail(arm, exc)
        replace(TaskReport("ok", environment=env), task=task,
                pid=os.getpid()).write(self.run_dir, windows_name(-1))
        self.say("windows summarised")
        return summaries

    def finish(self, summaries: dict[int, tuple[Figures, dict[str, Any]]],
               profile_dirs: list[Path | None] | None, profile_steps: int
               ) -> list[TaskReport]:
        """Each arm's report: MFU, the peak and its profile after its windows."""
        reports: list[TaskReport] = []
        for arm in self.arms:
            if arm.report is None and arm.index in summaries:
                try:
                    figures, arm_env = summaries[arm.index]
                    where = profile_dirs[arm.index] if profile_dirs else None
                    extras = self.lane.after_windows(arm.trainer, figures, where, self.say,
                                                     profile_steps if where else 0)
                    figures = at_sustained_clock(figures, arm_env.get("gpu_state") or {})
                    arm.report = TaskReport(
                        "ok", extras.reason, figures=figures,
                        environment={**arm_env, "peak_flops": extras.peak_entry},
                        local_replicas=arm.trainer.local_replicas,
                        weights_checksum=arm.trainer.weights_checksum())
                except BaseException as exc:
                    _fail(arm, exc)
            reports.append(arm.report or TaskReport("failed", "the arm was never built"))
        return reports


def run_arms(lane: ArmsLane, specs: list[RunSpec], task: Task, run_dir: Path, *,
             rounds: int, seed: int, rewarm_calls: int, launch_ts: float,
             profile_dirs: list[Path | None] | None = None,
             profile_steps: int = 0, pacer: Pacer | None = None, builds: int = 1,
             rebuild_share: float = REBUILD_SHARE
             ) -> tuple[list[TaskReport], dict[str, Any]]:
    """Build, warm up and measure every arm in interleaved rounds (in ``builds`` blocks,
    every arm built afresh before each while that pays: ``rebuild_pays``), then profile
    the arms given a directory in ``profile_dirs`` for up to ``profile_steps`` steps.
    ``pacer``: each window waits for the launcher's turn (one arm a process then).

    Returns one report per arm (in ``specs``' order) and the process's environment.
    """
    session = _Session.start(lane, specs, task, run_dir, launch_ts=launch_ts, seed=seed,
                             pacer=pacer, rewarm_calls=rewarm_calls)
    set_up_s = session.build_all(first=True)
    if not simulated():  # every arm's first call is done: any JIT is in the CUDA cache now
        note_jit_kept()
    (run_dir / f"ready.{task.name}").touch()
    if pacer is not None:
        pacer.say(b"R")
    inject_fault(task, "kill_after_warmup")
    session.slowdown = announce_slowdown(child_log)
    live = [arm for arm in session.arms if arm.live]
    # A round's windows take about each arm's max_seconds (a window bounded by its
    # steps ends sooner: the blocks measured then say whether a rebuild still pays).
    round_s = sum(arm.spec.max_seconds for arm in live)
    if any(multi_worker(arm.trainer) for arm in live):
        # Each worker would decide these on its own clock: its peers must match.
        builds, session.rewarm_calls = 1, 0
    blocks = block_rounds(rounds, planned_builds(set_up_s, round_s, rounds, builds,
                                                 rebuild_share))
    if builds > 1:
        child_log(f"{len(blocks)} build(s) of at most {builds}: building the arms took "
                  f"{set_up_s:.1f} s, a round's windows about {round_s:.1f} s")
    session.gpu.at_start()
    session.measure(blocks, rounds, set_up_s, rebuild_share)
    session.gpu.at_end()
    if pacer is not None:
        pacer.wait_turn()  # a turn or end of file: one process at a time finishes
    summaries = session.summarise()
    return session.finish(summaries, profile_dirs, profile_steps), session.env


def run_paced_backend(backend: Backend, specs: list[RunSpec], task: Task, run_dir: Path,
                      *, launch_ts: float, rewarm_calls: int, pacer: Pacer | None,
                      profile_dir: Path | None, profile_steps: int) -> TaskReport:
    """The one arm of a process of a lane that holds one arm a process
    (``Backend.arms_lane`` is None: a duet's side or a session's member), its windows
    in the launcher's turns; its report, failed or unsupported with the reason rather
    than raised."""
    from bench.child.backends.runner import run_backend

    spec = specs[0]
    if profile_dir is not None and profile_steps:  # the session's profile of this arm
        spec = spec.replace(profile_steps=profile_steps)
    say = progress_log(run_dir, task)
    try:
        if len(specs) != 1:  # the launcher checks (bench.launch.arms.check_arms)
            raise ValueError(f"a {spec.backend} process holds one arm. Received: "
                             f"{len(specs)} arms")
        return run_backend(backend, spec, task, launch_ts=launch_ts,
                           mark_ready=lambda: (run_dir / f"ready.{task.name}").touch(),
                           before_windows=lambda at_start: _windows_open(task, at_start),
                           profile_dir=profile_dir, progress=say, turns=pacer,
                           rewarm_calls=rewarm_calls)
    except Unsupported as exc:
        return TaskReport("unsupported", str(exc) or type(exc).__name__)
    except BaseException as exc:
        traceback.print_exc()
        return failure_report(exc)


def _windows_open(task: Task, at_start: Callable[[], None]) -> Callable[[], None]:
    """What runs as the windows open: the testing hook's fault, then the GPU state."""
    def hook() -> None:
        inject_fault(task, "kill_after_warmup")
        at_start()
    return hook


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.child.arms")
    parser.add_argument("--arms", required=True, type=Path)
    parser.add_argument("--run-dir", required=True, type=Path)
    parser.add_argument("--task", required=True, help="the Task as JSON")
    parser.add_argument("--launch-ts", type=float, default=time.time())
    parser.add_argument("--pace", type=Pacer.parse, default=None,
                        help="R,W: pipe ends the launcher gives turns on (bench.launch.duet)")
    args = parser.parse_args(argv)
    doc = json.loads(args.arms.read_text(encoding="utf-8"))
    specs = [RunSpec.from_dict(d) for d in doc["specs"]]
    task = start_process(args.task, args.run_dir)
    beat(args.run_dir, task.name, "process up")  # the first heartbeat (bench.progress)
    inject_fault(task, "hang_at_start")
    inject_fault(task, "exit_at_start")
    own: TaskReport
    try:
        backend: Backend = lane_backend(specs[0].backend)
        # One lane and one Keras per process (the launcher checks), chosen before
        # anything imports a framework.
        backend.begin_process(specs[0])
        lane = backend.arms_lane()
        if lane is None:
            profile = doc.get("profile") or {}
            where = (profile.get("dirs") or [None])[0]
            report = run_paced_backend(backend, specs, task, args.run_dir, launch_ts=args.launch_ts,
                                       rewarm_calls=int(doc.get("rewarm_calls", 1)),
                                       pacer=args.pace,
                                       profile_dir=Path(where) if where else None,
                                       profile_steps=int(profile.get("steps", 0)))
            replace(report, task=task, pid=os.getpid()).write(args.run_dir, arm_name(0))
            finish_process(replace(TaskReport("ok", environment=report.environment),
                                   task=task, pid=os.getpid()), args.run_dir, task.name)
            return 0
        profile = doc.get("profile") or {}
        dirs = [Path(d) if d else None for d in profile.get("dirs", [])] or None
        reports, env = run_arms(lane, specs, task, args.run_dir, rounds=int(doc["rounds"]),
                                builds=int(doc.get("builds", 1)),
                                rebuild_share=float(doc.get("rebuild_share", REBUILD_SHARE)),
                                seed=int(doc["seed"]),
                                rewarm_calls=int(doc.get("rewarm_calls", 1)),
                                launch_ts=args.launch_ts, profile_dirs=dirs,
                                profile_steps=int(profile.get("steps", 0)), pacer=args.pace)
        for i, report in enumerate(reports):
            replace(report, task=task, pid=os.getpid()).write(args.run_dir, arm_name(i))
        own = TaskReport("ok", environment=env)
    except BaseException as exc:  # the process itself failed (import, devices)
        traceback.print_exc()
        own = failure_report(exc)
    finish_process(replace(own, task=task, pid=os.getpid()), args.run_dir, task.name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
