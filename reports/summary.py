"""A plain summary table of a sweep (pandas), for the terminal and `bench show`."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from bench.results.schema import RunResult

MIB = 2**20


def to_frame(results: Sequence[RunResult]) -> pd.DataFrame:
    """One row per result with the headline figures (units in column names)."""
    rows = []
    for r in results:
        s, f = r.spec, r.figures
        row = {
            "workload": s.workload if s.size == "default" else f"{s.workload}[{s.size}]",
            "strategy": s.strategy if s.cross_device_ops == "default"
            else f"{s.strategy}({s.cross_device_ops})",
            "devices": s.devices, "replicas": r.replicas, "global_batch": r.global_batch,
            "precision": s.precision, "status": r.status,
            "global_ex_per_s": f.global_throughput if f else None,
            "per_replica_ex_per_s": f.per_replica_throughput if f else None,
            "step_median_ms": f.step_time.median_s * 1e3 if f else None,
            "step_p90_ms": f.step_time.p90_s * 1e3 if f else None,
            "cv_pct": f.throughput_cv * 100 if f else None,
            "first_step_s": f.startup.launch_to_first_step_s if f else None,
            "device_peak_mib": (max(f.memory.device_peak_bytes.values()) / MIB
                                if f and f.memory.device_peak_bytes else None),
            "host_peak_mib": (f.memory.host_peak_rss_bytes / MIB
                              if f and f.memory.host_peak_rss_bytes else None),
            "loss_start": f.loss_start if f else None,
            "loss_end": f.loss_end if f else None,
            "reason": "" if r.status == "ok" else (r.reason or "").splitlines()[0][:90],
            "key": r.key,
        }
        rows.append(row)
    df = pd.DataFrame(rows)
    if not df.empty:
        df = df.sort_values(["workload", "global_batch", "strategy", "devices"],
                            kind="stable").reset_index(drop=True)
    return df


def format_table(results: Sequence[RunResult]) -> str:
    """Human-readable table; failed/unsupported rows show their reason."""
    df = to_frame(results)
    if df.empty:
        return "(no results)"
    shown = df.drop(columns=["key", "replicas", "precision", "loss_start", "loss_end"])
    shown["loss"] = [f"{a:.3f}->{b:.3f}" if pd.notna(a) else ""
                     for a, b in zip(df["loss_start"], df["loss_end"], strict=True)]
    formats = {"global_ex_per_s": "{:,.0f}", "per_replica_ex_per_s": "{:,.0f}",
               "step_median_ms": "{:.2f}", "step_p90_ms": "{:.2f}", "cv_pct": "{:.1f}",
               "first_step_s": "{:.1f}", "device_peak_mib": "{:.0f}", "host_peak_mib": "{:.0f}"}
    for col, fmt in formats.items():
        shown[col] = [fmt.format(v) if pd.notna(v) else "-" for v in shown[col]]
    return str(shown.to_string(index=False))


LEGEND = (
    "global_ex_per_s: examples/s summed over replicas (median of windows); per_replica = "
    "global / replicas;\nstep_*_ms: per optimizer step; cv_pct: spread of window throughputs;"
    " first_step_s: process launch to first step;\ndevice_peak_mib: allocator peak (on CPU "
    "process-wide, all logical devices share it); host_peak_mib: peak RSS in the window."
)
