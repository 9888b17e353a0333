"""``python -m bench worker``: run one task of a multi-host run.

Every host runs the same command with the same configuration; the cluster comes
from TF_CONFIG (set by the user or by Kubernetes tooling) or, under Slurm, from
Slurm's variables (``bench.launch.slurm.step``). The chief (the
MultiWorkerMirrored worker 0, or the ParameterServer coordinator) writes the
run's result into ``--out`` like a sweep, with every host's figures gathered
through the cluster; the other tasks print a line and exit (parameter-server and
worker servers once the coordinator's port has closed). ``--timeout``
bounds every task: the task runs in a supervised child process; past the timeout
it dumps its stacks into its log and is killed, the chief records a ``timeout``
result, and the command exits with code 3.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from bench.cli.common import add_matrix_args, specs_from_args, writable_dir
from bench.errors import UsageError
from bench.launch import worker
from bench.spec import RunSpec


def spec_from_file(path: Path) -> RunSpec:
    """The RunSpec in ``path``: a spec as JSON, or a stored result (its ``spec``)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return RunSpec.from_dict(data.get("spec", data) if isinstance(data, dict) else data)
    except (OSError, ValueError, TypeError, AttributeError) as exc:
        raise UsageError(f"--spec must name a readable RunSpec JSON file: {exc}. "
                         f"Received: --spec={path}") from None


def spec_from_json(text: str) -> RunSpec:
    """The RunSpec written out as JSON text (``--spec-json``, as slurm-script does)."""
    try:
        return RunSpec.from_dict(json.loads(text))
    except (ValueError, TypeError, AttributeError) as exc:
        raise UsageError(f"--spec-json must be a RunSpec as JSON: {exc}. "
                         f"Received: --spec-json={text[:200]!r}") from None


def one_spec(args: argparse.Namespace, command: str) -> RunSpec:
    """The one configuration a multi-host command lays out: ``--spec`` (a file), else
    the matrix options, which must give exactly one."""
    specs = [spec_from_file(args.spec)] if args.spec else specs_from_args(args)
    if len(specs) != 1:
        raise UsageError(f"{command} lays out exactly one configuration; the options give "
                         f"{len(specs)}")
    return specs[0]


def cmd_worker(args: argparse.Namespace) -> int:
    spec = spec_from_json(args.spec_json) if args.spec_json else one_spec(args, "worker")
    return worker.run_worker(spec, args.cluster, args.out)


def _out_dir(text: str) -> Path:
    """``--out`` checked as ``bench run`` checks it, before the run's processes start:
    a file, or a directory this user cannot write in, is a usage error (exit 2)."""
    try:
        return writable_dir(Path(text))
    except UsageError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_parser(sub: Any) -> None:
    """Register ``worker``."""
    p = sub.add_parser("worker", help="run one task of a multi-host run (TF_CONFIG or Slurm)")
    add_matrix_args(p)
    p.add_argument("--out", type=_out_dir, required=True,
                   help="sweep directory where the chief writes the result")
    p.add_argument("--spec", type=Path,
                   help="the configuration as a RunSpec JSON file (or a stored result) "
                        "instead of the matrix options: every host runs the same file")
    p.add_argument("--spec-json", help="the configuration as RunSpec JSON text (what "
                                       "`stratbench slurm-script` writes into its job)")
    p.add_argument("--cluster", choices=["auto", "tf_config", "slurm"], default="auto",
                   help="where the cluster comes from (auto: TF_CONFIG if set, else Slurm)")
    p.set_defaults(func=cmd_worker, needs_tensorflow=True)
