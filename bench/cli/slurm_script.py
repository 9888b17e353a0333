"""``stratbench slurm-script``: the sbatch script for a multi-host run.

Prints (or writes to ``--output``) a batch script that runs ``stratbench worker
--cluster slurm`` in every task of one job step: the configuration inside it, the
nodes and tasks it needs, a time limit from the run's timeout. Submit it with
``sbatch FILE``; the chief writes the result into ``--out`` on the first node, and
the job's exit code is the run's (0 ok, 3 failed or timed out).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from bench.cli.common import add_matrix_args
from bench.cli.worker import one_spec
from bench.errors import UsageError
from bench.exits import Exit
from bench.launch.slurm.script import ScriptError, SlurmOptions, layout, sbatch_script


def add_parser(sub: Any) -> None:
    """Register ``slurm-script``."""
    p = sub.add_parser("slurm-script", help="an sbatch script for a multi-host run on Slurm",
                       description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    add_matrix_args(p)
    p.add_argument("--spec", type=Path, help="the configuration as a RunSpec JSON file "
                                             "(or a stored result) instead of the options")
    p.add_argument("--out", type=Path, required=True,
                   help="result directory (absolute; on the first node, or shared)")
    p.add_argument("--venv", type=Path, default=Path(sys.prefix),
                   help="virtual environment with stratbench, the same path on every node "
                        "(default: this one)")
    p.add_argument("--nodes", type=int, default=1)
    p.add_argument("--tasks-per-node", type=int,
                   help="default: the run's tasks spread evenly over the nodes")
    p.add_argument("--gpus-per-task", type=int, default=0)
    p.add_argument("--cpus-per-task", type=int)
    p.add_argument("--time", type=int, dest="time_min",
                   help="time limit in minutes (default: the run's timeout plus 3 minutes)")
    p.add_argument("--partition")
    p.add_argument("--job-name", default="stratbench")
    p.add_argument("--overcommit", action="store_true",
                   help="allow more tasks than CPUs (a small test node)")
    p.add_argument("--output", type=Path, help="write the script here instead of stdout")
    p.set_defaults(func=cmd_slurm_script)


def cmd_slurm_script(args: argparse.Namespace) -> int:
    spec = one_spec(args, "slurm-script")
    if not args.out.is_absolute() or not args.venv.is_absolute():
        raise UsageError(f"--out and --venv must be absolute paths (the job runs elsewhere). "
                         f"Received: --out={args.out}, --venv={args.venv}")
    try:
        opts = SlurmOptions(out=args.out, venv=args.venv, nodes=args.nodes,
                            tasks_per_node=args.tasks_per_node,
                            gpus_per_task=args.gpus_per_task, cpus_per_task=args.cpus_per_task,
                            time_min=args.time_min, partition=args.partition,
                            job_name=args.job_name, overcommit=args.overcommit)
        text = sbatch_script(spec, opts)
        ntasks, per_node = layout(spec, opts)
    except ScriptError as exc:
        raise UsageError(str(exc)) from None
    if args.output is None:
        print(text, end="")
        return Exit.OK
    args.output.write_text(text, encoding="utf-8")
    # sbatch opens the job's output file in --out before the script runs.
    args.out.mkdir(parents=True, exist_ok=True)
    print(f"wrote {args.output}: {ntasks} tasks on {args.nodes} node(s), {per_node} per "
          f"node; submit with: sbatch {args.output}")
    return Exit.OK
