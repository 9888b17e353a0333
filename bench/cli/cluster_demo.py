"""``python -m bench cluster-demo``: a multi-host run on this machine, one namespace per host.

Every task runs ``python -m bench worker`` inside its own Linux network namespace,
with its own address from 198.18.0.0/15 and its own TF_CONFIG, on links that
``--link-rate`` / ``--link-delay-ms`` shape; the chief's result (every host's
figures, gathered over the emulated network) goes to ``--out``. Needs root,
``ip`` and ``tc``; the namespaces are removed afterwards whatever happens.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from bench.cli.common import add_matrix_args, specs_from_args, split_list
from bench.cli.worker import spec_from_file
from bench.errors import UsageError
from bench.exits import Exit
from bench.launch.cgroups import CgroupError, CpuBudget
from bench.launch.cluster_demo import PEER_END_S, DemoError, DemoOutcome, run_demo
from bench.launch.netns import LinkShape, NetnsError, parse_rate
from bench.results.store import new_sweep_dir

REASON_LINES = 4  # the full reason, log tails included, is in the stored result


def add_parser(sub: Any) -> None:
    """Register ``cluster-demo``."""
    p = sub.add_parser(
        "cluster-demo", help="run one configuration as a multi-host run on emulated hosts "
                             "(network namespaces; needs root)",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_matrix_args(p)
    p.add_argument("--spec", type=Path, help="the configuration as a RunSpec JSON file "
                                             "(or a stored result) instead of the options")
    p.add_argument("--out", type=Path, help="sweep directory for the chief's result "
                                            "(default results/cluster-demo-<time>)")
    p.add_argument("--link-rate", type=_rate, default=None,
                   help="each host's link speed, e.g. 1gbit or 10gbit (default: unshaped)")
    p.add_argument("--link-delay-ms", type=float, default=0.0,
                   help="one-way delay added on each host's link, ms (needs the kernel's "
                        "netem qdisc)")
    p.add_argument("--cpu-per-host", type=float, default=None,
                   help="each host's CPU budget in CPUs, e.g. 0.5 (a cgroup quota; default: "
                        "none, training hosts pinned to their own cores)")
    p.add_argument("--fault", help="STRATBENCH_FAULT for every host, e.g. "
                                   "worker1:kill_after_warmup")
    p.add_argument("--absent", type=split_list, default=[],
                   help="tasks whose host never starts, e.g. worker1")
    p.set_defaults(func=cmd_cluster_demo, needs_tensorflow=True)


def _rate(text: str) -> float:
    try:
        return parse_rate(text)
    except NetnsError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def cmd_cluster_demo(args: argparse.Namespace) -> int:
    specs = [spec_from_file(args.spec)] if args.spec else specs_from_args(args)
    if len(specs) != 1:
        raise UsageError(f"cluster-demo runs exactly one configuration; the options give "
                         f"{len(specs)}")
    try:
        shape = LinkShape(args.link_rate, args.link_delay_ms / 1e3)
        cpu = CpuBudget(args.cpu_per_host) if args.cpu_per_host is not None else None
    except (NetnsError, CgroupError) as exc:
        raise UsageError(str(exc)) from None
    out: Path = args.out or new_sweep_dir("cluster-demo")
    # Ctrl-C and SIGTERM (bench.cli.main turns it into Ctrl-C) leave run_demo through
    # its Network's exit: the namespaces and everything in them are removed.
    try:
        outcome = run_demo(specs[0], out, shape, fault=args.fault, absent=args.absent,
                           cpu=cpu, progress=lambda m: print(f"  {m}", flush=True))
    except (DemoError, NetnsError, CgroupError) as exc:
        raise UsageError(str(exc)) from None
    print_outcome(outcome)
    ok = outcome.result is not None and outcome.result.status in ("ok", "unsupported")
    return Exit.OK if ok and outcome.clean else Exit.RUNS_FAILED


def print_outcome(outcome: DemoOutcome) -> None:
    """Every host's end, then the chief's result and each task's own figures."""
    note = outcome.budget.get("note")
    print(f"\nlinks: {outcome.shape.label()}" + (f" ({note})" if note else "")
          + f"; wall {outcome.wall_s:.1f} s")
    for h in outcome.hosts:
        end = ("never started" if not h.started else
               f"killed by the demo ({PEER_END_S:g} s after the chief)" if h.killed_by_demo
               else f"exit {h.returncode}, {h.ended_after_chief_s:+.1f} s vs the chief")
        where = (f"cpu {h.cpus:g}" if h.cpus is not None
                 else f"cores {','.join(map(str, h.cores)) or 'all'}")
        stat = outcome.cpu_stats.get(h.host, {})
        throttled = (f", throttled {stat['nr_throttled']}/{stat['nr_periods']} periods"
                     if stat.get("nr_periods") else "")
        print(f"  {h.task:<8} {h.host:<6} {h.address:<14} {where:<11} {end}{throttled}")
    if outcome.leftovers:
        print(f"  left in namespaces (killed on removal): {outcome.leftovers}")
    r = outcome.result
    if r is None:
        print("no result from the chief (it never wrote one; see the hosts' output above)",
              file=sys.stderr)
        return
    reason = "\n  ".join((r.reason or "").splitlines()[:REASON_LINES])
    print(f"\nchief result: {r.status}" + (f": {reason}" if reason else ""))
    if r.figures is None:
        return
    f = r.figures
    mfu = f"{f.mfu:.1%} of {f.peak_flops_per_s / 1e9:,.0f} GFLOP/s (sum of the hosts' peaks)" \
        if f.mfu is not None and f.peak_flops_per_s else "-"
    print(f"  global {f.global_throughput:,.1f} examples/s, step median "
          f"{f.step_time.median_s * 1e3:.2f} ms, MFU {mfu}")
    for t in r.figures.tasks or []:
        tput = f"{t.throughput:,.1f} ex/s" if t.throughput is not None else "-"
        rss = f"{t.host_peak_rss_bytes / 2**20:,.0f} MiB" if t.host_peak_rss_bytes else "-"
        print(f"  {t.task:<8} {tput:>14}  rss {rss:>9}  cores "
              f"{','.join(map(str, t.cores)) or '-'}")
