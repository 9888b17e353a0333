"""``stratbench run``: run a sweep, each configuration in its own process."""

from __future__ import annotations

import argparse
import os
import sys
import time
from functools import partial
from pathlib import Path
from typing import Any

from bench import sim
from bench.cli.ab import duration
from bench.cli.common import (
    add_explain,
    add_matrix_args,
    add_width,
    answers_width,
    specs_from_args,
    writable_dir,
)
from bench.cli.report import outputs_after_sweep
from bench.errors import UsageError
from bench.exits import Exit
from bench.hardware import Hardware, detect
from bench.launch.evidence import OFF, Evidence
from bench.launch.gpu_preflight import gpu_preflight, scope_of
from bench.launch.interpreter import INSTALL_CHECKS
from bench.launch.sweep import Replication, SweepOutcome, cost_line, measured_line, run_sweep
from bench.launch.usermodel import preflight
from bench.results.store import SweepStore, load_sweep, new_sweep_dir
from bench.sim.faults import FAULTS_VAR, Faults
from bench.spec import RunSpec

# Two processes is the least that shows run-to-run noise, which on a shared machine is
# larger than the noise between windows of one process.
DEFAULT_RUNS = 2


def cmd_run(args: argparse.Namespace) -> int:
    specs = specs_from_args(args)
    replication = replication_from_args(args)  # every usage error before a directory is made
    # The adaptive sweep reads the answers and the tables are the reports' (pandas,
    # scipy.stats): imported once the arguments stand (a usage error answers at once),
    # never when the parser is built.
    from bench.adaptive.budget import DEFAULT_BUDGET_S
    from bench.adaptive.sweep import budgeted_sweep
    from reports.answers import answers_lines
    from reports.results_table import LEGEND, format_table, median_runs

    hw = detect()
    evidence = _preflight(specs, hw, profile=args.profile)
    out = writable_dir(args.out or new_sweep_dir("sweep"))
    _say_where(specs, out, hw, evidence)
    budget = args.budget if args.budget is not None else (
        DEFAULT_BUDGET_S if args.preset == "default" else 0.0)
    t0 = time.monotonic()
    if budget:
        outcome = budgeted_sweep(specs, out, budget_s=budget, started=t0,
                                 interleave=args.interleave, evidence=evidence,
                                 passes=replication if args.runs is not None else None,
                                 show=partial(answers_lines, explain=args.explain,
                                              width=answers_width(args.width)),
                                 preset=args.preset == "default")
    else:
        extra = replication.passes - replication.runs
        print(f"each configuration in {replication.runs} separate process(es), alternating "
              f"order" + (f"; up to {extra} more where runs disagree by over "
                          f"{replication.spread:.0%}" if extra else ""))
        outcome = run_sweep(specs, out, replication=replication, interleave=args.interleave,
                            evidence=evidence)
    loaded = load_sweep(out)
    keys = {s.key() for s in specs}
    mine = [r for r in loaded.results if r.key in keys]
    runs_of = {r.key for r in mine}
    print(f"\nresults: {SweepStore(out).results_dir} ({len(mine)} runs of {len(runs_of)} of "
          f"{len(specs)} configurations; sweep wall time {outcome.wall_s:.0f} s)")
    if len(mine) > len(runs_of):
        # A budget's dozens of runs: one row per configuration, what the answers stand on.
        print(f"one row per configuration: its median run (every run: python -m bench show "
              f"{out})")
        print(format_table(median_runs(mine)))
    else:
        print(format_table(mine))
    print("\n" + LEGEND)
    _say_costs(outcome, loaded.warnings)
    if outcome.interrupted:
        return Exit.INTERRUPTED
    # The report never decides the exit code: a report failure is printed and the
    # sweep's results and status stand.
    outputs_after_sweep(out, args.explain, answers_width(args.width))
    if outcome.problems:
        print(f"\n{len(outcome.problems)} configuration(s) failed, ran out of memory or timed "
              f"out; logs in {SweepStore(out).logs_dir}", file=sys.stderr)
        return Exit.RUNS_FAILED
    return Exit.OK


def _preflight(specs: list[RunSpec], hw: Hardware, *, profile: bool) -> Evidence:
    """What must hold before anything runs (each a usage error, exit 2): JAX where asked
    for, the user's own models built, the GPUs able to run; returns the evidence the runs
    take (``--profile``)."""
    for lane in sorted({s.backend for s in specs} & set(INSTALL_CHECKS)):
        INSTALL_CHECKS[lane](len(hw.gpus))  # e.g. JAX and, on GPUs, its CUDA wheels (exit 2)
    preflight(specs)  # models of the user's own: one short process builds each (exit 2)
    evidence = Evidence() if profile else OFF
    if sim.active() is not None:  # a simulated server's faults, read as its children will
        Faults.parse(os.environ.get(FAULTS_VAR, ""), "")
    if hw.gpus:  # what would make NCCL fail or fall back, or a profile empty: said now
        findings = gpu_preflight(scope_of(specs, hw, profiled=bool(evidence.steps)))
        for finding in findings:
            print(f"stratbench: preflight: {finding.text()}", file=sys.stderr)
        fatal = [f for f in findings if f.fatal]
        if fatal:  # every run would fail the same way: none is started
            raise UsageError(f"no run can start on these GPUs ({fatal[0].problem}); "
                             f"nothing was run")
    return evidence


def _say_where(specs: list[RunSpec], out: Path, hw: Hardware, evidence: Evidence) -> None:
    """The sweep's directory and machine, and the evidence its runs profile."""
    simulated = sim.active()
    where = (f"{len(hw.gpus)} GPU(s)" + (f", SIMULATED ({simulated.name}: {sim.SIM_VAR})"
                                         if simulated else "") if hw.gpus
             else f"CPU only ({hw.cores} cores; device counts are logical devices sharing them)")
    print(f"stratbench: {len(specs)} configuration(s) -> {out}\nmachine: {hw.cpu_model}, {where}")
    if evidence.steps:
        print(f"evidence: each configuration's first run profiles {evidence.steps} steps after "
              f"its windows, for the report's explanations (--no-profile skips it)")


def _say_costs(outcome: SweepOutcome, warnings: list[str]) -> None:
    """What the sweep's time went to, and the store's warnings (on stderr)."""
    for line in (cost_line(outcome.ran, outcome.wall_s),
                 measured_line(outcome.ran, outcome.wall_s)):
        if line:
            print(f"\n{line}")
    for w in warnings:
        print(f"warning: {w}", file=sys.stderr)


def replication_from_args(args: argparse.Namespace) -> Replication:
    """Runs per configuration from ``--runs``/``--max-runs`` (usage errors name the flag;
    without --runs, DEFAULT_RUNS)."""
    runs = args.runs if args.runs is not None else DEFAULT_RUNS
    if runs < 1:
        raise UsageError(f"--runs must be at least 1. Received: --runs {runs}")
    max_runs = args.max_runs if args.max_runs is not None else runs
    if max_runs < runs:
        raise UsageError(f"--max-runs must be at least --runs ({runs}). "
                         f"Received: --max-runs {args.max_runs}")
    return Replication(runs=runs, max_runs=max_runs)


def budget_duration(text: str) -> float:
    """``--budget``: a duration (``10m``, ``90s``), or 0 for none."""
    return 0.0 if text.strip() in ("0", "0s", "0m", "0h") else duration(text)


def add_parser(sub: Any) -> None:
    """Register ``run``."""
    p = sub.add_parser("run", help="run a sweep (each configuration in its own process)")
    add_matrix_args(p)
    p.add_argument("--out", type=Path, help="sweep directory (re-use it to resume)")
    p.add_argument("--runs", type=int, default=None,
                   help=f"separate processes per configuration, at different times (default "
                        f"{DEFAULT_RUNS}; on a budget, runs go where answers are open, and "
                        f"--runs asks for that many of every configuration first)")
    p.add_argument("--max-runs", type=int, default=None, dest="max_runs",
                   help="more runs, up to this many, for configurations whose runs disagree "
                        "by over 10%% (default: --runs; sequential runs cost time, so they "
                        "are asked for)")
    p.add_argument("--interleave", action=argparse.BooleanOptionalAction, default=True,
                   help="the in-process configurations that one answer compares (same "
                        "workload, batch, ...; custom loop) share one process, their windows "
                        "interleaved, so that the answer's ratios come from pairs: from the "
                        "second run on (the first run of each stays its own process, for its "
                        "memory and start-up), and on a budget from the first (default: on)")
    p.add_argument("--profile", action=argparse.BooleanOptionalAction, default=True,
                   help="profile each configuration's first run for a few steps after its "
                        "windows, so the report can say why one configuration is slower than "
                        "another from both profiles (--no-profile: no profiles, and no "
                        "causes; default: on)")
    p.add_argument("--budget", type=budget_duration, default=None,
                   help="time for the whole sweep: after the planned runs, more runs where "
                        "answers are not settled while the budget allows; provisional "
                        "answers after the first pass (default 10m for --preset default, "
                        "else none; 0 turns it off)")
    add_explain(p)
    add_width(p)
    p.set_defaults(func=cmd_run, needs_tensorflow=True)
