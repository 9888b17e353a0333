"""A multi-host run on one machine (``bench cluster-demo``): every host a network namespace.

Each task of a multi-process strategy runs ``python -m bench worker`` inside its
own host (``bench.launch.netns``: a namespace with its own address in
198.18.0.0/15, on a switch, its link optionally shaped), with its own
``TF_CONFIG`` naming those addresses, pinned to its own cores. Nothing is shared
but the emulated network: each host writes into its own directory, and the
chief's result holds every host's figures only because they crossed the network
(``bench.child.backends.tf.gather``). It is the same command a user runs on real hosts.

Layout (``layout``): MultiWorkerMirrored puts one worker per host, on disjoint
cores when there are enough (2 cores, 2 hosts: one core each). ParameterServer
puts the coordinator (chief) and the parameter servers on host 0 and each worker
server on a host of its own (1 ps + 2 workers: 3 hosts); those hosts share every
core, because a server pinned to one core deadlocks on its first step (TF 2.21).

Budgets (``cpu``): every host gets a cgroup with that CPU quota (``bench.launch.cgroups``)
instead of pinned cores, and its training process as many intra-op threads as the
quota rounds up to; the link rate is shaped with ``tbf`` and a delay with ``netem``
where the kernel has it (else the delay is dropped and the result says so). The
chief's result records both (``launcher["budget"]``), and the demo reads each
host's throttling statistics before the groups are removed.

Deadlines: the chief's own supervisor ends its task at the spec's timeout. Once
the chief has ended, every other host has ``PEER_END_S`` to end by itself (a
MultiWorkerMirrored peer of a dead worker fails within ~0.1 s; a frozen one by
TensorFlow's ~10 s heartbeat; servers end once the coordinator's port closes);
the demo kills what is left after that and reports it. The network is removed
whatever happens, and a process left in any namespace is killed and reported.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from bench.errors import BenchError
from bench.hardware import Hardware, detect
from bench.launch.cgroups import CpuBudget
from bench.launch.netns import (
    LinkShape,
    NetnsError,
    Network,
    applicable,
    ours,
    unavailable_reason,
)
from bench.launch.worker import HOST_BUDGET_VAR
from bench.results.schema import RunResult
from bench.results.store import SweepStore, load
from bench.spec import RunSpec
from bench.strategies import STRATEGIES
from bench.tasks import Task, split_cores

BASE_PORT = 20000
# The stated deadline: once the chief has ended, every other host ends within this.
PEER_END_S = 30.0
# The demo's own backstop beyond the spec's timeout (the chief's supervisor ends
# its task at the timeout, then dumps stacks and writes the result).
MARGIN_S = 30.0
POLL_S = 0.1
HUB_ROLES = ("chief", "ps")


class DemoError(BenchError):
    """The configuration cannot run as a multi-host demo (the CLI exits 2)."""


@dataclass(frozen=True)
class HostPlan:
    """The tasks one emulated host runs and the cores they are pinned to."""

    tasks: tuple[Task, ...]
    cores: tuple[int, ...] = ()  # empty: every core


def layout(spec: RunSpec, hw: Hardware | None = None, pin: bool = True) -> list[HostPlan]:
    """Hosts of ``spec``'s cluster tasks: coordinator and parameter servers on host 0,
    every other task (a worker) on a host of its own; training hosts on disjoint
    cores where there are enough (``pin``; hosts with a CPU budget are not pinned:
    the quota is their share), server hosts on every core."""
    tasks = [t for t in STRATEGIES.get(spec.strategy).plan(spec, hw or detect())
             if t.cluster_job]
    if not tasks:
        raise DemoError(f"strategy {spec.strategy} runs in one process; a multi-host demo "
                        f"needs a cluster strategy (multi_worker_mirrored, "
                        f"parameter_server). Received: strategy={spec.strategy!r}")
    hub = tuple(t for t in tasks if t.role in HUB_ROLES)
    own = [t for t in tasks if t.role not in HUB_ROLES]
    trainers = [t for t in own if t.runner == "train"]
    core_sets = iter(split_cores(len(trainers)) if trainers and pin else [])
    hosts = [HostPlan(hub)] if hub else []
    hosts += [HostPlan((t,), next(core_sets, ()) if t.runner == "train" else ())
              for t in own]
    return hosts


def tf_configs(hosts: Sequence[HostPlan], addresses: Sequence[str]) -> dict[str, dict[str, Any]]:
    """TF_CONFIG per task name: the k-th task of a host listens on BASE_PORT + k."""
    cluster: dict[str, dict[int, str]] = {}
    for plan, addr in zip(hosts, addresses, strict=True):
        for k, t in enumerate(plan.tasks):
            cluster.setdefault(t.cluster_job or "", {})[t.index] = f"{addr}:{BASE_PORT + k}"
    spec = {job: [by_index[i] for i in sorted(by_index)] for job, by_index in cluster.items()}
    return {t.name: {"cluster": spec, "task": {"type": t.cluster_job, "index": t.index}}
            for plan in hosts for t in plan.tasks}


@dataclass
class HostOutcome:
    """How one host's ``bench worker`` ended."""

    task: str
    host: str  # e.g. "host1"
    address: str
    cores: tuple[int, ...]
    started: bool
    returncode: int | None = None
    cpus: float | None = None  # its CPU budget (None: its cores, unlimited)
    # Seconds after the chief's worker ended (negative: before it); None: never ended.
    ended_after_chief_s: float | None = None
    killed_by_demo: bool = False
    output: str = ""  # its stdout/stderr file


@dataclass
class DemoOutcome:
    """A demo run: the chief's stored result and how every host ended."""

    result: RunResult | None
    hosts: list[HostOutcome]
    shape: LinkShape
    wall_s: float
    leftovers: dict[str, list[int]] = field(default_factory=dict)  # netns -> pids
    # What every host was given, as the chief's result records it (launcher["budget"]).
    budget: dict[str, Any] = field(default_factory=dict)
    # Each host's cgroup cpu.stat at the end (periods, throttled periods and time).
    cpu_stats: dict[str, dict[str, int]] = field(default_factory=dict)

    @property
    def clean(self) -> bool:
        """Every host ended by itself within the deadline and nothing was left."""
        return not self.leftovers and not any(h.killed_by_demo for h in self.hosts)


def budget_record(shape: LinkShape, asked: LinkShape, note: str | None,
                  cpu: CpuBudget | None, backend: str) -> dict[str, Any]:
    """What every host was given, as results record it: the CPU budget (None: the
    hosts' own cores), the link as applied and as asked, and what was dropped."""
    return {"cpu": cpu.to_dict() if cpu is not None else None, "cgroup": backend or None,
            "link": shape.to_dict(), "link_asked": asked.to_dict(), "note": note}


def worker_command(spec_file: Path, target: Path) -> list[str]:
    """The command every host runs: ``bench worker`` on the shared spec file."""
    return [sys.executable, "-m", "bench", "worker", "--spec", str(spec_file),
            "--cluster", "tf_config", "--out", str(target)]


def run_demo(spec: RunSpec, out: Path, shape: LinkShape | None = None, *,
             fault: str | None = None, absent: Sequence[str] = (),
             cpu: CpuBudget | None = None,
             progress: Callable[[str], None] = lambda _: None) -> DemoOutcome:
    """Run ``spec`` on emulated hosts; the chief's result goes to ``out``.

    ``fault`` is passed to every host as STRATBENCH_FAULT (e.g.
    ``"worker1:kill_after_warmup"``); the tasks named in ``absent`` are never
    started (a host that never comes up); ``cpu`` is every host's CPU budget.
    Raises NetnsError where namespaces cannot be made, CgroupError where budgets
    cannot be set, DemoError for a configuration without cluster tasks.
    """
    why = unavailable_reason()
    if why is not None:
        raise NetnsError(f"bench cluster-demo cannot run here: {why}")
    asked = shape or LinkShape()
    shape, note = applicable(asked)
    if note:
        progress(note)
    plans = layout(spec, pin=cpu is None)
    _check_absent(plans, absent)
    out = Path(out).resolve()
    demo_dir = out / "hosts"
    demo_dir.mkdir(parents=True, exist_ok=True)
    spec_file = demo_dir / f"{spec.key()}.spec.json"
    spec_file.write_text(json.dumps(spec.to_dict()), encoding="utf-8")
    chief_name = next(t.name for p in plans for t in p.tasks if t.main)
    t0 = time.monotonic()
    before = SweepStore(out).result_files_of(spec)
    outcomes: list[HostOutcome] = []
    procs: dict[str, subprocess.Popen[Any]] = {}
    leftovers: dict[str, list[int]] = {}
    budget: dict[str, Any] = {}
    cpu_stats: dict[str, dict[str, int]] = {}
    with Network(len(plans), shape, [p.cores for p in plans], cpu=cpu) as net:
        budget = budget_record(shape, asked, note, cpu,
                               net.groups.backend_name if net.groups else "")
        configs = tf_configs(plans, [h.address for h in net.hosts])
        files: list[IO[bytes]] = []
        try:
            for plan, host in zip(plans, net.hosts, strict=True):
                for t in plan.tasks:
                    outcomes.append(HostOutcome(t.name, host.label, host.address,
                                                host.cores, t.name not in absent,
                                                cpus=host.cpus))
                    if t.name in absent:
                        progress(f"{t.name}: {host.label} ({host.address}) never started "
                                 f"(absent on purpose)")
                        continue
                    log = demo_dir / f"{spec.key()}.{t.name}.out"
                    outcomes[-1].output = str(log)
                    target = out if t.main else demo_dir / t.name
                    files.append(open(log, "ab"))  # noqa: SIM115 (closed in finally)
                    procs[t.name] = net.popen(
                        host, worker_command(spec_file, target), stdout=files[-1],
                        stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                        env=_task_env(configs[t.name], budget, fault),
                        cwd=str(Path(__file__).resolve().parents[2]))
                    address = configs[t.name]["cluster"][t.cluster_job][t.index]
                    where = (f"{host.cpus:g} CPU" if host.cpus is not None else
                             f"cores {','.join(map(str, host.cores)) or 'all'}")
                    progress(f"{t.name}: {host.label} {address} {where}")
            _wait(procs, outcomes, chief_name, spec.timeout_s + MARGIN_S, progress)
            leftovers = {k: v for k, v in net.live_pids().items() if v}
            if net.groups is not None:
                cpu_stats = {h.label: net.groups.stats(h.label) for h in net.hosts}
        finally:
            for fh in files:
                fh.close()
    # The network is gone here (Network.__exit__ killed anything left in it).
    result = new_result(out, spec, before)
    return DemoOutcome(result, outcomes, shape, time.monotonic() - t0, leftovers, budget,
                       cpu_stats)


def _check_absent(plans: Sequence[HostPlan], absent: Sequence[str]) -> None:
    names = {t.name for p in plans for t in p.tasks}
    unknown = sorted(set(absent) - names)
    if unknown:
        raise DemoError(f"absent names no task of this run ({', '.join(sorted(names))}). "
                        f"Received: absent={unknown}")


def _task_env(tf_config: Mapping[str, Any], budget: Mapping[str, Any],
              fault: str | None) -> dict[str, str]:
    """A host task's environment: its TF_CONFIG, the hosts' budget, and the fault to
    inject (a STRATBENCH_FAULT of the caller's own never leaks into a host)."""
    env = {**os.environ, "TF_CONFIG": json.dumps(tf_config),
           HOST_BUDGET_VAR: json.dumps(budget)}
    env.pop("STRATBENCH_FAULT", None)
    if fault:
        env["STRATBENCH_FAULT"] = fault
    return env


def _wait(procs: dict[str, subprocess.Popen[Any]], outcomes: list[HostOutcome],
          chief: str, deadline_s: float, progress: Callable[[str], None]) -> None:
    """Wait for the chief (up to ``deadline_s``), then ``PEER_END_S`` for the others;
    record when each ended and kill (recording it) whatever outlives that."""
    t0 = time.monotonic()
    ended: dict[str, float] = {}
    chief_end: float | None = None if chief in procs else t0
    while True:
        now = time.monotonic()
        for name, proc in procs.items():
            if name not in ended and proc.poll() is not None:
                ended[name] = now
        if chief_end is None and chief in ended:
            chief_end = ended[chief]
            progress(f"{chief} (chief) ended after {chief_end - t0:.1f} s")
        if len(ended) == len(procs):
            break
        if chief_end is None and now - t0 > deadline_s:
            progress(f"the chief did not end within {deadline_s:g} s: ending the demo")
            chief_end = now
        if chief_end is not None and now - chief_end > PEER_END_S:
            break
        time.sleep(POLL_S)
    base = chief_end if chief_end is not None else time.monotonic()
    for o in outcomes:
        if o.task not in procs:
            continue
        proc = procs[o.task]
        if o.task in ended:
            o.returncode, o.ended_after_chief_s = proc.returncode, ended[o.task] - base
            continue
        o.killed_by_demo = True
        progress(f"{o.task} on {o.host} did not end within {PEER_END_S:g} s of the chief: "
                 f"killed")
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        try:
            o.returncode = proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            o.returncode = None


def new_result(out: Path, spec: RunSpec, before: set[Path]) -> RunResult | None:
    """The newest result of ``spec`` in ``out`` not among ``before`` (None: none)."""
    new = sorted(SweepStore(out).result_files_of(spec) - before, key=lambda p: p.stat().st_mtime)
    return load(new[-1]) if new else None


def leftover_namespaces() -> list[str]:
    """Namespaces of bench's networks that still exist (should be none after a demo)."""
    return ours()
