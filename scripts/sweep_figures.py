"""Figures of a stored sweep: wall time, where it went, start-up cost, multi-process vs
mirrored.

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


def time_spent(df: pd.DataFrame) -> pd.DataFrame:
    """Wall time and window time by workload and kind of process: a session (one process,
    its configurations' windows in rounds), a configuration's own processes, or a probe
    (the all-reduce probe). The runs of one process share its start and wall time: its
    wall time is counted once, its kind is its runs' (an arm that failed to build is
    still the session's)."""
    processes = df.groupby(["started_at", "wall_s"], as_index=False).agg(
        workload=("workload", "first"), mode=("mode", "first"), arms=("arms", "max"),
        windows_s=("windows_s", "sum"))
    processes["kind"] = ["probe" if m != "train" else "session" if n > 1 else
                         "own processes"
                         for m, n in zip(processes["mode"], processes["arms"], strict=True)]
    out = processes.groupby(["workload", "kind"]).agg(
        wall_s=("wall_s", "sum"), windows_s=("windows_s", "sum"),
        processes=("wall_s", "size"))
    out["measured"] = out["windows_s"] / out["wall_s"]
    return out


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
            "backend": r.spec.backend,
            "replicas": r.replicas, "batch": r.global_batch, "status": r.status,
            "ex_per_s": f.global_throughput if f else None,
            "cv_pct": f.throughput_cv * 100 if f else None,
            "first_step_s": f.startup.launch_to_first_step_s if f else None,
            "import_framework_s": f.startup.import_framework_s if f else None,
            "preimported_s": f.startup.preimported_s if f else None,
            "windows_s": sum(w.wall_s for w in f.windows) if f else 0.0,
            "arms": len(r.interleaved.arms) if r.interleaved else 1, "mode": r.spec.mode,
            "started_at": r.started_at, "wall_s": r.wall_s})
    df = pd.DataFrame(rows)
    print(f"sweep: {args.sweep}  ({len(df)} results: "
          f"{', '.join(f'{k} {v}' for k, v in df['status'].value_counts().items())})")
    print(f"wall time: {sweep_wall_time(args.sweep)}; sum of per-configuration wall "
          f"times {df['wall_s'].sum() / 60:.1f} min")
    spent = time_spent(df)
    print("\nwhere the time went (s; a session's wall time counted once):")
    print(spent.round({"wall_s": 0, "windows_s": 0, "measured": 2}).to_string())
    total = spent[["wall_s", "windows_s"]].sum()
    print(f"(all: {total['windows_s']:.0f} s of windows in {total['wall_s']:.0f} s of "
          f"processes, {total['windows_s'] / total['wall_s']:.0%})")
    ok = df[df["status"] == "ok"]
    print("\nstart-up cost (launch to end of first step), median s per workload x strategy:")
    table = ok.pivot_table(index="strategy", columns="workload", values="first_step_s",
                           aggfunc="median")
    print(table.round(1).to_string())
    forked = ok["preimported_s"].notna()
    # Runs of TensorFlow's lane only import TensorFlow; another lane's, its framework.
    framework = "TensorFlow" if set(ok["backend"]) <= {"tf"} else "framework"
    print(f"({framework} import alone: median {ok['import_framework_s'].median():.1f} s"
          + (f"; {int(forked.sum())} of {len(ok)} runs' processes forked from the "
             f"pre-imported starter, which imported it in "
             f"{ok.loc[forked, 'preimported_s'].median():.1f} s (median), not counted "
             f"above" if forked.any() else "") + ")")
    print("\nsame workload, batch and replicas, one sweep: throughput vs mirrored")
    # A configuration measured in several sessions: the median of its runs.
    base = ok[ok["strategy"] == "mirrored"].groupby(
        ["workload", "batch", "replicas"])["ex_per_s"].median()
    for _, r in ok[ok["strategy"].isin(MULTI)].iterrows():
        key = (r["workload"], r["batch"], r["replicas"])
        ref = base.get(key)
        share = f" ({r['per_device']} per device)" if r["per_device"] > 1 else ""
        vs = f"{r['ex_per_s'] / ref:5.2f}x mirrored ({ref:,.0f} ex/s)" if ref else "no mirrored"
        print(f"  {r['workload']:9s} b={r['batch']:<5d} replicas={r['replicas']} "
              f"{r['strategy'] + share:34s} {r['ex_per_s']:10,.0f} ex/s  {vs}  "
              f"first step {r['first_step_s']:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
