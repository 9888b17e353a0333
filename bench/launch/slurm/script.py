"""The sbatch script of a multi-host run (``stratbench slurm-script``).

One job step runs ``stratbench worker --cluster slurm`` in every task; each task
computes its place in the cluster from Slurm's variables (``bench.launch.slurm.step``).
The configuration travels inside the script as JSON on the worker's command line,
so no file has to be shared between the nodes; the chief (the first task of the
first node) writes the run's result into the output directory on its own node.

The job's exit code is the run's: ``srun`` returns the highest exit code of its
tasks, and every task exits as ``stratbench worker`` does (0 ok or unsupported,
3 failed or timed out, 2 a configuration that does not fit the job), so
``sacct``'s COMPLETED or FAILED agrees with the stored result. The time limit is
the run's timeout plus a margin for start-up and the result; a task also ends
on its own before the job's end (the worker reads it), so a run that needs
longer is recorded as ``timeout``, its stacks in its log, rather than killed.
"""

from __future__ import annotations

import json
import math
import shlex
from dataclasses import dataclass
from pathlib import Path

from bench.errors import BenchError
from bench.launch.k8s import ManifestError, pod_tasks
from bench.spec import RunSpec

# Beyond the run's timeout: every task's start-up (TensorFlow's import), the
# gathering of every host's figures and the chief's result.
TIME_MARGIN_S = 180.0


class ScriptError(BenchError):
    """Options that cannot make a valid job (the CLI exits 2)."""


@dataclass(frozen=True)
class SlurmOptions:
    """What the job needs besides the run's spec."""

    out: Path  # where the chief writes the result (a directory on the first node)
    venv: Path  # the virtual environment with stratbench installed, on every node
    nodes: int = 1
    tasks_per_node: int | None = None  # None: the run's tasks spread evenly
    gpus_per_task: int = 0
    cpus_per_task: int | None = None
    time_min: int | None = None  # None: from the run's timeout
    partition: str | None = None
    job_name: str = "stratbench"
    overcommit: bool = False  # more tasks than CPUs (a small test node)

    def __post_init__(self) -> None:
        for name in ("nodes", "tasks_per_node", "cpus_per_task", "time_min"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ScriptError(f"SlurmOptions.{name} must be >= 1. Received: {name}={value}")
        if self.gpus_per_task < 0:
            raise ScriptError(f"SlurmOptions.gpus_per_task must be >= 0. "
                              f"Received: gpus_per_task={self.gpus_per_task}")


def time_limit_min(spec: RunSpec, opts: SlurmOptions) -> int:
    """The job's time limit in minutes: the run's timeout plus the margin."""
    return opts.time_min or math.ceil((spec.timeout_s + TIME_MARGIN_S) / 60)


def layout(spec: RunSpec, opts: SlurmOptions) -> tuple[int, int]:
    """(tasks, tasks per node) of the job; ScriptError where the nodes cannot hold them."""
    try:
        ntasks = len(pod_tasks(spec))
    except ManifestError as exc:
        raise ScriptError(str(exc)) from None
    per_node = opts.tasks_per_node or math.ceil(ntasks / opts.nodes)
    if opts.nodes > ntasks:
        raise ScriptError(f"{spec.strategy} on {spec.devices} devices runs {ntasks} tasks: "
                          f"more nodes would stay empty. Received: nodes={opts.nodes}")
    if per_node * opts.nodes < ntasks:
        raise ScriptError(f"{opts.nodes} node(s) x {per_node} task(s) cannot hold the run's "
                          f"{ntasks} tasks. Received: tasks_per_node={opts.tasks_per_node}")
    return ntasks, per_node


def worker_command(spec: RunSpec, out: Path, program: list[str]) -> list[str]:
    """What every task runs: ``program`` (``stratbench``, or an interpreter's
    ``python -m bench``) as the worker of ``spec``, its result into ``out``."""
    return [*program, "worker", "--cluster", "slurm", "--spec-json",
            json.dumps(spec.to_dict(), sort_keys=True, separators=(",", ":")),
            "--out", str(out)]


def sbatch_script(spec: RunSpec, opts: SlurmOptions) -> str:
    """The script ``sbatch`` runs: its directives, then one ``srun`` of the worker."""
    ntasks, per_node = layout(spec, opts)
    lines = ["#!/bin/bash",
             f"#SBATCH --job-name={opts.job_name}",
             f"#SBATCH --nodes={opts.nodes}",
             f"#SBATCH --ntasks={ntasks}",
             f"#SBATCH --ntasks-per-node={per_node}",
             f"#SBATCH --time={time_limit_min(spec, opts)}",
             f"#SBATCH --output={opts.out}/slurm-%j.out"]
    if opts.cpus_per_task:
        lines.append(f"#SBATCH --cpus-per-task={opts.cpus_per_task}")
    if opts.gpus_per_task:
        lines.append(f"#SBATCH --gpus-per-task={opts.gpus_per_task}")
    if opts.partition:
        lines.append(f"#SBATCH --partition={opts.partition}")
    if opts.overcommit:
        lines.append("#SBATCH --overcommit")
    lines += [
        "# Every task runs the same command and finds its place from Slurm's variables;",
        "# the chief writes the result into the output directory. The job's exit code is",
        "# the run's: 0 ok, 3 failed or timed out, 2 a configuration that does not fit.",
        "set -euo pipefail",
        f"mkdir -p {shlex.quote(str(opts.out))}",
        "exec srun " + " ".join(shlex.quote(a) for a in worker_command(
            spec, opts.out, [str(opts.venv / "bin" / "stratbench")])),
    ]
    return "\n".join(lines) + "\n"
