"""The cluster demo on Slurm: the emulated hosts are Slurm nodes (``bench lab --engine
slurm``).

The same hosts as ``bench cluster-demo`` (``bench.launch.cluster_demo.layout``: the
coordinator and parameter servers on one host, every worker on a host of its own,
each host a network namespace with its CPU quota and shaped link), but the tasks
reach them the way users' jobs do: a private Slurm (``bench.launch.slurm.private``)
with one ``slurmd`` per host, and one ``srun`` of ``stratbench worker --cluster
slurm`` placing each task on its host (``--distribution=arbitrary`` with a host
file in rank order). Each task computes its ``TF_CONFIG`` from Slurm's variables.
The outcome has the demo's shape, so the lab reads both alike.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from bench.hardware import CPU_BUDGET_VAR
from bench.launch.cgroups import CpuBudget
from bench.launch.cluster_demo import (
    MARGIN_S,
    DemoOutcome,
    HostOutcome,
    budget_record,
    layout,
    new_result,
)
from bench.launch.netns import LinkShape, applicable, pids_in
from bench.launch.slurm.private import PrivateSlurm, SlurmError
from bench.launch.slurm.script import worker_command
from bench.launch.worker import HOST_BUDGET_VAR
from bench.results.store import SweepStore
from bench.spec import RunSpec

# This interpreter's stratbench, whatever the tasks' working directory holds.
PROGRAM = [sys.executable, "-m", "bench"]
# Once srun has ended, the step's processes have this long to leave the nodes.
STEP_END_S = 15.0
POLL_S = 0.2


def run_on_slurm(spec: RunSpec, out: Path, shape: LinkShape | None = None, *,
                 cpu: CpuBudget | None = None,
                 progress: Callable[[str], None] = lambda _: None) -> DemoOutcome:
    """Run ``spec`` with every host a Slurm node; the chief's result goes to ``out``.
    Raises SlurmError where a private Slurm cannot start."""
    asked = shape or LinkShape()
    shape, note = applicable(asked)
    if note:
        progress(note)
    plans = layout(spec, pin=False)
    out = Path(out).resolve()
    (out / "hosts").mkdir(parents=True, exist_ok=True)
    before = SweepStore(out).result_files_of(spec)
    t0 = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix="slurm-", dir=out / "hosts"))
    try:
        with PrivateSlurm(len(plans), work, budget=cpu, shape=shape) as slurm:
            net = slurm.network
            assert net is not None
            budget = budget_record(shape, asked, note, cpu,
                                   net.groups.backend_name if net.groups else "")
            nodes = net.hosts[1:]
            hostfile = work / "hostfile"
            hostfile.write_text("".join(f"{name}\n" for name, p in
                                        zip(slurm.node_names, plans, strict=True)
                                        for _ in p.tasks), encoding="utf-8")
            ntasks = sum(len(p.tasks) for p in plans)
            env = {"SLURM_HOSTFILE": str(hostfile), HOST_BUDGET_VAR: json.dumps(budget),
                   "PYTHONSAFEPATH": "1"}
            if cpu is not None:
                env[CPU_BUDGET_VAR] = f"{cpu.cpus:g}"
            log = out / "hosts" / f"{spec.key()}.srun.out"
            progress(f"{ntasks} task(s) on {len(plans)} Slurm node(s): " + ", ".join(
                f"{name}={'+'.join(t.name for t in p.tasks)}"
                for name, p in zip(slurm.node_names, plans, strict=True)))
            with open(log, "ab") as fh:
                proc = slurm.popen(["srun", f"--nodes={len(plans)}", f"--ntasks={ntasks}",
                                    "--distribution=arbitrary", "--overcommit",
                                    "--job-name=stratbench-lab",
                                    *worker_command(spec, out, PROGRAM)],
                                   env, stdout=fh, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL)
            returncode, killed = _wait(slurm, proc, spec.timeout_s + MARGIN_S, progress)
            leftovers = _leftovers([h.netns for h in nodes])
            cpu_stats = ({h.label: net.groups.stats(h.label) for h in net.hosts}
                         if net.groups is not None else {})
            hosts = [HostOutcome(t.name, host.label, host.address, (), True, returncode,
                                 cpus=host.cpus, killed_by_demo=killed, output=str(log))
                     for p, host in zip(plans, nodes, strict=True) for t in p.tasks]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return DemoOutcome(new_result(out, spec, before), hosts, shape, time.monotonic() - t0,
                       leftovers, budget, cpu_stats)


def _wait(slurm: PrivateSlurm, proc: subprocess.Popen[bytes], deadline_s: float,
          progress: Callable[[str], None]) -> tuple[int | None, bool]:
    """srun's exit code, and whether it had to be cancelled past ``deadline_s``."""
    try:
        return proc.wait(timeout=deadline_s), False
    except subprocess.TimeoutExpired:
        progress(f"the job did not end within {deadline_s:g} s: cancelling it")
    with contextlib.suppress(SlurmError):
        slurm.run(["scancel", "--name=stratbench-lab"], timeout=10.0)
    try:
        return proc.wait(timeout=STEP_END_S + 30), True
    except subprocess.TimeoutExpired:
        return None, True


def _leftovers(netns: list[str]) -> dict[str, list[int]]:
    """Processes other than slurmd still on the nodes once the step has had
    ``STEP_END_S`` to leave."""
    deadline = time.monotonic() + STEP_END_S
    while True:
        left = {name: [pid for pid in pids_in(name) if not _is_slurmd(pid)]
                for name in netns}
        left = {k: v for k, v in left.items() if v}
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(POLL_S)


def _is_slurmd(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip() == "slurmd"
    except OSError:
        return True  # gone meanwhile
