"""``stratbench list``: the expanded matrix, without running it; on GPUs, the first
pass the budget buys (``bench.adaptive.plan``)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from bench.adaptive.plan import (
    MAKE_BENCH_PROBE_S,
    MAKE_BENCH_REPORT_S,
    MAKE_BENCH_S,
    MAKE_BENCH_SWEEP_S,
    plan_first_pass,
)
from bench.cli.allreduce import default_devices
from bench.cli.common import add_matrix_args, specs_from_args
from bench.cli.run import budget_duration
from bench.errors import UsageError
from bench.exits import Exit
from bench.hardware import Hardware, detect, topology, topology_links
from bench.launch.evidence import DEFAULT_STEPS
from bench.results.store import SweepStore, load_sweep
from bench.spec import RunSpec
from bench.strategies import STRATEGIES


def cmd_list(args: argparse.Namespace) -> int:
    if args.out is not None and args.out.exists() and not args.out.is_dir():
        raise UsageError(f"--out must name a sweep directory, but {args.out} is a file. "
                         f"Received: --out={args.out}")
    hw = detect()
    specs = specs_from_args(args)
    budget = args.budget if args.budget is not None else (
        MAKE_BENCH_SWEEP_S if args.preset == "default" else 0.0)
    if hw.gpus and budget:
        return _list_plan(args, hw, specs, budget)
    for i, spec in enumerate(specs, 1):
        reason = STRATEGIES.get(spec.strategy).unsupported_reason(spec, hw)
        state = f"unsupported: {reason}" if reason else "will run"
        if args.out and SweepStore(args.out).has_result(spec):
            state = "done"
        print(f"{i:4d}  {spec.label():55s} {state}")
    print(f"{len(specs)} configuration(s)")
    return Exit.OK


def _list_plan(args: argparse.Namespace, hw: Hardware, specs: list[RunSpec],
               budget: float) -> int:
    """Each configuration with what the first pass does with it, its estimate and
    what was left out: what `bench run` with this budget measures first."""
    results = load_sweep(args.out).results if args.out and args.out.is_dir() else []
    counts = default_devices(len(hw.gpus))
    probe = (f"~{MAKE_BENCH_PROBE_S:.0f} s for the all-reduce probe it runs first, at "
             f"{' and '.join(map(str, counts))} GPUs" if counts else "no all-reduce probe "
             "(one GPU)")
    note = (f" (make bench: {MAKE_BENCH_S:.0f} s less {MAKE_BENCH_REPORT_S:.0f} s for the "
            f"report and {probe}; --budget sets another)" if args.budget is None else "")
    first = plan_first_pass(specs, hw, budget_s=budget, preset=args.preset == "default",
                            results=results, links=topology_links(topology()),
                            evidence_steps=DEFAULT_STEPS, budget_note=note)
    for i, entry in enumerate(first.entries, 1):
        print(f"{i:4d}  {entry.spec.label():55s} {entry.text()}")
    for line in first.summary(left_out=False):  # each line above says why
        print(line)
    return Exit.OK


def add_parser(sub: Any) -> None:
    """Register ``list``."""
    p = sub.add_parser("list", help="print the expanded matrix without running it")
    add_matrix_args(p)
    p.add_argument("--out", type=Path, help="mark configurations already done there")
    p.add_argument("--budget", type=budget_duration, default=None,
                   help="on GPUs: the time the sweep's first pass must fit, as `bench run "
                        "--budget` (default for --preset default: what make bench leaves "
                        "the sweep; 0: list the whole matrix)")
    p.set_defaults(func=cmd_list)
