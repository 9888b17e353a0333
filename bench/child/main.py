"""Entry point of one process of a run.

    python -m bench.child --spec SPEC.json --run-dir DIR --task TASK.json --launch-ts T

The process does its task's job (``Task.runner``: train, serve as a cluster
server, or coordinate a parameter-server run) and leaves files in ``DIR``:
``ready.<task>`` once its strategy or server is up, ``progress.<task>`` (a line
per phase finished: the launcher declares a task that is not up yet hung only when
this stops growing, ``bench.progress``) and ``payload.<task>.json`` (its ``TaskReport``: status,
reason, figures, environment) when it finishes, whatever happened. Tasks with ``barrier``
(independent copies) mark themselves ready only after their warm-up, then wait for
``DIR/go`` (written by the launcher once every task is ready) before their measured
windows: the copies' windows start together, after every copy has warmed up.

Testing hook: STRATBENCH_FAULT="<task>:<fault>" (e.g. "worker1:hang_at_start")
makes that task misbehave: ``hang_at_start`` (never starts TensorFlow),
``exit_at_start`` (exits 3 at once), ``kill_after_warmup`` (SIGKILLs itself after
warm-up, i.e. dies mid-run). The fault tests use it; it is recorded in the
environment fingerprint like every STRATBENCH_ variable.
"""

from __future__ import annotations

import argparse
import faulthandler
import json
import os
import signal
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from bench.child.backends import lane_backend, simulated
from bench.child.backends.runner import run_backend
from bench.errors import Unsupported
from bench.gpu_build import note_jit_kept
from bench.hardware import detect
from bench.progress import beat
from bench.results.payload import TaskReport
from bench.spec import RunSpec
from bench.tasks import Task

# Exceptions whose class name means "ran out of memory" (TensorFlow's class is
# matched by name so that this module does not import TensorFlow at load time).
_OOM_NAMES = ("ResourceExhaustedError", "MemoryError")
BARRIER_POLL_S = 0.01

# Errors that mean "this software stack cannot run this combination", recognised by
# message so that a fixed TensorFlow/Keras simply runs instead. Pattern -> explanation.
KNOWN_INCOMPATIBLE = {
    "You must specify an aggregation method to update a AggregatingVariable": (
        "CentralStorageStrategy with 2+ replicas cannot update variables created without an "
        "aggregation method in replica context; Keras 3 BatchNormalization's moving "
        "statistics are such variables (seen with TF 2.21 / Keras 3.15)"),
    "No OpKernel was registered to support Op 'NcclAllReduce'": (
        "NCCL all-reduce has no kernel on this device type (needs GPUs)"),
    "'ShardedVariable' object has no attribute 'handle'": (
        "Keras 3 layers cannot train sharded variables: ParameterServerStrategy's "
        "variable_partitioner splits a variable larger than the shard size and the first "
        "step fails (seen with TF 2.21 / Keras 3.15); use partitioner=none"),
}


def child_log(msg: str) -> None:
    """A line of this process's log (stderr, which the launcher keeps)."""
    print(f"[child {os.getpid()}] {msg}", file=sys.stderr, flush=True)


def progress_log(run_dir: Path, task: Task) -> Callable[[str], None]:
    """A log for phases: each message goes to the log and is a heartbeat in the
    task's progress file, the launcher's sign that a long start-up is not a hang."""
    def say(msg: str) -> None:
        child_log(msg)
        beat(run_dir, task.name, msg)
    return say


class Context:
    """What a runner needs: the spec, its task, where to leave files, the launch time."""

    def __init__(self, spec: RunSpec, task: Task, run_dir: Path, launch_ts: float,
                 profile_dir: Path | None, evidence_steps: int = 0) -> None:
        self.spec, self.task, self.run_dir = spec, task, run_dir
        self.launch_ts, self.profile_dir = launch_ts, profile_dir
        # Steps a sweep asks this run to profile after its windows, for the report's
        # explanations (bench.launch.evidence), although its spec asks for none.
        self.evidence_steps = evidence_steps
        self.say = progress_log(run_dir, task)  # log a phase, and beat
        self.backend = lane_backend(spec.backend)  # imports no framework yet

    def mark_ready(self) -> None:
        (self.run_dir / f"ready.{self.task.name}").touch()

    def wait_for_go(self) -> float:
        """Block until the launcher says every task is ready (it kills us on its deadline);
        returns the wall-clock time the launcher set for every task's windows to start."""
        go = self.run_dir / "go"
        while not go.exists():
            time.sleep(BARRIER_POLL_S)
        return float(go.read_text())


def inject_fault(task: Task, stage: str) -> None:
    """Fail on purpose at ``stage`` when STRATBENCH_FAULT names this task and stage
    (``worker1:hang_at_start``): how tests make a process hang, exit or die."""
    wanted = os.environ.get("STRATBENCH_FAULT", "")
    name, _, fault = wanted.partition(":")
    if name != task.name or fault != stage:
        return
    child_log(f"STRATBENCH_FAULT: {wanted}")
    if fault == "hang_at_start":
        while True:
            time.sleep(3600)
    if fault == "exit_at_start":
        os._exit(3)
    if fault == "kill_after_warmup":
        os.kill(os.getpid(), signal.SIGKILL)


def run_train(ctx: Context) -> TaskReport:
    """Measure training with the spec's backend (bench.child.backends), or its
    all-reduce probe."""
    from bench.strategies import STRATEGIES

    # What this process trains: an independent copy trains one replica's share.
    ctx.spec = STRATEGIES.get(ctx.spec.strategy).local_spec(ctx.spec, ctx.task)
    if ctx.spec.mode == "allreduce":
        return ctx.backend.allreduce(ctx.spec, ctx.task, ctx.mark_ready, ctx.say)
    return run_backend(ctx.backend, ctx.spec, ctx.task,
                       launch_ts=ctx.launch_ts, mark_ready=ctx.mark_ready,
                       before_windows=lambda at_start: _before_windows(ctx, at_start),
                       profile_dir=ctx.profile_dir, progress=ctx.say,
                       evidence_steps=ctx.evidence_steps)


def _before_windows(ctx: Context, at_start: Callable[[], None]
                    ) -> Callable[[], float | None]:
    def hook() -> float | None:
        inject_fault(ctx.task, "kill_after_warmup")
        if not simulated():  # its first call is done: any JIT is in the CUDA cache now
            note_jit_kept()
        if not ctx.task.barrier:
            at_start()
            return None
        # Ready only now, warmed up: the launcher says "go" once every copy is, so no
        # copy's windows run beside another's tracing or first steps. Every copy then
        # opens its windows at the time the launcher set, not when it saw the word (a
        # poll apart), and closes them on that schedule (windows.Rules.common_start_ts).
        ctx.mark_ready()
        start_ts = ctx.wait_for_go()
        at_start()  # after the barrier: the state as the windows open
        time.sleep(max(0.0, start_ts - time.time()))
        return start_ts
    return hook


def run_server(ctx: Context) -> TaskReport:
    """A cluster server (parameter-server or worker task): serve until killed."""
    return ctx.backend.serve(ctx.task, ctx.mark_ready, ctx.say)


def run_ps_chief(ctx: Context) -> TaskReport:
    """Coordinate a parameter-server run and measure it (a lane without a coordinator
    of its own trains the task as one training process)."""
    report = ctx.backend.coordinate(ctx.spec, ctx.task, launch_ts=ctx.launch_ts,
                                    mark_ready=ctx.mark_ready, progress=ctx.say)
    return run_train(ctx) if report is None else report


RUNNERS: dict[str, Callable[[Context], TaskReport]] = {
    "train": run_train, "server": run_server, "ps_chief": run_ps_chief,
}


def failure_report(exc: BaseException) -> TaskReport:
    """Classify an exception as unsupported (known incompatibility), oom or failed."""
    known = next((why for pattern, why in KNOWN_INCOMPATIBLE.items() if pattern in str(exc)),
                 None)
    is_oom = any(c.__name__ in _OOM_NAMES for c in type(exc).__mro__)
    status = "unsupported" if known else "oom" if is_oom else "failed"
    return TaskReport(status, known or f"{type(exc).__name__}: {summary(exc)}")


def summary(exc: BaseException) -> str:
    """The line of an exception message that says what went wrong.

    TensorFlow's errors from a tf.function start with "in user code:" and a
    traceback, and end with the actual error: take the last meaningful line then.
    """
    lines = [ln.strip() for ln in str(exc).strip().splitlines() if ln.strip()]
    if not lines:
        return ""
    line = lines[-1] if lines[0].rstrip(":") == "in user code" else lines[0]
    return line[:2000]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.child")
    parser.add_argument("--spec", required=True, type=Path)
    parser.add_argument("--run-dir", required=True, type=Path)
    parser.add_argument("--task", required=True, help="the Task as JSON")
    parser.add_argument("--launch-ts", type=float, default=time.time())
    parser.add_argument("--profile-dir", type=Path, default=None)
    parser.add_argument("--profile-steps", type=int, default=0)
    args = parser.parse_args(argv)
    spec = RunSpec.from_dict(json.loads(args.spec.read_text(encoding="utf-8")))
    task = start_process(args.task, args.run_dir)
    # The first heartbeat: the interpreter is up (a task hung at start is then caught
    # by the silence after it).
    beat(args.run_dir, task.name, "process up")
    inject_fault(task, "hang_at_start")
    inject_fault(task, "exit_at_start")
    ctx = Context(spec, task, args.run_dir, args.launch_ts, args.profile_dir,
                  args.profile_steps)
    try:
        ctx.backend.begin_process(spec)  # before anything imports a framework
        report = RUNNERS[task.runner](ctx)
    except Unsupported as exc:
        report = TaskReport("unsupported", str(exc) or type(exc).__name__)
    except BaseException as exc:  # anything else becomes a recorded failure
        report = failure_report(exc)
        traceback.print_exc()
    report = replace(report, task=task, pid=os.getpid())
    # Multi-host: every host's figures.
    report = ctx.backend.gather_hosts(task, spec, args.run_dir, report)
    finish_process(report, args.run_dir, task.name)
    return 0


def start_process(task_json: str, run_dir: Path) -> Task:
    """What every child process does first, before TensorFlow: its Task, stacks on
    SIGUSR1, the hardware as the launcher saw it, the task's cores, and its temporary
    files in ``run_dir`` (``temp_files_in``)."""
    # The launcher sends SIGUSR1 before killing a hung run: every thread's Python
    # stack then lands in this task's log, saying where it was stuck.
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    task = Task.from_dict(json.loads(task_json))
    temp_files_in(run_dir / f"tmp.{task.name}")
    # Hardware as the launcher sees it, before pinning: the fingerprint's cpu_cores
    # then match the launcher's (this task's own cores are recorded apart).
    detect()
    if task.cores and hasattr(os, "sched_setaffinity"):
        # Before TensorFlow starts: it sizes its thread pools from the usable cores.
        os.sched_setaffinity(0, task.cores)
    return task


def temp_files_in(directory: Path) -> None:
    """This process's temporary files (and its subprocesses') go to ``directory``.

    Autograph writes each converted function to a ``__autograph_generated_file*.py``
    in the temporary directory and removes it at interpreter exit, which a child never
    reaches (``finish_process`` ends it with ``os._exit``): thousands of them piled up
    in /tmp. The run directory is the launcher's own temporary directory, removed with
    everything in it once the run's payloads are read."""
    directory.mkdir(parents=True, exist_ok=True)
    os.environ["TMPDIR"] = str(directory)
    tempfile.tempdir = str(directory)


def finish_process(report: TaskReport, run_dir: Path, name: str) -> None:
    """Leave ``report`` as payload ``name`` and end the process at once."""
    report.write(run_dir, name)
    child_log(f"payload written: {report.status}")
    sys.stdout.flush()
    sys.stderr.flush()
    # Skip interpreter teardown: TensorFlow's thread pools can stall exit for seconds.
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
