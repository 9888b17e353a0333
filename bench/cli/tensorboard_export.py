"""``stratbench tensorboard SWEEP_DIR``: a sweep as TensorBoard event files.

Writes ``SWEEP_DIR/tensorboard/`` (each stored run an HParams session: its spec as
hyperparameters, its figures as metrics) and prints the command that opens it
beside the sweep's profiles. ``bench run`` does the same at the end of a sweep.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.errors import UsageError
from bench.exits import Exit

# The export reads the results through the reports (pandas, scipy.stats): imported when it
# runs, so that building the parser (every `python -m bench` process) does without them.
if TYPE_CHECKING:
    from reports.tensorboard import Exported


def _line(exported: Exported) -> str:
    return (f"tensorboard: {exported.sessions} run(s) as HParams sessions in "
            f"{exported.logdir}; open them beside the profiles with: {exported.command}")


def export_after_sweep(sweep_dir: Path) -> Exported | None:
    """The export at the end of ``bench run``: a failure is printed, never raised
    (the sweep's results and exit code stand)."""
    try:  # the import too: an export that fails to import is printed like any failure
        from reports.tensorboard import export

        exported = export(sweep_dir)
    except Exception as exc:  # reported; the sweep's outcome stands
        print(f"warning: the TensorBoard export of {sweep_dir} could not be written: "
              f"{type(exc).__name__}: {exc}. Results are intact; retry with "
              f"`python -m bench tensorboard {sweep_dir}`", file=sys.stderr)
        return None
    print(_line(exported))
    return exported


def cmd_tensorboard(args: argparse.Namespace) -> int:
    if not args.sweep_dir.is_dir():
        raise UsageError(f"no sweep directory at {args.sweep_dir}. "
                         f"Received: sweep_dir={str(args.sweep_dir)!r}")
    from reports.tensorboard import export  # once the arguments stand

    print(_line(export(args.sweep_dir)))
    return Exit.OK


def add_parser(sub: Any) -> None:
    """Register ``tensorboard``."""
    p = sub.add_parser("tensorboard", help="write a sweep as TensorBoard HParams sessions "
                                           "and print the command that opens it")
    p.add_argument("sweep_dir", type=Path, help="a directory written by `bench run --out`")
    p.set_defaults(func=cmd_tensorboard)
