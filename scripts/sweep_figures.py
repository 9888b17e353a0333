"""Figures of a stored sweep: wall time, start-up cost, multi-process vs mirrored.

    python -m scripts.sweep_figures results/bench-full

Reads result files only (no TensorFlow). Start-up cost = process launch to the end
of the first training step (TensorFlow import, device set-up, model build, tracing,
first step). Comparisons pair configurations of one workload, batch and replica
count measured in the same sweep.
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
from pathlib import Path

import pandas as pd

from bench.results.store import SweepStore, load_sweep

MULTI = ("multi_worker_mirrored", "parameter_server", "independent")


def sweep_wall_time(sweep: Path) -> str:
    """First start to last end of the invocations recorded in the sweep's journal."""
    events = SweepStore(sweep).journal_events()
    if not events:
        return "no journal"
    times = [dt.datetime.fromisoformat(e["at"]) for e in events if "at" in e]
    runs = sum(1 for e in events if e.get("event") == "start")
    if len(times) < 2:
        return "incomplete"
    return (f"{(max(times) - min(times)).total_seconds() / 60:.1f} min over {runs} "
            f"invocation(s) (second resolution)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("sweep", type=Path)
    args = parser.parse_args()
    loaded = load_sweep(args.sweep)
    for w in loaded.warnings:
        print(f"warning: {w}", file=sys.stderr)
    rows = []
    for r in loaded.results:
        f = r.figures
        rows.append({
            "workload": r.spec.workload, "strategy": r.spec.strategy,
            "devices": r.spec.devices, "per_device": r.spec.workers_per_device,
            "replicas": r.replicas, "batch": r.global_batch, "status": r.status,
            "ex_per_s": f.global_throughput if f else None,
            "cv_pct": f.throughput_cv * 100 if f else None,
            "first_step_s": f.startup.launch_to_first_step_s if f else None,
            "import_tf_s": f.startup.import_tf_s if f else None,
            "wall_s": r.wall_s})
    df = pd.DataFrame(rows)
    print(f"sweep: {args.sweep}  ({len(df)} results: "
          f"{', '.join(f'{k} {v}' for k, v in df['status'].value_counts().items())})")
    print(f"wall time: {sweep_wall_time(args.sweep)}; sum of per-configuration wall "
          f"times {df['wall_s'].sum() / 60:.1f} min")
    ok = df[df["status"] == "ok"]
    print("\nstart-up cost (launch to end of first step), median s per workload x strategy:")
    table = ok.pivot_table(index="strategy", columns="workload", values="first_step_s",
                           aggfunc="median")
    print(table.round(1).to_string())
    print(f"(TensorFlow import alone: median {ok['import_tf_s'].median():.1f} s)")
    print("\nsame workload, batch and replicas, one sweep: throughput vs mirrored")
    base = ok[(ok["strategy"] == "mirrored")].set_index(["workload", "batch", "replicas"])
    for _, r in ok[ok["strategy"].isin(MULTI)].iterrows():
        key = (r["workload"], r["batch"], r["replicas"])
        ref = base["ex_per_s"].get(key)
        share = f" ({r['per_device']} per device)" if r["per_device"] > 1 else ""
        vs = f"{r['ex_per_s'] / ref:5.2f}x mirrored ({ref:,.0f} ex/s)" if ref else "no mirrored"
        print(f"  {r['workload']:9s} b={r['batch']:<5d} replicas={r['replicas']} "
              f"{r['strategy'] + share:34s} {r['ex_per_s']:10,.0f} ex/s  {vs}  "
              f"first step {r['first_step_s']:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
