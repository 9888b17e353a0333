"""Launch one process that measures several configurations with interleaved windows.

The parent side of ``bench.child.arms``: checks that the configurations can share a
process, starts it under the same supervision as any run (start-up deadline,
timeout, stacks dumped and every process killed on a hang), and turns each arm's
payload into a ``RunResult`` that says, in ``interleaved``, which process and which
rounds it shared. Parent side: no TensorFlow.
"""

from __future__ import annotations

import json
import tempfile
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from bench.env import now_iso
from bench.hardware import Hardware, detect
from bench.launch.launcher import (
    _Proc,
    _Run,
    _supervise,
    child_command,
    child_env,
    make_result,
    unsupported_result,
)
from bench.launch.prestart import starter_lane
from bench.results.pairs import builds_of
from bench.results.payload import TaskReport, arm_name, read_report
from bench.results.schema import Interleaving, RunResult
from bench.spec import RunSpec
from bench.strategies import STRATEGIES, own_gpus
from bench.tasks import Task, with_gpu_cores

DEFAULT_ROUNDS = 6
TASK = Task("single", 0, "arms", main=True)


class ArmsError(ValueError):
    """The configurations cannot share one process (the message names which and why)."""


def shareable_reason(spec: RunSpec, *, member: bool = False, alone: bool = False
                     ) -> str | None:
    """Why ``spec`` cannot be an arm of a shared process, or None if it can. With
    ``member``: why it can be neither that nor a session's member in processes of its
    own taking turns with the arms' (``bench.launch.session``). With ``alone``: why it
    cannot be the one arm of a paced process (a duet's side)."""
    factory = STRATEGIES.get(spec.strategy)
    if spec.backend not in factory.backends:  # unsupported: it runs alone and says why
        return f"strategy {spec.strategy} does not run on the {spec.backend} backend"
    own = (member or alone) and factory.paced_alone
    if factory.no_shared_process_reason and not own:
        return f"strategy {spec.strategy}: {factory.no_shared_process_reason}"
    hw = detect()
    tasks = factory.plan(spec, hw)
    paced = member and factory.paced_processes and len(tasks) > 1
    if (paced or (own and member)) and hw.gpus:
        # A process waiting for its turn keeps its GPU memory and CUDA context beside
        # the arms' process, which holds every arm's: on accelerators it runs alone.
        return (f"strategy {spec.strategy} runs {len(tasks)} process(es) of its own, and "
                f"on GPUs a process waiting for its turn keeps its GPU memory")
    if not paced and (len(tasks) != 1 or tasks[0].role != "single"):
        return f"strategy {spec.strategy} runs {len(tasks)} processes"
    if spec.loop != "custom":
        return f"only the custom loop interleaves windows (loop={spec.loop})"
    if spec.profile_steps:
        return f"a profile is taken in the configuration's own process " \
               f"(profile_steps={spec.profile_steps})"
    if spec.mode != "train":
        return f"only training interleaves (mode={spec.mode})"
    return None


def check_arms(specs: Sequence[RunSpec], *, alone: bool = False) -> None:
    """Raise ArmsError unless every spec can be an arm and they can share a process
    (``alone``: the one arm of a paced process, a duet's side)."""
    if not specs:
        raise ArmsError("no configuration to interleave. Received: specs=[]")
    for spec in specs:
        why = shareable_reason(spec, alone=alone and len(specs) == 1)
        if why:
            raise ArmsError(f"{spec.label()} cannot share a process: {why}")
    lanes = {(s.backend, s.keras) for s in specs}
    if len(lanes) > 1:  # the framework and Keras are chosen once per process, at start
        raise ArmsError(f"the arms of one process need one backend and Keras lane. "
                        f"Received: {sorted(f'{b} keras{k}' for b, k in lanes)}")


def arms_task(specs: Sequence[RunSpec], hw: Hardware | None = None) -> Task:
    """The task of a process holding ``specs`` as its arms: as many devices as the
    largest needs, and only those GPUs (by UUID, as a run of its own gets them), so
    that its energy, clocks and memory are of the cards its arms train on; pinned to
    the cores of those cards' NUMA node(s), as an in-process run is."""
    devices = max(s.devices for s in specs)
    hw = hw or detect()
    (task,) = with_gpu_cores([Task(TASK.role, TASK.index, TASK.runner, main=True,
                                   local_devices=devices, gpus=own_gpus(hw, devices))], hw)
    return task


def write_arms(run_dir: Path, specs: Sequence[RunSpec], *, rounds: int, seed: int,
               rewarm_calls: int, builds: int = 1, rebuild_share: float | None = None,
               dirs: Sequence[Path | None] = (), profile_steps: int = 0) -> Path:
    """Write ARMS.json for ``bench.child.arms`` into ``run_dir`` (made if missing): the
    arms, their rounds and builds (``rebuild_share`` None: the child's own), and the
    profile directory of each arm in ``dirs`` (None: not profiled)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / "arms.json"
    path.write_text(json.dumps({
        "specs": [s.to_dict() for s in specs], "rounds": rounds, "builds": builds,
        **({"rebuild_share": rebuild_share} if rebuild_share is not None else {}),
        "seed": seed, "rewarm_calls": rewarm_calls, "profile": {
            "dirs": [str(d.resolve()) if d else None for d in dirs],
            "steps": profile_steps}}), encoding="utf-8")
    return path


def check_session(specs: Sequence[RunSpec], rounds: int,
                  profile_dirs: Sequence[Path | None]) -> None:
    """Raise ArmsError unless the rounds and profile directories fit ``specs``."""
    if profile_dirs and len(profile_dirs) != len(specs):
        raise ArmsError(f"one profile directory (or None) per configuration. Received: "
                        f"{len(profile_dirs)} for {len(specs)} configurations")
    if rounds < 2:
        raise ArmsError(f"interleaving needs at least 2 rounds. Received: rounds={rounds}")


def run_interleaved(specs: Sequence[RunSpec], log_path: Path, *, rounds: int = DEFAULT_ROUNDS,
                    seed: int = 0, rewarm_calls: int = 1, timeout_s: float | None = None,
                    env: Mapping[str, str] | None = None, python: str | None = None,
                    profile_dirs: Sequence[Path | None] = (),
                    profile_steps: int = 0, builds: int = 1,
                    rebuild_share: float | None = None) -> list[RunResult]:
    """Measure ``specs`` in one process, ``rounds`` windows each, interleaved; with
    ``builds`` above 1 the rounds come in that many blocks, every arm built afresh
    before each where the builds are cheap enough (``bench.child.arms``; ``rebuild_share``
    None: the child's own ``REBUILD_SHARE``).

    ``profile_dirs[i]`` (if given and not None): spec i is profiled there for up to
    ``profile_steps`` steps after every arm's windows, alone (a sweep's evidence).
    Returns one result per spec, in order; never raises for a failed run (every arm
    then carries the failure). A spec that cannot run on this hardware gets its
    "unsupported" result and is left out of the process. ``env`` and ``python`` as in
    ``run_isolated`` (one environment and interpreter: the arms share the process).
    """
    check_arms(specs)
    check_session(specs, rounds, profile_dirs)
    hw = detect()
    results: dict[int, RunResult] = {}
    arms: list[int] = []
    for i, spec in enumerate(specs):
        pre = unsupported_result(spec, hw)
        if pre is not None:
            results[i] = pre
        else:
            arms.append(i)
    if not arms:
        return [results[i] for i in range(len(specs))]
    arm_specs = [specs[i].replace(repeats=rounds) for i in arms]
    dirs = [Path(d) if (profile_dirs and (d := profile_dirs[i])) else None for i in arms]
    task = arms_task(arm_specs, hw)
    # The process runs every arm's warm-up and windows: its timeout is the arms' sum.
    timeout = timeout_s if timeout_s is not None else sum(s.timeout_s for s in arm_specs)
    session = uuid.uuid4().hex[:12]
    started = now_iso()
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="stratbench-arms-") as tmp:
        run_dir = Path(tmp)
        arms_file = write_arms(run_dir, arm_specs, rounds=rounds, seed=seed,
                               rewarm_calls=rewarm_calls, builds=builds,
                               rebuild_share=rebuild_share, dirs=dirs,
                               profile_steps=profile_steps)
        t0 = time.monotonic()
        cmd = child_command("bench.child.arms", "--arms", str(arms_file), "--run-dir",
                            str(run_dir), "--task", json.dumps(task.to_dict()),
                            "--launch-ts", repr(time.time()), python=python)
        procs: list[_Proc] = []
        run = _Run(run_dir, procs)
        try:
            run.start(task, cmd, log_path, {**child_env(task, None, hw), **(env or {})},
                      lane_ok=starter_lane(arm_specs))
            status, reason, culprit = _supervise(run, t0, timeout)
            if status is not None:
                run.dump_stacks()
        except BaseException:
            run.kill_all()
            raise
        run.kill_all()
        wall = time.monotonic() - t0
        own = run.report(procs[0])
        reports = [read_report(run_dir, arm_name(k)) for k in range(len(arms))]
    info = {"timeout_s": timeout, "log": str(log_path), "tasks": [
        {"task": task.name, "pid": procs[0].proc.pid, "returncode": procs[0].proc.returncode,
         "log": str(log_path)}]}
    labels = [s.label() for s in arm_specs]
    for k, i in enumerate(arms):
        failure = (status, f"{reason}\n--- log tail ---\n{run.tails(culprit)}") \
            if status is not None else None
        result = arm_result(specs[i], failure, own, reports[k], run.tails,
                            started_at=started, wall_s=wall, launcher=info)
        result.interleaved = Interleaving(session=session, arms=labels, arm=k,
                                          rounds=rounds, seed=seed,
                                          builds=max(1, len(builds_of(result))))
        results[i] = result
    return [results[i] for i in range(len(specs))]


def arm_result(spec: RunSpec, failure: tuple[str, str] | None, own: TaskReport | None,
               report: TaskReport | None, tails: Callable[[], str], *, started_at: str,
               wall_s: float, launcher: dict[str, Any]) -> RunResult:
    """One arm's result: ``failure`` (status, reason) when the supervisor decided, else
    the process's own report ``own`` if it failed, else the arm's ``report``."""
    def result(status: str, reason: str | None, **kw: Any) -> RunResult:
        return make_result(spec, status, reason, started_at=started_at, wall_s=wall_s,
                           launcher=launcher, **kw)
    if failure is not None:
        return result(*failure)
    if own is None or own.status != "ok":
        return result(own.status if own else "failed",
                      f"{own.reason if own else 'the process left no result'}"
                      f"\n--- log tail ---\n{tails()}")
    if report is None:
        return result("failed", "the arm left no result")
    return result(report.status, report.reason, figures=report.figures,
                  environment=report.environment)
