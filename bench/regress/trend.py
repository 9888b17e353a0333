"""Trend plot: throughput over time per configuration, from the history store.

Pure function of stored results (no TensorFlow); matplotlib with the Agg backend
so it works on a headless CI machine.
"""

from __future__ import annotations

import datetime as _dt
from pathlib import Path

from bench.regress.history import Row


def _when(iso: str) -> _dt.datetime:
    return _dt.datetime.fromisoformat(iso)


def plot_trend(rows: list[Row], out: Path, title: str = "") -> Path | None:
    """One panel per workload, one line per configuration; None if nothing to plot.

    Points are the median window throughput of each run (examples/s, global);
    error bars are +-1 standard deviation across its windows (CV x median).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ok = [r for r in rows if r.status == "ok" and r.global_throughput is not None]
    if not ok:
        return None
    by_workload: dict[str, dict[str, list[Row]]] = {}
    for r in ok:
        by_workload.setdefault(r.label.split()[0], {}).setdefault(r.label, []).append(r)
    fig, axes = plt.subplots(len(by_workload), 1, figsize=(10, 3.2 * len(by_workload)),
                             squeeze=False)
    for ax, (workload, configs) in zip(axes[:, 0], sorted(by_workload.items()), strict=True):
        for label, runs in sorted(configs.items()):
            runs = sorted(runs, key=lambda r: r.started_at)
            ys = [r.global_throughput or 0.0 for r in runs]
            err = [(r.throughput_cv or 0.0) * y for r, y in zip(runs, ys, strict=True)]
            ax.errorbar([_when(r.started_at) for r in runs], ys, yerr=err, marker="o",
                        capsize=3, label=label)
        ax.set_title(workload)
        ax.set_ylabel("global examples/s")
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small", loc="best")
    axes[-1, 0].set_xlabel("run start (UTC)")
    fig.suptitle(title or "throughput over time (median of windows, bars: +-1 std)")
    fig.autofmt_xdate()
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out
