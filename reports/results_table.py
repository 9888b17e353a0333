"""A plain table of a sweep's results (pandas), for the terminal and `bench show`.

One row per result; the figure columns are the schema's labelled figures
(``reports.columns.SCHEMA_FIGURES``), stored values in the CSV, shown values in the
terminal table, so a figure added to the schema appears here too. A figure whose
schema field names the one that says why it is empty has a reason column beside it in
the CSV (``memory_device_peak_bytes_reason``); the terminal shows ``n/a [k]`` and the
reasons under the table.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from bench.answers.runs import strategy_label
from bench.results.schema import RunResult
from bench.spec import workload_label
from reports.columns import SCHEMA_FIGURES, Notes, SchemaFigure


def to_frame(results: Sequence[RunResult]) -> pd.DataFrame:
    """One row per result: identity, every labelled figure (CSV name, stored unit)."""
    rows = []
    for r in results:
        s = r.spec
        row: dict[str, object] = {
            # A user's model by its file name and function (the stored spec has the path).
            "workload": workload_label(s.workload, s.size),
            "strategy": strategy_label(s), "devices": s.devices, "replicas": r.replicas,
            "global_batch": r.global_batch, "precision": s.precision,
            "replicate": r.replicate, "status": r.status,
        }
        for f in SCHEMA_FIGURES:
            row[f.name] = f.value(r.figures) if r.status == "ok" else None
            if f.reason_name:
                row[f.reason_name] = (f.absence(r.figures) if r.status == "ok" else None) or ""
        row["reason"] = "" if r.status == "ok" else (r.reason or "").splitlines()[0][:90]
        row["key"] = r.key
        rows.append(row)
    df = pd.DataFrame(rows)
    if not df.empty:
        df = df.sort_values(["workload", "global_batch", "strategy", "devices", "replicate"],
                            kind="stable").reset_index(drop=True)
    return df


# Shown in the terminal (the rest stays in the CSV: `bench show --csv`).
# The reason columns become notes under the table. Of a profiled step, the terminal
# shows the breakdown's shares (its seconds and the older communication split, which
# the communication share repeats, stay in the CSV) to keep the table readable.
_TERMINAL_HIDDEN = ("key", "replicas", "precision", "loss_start", "loss_end",
                    *(f.reason_name for f in SCHEMA_FIGURES if f.reason_name),
                    *(f.name for f in SCHEMA_FIGURES
                      if f.path[0] == "communication"
                      or (f.path[0] == "breakdown" and f.path[-1].endswith("_s"))))


def _cells(df: pd.DataFrame, f: SchemaFigure, notes: Notes) -> list[str]:
    """A figure's shown values; a missing one with a stated reason is a note's mark."""
    reasons = df[f.reason_name] if f.reason_name else [""] * len(df)
    rows = (f"{w} {s} n={n} b={b}" for w, s, n, b in
            zip(df["workload"], df["strategy"], df["devices"], df["global_batch"], strict=True))
    return [f.text(v) if pd.notna(v) else notes.mark(f.header, why, row) if why else "-"
            for v, why, row in zip(df[f.name], reasons, rows, strict=True)]


def format_table(results: Sequence[RunResult]) -> str:
    """Human-readable table; failed/unsupported rows show their reason, figures missing
    for a stated reason a mark and the reason under the table."""
    df = to_frame(results)
    if df.empty:
        return "(no results)"
    notes = Notes()
    shown = df.drop(columns=[c for c in _TERMINAL_HIDDEN if c in df.columns])
    if "loss_start" in df.columns and "loss_end" in df.columns:
        shown.insert(len(shown.columns) - 1, "loss",
                     [f"{a:.3f}->{b:.3f}" if pd.notna(a) and pd.notna(b) else ""
                      for a, b in zip(df["loss_start"], df["loss_end"], strict=True)])
    if (shown["replicate"] == 1).all():
        shown = shown.drop(columns=["replicate"])
    for f in SCHEMA_FIGURES:
        if f.name in shown.columns:
            shown[f.name] = _cells(df, f, notes)
            shown = shown.rename(columns={f.name: f.header})
    return "\n".join([str(shown.to_string(index=False)), *notes.lines()])


def median_runs(results: Sequence[RunResult]) -> list[RunResult]:
    """One run per configuration: the run with its median throughput (the lower one of
    an even count), a configuration without a successful run by its last run, in the
    order of ``results``. A sweep of many runs shows these; ``bench show`` every run."""
    by_key: dict[str, list[RunResult]] = {}
    for r in results:
        by_key.setdefault(r.key, []).append(r)
    out = []
    for runs in by_key.values():
        ok = sorted((r for r in runs if r.figures is not None),
                    key=lambda r: r.figures.global_throughput if r.figures else 0.0)
        out.append(ok[(len(ok) - 1) // 2] if ok else max(runs, key=lambda r: r.replicate))
    return out


LEGEND = "\n".join(f"{f.header}: {f.define}" for f in SCHEMA_FIGURES
                   if f.name not in _TERMINAL_HIDDEN)
