"""``stratbench show SWEEP_DIR``: a sweep's results as a table (or CSV)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from bench.errors import UsageError
from bench.exits import Exit
from bench.results.store import load_sweep
from bench.results.text import allreduce_table


def cmd_show(args: argparse.Namespace) -> int:
    # The tables are pandas frames: imported here, not when the parser is built.
    from reports.results_table import LEGEND, format_table, to_frame

    if not args.sweep_dir.is_dir():
        raise UsageError(f"no sweep directory at {args.sweep_dir}")
    loaded = load_sweep(args.sweep_dir)
    for w in loaded.warnings:
        print(f"warning: {w}", file=sys.stderr)
    probes = [r for r in loaded.results if r.allreduce is not None]
    training = [r for r in loaded.results if r.allreduce is None]
    if args.csv:
        print(to_frame(training).to_csv(index=False), end="")
        return Exit.OK
    if training or not probes:
        print(format_table(training))
        print("\n" + LEGEND)
    if probes:
        print(allreduce_table(probes))
    return Exit.OK


def add_parser(sub: Any) -> None:
    """Register ``show``."""
    p = sub.add_parser("show", help="table of a sweep's results")
    p.add_argument("sweep_dir", type=Path)
    p.add_argument("--csv", action="store_true", help="CSV instead of a table")
    p.set_defaults(func=cmd_show)
