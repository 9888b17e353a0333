"""``python -m bench lab``: the scaling lab, 1..4 emulated hosts with a CPU budget each.

Every host is a network namespace with a cgroup CPU quota (``--cpu-per-host``) behind
a link shaped to each ``--link`` rate. MultiWorkerMirrored runs at a fixed global
batch on each host count (strong scaling), ParameterServer at a fixed batch per step
(weak scaling, ranked apart), several runs per point in interleaved order, plus what
the out-of-sample projection is fitted from: one host at half the global batch, and
an all-reduce probe over two hosts per link. Runs resume from ``--out``; every
invocation ends with the report of everything stored there (``<out>/report/lab.md``
and its speed-up plots): speed-up tables with intervals, the projection fitted on one
and two hosts against the measured three and four, the order check, and the lab's
compute-to-link ratio. ``--engine slurm`` makes every host a Slurm node (its own
slurmd) and places the tasks with ``srun``, as users' jobs are placed.
``--report-only`` prints it without running anything. Run it
in pieces (one workload and link per invocation) to leave the machine to others in
between. Needs root.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from bench.cli.common import int_list, split_list, writable_dir
from bench.errors import UsageError
from bench.exits import Exit
from bench.launch.cgroups import CgroupError, CpuBudget
from bench.launch.cgroups import unavailable_reason as cgroups_unavailable
from bench.launch.lab import ENGINES, LAB_WORKLOADS, STRATEGIES, LabError, plan, run_lab
from bench.launch.netns import NetnsError, parse_rate
from bench.launch.netns import unavailable_reason as netns_unavailable
from bench.results.store import SweepStore, new_sweep_dir


def _runs_anything(args: argparse.Namespace) -> bool:
    """Whether the command starts TensorFlow children (``--report-only`` reads stored
    results alone, so it runs where TensorFlow is not installed)."""
    return not args.report_only


def add_parser(sub: Any) -> None:
    """Register ``lab``."""
    p = sub.add_parser("lab", help="scaling on 1..4 emulated hosts with a CPU budget each "
                                   "(network namespaces and cgroups; needs root)",
                       description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workload", type=split_list, default=list(LAB_WORKLOADS),
                   help=f"lab workloads: {', '.join(LAB_WORKLOADS)} (default all)")
    p.add_argument("--strategy", type=split_list, default=list(STRATEGIES),
                   help=f"{', '.join(STRATEGIES)} (default both)")
    p.add_argument("--hosts", type=int_list("--hosts"), default=[1, 2, 3, 4],
                   help="host counts (default 1,2,3,4)")
    p.add_argument("--cpu-per-host", type=float, default=0.5,
                   help="each host's CPU budget in CPUs (default 0.5)")
    p.add_argument("--link", type=split_list, default=["1gbit", "10gbit"],
                   help="link rates, e.g. 1gbit,10gbit (default)")
    p.add_argument("--runs", type=int, default=3, help="runs per point (default 3)")
    p.add_argument("--probe-runs", type=int, default=1,
                   help="all-reduce probe runs per link (default 1)")
    p.add_argument("--max-minutes", type=float, default=None,
                   help="start no run after this many minutes (re-run to resume)")
    p.add_argument("--resamples", type=int, default=2000,
                   help="bootstrap resamples of the projection's intervals (default 2000)")
    p.add_argument("--engine", choices=ENGINES.names(), default="demo",
                   help="how the hosts get their tasks: " + "; ".join(
                       f"{name}: {e.description}" for name, e in ENGINES.items()))
    p.add_argument("--report-only", action="store_true",
                   help="print the report of what --out holds; run nothing")
    p.add_argument("--out", type=Path, help="lab directory (re-use it to add pieces and "
                                            "resume; default results/lab-<time>)")
    p.set_defaults(func=cmd_lab, needs_tensorflow=_runs_anything)


def cmd_lab(args: argparse.Namespace) -> int:
    # The lab's report brings scipy.stats: imported here, not when the parser is built.
    from reports.lab import report, write

    out: Path = args.out or new_sweep_dir("lab")
    outcome = None
    if not args.report_only:
        try:
            cpu = CpuBudget(args.cpu_per_host)
            rates = [parse_rate(r) for r in args.link]
            points = plan(args.workload, args.strategy, args.hosts, rates)
        except (CgroupError, NetnsError, LabError) as exc:
            raise UsageError(str(exc)) from None
        engine = ENGINES.get(args.engine)
        why = netns_unavailable() or cgroups_unavailable() or engine.unavailable()
        if why is not None:
            raise UsageError(f"bench lab cannot run here: {why}")
        cores = len(os.sched_getaffinity(0))
        # A ParameterServer run has a host more than its workers (coordinator and ps).
        most = max(args.hosts) + ("parameter_server" in args.strategy)
        if cpu.cpus * most > cores:
            print(f"note: {most} hosts x {cpu.cpus:g} CPU is more than this machine's "
                  f"{cores} cores: the budgets cannot all be met at once")
        writable_dir(out)
        print(f"stratbench lab: {len(points)} point(s) x {args.runs} run(s) -> {out}",
              flush=True)
        outcome = run_lab(points, out, cpu, args.runs, probe_runs=args.probe_runs,
                          max_minutes=args.max_minutes, runner=engine.runner,
                          progress=lambda m: print(m, flush=True))
        print(f"\n{len(outcome.runs)} run(s) made, {outcome.skipped} point(s) resumed"
              + (f", {len(outcome.failed)} failed" if outcome.failed else ""))
    if not out.is_dir():
        raise UsageError(f"--out must name a lab directory. Received: --out={out}")
    rep = report(out, args.resamples)
    path = write(rep, SweepStore(out).report_dir)
    print()
    print(rep.markdown)
    print(f"\nreport: {path}")
    if outcome is not None and outcome.stopped_early:
        return Exit.INTERRUPTED
    return Exit.RUNS_FAILED if outcome is not None and outcome.failed else Exit.OK
