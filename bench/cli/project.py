"""``python -m bench project``: project scaling to 512 replicas from measured inputs.

Inputs: a stored single-replica training run at the per-replica batch (its median
step time and gradient bytes; or ``--compute-ms`` and ``--grad-bytes``), and the
link: a stored all-reduce probe result on the link in question (alpha fitted to its
small buffers, B to its time at the gradient size), or ``--bandwidth`` and
``--latency-us``. Prints the inputs, the
fitted alpha and B, the formulas, and step time, throughput and scaling
efficiency as a band from no overlap to full overlap of communication with the
backward pass. ``--measured`` results (multi-replica runs) are set against the
projection with the error at each; ``--plot`` writes the efficiency plot (PNG).

From the scaling lab instead (``--lab DIR --workload W --peak-flops F --bandwidth B``):
the workload's lab model (fitted on one and two emulated hosts, ``bench lab``)
carried to a target whose replica peaks at F FLOP/s on a link of B: compute scaled
by the ratio of the lab host's peak to F, the ring all-reduce on B (latency
``--latency-us``, else the lab's at the link rate whose compute-to-link ratio is
nearest the target's), the lab's overlap exponent; the curve to ``--max-replicas``
with its 95% bootstrap interval.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from bench.errors import SchemaError, UsageError
from bench.exits import Exit
from bench.launch.netns import NetnsError, parse_rate
from bench.results.store import load
from reports.projection import (
    Inputs,
    Link,
    ProjectionError,
    check,
    inputs_from_result,
    link_from_probe,
    plot,
    project,
    text,
)


def add_parser(sub: Any) -> None:
    """Register ``project``."""
    p = sub.add_parser("project", help="project step time, throughput and scaling "
                                       "efficiency to n = 2..512 replicas",
                       description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--single", type=Path,
                   help="stored result of a single-replica run at the per-replica batch")
    p.add_argument("--compute-ms", type=float, help="instead of --single: one replica's "
                                                    "step time, ms")
    p.add_argument("--grad-bytes", type=float, help="instead of --single: gradient bytes "
                                                    "all-reduced per step")
    p.add_argument("--batch", type=int, help="instead of --single: per-replica batch")
    p.add_argument("--allreduce", type=Path,
                   help="stored all-reduce probe result on the link (alpha and B are fitted)")
    p.add_argument("--bandwidth", help="instead of --allreduce: link speed, e.g. 10gbit")
    p.add_argument("--latency-us", type=float, default=None,
                   help="instead of --allreduce: per-hop latency alpha, microseconds")
    p.add_argument("--max-replicas", type=int, default=512)
    p.add_argument("--measured", type=Path, nargs="*", default=[],
                   help="stored multi-replica runs to set against the projection")
    p.add_argument("--plot", type=Path, help="write the efficiency plot here (PNG)")
    p.add_argument("--lab", type=Path, help="a bench lab directory: project its fitted "
                                            "model of --workload to the target")
    p.add_argument("--workload", help="with --lab: the lab workload to carry over")
    p.add_argument("--peak-flops", type=float,
                   help="with --lab: the target's peak FLOP/s per replica, e.g. 1.95e13")
    p.set_defaults(func=cmd_project)


def _load(path: Path, flag: str) -> Any:
    try:
        return load(path)
    except (OSError, SchemaError) as exc:
        raise UsageError(f"{flag} must name a stored result: {exc}. "
                         f"Received: {flag}={path}") from None


def _inputs(args: argparse.Namespace) -> Inputs:
    manual = (args.compute_ms, args.grad_bytes, args.batch)
    if args.single and any(v is not None for v in manual):
        raise UsageError("give --single or --compute-ms/--grad-bytes/--batch, not both")
    if args.single:
        return inputs_from_result(_load(args.single, "--single"))
    if any(v is None for v in manual):
        raise UsageError("give --single RESULT, or all of --compute-ms, --grad-bytes and "
                         "--batch")
    return Inputs(args.compute_ms / 1e3, args.grad_bytes, args.batch)


def _link(args: argparse.Namespace, grad_bytes: float) -> Link:
    given = args.bandwidth is not None or args.latency_us is not None
    if args.allreduce and given:
        raise UsageError("give --allreduce or --bandwidth/--latency-us, not both")
    if args.allreduce:
        result = _load(args.allreduce, "--allreduce")
        if result.allreduce is None:
            raise UsageError(f"--allreduce must name an all-reduce probe result (bench "
                             f"allreduce). Received: {args.allreduce} ({result.key})")
        return link_from_probe(result.allreduce, grad_bytes)
    if args.bandwidth is None or args.latency_us is None:
        raise UsageError("give --allreduce RESULT, or both --bandwidth and --latency-us")
    try:
        bps = parse_rate(args.bandwidth)
    except NetnsError as exc:
        raise UsageError(str(exc)) from None
    return Link(args.latency_us / 1e6, bps / 8, f"given: {args.bandwidth}, "
                                                f"{args.latency_us:g} us")


def cmd_lab_transfer(args: argparse.Namespace) -> int:
    """``--lab``: the lab's model of a workload carried to the target's peak and link."""
    # The lab's fits bring scipy.stats: imported here, not when the parser is built.
    from reports.lab import group, load_lab, transfer

    if not (args.workload and args.peak_flops and args.bandwidth):
        raise UsageError("--lab needs --workload, --peak-flops and --bandwidth")
    if args.single or args.allreduce or args.measured or args.compute_ms is not None:
        raise UsageError("--lab takes its inputs from the lab: drop --single, --allreduce, "
                         "--measured and --compute-ms")
    try:
        bandwidth = parse_rate(args.bandwidth) / 8
    except NetnsError as exc:
        raise UsageError(str(exc)) from None
    runs, _ = load_lab(args.lab)
    if not runs:
        raise UsageError(f"--lab must name a bench lab directory with results. "
                         f"Received: --lab={args.lab}")
    latency = args.latency_us / 1e6 if args.latency_us is not None else None
    try:
        out = transfer(group(runs), args.workload, args.peak_flops, bandwidth, latency,
                       args.batch, args.max_replicas)
    except ProjectionError as exc:
        raise UsageError(str(exc)) from None
    print(out.text())
    return Exit.OK


def cmd_project(args: argparse.Namespace) -> int:
    if args.lab:
        return cmd_lab_transfer(args)
    try:
        inputs = _inputs(args)
        projection = project(inputs, _link(args, inputs.grad_bytes), args.max_replicas)
        checks = []
        for path in args.measured:
            r = _load(path, "--measured")
            if r.status != "ok" or r.figures is None:
                raise UsageError(f"--measured must name ok training runs. Received: {path} "
                                 f"(status {r.status})")
            checks.append(check(projection, r.replicas, r.figures.global_throughput,
                                f"{r.spec.strategy} n={r.replicas}"))
    except ProjectionError as exc:
        raise UsageError(str(exc)) from None
    print(text(projection, checks))
    if args.plot:
        args.plot.write_bytes(plot(projection, checks))
        print(f"\nplot: {args.plot}")
    return Exit.OK
