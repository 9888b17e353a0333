"""``stratbench list``: the expanded matrix, without running it."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from bench.cli.common import add_matrix_args, specs_from_args
from bench.errors import UsageError
from bench.exits import Exit
from bench.hardware import detect
from bench.results.store import SweepStore
from bench.strategies import STRATEGIES


def cmd_list(args: argparse.Namespace) -> int:
    if args.out is not None and args.out.exists() and not args.out.is_dir():
        raise UsageError(f"--out must name a sweep directory, but {args.out} is a file. "
                         f"Received: --out={args.out}")
    hw = detect()
    specs = specs_from_args(args)
    for i, spec in enumerate(specs, 1):
        reason = STRATEGIES.get(spec.strategy).unsupported_reason(spec, hw)
        state = f"unsupported: {reason}" if reason else "will run"
        if args.out and SweepStore(args.out).has_result(spec):
            state = "done"
        print(f"{i:4d}  {spec.label():55s} {state}")
    print(f"{len(specs)} configuration(s)")
    return Exit.OK


def add_parser(sub: Any) -> None:
    """Register ``list``."""
    p = sub.add_parser("list", help="print the expanded matrix without running it")
    add_matrix_args(p)
    p.add_argument("--out", type=Path, help="mark configurations already done there")
    p.set_defaults(func=cmd_list)
