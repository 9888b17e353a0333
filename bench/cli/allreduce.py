"""``python -m bench allreduce``: the nccl-tests-style all-reduce probe as a sweep.

Each (strategy, cross-device ops, device count) runs in its own child process with a
hard timeout, like a training configuration, and is stored in the common schema
(``RunResult.allreduce``) in the sweep directory, so an interrupted probe resumes.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Any

from bench.cli.common import int_list, param, print_notes, split_list, writable_dir
from bench.errors import UsageError
from bench.exits import Exit
from bench.hardware import detect
from bench.launch.sweep import run_sweep
from bench.matrix import expand_axes
from bench.results.store import SweepStore, load, new_sweep_dir
from bench.results.text import allreduce_table
from bench.spec import ALLREDUCE_MIN_BYTES, RunSpec

_UNITS = {"": 1, "b": 1, "kib": 2**10, "mib": 2**20, "gib": 2**30, "kb": 10**3,
          "mb": 10**6, "gb": 10**9}


def parse_bytes(text: str) -> int:
    """``"64MiB"`` -> 67108864; plain integers are bytes."""
    m = re.fullmatch(r"\s*(\d+)\s*([A-Za-z]*)\s*", text)
    if not m or m.group(2).lower() not in _UNITS:
        raise argparse.ArgumentTypeError(
            f"--max-bytes takes a size such as 65536, 64KiB or 256MiB. Received: {text!r}")
    return int(m.group(1)) * _UNITS[m.group(2).lower()]


def add_parser(sub: Any) -> None:
    """Register the ``allreduce`` subcommand."""

    p = sub.add_parser(
        "allreduce", help="time all-reduces through a strategy's own cross-device path",
        description="All-reduce buffers of 1 KiB doubling to --max-bytes, then the exact "
                    "gradient shapes of --workload, through each strategy's cross-device "
                    "path (the ops training uses). Reports time per all-reduce (median, "
                    "p90), algbw = bytes / time and busbw = algbw x 2(n-1)/n, as "
                    "nccl-tests does.")
    p.add_argument("--strategy", type=split_list, default=["mirrored"],
                   help="mirrored, central_storage, ... (default mirrored)")
    p.add_argument("--cross-device-ops", type=split_list, dest="cross_device_ops",
                   default=["default"],
                   help="mirrored: default, hierarchical_copy, reduction_to_one_device, nccl")
    p.add_argument("--communication", type=split_list, default=["auto"],
                   help="multi_worker_mirrored collectives: auto, ring, nccl")
    p.add_argument("--devices", type=int_list("--devices"), default=None,
                   help="device counts (default: 2 and every GPU on a GPU machine, so "
                        "that scaling to all of them is read from a measured bandwidth, "
                        "not a 2-GPU one; 2 elsewhere)")
    p.add_argument("--workload", default="resnet50",
                   help="whose gradient shapes to all-reduce (default resnet50)")
    p.add_argument("--size", default="default", help="workload variant: default, tiny")
    p.add_argument("--param", type=param, action="append", default=[],
                   help="workload parameter KEY=VALUE, e.g. classes=10")
    p.add_argument("--max-bytes", type=parse_bytes, default=256 * 2**20,
                   dest="allreduce_max_bytes", help="largest buffer (default 256MiB)")
    p.add_argument("--warmup", type=int, default=5, dest="warmup_steps",
                   help="untimed all-reduces per point (default 5)")
    p.add_argument("--min-iters", type=int, default=10, dest="min_steps")
    p.add_argument("--max-iters", type=int, default=100, dest="max_steps")
    p.add_argument("--max-seconds", type=float, default=2.0, dest="max_seconds",
                   help="timed seconds per point once --min-iters are done (default 2)")
    p.add_argument("--timeout", type=float, default=900.0, dest="timeout_s",
                   help="hard limit per configuration, seconds")
    p.add_argument("--out", type=Path, help="sweep directory (re-use it to resume)")
    p.set_defaults(func=cmd_allreduce, needs_tensorflow=True)


def default_devices(gpus: int) -> list[int]:
    """The probe's device counts unless asked: 2, and every GPU where there are more;
    none on one GPU (nothing to all-reduce between); 2 logical devices on a CPU."""
    if gpus == 1:
        return []
    return sorted({2, gpus}) if gpus > 2 else [2]


def probe_specs(args: argparse.Namespace) -> list[RunSpec]:
    """The probe configurations the options ask for (validated)."""
    if args.allreduce_max_bytes < ALLREDUCE_MIN_BYTES:
        raise UsageError(f"--max-bytes must be at least {ALLREDUCE_MIN_BYTES}. "
                         f"Received: {args.allreduce_max_bytes}")
    fixed: dict[str, Any] = {
        "mode": "allreduce", "batch_mode": "per_replica", "batch": 1,
        **{k: getattr(args, k) for k in ("allreduce_max_bytes", "warmup_steps", "min_steps",
                                          "max_steps", "max_seconds", "timeout_s")}}
    if args.param:
        fixed["params"] = dict(args.param)
    # One expansion over every strategy: a cross-device ops or communication value is
    # only an error when none of the strategies takes it; otherwise it is dropped for
    # the others, with a note (e.g. communication for mirrored).
    expansion = expand_axes(
        {"workload": [args.workload], "size": [args.size], "strategy": args.strategy,
         "cross_device_ops": args.cross_device_ops, "communication": args.communication,
         "devices": args.devices or default_devices(len(detect().gpus))}, fixed)
    print_notes(expansion.notes)
    return expansion.specs


def cmd_allreduce(args: argparse.Namespace) -> int:
    if args.devices is None and not default_devices(len(detect().gpus)):
        print("stratbench allreduce: one GPU, nothing to all-reduce between: no probe "
              "(--devices asks for one anyway)")
        return Exit.OK
    specs = probe_specs(args)
    out = writable_dir(args.out or new_sweep_dir("allreduce"))
    print(f"stratbench allreduce: {len(specs)} configuration(s) -> {out}")
    outcome = run_sweep(specs, out)
    store = SweepStore(out)
    results = [load(store.paths(s).result) for s in specs if store.has_result(s)]
    print(f"\nresults: {store.results_dir}\n")
    print(allreduce_table(results))
    print("\nalgbw = bytes per replica / median time; busbw = algbw x 2(n-1)/n "
          "(nccl-tests' all-reduce convention); GB = 1e9 bytes")
    if outcome.interrupted:
        return Exit.INTERRUPTED
    if outcome.problems:
        print(f"\n{len(outcome.problems)} configuration(s) failed or timed out; logs in "
              f"{store.logs_dir}", file=sys.stderr)
        return Exit.RUNS_FAILED
    return Exit.OK
