"""``stratbench run``: run a sweep, each configuration in its own process."""

from __future__ import annotations

import argparse
import datetime as _dt
import sys
from pathlib import Path
from typing import Any

from bench.cli.common import add_matrix_args, specs_from_args, writable_dir
from bench.cli.report import report_after_sweep
from bench.cli.tensorboard_export import export_after_sweep
from bench.exits import Exit
from bench.hardware import detect
from bench.launch.sweep import run_sweep
from bench.results.store import SweepStore, load_sweep
from reports.results_table import LEGEND, format_table


def _default_out() -> Path:
    return Path("results") / f"sweep-{_dt.datetime.now():%Y%m%d-%H%M%S}"


def cmd_run(args: argparse.Namespace) -> int:
    specs = specs_from_args(args)
    out = writable_dir(args.out or _default_out())
    hw = detect()
    where = (f"{len(hw.gpus)} GPU(s)" if hw.gpus
             else f"CPU only ({hw.cores} cores; device counts are logical devices sharing them)")
    print(f"stratbench: {len(specs)} configuration(s) -> {out}\nmachine: {hw.cpu_model}, {where}")
    outcome = run_sweep(specs, out)
    loaded = load_sweep(out)
    keys = {s.key() for s in specs}
    mine = [r for r in loaded.results if r.key in keys]
    print(f"\nresults: {SweepStore(out).results_dir} ({len(mine)} of {len(specs)} configurations)")
    print(format_table(mine))
    print("\n" + LEGEND)
    for w in loaded.warnings:
        print(f"warning: {w}", file=sys.stderr)
    if outcome.interrupted:
        return Exit.INTERRUPTED
    # The report never decides the exit code: a report failure is printed and the
    # sweep's results and status stand.
    report_after_sweep(out)
    export_after_sweep(out)
    if outcome.problems:
        print(f"\n{len(outcome.problems)} configuration(s) failed, ran out of memory or timed "
              f"out; logs in {out / 'logs'}", file=sys.stderr)
        return Exit.RUNS_FAILED
    return Exit.OK


def add_parser(sub: Any) -> None:
    """Register ``run``."""
    p = sub.add_parser("run", help="run a sweep (each configuration in its own process)")
    add_matrix_args(p)
    p.add_argument("--out", type=Path, help="sweep directory (re-use it to resume)")
    p.set_defaults(func=cmd_run)
