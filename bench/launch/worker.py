"""One task of a multi-host run (``stratbench worker``), supervised like a local run.

Every host runs the same command with the same configuration; the cluster comes
from TF_CONFIG (set by the user, Kubernetes tooling or ``bench cluster-demo``)
or, under Slurm, from Slurm's own variables (``bench.launch.slurm.step``). The
task runs in a supervised child process; past the spec's timeout it dumps its
stacks into its log and is killed.

The chief (the MultiWorkerMirrored worker 0, or the ParameterServer coordinator)
writes the run's result like a sweep, holding every host's own figures: the
child gathers them through the cluster itself (``bench.child.backends.tf.gather``: an
all-gather over the collectives, or the coordinator's reads of its servers), so
no shared filesystem is assumed. A host that failed or never reported makes the
run ``failed`` with that host named; when the chief's own task fails or times
out, the hosts whose TensorFlow port no longer answers are named (a dead or
never-started peer is the usual cause). Other tasks print a line and exit;
parameter-server and worker servers serve until the coordinator's port closes
(the run is over), then exit 0.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from bench.env import now_iso
from bench.errors import UsageError
from bench.exits import Exit
from bench.hardware import GpuInfo, Hardware, cpu_budget, detect
from bench.launch.launcher import (
    STACK_DUMP_WAIT_S,
    child_command,
    child_env,
    log_tail,
    make_result,
    process_group,
    task_args,
)
from bench.launch.slurm import step as slurm
from bench.launch.slurm.step import SlurmStep
from bench.results.combination import combine
from bench.results.mfu import TaskPeak, run_mfu
from bench.results.payload import TaskReport, read_report
from bench.results.schema import Figures
from bench.results.store import SweepStore, save
from bench.spec import RunSpec
from bench.strategies import STRATEGIES
from bench.tasks import RUN_GPUS, Task

# Task.extra flag that makes the child gather every host's figures (bench.child.backends.tf.gather).
GATHER_FLAG = "gather"
# What an emulated host was given (CPU budget, link), as JSON set by the launcher that
# made the host (bench cluster-demo, bench lab); the chief records it in the result.
HOST_BUDGET_VAR = "STRATBENCH_HOST_BUDGET"
POLL_S = 0.2
PROBE_TIMEOUT_S = 2.0
# A server task checks the coordinator's port this often; after this many misses in a
# row (once it had answered) the run is over and the server ends.
WATCH_INTERVAL_S = 1.0
WATCH_MISSES = 3
MAX_REPLICATES = 1000
# A task under Slurm ends this long before its job's time limit, so that its stacks,
# the gathering and the chief's result fit before Slurm kills the step.
SLURM_MARGIN_S = 20.0


def tf_config_from_slurm(strategy: str, ps_tasks: int) -> tuple[dict[str, Any], SlurmStep]:
    """TF_CONFIG for this Slurm task, from Slurm's variables (``bench.launch.slurm``)."""
    step = SlurmStep.from_env()
    return (slurm.tf_config(step, strategy, ps_tasks, slurm.node_addresses(step.nodes)),
            step)


@dataclass(frozen=True)
class Member:
    """One task of the cluster as TF_CONFIG lists it."""

    name: str  # e.g. "worker1": TF_CONFIG job + index, as Task.name
    address: str  # host:port
    node: str | None = None  # the Slurm node it runs on, where Slurm placed it

    @property
    def label(self) -> str:
        """How a message names it: task, address and, under Slurm, node."""
        where = f"{self.address} on node {self.node}" if self.node else self.address
        return f"{self.name} ({where})"

    def endpoint(self) -> tuple[str, int]:
        host, _, port = self.address.rpartition(":")
        return host.strip("[]"), int(port)


def members(tf_config: dict[str, Any], step: SlurmStep | None = None) -> list[Member]:
    """Every task of TF_CONFIG's cluster, chief job first (TensorFlow's ranking); under
    Slurm (``step``) each with its node."""
    cluster = tf_config.get("cluster") or {}
    jobs = sorted(cluster, key=lambda j: (j != "chief", j))
    found = [Member(f"{job}{i}", addr) for job in jobs for i, addr in enumerate(cluster[job])]
    if step is None:
        return found
    # The Slurm cluster lists its tasks in rank order, job after job (chief, ps, worker).
    nodes = step.rank_nodes()
    return [replace(m, node=nodes[i]) for i, m in enumerate(found)]


@dataclass(frozen=True)
class Placement:
    """Where this task sits: its TF_CONFIG, its Slurm step (None outside Slurm) and
    the epoch second by which it must end (the Slurm job's end; None: no such end)."""

    tf_config: dict[str, Any]
    step: SlurmStep | None = None
    ends_at: float | None = None


def placement(spec: RunSpec, cluster: str) -> Placement:
    """This task's cluster, from TF_CONFIG or Slurm's variables (``cluster``: auto,
    tf_config or slurm). Raises UsageError for a description that cannot be read."""
    source = cluster
    if source == "auto":
        source = "tf_config" if os.environ.get("TF_CONFIG") else "slurm"
    step = None
    ends_at = None
    if source == "slurm":
        if "SLURM_JOB_ID" not in os.environ:
            raise UsageError("no TF_CONFIG and not inside a Slurm job (SLURM_JOB_ID unset)")
        config, step = tf_config_from_slurm(spec.strategy, spec.ps_tasks or 1)
        os.environ["TF_CONFIG"] = json.dumps(config)
        ends_at = slurm.job_end_epoch(step.job_id)
    try:
        tf_config = json.loads(os.environ["TF_CONFIG"])
        _job, _index = tf_config["task"]["type"], int(tf_config["task"]["index"])
    except (KeyError, ValueError, TypeError) as exc:
        raise UsageError(f"TF_CONFIG must be JSON with cluster and task.type/task.index. "
                         f"Received: TF_CONFIG={os.environ.get('TF_CONFIG')!r}") from exc
    return Placement(tf_config, step, ends_at)


def host_task(spec: RunSpec, tf_config: dict[str, Any], hw: Hardware) -> Task:
    """This host's task of the run's plan, on this host's own cores and GPUs."""
    job, index = tf_config["task"]["type"], int(tf_config["task"]["index"])
    tasks = [t for t in STRATEGIES.get(spec.strategy).plan(spec, hw) if t.cluster_job]
    task = next((t for t in tasks if t.cluster_job == job and t.index == index), None)
    if task is None:
        raise UsageError(f"strategy {spec.strategy} has no task {job}:{index} for "
                         f"{spec.devices} devices; its tasks: "
                         f"{', '.join(f'{t.cluster_job}:{t.index}' for t in tasks)}")
    # Other hosts have their own cores: no pinning computed for this machine's cores.
    intra, inter = host_threads(task)
    task = replace(task, cores=(), intra_threads=intra, inter_threads=inter,
                   extra={**task.extra, GATHER_FLAG: True})
    if not hw.gpus or task.no_gpu:
        return task
    gpus = host_gpus(hw.gpus, max(1, task.local_devices), local_rank(tf_config))
    extra = {**task.extra, RUN_GPUS: gpus} if task.main else task.extra
    return replace(task, gpus=gpus, extra=extra)


def local_rank(tf_config: dict[str, Any]) -> int:
    """How many GPU-using tasks (``worker`` job) come before this one on its address."""
    everyone = members(tf_config)
    own = f"{tf_config['task']['type']}{int(tf_config['task']['index'])}"
    me = next((m for m in everyone if m.name == own), None)
    if me is None:
        raise UsageError(f"TF_CONFIG's cluster has no task {own}")
    host = me.endpoint()[0]
    before = everyone[:everyone.index(me)]
    return sum(1 for m in before if m.name.startswith("worker") and m.endpoint()[0] == host)


def host_gpus(visible: tuple[GpuInfo, ...], need: int, local: int) -> tuple[str, ...]:
    """This task's GPUs among the host's visible ones: all of them where the host (or
    Slurm, through CUDA_VISIBLE_DEVICES) gave the task exactly what it needs, else
    the ``local``-th share of them."""
    if len(visible) == need:
        return tuple(g.cuda_id for g in visible)
    share = visible[local * need:(local + 1) * need]
    if len(share) < need:
        raise UsageError(
            f"this task needs {need} GPU(s) as the {local + 1}. GPU task on its host, but "
            f"the host shows {len(visible)}. Received: CUDA_VISIBLE_DEVICES="
            f"{os.environ.get('CUDA_VISIBLE_DEVICES')!r}")
    return tuple(g.cuda_id for g in share)


def run_worker(spec: RunSpec, cluster: str, out: Path) -> int:
    """Run this host's task of ``spec``; the chief stores the run's result in ``out``.

    Returns 0 when the task ended ok or unsupported, ``Exit.RUNS_FAILED`` (3) otherwise.
    Raises UsageError for a cluster description that does not fit the spec.
    """
    where = placement(spec, cluster)
    tf_config = where.tf_config
    task = host_task(spec, tf_config, detect())
    job, index = str(tf_config["task"]["type"]), task.index
    started = now_iso()
    t0 = time.monotonic()
    store = SweepStore(out)
    replicate = next(r for r in range(1, MAX_REPLICATES) if not store.has_result(spec, r))
    paths = store.paths(spec, replicate)
    log = paths.log.with_name(f"{paths.log.stem}.{task.name}.log")
    everyone = members(tf_config, where.step)
    watch = None
    chief = next((m for m in everyone if m.name.startswith("chief")), None)
    if task.runner == "server" and chief is not None:
        watch = PortWatch(chief)
    deadline_s = spec.timeout_s
    if where.ends_at is not None:  # end before Slurm's time limit, stacks dumped
        deadline_s = min(deadline_s, max(1.0, where.ends_at - time.time() - SLURM_MARGIN_S))
    status, report = _run_supervised(spec, task, tf_config, log, paths.profile, watch,
                                     deadline_s)
    report = task_report(status, report, job, index, deadline_s, spec.timeout_s, log, chief)
    if not task.main:
        print(f"task {job}:{index} finished: {report.status}; log: {log}")
        return 0 if report.status in ("ok", "unsupported") else Exit.RUNS_FAILED
    peers = [m for m in everyone if m.name != task.name]
    outcome = chief_outcome(spec, task.name, report, peers, unreachable)
    info: dict[str, Any] = {"tf_config": tf_config, "hosts": [
        {"task": m.name, "address": m.address,
         "peak_flops_per_s": outcome.peaks.get(m.name)} for m in everyone],
        "gather_s": report.gather_s}
    if where.step is not None:
        info["slurm"] = slurm.describe(where.step)
    budget = host_budget()
    if budget is not None:
        info["budget"] = budget
    result = make_result(spec, outcome.status, outcome.reason, figures=outcome.figures,
                         environment=report.environment, started_at=started,
                         wall_s=time.monotonic() - t0, launcher=info,
                         allreduce=report.allreduce)
    result = replace(result, replicate=replicate)
    save(result, paths.result)
    print(f"chief result: {paths.result} ({result.status}); log: {log}")
    return 0 if result.status in ("ok", "unsupported") else Exit.RUNS_FAILED


def task_report(status: str, report: TaskReport | None, job: str, index: int,
                deadline_s: float, timeout_s: float, log: Path,
                chief: Member | None) -> TaskReport:
    """The task's report, with what ended it where the child could not say."""
    if status == "timeout":
        why = (f"the Slurm job's time limit (it ended {deadline_s:.0f} s in, before it)"
               if deadline_s < timeout_s else f"the {timeout_s:g} s timeout")
        return TaskReport("timeout", (
            f"task {job}:{index} exceeded {why} (a peer that never started, or a blocked "
            f"collective)\n--- log tail ---\n{log_tail(log)}"))
    if status == "cancelled":
        return TaskReport("failed", (
            f"cancelled: task {job}:{index} was sent SIGTERM or SIGINT (scancel, Slurm's "
            f"time limit or Ctrl-C) and ended with its stacks in its log"
            f"\n--- log tail ---\n{log_tail(log)}"))
    if status == "peer_left":
        return TaskReport("ok", f"served until the coordinator ({chief}) left")
    if report is None:
        return TaskReport("failed", f"task {job}:{index} {status}"
                                    f"\n--- log tail ---\n{log_tail(log)}")
    return report


def host_budget() -> dict[str, Any] | None:
    """The budget the launcher recorded for this host (``STRATBENCH_HOST_BUDGET``)."""
    text = os.environ.get(HOST_BUDGET_VAR)
    if not text:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return {"unreadable": text}
    return value if isinstance(value, dict) else {"value": value}


def host_threads(task: Task) -> tuple[int, int]:
    """Threads of a training task on a host whose cores it was pinned to (taskset,
    a cpuset): ``(intra, inter)`` = as many intra-op threads as its cores and one
    inter-op thread, the local plan's choice for CPU workers. It also keys the peak
    FLOP/s cache by the thread count, so a one-core host never reads the peak an
    unpinned process measured. A host with a CPU budget (a cgroup quota) gets as many
    intra-op threads as the budget rounds up to: more would only take turns in its
    quota. Elsewhere TensorFlow's defaults, ``(0, 0)``."""
    budget = cpu_budget()
    if task.runner == "train" and budget is not None and not task.gpus and not detect().gpus:
        return max(1, math.ceil(budget - 1e-9)), 1
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return 0, 0
    pinned = usable < (os.cpu_count() or usable)
    if task.runner == "train" and pinned and not task.gpus and not detect().gpus:
        return usable, 1
    return 0, 0


@dataclass
class ChiefOutcome:
    """What the chief stores: status, reason, figures and each host's peak."""

    status: str
    reason: str | None
    figures: Figures | None
    peaks: dict[str, float]


def chief_outcome(spec: RunSpec, own: str, report: TaskReport, peers: list[Member],
                  probe: Callable[[list[Member]], list[Member]]) -> ChiefOutcome:
    """The run's outcome from the chief's report and every host's gathered report.

    The chief's own failure or timeout comes first, with the peers ``probe`` finds
    unreachable named; then a host whose report is missing or not ok fails the run,
    named. Otherwise the figures combine every host's as for local multi-process
    runs, with MFU over the sum of every training host's peak.
    """
    status, reason = report.status, report.reason
    if status not in ("ok", "unsupported"):
        gone = probe(peers)
        if gone:
            names = ", ".join(m.label for m in gone)
            unreached = f"host(s) not reachable: {names}: the task is gone or never started"
            # A cancelled run says so first: the peers it left are a consequence.
            reason = (f"{reason}; {unreached}" if (reason or "").startswith("cancelled")
                      else f"{unreached}; this task ({own}) ended with {status}: {reason}")
        return ChiefOutcome(status, reason, None, {})
    if status == "unsupported":
        return ChiefOutcome(status, reason, None, {})
    hosts = report.hosts
    if hosts is None:
        why = report.hosts_error or "the chief's task returned no host reports"
        gone = probe(peers)
        named = (f"; not reachable: {', '.join(m.label for m in gone)}"
                 if gone else "")
        return ChiefOutcome("failed", f"could not gather every host's figures: {why}{named}",
                            None, {})
    by_name = {r.task_figures.task: r for r in hosts}
    expected = [own, *(m.name for m in peers)]
    problems = [f"host of task {name} never reported its figures"
                for name in expected if name not in by_name]
    problems += [f"host of task {name} failed: {r.status}: {r.reason}"
                 for name, r in by_name.items() if r.status != "ok"]
    if problems:
        return ChiefOutcome("failed", "; ".join(problems), None, {})
    peaks = {name: float(r.peak_flops_per_s) for name, r in by_name.items()
             if r.peak_flops_per_s}
    if report.figures is None:  # e.g. the all-reduce probe: no training figures
        return ChiefOutcome(status, reason, None, peaks)
    tasks = [by_name[name].task_figures for name in expected]
    figures = combine(spec, report.figures, tasks)
    figures = replace(figures, combination=(
        f"{figures.combination}; multi-host: every task's own figures were gathered "
        f"from its host through the cluster"))
    own_fault = figures.peak_fault  # the chief's remark on its own share's peak
    # MFU over the peaks of the hosts where the steps run: every MultiWorkerMirrored
    # worker; the worker servers of a parameter-server run (not its coordinator).
    figures = run_mfu(figures, [TaskPeak.of_host(r) for r in by_name.values()
                                if r.task_figures.role == "worker"])
    # As for local runs, a missing MFU is explained in the reason (never mistaken for a
    # failure); the run-wide remark replaces the chief's remark on its own share.
    parts = [p for p in (reason or "").split("; ") if p and p != own_fault]
    reason = "; ".join([*parts, *([figures.peak_fault] if figures.peak_fault else [])]) or None
    return ChiefOutcome(status, reason, figures, peaks)


def reachable(member: Member, timeout: float = PROBE_TIMEOUT_S) -> bool:
    """Whether ``member``'s TensorFlow port accepts a TCP connection."""
    try:
        with socket.create_connection(member.endpoint(), timeout=timeout):
            return True
    except OSError:
        return False


def unreachable(peers: list[Member]) -> list[Member]:
    """The peers whose port does not answer (probed in parallel, bounded)."""
    if not peers:
        return []
    with ThreadPoolExecutor(max_workers=min(16, len(peers))) as pool:
        answers = list(pool.map(reachable, peers))
    return [m for m, ok in zip(peers, answers, strict=True) if not ok]


class PortWatch:
    """Says when ``member``'s port, once seen open, has stayed closed: the process
    behind it has ended (a server uses it to learn that the coordinator left)."""

    def __init__(self, member: Member, interval_s: float = WATCH_INTERVAL_S,
                 misses: int = WATCH_MISSES) -> None:
        self.member, self.interval_s, self.misses = member, interval_s, misses
        self.seen, self.missed, self.next_at = False, 0, 0.0

    def left(self) -> bool:
        now = time.monotonic()
        if now < self.next_at:
            return False
        self.next_at = now + self.interval_s
        if reachable(self.member, timeout=min(PROBE_TIMEOUT_S, self.interval_s)):
            self.seen, self.missed = True, 0
            return False
        self.missed += 1
        return self.seen and self.missed >= self.misses


def _run_supervised(spec: RunSpec, task: Task, tf_config: dict[str, Any], log: Path,
                    profile_dir: Path, watch: PortWatch | None = None,
                    deadline_s: float | None = None) -> tuple[str, TaskReport | None]:
    """Run the task in a child process (``bench.child``) under the run's timeout.

    The watch has to come from outside: a MultiWorkerMirrored constructor waiting for
    a peer that never starts blocks inside TensorFlow without releasing the GIL, so
    no thread of that process could end it. On timeout the child is asked for its
    stacks (into the log), then its process group is SIGKILLed; so is a server's
    once ``watch`` says the coordinator left.
    SIGTERM (Slurm's scancel or time limit, which reach every process of the step)
    or Ctrl-C ends the task the same way, as ``"cancelled"``.
    Returns (``"done"``, ``"timeout"``, ``"cancelled"``, ``"peer_left"`` or a
    description of the exit, the task's report or None).
    """
    log.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="stratbench-worker-") as tmp:
        run_dir = Path(tmp)
        spec_file = run_dir / "spec.json"
        spec_file.write_text(json.dumps(spec.to_dict()), encoding="utf-8")
        cmd = child_command("bench.child", *task_args(spec_file, run_dir, task, time.time(),
                                                      profile_dir))
        status = "done"
        deadline = time.monotonic() + (spec.timeout_s if deadline_s is None else deadline_s)
        # The group is killed as the block ends, also on Ctrl-C: nothing of the task
        # outlives it.
        with open(log, "ab") as fh, process_group(
                cmd, stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env=child_env(task, tf_config, detect())) as proc:
            while True:
                try:
                    proc.wait(timeout=POLL_S)
                    break
                except subprocess.TimeoutExpired:
                    pass
                except KeyboardInterrupt:  # SIGTERM (scancel, a time limit) or Ctrl-C
                    status = "cancelled"
                    _dump_stacks(proc)
                    break
                if watch is not None and watch.left():
                    status = "peer_left"
                    break
                if time.monotonic() > deadline:
                    status = "timeout"
                    _dump_stacks(proc)
                    break
        report = read_report(run_dir, task.name)
    if status == "done" and report is None:
        status = f"exited with code {proc.returncode} without a result"
    return status, report


def _dump_stacks(proc: subprocess.Popen[Any]) -> None:
    """Ask the task's process for its Python stacks (into its log), briefly."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(proc.pid, signal.SIGUSR1)
    with contextlib.suppress(subprocess.TimeoutExpired, KeyboardInterrupt):
        proc.wait(timeout=STACK_DUMP_WAIT_S)
