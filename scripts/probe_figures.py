"""Probe figures: all-reduce bus bandwidth per Mirrored cross-device option, and the
communication fraction of ResNet50 (32x32 input, 10 classes) by device count.

    .venv/bin/python -m scripts.probe_figures [--out DIR] [--part allreduce,profile]

Every configuration runs isolated through the normal sweep machinery (resumable with
the same --out). Prints the figures, the machine load before and after, and where the
results and profiles are. Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from bench.launch.sweep import run_sweep
from bench.matrix import expand
from bench.results.schema import RunResult
from bench.results.store import load_sweep, new_sweep_dir
from bench.results.text import allreduce_table

MiB = 2**20


def load_avg() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} cores"


def allreduce_part(out: Path) -> list[RunResult]:
    specs = expand(
        {"workload": ["resnet50"], "strategy": ["mirrored"], "devices": [2, 4],
         "cross_device_ops": ["default", "hierarchical_copy", "reduction_to_one_device",
                              "nccl"]},
        {"mode": "allreduce", "batch_mode": "per_replica", "batch": 1,
         "params": {"image_size": 32, "classes": 10}, "allreduce_max_bytes": 64 * MiB,
         "warmup_steps": 3, "min_steps": 10, "max_steps": 100, "max_seconds": 1.0,
         "timeout_s": 900.0})
    return run_sweep(specs, out / "allreduce").ran or []


def profile_part(out: Path) -> list[RunResult]:
    specs = expand(
        {"workload": ["resnet50"], "strategy": ["mirrored"], "devices": [1, 2, 4],
         "batch": [32]},
        {"params": {"image_size": 32, "classes": 10}, "profile_steps": 5, "repeats": 2,
         "max_seconds": 5.0, "timeout_s": 900.0})
    return run_sweep(specs, out / "profile").ran or []


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=new_sweep_dir("probes"))
    parser.add_argument("--part", default="allreduce,profile")
    args = parser.parse_args()
    parts = set(args.part.split(","))
    print(f"before: {load_avg()}")
    if "allreduce" in parts:
        allreduce_part(args.out)
        results = load_sweep(args.out / "allreduce").results
        print("\nall-reduce through MirroredStrategy's cross-device path (all sizes):")
        print(allreduce_table(results))
        print("\nbus bandwidth at 64 MiB (busbw = bytes/time x 2(n-1)/n):")
        for r in results:
            at = [p for p in (r.allreduce.points if r.allreduce else []) if p.bytes == 64 * MiB]
            figure = (f"{at[0].busbw / 1e9:.3f} GB/s (median {at[0].time_median_s * 1e3:.1f} "
                      f"ms, p90 {at[0].time_p90_s * 1e3:.1f} ms, {at[0].iterations} timed)"
                      if at else f"{r.status}: {(r.reason or '').splitlines()[0]}")
            print(f"  {r.spec.cross_device_ops:24s} n={r.spec.devices}: {figure}")
    if "profile" in parts:
        profile_part(args.out)
        results = load_sweep(args.out / "profile").results
        print("\nResNet50 (32x32, 10 classes), mirrored, global batch 32, 5 profiled steps:")
        for r in sorted(results, key=lambda r: r.spec.devices):
            c = r.figures.communication if r.figures else None
            if c is None:
                print(f"  n={r.spec.devices}: {r.status} {(r.reason or '').splitlines()[:1]}")
                continue
            f = r.figures
            assert f is not None
            print(f"  n={r.spec.devices}: comm fraction {c.comm_fraction:.1%} "
                  f"(collective {c.collective_s * 1e3:.1f} ms, compute {c.compute_s * 1e3:.1f}"
                  f" ms, other {c.other_s * 1e3:.1f} ms of a {c.step_s * 1e3:.1f} ms profiled "
                  f"step; profiler overhead x{c.profiler_overhead or float('nan'):.2f}); "
                  f"{f.global_throughput:.1f} examples/s, MFU "
                  f"{(f.mfu or float('nan')):.1%}; op types {c.op_types}")
            print(f"        tensorboard --logdir {c.profile_dir}")
    print(f"\nafter: {load_avg()}\nresults: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
