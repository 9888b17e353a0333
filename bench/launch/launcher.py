"""Run one configuration in fresh child processes under hard deadlines.

Every process of a run gets its own session (process group), so a timeout,
a failure or Ctrl-C kills it and anything it spawned with SIGKILL: TensorFlow
processes with TF_CONFIG ignore SIGTERM, and collectives can block forever
(a MultiWorkerMirrored leader whose peer never starts waits in the strategy
constructor indefinitely). Whatever happens, the caller gets a RunResult with
a status and a reason, and no process of the run survives it.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.env import CPU_ALLOCATOR_VAR, fingerprint, now_iso
from bench.files import replace_whole
from bench.gpu_build import cuda_cache_env
from bench.hardware import Hardware, detect
from bench.launch.interrupts import interrupts_deferred
from bench.launch.liveness import Deadlines, ProgressWatch, all_hung
from bench.launch.prestart import ChildProcess, start_child, starter_lane
from bench.results.combination import combine
from bench.results.mfu import TaskPeak, run_mfu
from bench.results.payload import TaskReport, read_report, task_figures
from bench.results.schema import AllReduceFigures, Figures, RunResult
from bench.spec import RunSpec
from bench.strategies import STRATEGIES
from bench.tasks import Task

KILL_GRACE_S = 10.0
POLL_S = 0.05
# Barrier tasks start their windows this long after the launcher saw every one ready:
# more than a task takes to notice the word (bench.child.main.BARRIER_POLL_S) and read
# its device state, so that every one starts on the same clock.
GO_LEAD_S = 0.25
# A task is hung when it shows no sign of life (bench.launch.liveness): no first phase
# within STARTUP_TIMEOUT_S of launch (the interpreter and bench imported: seconds, even
# with eight processes importing at once), then neither a next phase nor busy CPU for
# IDLE_TIMEOUT_S, every live task of its run at once (a worker waits, idle, for a peer
# that compiles). One phase can be a single long call: the first call of a ResNet50
# session's Mirrored arm on 4 logical devices took 74 s of busy CPU; the driver's JIT
# of TensorFlow's kernels on a card its wheel has no SASS for, minutes. Busy, such a
# call is no hang. An NCCL collective whose peers never answer is idle: it is ended
# IDLE_TIMEOUT_S after its last sign of life, within two minutes, not at the run's
# timeout. PROGRESS_SILENCE_S holds between phases where a process's CPU time cannot be
# read. Once a task is up, its measured windows say a phase each: a window longer than
# the idle deadline (--max-seconds) stretches it to WINDOW_SILENCES windows.
STARTUP_TIMEOUT_S = 120.0
PROGRESS_SILENCE_S = 300.0
IDLE_TIMEOUT_S = 90.0
WINDOW_SILENCES = 2.0
# After the main task finishes, how long its peers get to leave their payloads.
PEER_GRACE_S = 15.0
TAIL_LINES = 25
STACK_DUMP_WAIT_S = 1.0
# TensorFlow start-up chatter that survives TF_CPP_MIN_LOG_LEVEL; never a reason.
_NOISE = re.compile(
    r"oneDNN custom operations|cpu_feature_guard|rebuild TensorFlow with|"
    r"All log messages before absl::InitializeLog|Memory patch applied|"
    r"will not be optimized because the dataset does not implement|"
    r"Unable to register cu(DNN|FFT|BLAS) factory|computation placer already registered")
_OOM_TEXT = re.compile(r"ResourceExhaustedError|OOM when allocating|MemoryError|"
                       r"out of memory|Cannot allocate memory|std::bad_alloc")


def log_tail(path: Path, lines: int = TAIL_LINES) -> str:
    """Last ``lines`` meaningful lines of a child log (start-up noise removed)."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    kept = [ln for ln in text.splitlines() if ln.strip() and not _NOISE.search(ln)]
    return "\n".join(kept[-lines:])


# Task.extra entries recorded in the child's environment: the collective implementation
# a multi-worker plan chose, and how many processes share one GPU.
RECORDED_TASK_EXTRA = ("communication", "processes_on_device")


def checkout_pythonpath(env: Mapping[str, str]) -> str:
    """``env``'s PYTHONPATH with this checkout first.

    A child must import this checkout, wherever the CLI was started from and whatever
    interpreter runs it (another virtual environment has no stratbench installed):
    bench/launch/launcher.py -> the directory that holds bench/.
    """
    root = str(Path(__file__).resolve().parents[2])
    return os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)


def child_command(module: str, *args: str, python: str | None = None) -> list[str]:
    """The command line of a child process: ``python -m module args``.

    Every child process of a run starts through here, so a side of an A/B comparison
    that names another interpreter (``--candidate-python``: a second virtual
    environment, another TensorFlow) runs all of its processes under it; ``None`` is
    this interpreter.
    """
    return [python or sys.executable, "-m", module, *args]


def child_env(task: Task, tf_config: dict[str, Any] | None, hw: Hardware) -> dict[str, str]:
    """The environment of one task's process.

    GPUs: each task sees only its own (by UUID, which names a GPU or a MIG slice
    whatever the device order); a task with ``no_gpu`` (parameter servers, the
    coordinator) sees none, so it cannot take memory on a worker's GPU. Variables
    the user set (TF_GPU_ALLOCATOR, NCCL_*, ...) pass through, and the fingerprint
    records every TF_/NCCL_/CUDA_/STRATBENCH_ variable of the main task.
    """
    env = dict(os.environ)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
    # The BFC CPU allocator keeps the statistics the device memory figure reads; the
    # default one keeps them only on some CPUs (see CPU_ALLOCATOR_VAR). A value the
    # user set is kept, and an empty figure then says why.
    env.setdefault(CPU_ALLOCATOR_VAR, "1")
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONPATH"] = checkout_pythonpath(env)
    # `python -m` puts the working directory first on sys.path: a user's own
    # `workloads/` or `bench/` there would be imported instead of ours (Python 3.11+
    # leaves it out with this; older interpreters ignore it).
    env["PYTHONSAFEPATH"] = "1"
    env.pop("TF_CONFIG", None)
    if tf_config is not None:
        env["TF_CONFIG"] = json.dumps(tf_config)
    if hw.gpus:
        # CUDA numbers GPUs fastest first unless told otherwise; nvidia-smi, whose
        # indices hardware detection uses, in PCI bus order. On a machine with mixed
        # cards the two differ and an index would pin the wrong one.
        env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
        if task.no_gpu:
            env["CUDA_VISIBLE_DEVICES"] = ""
        elif task.gpus:
            env["CUDA_VISIBLE_DEVICES"] = ",".join(task.gpus)
        # TensorFlow's kernels JIT-compiled for a card the wheel has no SASS for are
        # kept across processes and sweeps (bench.gpu_build).
        env.update(cuda_cache_env(env))
        if task.runner == "server" and task.gpus:
            # A worker server never runs the child's device setup: without this it
            # would reserve its whole GPU before the first step.
            env.setdefault("TF_FORCE_GPU_ALLOW_GROWTH", "true")
    # What the plan decided per task, as STRATBENCH_ variables: the main task's
    # fingerprint records them with the run.
    for key in RECORDED_TASK_EXTRA:
        if key in task.extra:
            env[f"STRATBENCH_{key.upper()}"] = str(task.extra[key])
    return env


def free_ports(count: int) -> list[int]:
    """``count`` distinct free TCP ports on 127.0.0.1 (held open until all are picked)."""
    socks = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def cluster_configs(tasks: list[Task]) -> list[dict[str, Any] | None]:
    """TF_CONFIG per task: loopback addresses for every task in a cluster job."""
    members = [t for t in tasks if t.cluster_job]
    ports = iter(free_ports(len(members)))
    cluster: dict[str, list[str]] = {}
    for t in members:
        job = t.cluster_job or ""
        cluster.setdefault(job, []).append(f"127.0.0.1:{next(ports)}")
    return [{"cluster": cluster, "task": {"type": t.cluster_job, "index": t.index}}
            if t.cluster_job else None for t in tasks]


def kill_group(proc: ChildProcess) -> None:
    """SIGKILL the child's whole process group and reap it (bounded wait)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):  # a process stuck in D state
        proc.wait(timeout=KILL_GRACE_S)


@contextlib.contextmanager
def process_group(cmd: Sequence[str], **popen: Any) -> Iterator[subprocess.Popen[Any]]:
    """``cmd`` started in a session of its own, its whole group killed and reaped as the
    block ends, however it ends (a Ctrl-C while it starts included)."""
    started: list[subprocess.Popen[Any]] = []
    try:
        with interrupts_deferred():
            started.append(subprocess.Popen(cmd, start_new_session=True, **popen))
        yield started[0]
    finally:
        for proc in started:
            kill_group(proc)


def peak_rss_of(pid: int) -> int | None:
    """VmHWM of a live process (read before it is killed), in bytes."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return None


def make_result(spec: RunSpec, status: str, reason: str | None, *,
                figures: Figures | None = None, environment: dict[str, Any] | None = None,
                started_at: str = "", wall_s: float = 0.0,
                launcher: dict[str, Any] | None = None,
                allreduce: AllReduceFigures | None = None) -> RunResult:
    return RunResult(
        key=spec.key(), spec=spec, status=status, reason=reason,
        replicas=spec.replicas, global_batch=spec.global_batch,
        per_replica_batch=spec.per_replica_batch, figures=figures,
        environment=environment if environment is not None else fingerprint(),
        started_at=started_at or now_iso(), finished_at=now_iso(), wall_s=wall_s,
        launcher=launcher or {}, allreduce=allreduce)


def unsupported_result(spec: RunSpec, hw: Hardware | None = None) -> RunResult | None:
    """A result for a spec that cannot run on this hardware, or None if it can."""
    reason = STRATEGIES.get(spec.strategy).unsupported_reason(spec, hw or detect())
    return None if reason is None else make_result(spec, "unsupported", reason)


@dataclass
class _Proc:
    task: Task
    proc: ChildProcess
    log: Path
    rss: int | None = None


class _Run:
    """The processes of one run and the files they leave in ``run_dir``."""

    def __init__(self, run_dir: Path, procs: list[_Proc]) -> None:
        self.run_dir, self.procs = run_dir, procs
        self._reports: dict[str, TaskReport] = {}

    def start(self, task: Task, cmd: Sequence[str], log: Path,
              env: Mapping[str, str], *, lane_ok: bool = False) -> None:
        """Start ``task``'s process in a session of its own, its output appended to
        ``log``, and put it on this run's list before a Ctrl-C can land (``kill_all``
        then finds it whenever the interrupt comes). ``lane_ok``: its specs train in the
        lane a pre-imported starter holds (``bench.launch.prestart.start_child``)."""
        with interrupts_deferred(), open(log, "ab") as fh:
            proc = start_child(cmd, log=fh, env=env, lane_ok=lane_ok)
            self.procs.append(_Proc(task, proc, log))

    def ready(self, p: _Proc) -> bool:
        return (self.run_dir / f"ready.{p.task.name}").exists()

    def report(self, p: _Proc) -> TaskReport | None:
        """The report ``p`` left (None: none yet), read once: it is written whole and
        never changes, and the supervisor asks every poll."""
        name = p.task.name
        if name not in self._reports:
            found = read_report(self.run_dir, name)
            if found is None:
                return None
            self._reports[name] = found
        return self._reports[name]

    def tails(self, first: _Proc | None = None) -> str:
        order = sorted(self.procs, key=lambda p: p is not first)
        if len(self.procs) == 1:
            return log_tail(self.procs[0].log)
        return "\n".join(f"--- {p.task.name} (exit {p.proc.returncode}) ---\n"
                         f"{log_tail(p.log, 12)}" for p in order)

    def dump_stacks(self) -> None:
        """Ask every live task for its Python stacks (faulthandler, into its log)."""
        live = [p for p in self.procs if p.proc.poll() is None]
        for p in live:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(p.proc.pid, signal.SIGUSR1)
        if live:
            time.sleep(STACK_DUMP_WAIT_S)

    def kill_all(self) -> None:
        for p in self.procs:
            if p.proc.poll() is None:
                p.rss = peak_rss_of(p.proc.pid)
        for p in self.procs:
            kill_group(p.proc)


def task_args(spec_file: Path, run_dir: Path, task: Task, launch_ts: float,
              profile_dir: Path | None = None, profile_steps: int = 0) -> list[str]:
    """The arguments of ``python -m bench.child`` for one task of a run."""
    args = ["--spec", str(spec_file), "--run-dir", str(run_dir), "--task",
            json.dumps(task.to_dict()), "--launch-ts", repr(launch_ts)]
    if profile_dir is not None:
        args += ["--profile-dir", str(profile_dir)]
    return args + (["--profile-steps", str(profile_steps)] if profile_steps else [])


def run_isolated(spec: RunSpec, log_path: Path, timeout_s: float | None = None,
                 profile_dir: Path | None = None,
                 env: Mapping[str, str] | None = None,
                 python: str | None = None, profile_steps: int = 0) -> RunResult:
    """Run ``spec`` in fresh child processes; never raises for a failed run.

    ``env``: variables set in every task's environment over the inherited ones (one
    side of an A/B comparison, e.g. ``TF_ENABLE_ONEDNN_OPTS=0``). ``python``: the
    interpreter every task starts under (default this one; ``child_command``).
    ``profile_steps``: profile up to that many steps after the windows (into
    ``profile_dir``) although the spec does not ask to, a sweep's evidence
    (``bench.launch.evidence``): the run keeps ``spec`` and its key, since a profile
    taken after the windows changes nothing they measure. KeyboardInterrupt is
    re-raised after every process of the run is killed.
    """
    hw = detect()
    pre = unsupported_result(spec, hw)
    if pre is not None:
        return pre
    factory = STRATEGIES.get(spec.strategy)
    tasks = factory.plan(spec, hw)
    timeout = timeout_s if timeout_s is not None else spec.timeout_s
    started = now_iso()
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="stratbench-") as tmp:
        run_dir = Path(tmp)
        spec_file = run_dir / "spec.json"
        spec_file.write_text(json.dumps(spec.to_dict()), encoding="utf-8")
        t0 = time.monotonic()
        launch_ts = time.time()
        procs: list[_Proc] = []
        run = _Run(run_dir, procs)
        try:
            for task, tf_config in zip(tasks, cluster_configs(tasks), strict=True):
                log = log_path if len(tasks) == 1 else log_path.with_name(
                    f"{log_path.stem}.{task.name}.log")
                cmd = child_command("bench.child", *task_args(
                    spec_file, run_dir, task, launch_ts, profile_dir, profile_steps),
                    python=python)
                run.start(task, cmd, log, {**child_env(task, tf_config, hw), **(env or {})},
                          lane_ok=starter_lane([spec]))
            status, reason, culprit = _supervise(run, t0, timeout, spec.max_seconds)
            if status is not None:  # a hang or a dead task: where was everyone else?
                run.dump_stacks()
        except BaseException:
            run.kill_all()
            raise
        run.kill_all()  # nothing of a run outlives it
        wall = time.monotonic() - t0
        reports = {p.task.name: run.report(p) for p in procs}
    main = next(p for p in procs if p.task.main)
    info = {"timeout_s": timeout, "log": str(log_path), "python": python or sys.executable,
            "tasks": [{"task": p.task.name, "pid": p.proc.pid,
                       "returncode": p.proc.returncode, "log": str(p.log)} for p in procs]}
    if status is not None:  # the supervisor decided: timeout or a task failed
        return make_result(spec, status, f"{reason}\n--- log tail ---\n{run.tails(culprit)}",
                           started_at=started, wall_s=wall, launcher=info)
    report = reports[main.task.name] or TaskReport(
        "failed", f"task {main.task.name} left no result")
    status, outcome = report.status, report.reason
    if status in ("failed", "oom"):
        outcome = f"{outcome}\n--- log tail ---\n{run.tails(main)}"
    figures = _combine(spec, report.figures, procs, reports) if report.figures else None
    if figures is not None and figures.peak_fault and figures.peak_fault not in (outcome or ""):
        # The run is fine; its MFU is missing because the peak it was held against is
        # wrong. Said in the reason so that nobody reads the missing figure as a failure.
        outcome = "; ".join(filter(None, [outcome, figures.peak_fault]))
    return make_result(spec, status, outcome, figures=figures,
                       environment=report.environment, started_at=started,
                       wall_s=wall, launcher=info, allreduce=report.allreduce)


def startup_deadlines(window_s: float = 0.0) -> Deadlines:
    """The deadlines a task's signs of life are held to, for windows of ``window_s``
    (read at each launch, so that a test can shorten them)."""
    return Deadlines(startup_s=STARTUP_TIMEOUT_S, silence_s=PROGRESS_SILENCE_S,
                     idle_s=max(IDLE_TIMEOUT_S, WINDOW_SILENCES * window_s))


def _supervise(run: _Run, t0: float, timeout: float, window_s: float = 0.0
               ) -> tuple[str | None, str, _Proc | None]:
    """Wait for the run to end. Returns (status, reason, culprit) when the launcher
    must decide the outcome, or (None, "", None) when the main task left its payload.

    The run is hung when every live task shows no sign of life (``startup_deadlines``,
    ``bench.launch.liveness``), before or after it is up, until the main task
    finishes; the whole run is bounded by ``timeout``."""
    procs = run.procs
    main = next(p for p in procs if p.task.main)
    deadlines = startup_deadlines(window_s)
    watches = {p.task.name: ProgressWatch.of(run.run_dir, p.task.name, t0, deadlines,
                                             pid=p.proc.pid)
               for p in procs}
    deadline = t0 + timeout
    go_written = not any(p.task.barrier for p in procs)
    main_done_at: float | None = None
    while True:
        now = time.monotonic()
        if main.proc.poll() is not None:
            if run.report(main) is None:
                rc = main.proc.returncode
                oom = rc == -signal.SIGKILL or bool(_OOM_TEXT.search(log_tail(main.log)))
                why = ("was killed by SIGKILL (likely the kernel's OOM killer)"
                       if rc == -signal.SIGKILL else f"exited with code {rc} without a result")
                return ("oom" if oom else "failed"), f"task {main.task.name} {why}", main
            main_done_at = main_done_at or now
            trainers = [p for p in procs if p.task.runner == "train"]
            if all(p.proc.poll() is not None for p in trainers) or \
                    now - main_done_at > PEER_GRACE_S:
                return None, "", None
        for p in procs:
            if p is main or p.proc.poll() is None:
                continue
            report = run.report(p)
            if report is None or report.status != "ok":
                why = (report.reason if report else None) or \
                    f"exited with code {p.proc.returncode} without a result"
                return "failed", f"task {p.task.name} failed: {why}", p
        if not go_written and all(run.ready(p) for p in procs):
            _say_go(run.run_dir / "go", time.time() + GO_LEAD_S)
            go_written = True
        late = [p for p in procs if not run.ready(p)]
        if now > deadline:
            starting = f" (still starting: {', '.join(p.task.name for p in late)})" \
                if late else ""
            return "timeout", f"killed after exceeding the {timeout:g} s timeout{starting}", \
                late[0] if late else None
        live = [p for p in procs if p.proc.poll() is None] if main_done_at is None else []
        if all_hung((watches[p.task.name] for p in live), now):
            why = "; ".join(f"{p.task.name}: {watches[p.task.name].why(now)}" for p in live)
            names = ", ".join(p.task.name for p in live)
            stuck = [p for p in live if not run.ready(p)]
            if stuck:
                return "timeout", (f"start-up hang: task(s) {', '.join(p.task.name for p in stuck)}"
                                   f" not up and no task of the run alive ({why})"), stuck[0]
            return "timeout", (f"hang after ready: task(s) {names} up, then idle and silent "
                               f"(a collective whose peers never answer, or a deadlock; {why})"
                               ), live[0]
        time.sleep(POLL_S)


def _say_go(path: Path, start_ts: float) -> None:
    """Tell barrier tasks when their windows start (written whole: they poll for it)."""
    replace_whole(path, repr(start_ts))


def _combine(spec: RunSpec, main: Figures, procs: list[_Proc],
             reports: dict[str, TaskReport | None]) -> Figures:
    """The run's figures: the main task's, plus per-task figures for multi-process runs,
    with MFU over the peaks of the hardware its tasks used."""
    if len(procs) == 1:
        return main
    factory = STRATEGIES.get(spec.strategy)
    tasks = [task_figures(p.task, reports.get(p.task.name),
                          lambda local: factory.task_share(spec, local),
                          pid=p.proc.pid, cores=list(p.task.cores), host_peak_rss_bytes=p.rss,
                          threads={"intra_op": p.task.intra_threads,
                                   "inter_op": p.task.inter_threads})
             for p in procs]
    combined = combine(spec, main, tasks)
    return run_mfu(combined, [TaskPeak.of_task(p.task, r.figures) for p in procs
                              if (r := reports.get(p.task.name)) and r.figures])
