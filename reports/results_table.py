"""A plain table of a sweep's results (pandas), for the terminal and `bench show`.

One row per result; the figure columns are the schema's labelled figures
(``reports.columns.SCHEMA_FIGURES``), stored values in the CSV, shown values in the
terminal table, so a figure added to the schema appears here too.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from bench.results.schema import RunResult
from reports.columns import SCHEMA_FIGURES
from reports.runs import strategy_label


def to_frame(results: Sequence[RunResult]) -> pd.DataFrame:
    """One row per result: identity, every labelled figure (CSV name, stored unit)."""
    rows = []
    for r in results:
        s = r.spec
        row: dict[str, object] = {
            "workload": s.workload if s.size == "default" else f"{s.workload}[{s.size}]",
            "strategy": strategy_label(s), "devices": s.devices, "replicas": r.replicas,
            "global_batch": r.global_batch, "precision": s.precision,
            "replicate": r.replicate, "status": r.status,
        }
        for f in SCHEMA_FIGURES:
            row[f.name] = f.value(r.figures) if r.status == "ok" else None
        row["reason"] = "" if r.status == "ok" else (r.reason or "").splitlines()[0][:90]
        row["key"] = r.key
        rows.append(row)
    df = pd.DataFrame(rows)
    if not df.empty:
        df = df.sort_values(["workload", "global_batch", "strategy", "devices", "replicate"],
                            kind="stable").reset_index(drop=True)
    return df


# Shown in the terminal (the rest stays in the CSV: `bench show --csv`).
_TERMINAL_HIDDEN = ("key", "replicas", "precision", "loss_start", "loss_end")


def format_table(results: Sequence[RunResult]) -> str:
    """Human-readable table; failed/unsupported rows show their reason."""
    df = to_frame(results)
    if df.empty:
        return "(no results)"
    shown = df.drop(columns=[c for c in _TERMINAL_HIDDEN if c in df.columns])
    if "loss_start" in df.columns and "loss_end" in df.columns:
        shown.insert(len(shown.columns) - 1, "loss",
                     [f"{a:.3f}->{b:.3f}" if pd.notna(a) and pd.notna(b) else ""
                      for a, b in zip(df["loss_start"], df["loss_end"], strict=True)])
    if (shown["replicate"] == 1).all():
        shown = shown.drop(columns=["replicate"])
    for f in SCHEMA_FIGURES:
        if f.name in shown.columns:
            shown[f.name] = [f.text(v) if pd.notna(v) else "-" for v in shown[f.name]]
            shown = shown.rename(columns={f.name: f.header})
    return str(shown.to_string(index=False))


LEGEND = "\n".join(f"{f.header}: {f.define}" for f in SCHEMA_FIGURES
                   if f.name not in _TERMINAL_HIDDEN)
