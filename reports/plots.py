"""Plots of a report, as base64 PNG (embedded in the HTML: no files, no network).

Figures are built with ``matplotlib.figure.Figure`` and the Agg canvas directly, not
pyplot: no global state, no GUI backend, nothing left open between plots. Every axis
names its unit; every figure is titled with workload, hardware and date.
"""

from __future__ import annotations

import base64
import io
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from bench.answers.configs import ConfigView
from bench.answers.recommend import Ranking, WorkloadAnswer
from bench.answers.runs import ONE_DEVICE_BASELINES, RunView
from reports.breakdown import profiled
from reports.report import MachineReport

MIB = 2**20
_COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2",
           "#7f7f7f", "#bcbd22", "#17becf")
_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")


@dataclass(frozen=True)
class Plot:
    name: str  # stable identifier, e.g. "throughput-vs-devices"
    title: str
    png_base64: str
    caption: str


def _png(fig: Figure) -> str:
    FigureCanvasAgg(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _panels(n: int, title: str) -> tuple[Figure, list[Any]]:
    cols = min(n, 3)
    rows = (n + cols - 1) // cols
    fig = Figure(figsize=(4.6 * cols, 3.5 * rows + 0.6), layout="constrained")
    fig.suptitle(title, fontsize=10)
    axes = [fig.add_subplot(rows, cols, i + 1) for i in range(n)]
    return fig, axes


class Palette:
    """One colour and marker per strategy, the same in every plot of a machine."""

    def __init__(self, strategies: Sequence[str]) -> None:
        names = sorted(set(strategies))
        self._index = {s: i for i, s in enumerate(names)}

    def color(self, strategy: str) -> str:
        return _COLORS[self._index.get(strategy, 0) % len(_COLORS)]

    def marker(self, strategy: str) -> str:
        return _MARKERS[self._index.get(strategy, 0) % len(_MARKERS)]


def _title(what: str, w: WorkloadAnswer, mr: MachineReport) -> str:
    return f"{what}: {w.variant.label()}\n{mr.machine.hardware}, {mr.machine.dates}"


def _by_strategy(runs: Sequence[ConfigView]) -> dict[str, list[ConfigView]]:
    out: dict[str, list[ConfigView]] = {}
    for run in runs:
        if run.ok:
            out.setdefault(run.strategy, []).append(run)
    return out


def _baseline(rk: Ranking) -> ConfigView | None:
    """The 1-device reference of a batch setting: the preferred single-device baseline,
    else the best 1-device run."""
    ones = [r for r in rk.by_replicas.get(1, []) if r.ok]
    for name in ONE_DEVICE_BASELINES:
        for r in ones:
            if r.base_strategy == name and r.strategy == name:
                return r
    return max(ones, key=lambda r: r.throughput or 0.0) if ones else None


def throughput_vs_devices(w: WorkloadAnswer, mr: MachineReport, pal: Palette) -> Plot | None:
    rks = [rk for rk in w.rankings if rk.ok_configs()]
    counts = sorted({r.replicas for rk in rks for r in rk.ok_configs()})
    if not rks or len(counts) < 2:
        return None
    fig, axes = _panels(len(rks), _title("Throughput vs devices", w, mr))
    for ax, rk in zip(axes, rks, strict=True):
        for strategy, runs in sorted(_by_strategy(rk.ok_configs()).items()):
            runs = sorted(runs, key=lambda r: r.replicas)
            ys = [r.throughput or 0.0 for r in runs]
            # The bars span the lowest and highest run: what a re-run could show.
            spans = [r.run_range or (y, y) for r, y in zip(runs, ys, strict=True)]
            ax.errorbar([r.replicas for r in runs], ys,
                        yerr=[[max(0.0, y - lo) for y, (lo, _) in zip(ys, spans, strict=True)],
                              [max(0.0, hi - y) for y, (_, hi) in zip(ys, spans, strict=True)]],
                        marker=pal.marker(strategy), color=pal.color(strategy), label=strategy,
                        capsize=3)
        base = _baseline(rk)
        if base is not None and base.throughput:
            ideal = ([base.throughput] * len(counts) if mr.machine.cpu_only
                     else [base.throughput * n for n in counts])
            what = "ideal on shared cores" if mr.machine.cpu_only else "ideal (linear)"
            ax.plot(counts, ideal, linestyle="--", color="black", linewidth=1,
                    label=f"{what} from {base.strategy}")
        ax.set_title(rk.label, fontsize=9)
        ax.set_xlabel("replicas (devices)")
        ax.set_ylabel("global throughput (examples/s)")
        ax.set_xticks(counts)
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=7)
    return Plot("throughput-vs-devices", "Throughput vs device count", _png(fig),
                "Global throughput (examples/s, median of the runs' figures) per strategy, "
                "bars from the lowest to the highest run; the dashed line is the ideal from "
                "the 1-device baseline"
                + (" (flat: logical devices share the same cores)." if mr.machine.cpu_only
                   else " times the device count."))


def efficiency_vs_devices(w: WorkloadAnswer, mr: MachineReport, pal: Palette) -> Plot | None:
    rks = [rk for rk in w.rankings if rk.ok_configs()]
    if not rks or len({r.replicas for rk in rks for r in rk.ok_configs()}) < 2:
        return None
    fig, axes = _panels(len(rks), _title("Scaling efficiency vs devices", w, mr))
    for ax, rk in zip(axes, rks, strict=True):
        strong = rk.batch_mode == "global"
        for strategy, runs in sorted(_by_strategy(rk.ok_configs()).items()):
            pts = []
            for r in sorted(runs, key=lambda r: r.replicas):
                sc = mr.scaling.get(r.key)
                eff = (sc.strong_eff if strong else sc.weak_eff) if sc else None
                if eff is not None:
                    pts.append((r.replicas, eff.value * 100))
            if pts:
                ax.plot(*zip(*pts, strict=True), marker=pal.marker(strategy),
                        color=pal.color(strategy), label=strategy)
        ax.axhline(100, linestyle="--", color="black", linewidth=1, label="ideal (100%)")
        ax.set_xticks(sorted({r.replicas for r in rk.ok_configs()}))
        ax.set_title(f"{rk.label} ({'strong' if strong else 'weak'} scaling)", fontsize=9)
        ax.set_xlabel("replicas (devices)")
        ax.set_ylabel("efficiency vs same strategy on 1 device (%)")
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=7)
    return Plot("efficiency-vs-devices", "Scaling efficiency vs device count", _png(fig),
                "Strong scaling (global batch fixed): speed-up / N. Weak scaling (per-replica "
                "batch fixed): T(N) / (N x T(1)). 100% is perfect scaling"
                + ("; on logical CPU devices sharing the cores, 1/N is the ceiling."
                   if mr.machine.cpu_only else "."))


def _breakdown(run: ConfigView, mr: MachineReport) -> dict[str, float] | None:
    """Milliseconds per step by part: profiled if available, else estimated."""
    p = profiled(run)
    if p is not None:
        parts = {k: v * 1e3 for k, v in p.parts.items()}
        if p.unsplit_s is not None:
            parts["other"] = p.unsplit_s * 1e3
        return parts
    if run.step_s is None:
        return None
    share = mr.overhead.get(run.key)
    if share is None:
        return {"measured step (no breakdown)": run.step_s * 1e3}
    share = min(max(share, 0.0), 1.0)
    return {"ideal step (estimated)": run.step_s * (1 - share) * 1e3,
            "overhead beyond ideal (estimated)": run.step_s * share * 1e3}


_PART_COLORS = {"input": "#55a868", "compute": "#4c72b0", "communication": "#dd5143",
                "host": "#8172b2", "idle": "#dddddd", "other": "#aaaaaa",
                "ideal step (estimated)": "#8fb0d8",
                "overhead beyond ideal (estimated)": "#f0a35e",
                "measured step (no breakdown)": "#cccccc"}


def step_breakdown(w: WorkloadAnswer, mr: MachineReport, pal: Palette) -> Plot | None:
    rks = [rk for rk in w.rankings if rk.ok_configs()]
    if not rks:
        return None
    fig, axes = _panels(len(rks), _title("Step-time breakdown", w, mr))
    any_profiled = False
    for ax, rk in zip(axes, rks, strict=True):
        runs = sorted(rk.ok_configs(), key=lambda r: (r.replicas, r.strategy))
        labels, seen = [], set()
        for i, run in enumerate(runs):
            parts = _breakdown(run, mr) or {}
            any_profiled |= "communication" in parts
            bottom = 0.0
            for part, value in parts.items():
                ax.bar(i, value, bottom=bottom, color=_PART_COLORS.get(part, "#999999"),
                       label=part if part not in seen else None)
                seen.add(part)
                bottom += value
            labels.append(f"{run.strategy}\nN={run.replicas}")
        ax.set_xticks(range(len(runs)))
        ax.set_xticklabels(labels, fontsize=6, rotation=60, ha="right")
        ax.set_ylabel("step time (ms)")
        ax.set_title(rk.label, fontsize=9)
        ax.legend(fontsize=6)
    estimate = ("the median step split into the ideal step (from the 1-device baseline's "
                "throughput) and the overhead beyond it: an estimate, not a profile; baselines "
                "show the measured step only.")
    return Plot("step-breakdown", "Step-time breakdown", _png(fig),
                "Input / compute / communication / host / idle per profiled step where runs "
                "were profiled (see breakdown); "
                f"elsewhere {estimate}" if any_profiled else estimate[0].upper() + estimate[1:])


def _per_count_panels(w: WorkloadAnswer, what: str, mr: MachineReport,
                      y: Callable[[ConfigView], float | None], x: Callable[[ConfigView], int],
                      xlabel: str, ylabel: str, pal: Palette) -> Figure | None:
    runs = [r for r in w.configs if r.ok and y(r) is not None]
    counts = sorted({r.replicas for r in runs})
    if not runs or len({x(r) for r in runs}) < 2:
        return None
    fig, axes = _panels(len(counts), _title(what, w, mr))
    for ax, n in zip(axes, counts, strict=True):
        for strategy, rs in sorted(_by_strategy([r for r in runs if r.replicas == n]).items()):
            rs = sorted(rs, key=x)
            ax.plot([x(r) for r in rs], [y(r) for r in rs], marker=pal.marker(strategy),
                    color=pal.color(strategy), label=strategy)
        ax.set_title(f"{n} replica(s)", fontsize=9)
        ax.set_xticks(sorted({x(r) for r in runs if r.replicas == n}))
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=7)
    return fig


def memory_vs_batch(w: WorkloadAnswer, mr: MachineReport, pal: Palette) -> Plot | None:
    scopes = {r.memory_scope for r in w.configs if r.ok}
    process = "process" in scopes
    fig = _per_count_panels(
        w, "Peak memory vs batch size", mr,
        lambda r: r.device_peak_bytes / MIB if r.device_peak_bytes else None,
        lambda r: r.per_replica_batch, "per-replica batch (examples)",
        "peak device memory, process-wide (MiB)" if process
        else "peak memory per device (MiB)", pal)
    if fig is None:
        return None
    # A configuration without the figure is not drawn: the caption says so, and the
    # comparison tables' notes say why.
    missing = sum(1 for r in w.configs if r.ok and not r.device_peak_bytes)
    return Plot("memory-vs-batch", "Peak memory vs batch size", _png(fig),
                "Allocator peak during the measured windows. "
                + ("On CPU all logical devices share one allocator, so the figure is the "
                   "whole process's, not one device's." if process
                   else "Largest peak over the devices of the run.")
                + (f" {missing} configuration(s) without the figure are not drawn (the "
                   f"tables' notes say why)." if missing else ""))


def throughput_vs_batch(w: WorkloadAnswer, mr: MachineReport, pal: Palette) -> Plot | None:
    fig = _per_count_panels(w, "Throughput vs batch size", mr, lambda r: r.throughput,
                            lambda r: r.global_batch, "global batch (examples)",
                            "global throughput (examples/s)", pal)
    if fig is None:
        return None
    return Plot("throughput-vs-batch", "Throughput vs batch size", _png(fig),
                "Global throughput (examples/s) against the global batch, one panel per "
                "replica count.")


WORKLOAD_PLOTS: dict[str, Callable[[WorkloadAnswer, MachineReport, Palette], Plot | None]] = {
    "throughput-vs-devices": throughput_vs_devices,
    "efficiency-vs-devices": efficiency_vs_devices,
    "step-breakdown": step_breakdown,
    "memory-vs-batch": memory_vs_batch,
    "throughput-vs-batch": throughput_vs_batch,
}


def palette(mr: MachineReport) -> Palette:
    return Palette([r.strategy for r in mr.machine.runs])


def workload_plots(w: WorkloadAnswer, mr: MachineReport) -> list[Plot]:
    pal = palette(mr)
    return [p for fn in WORKLOAD_PLOTS.values() if (p := fn(w, mr, pal)) is not None]


def allreduce_points(run: RunView) -> list[tuple[float, float]]:
    """(message bytes, bus bandwidth bytes/s) of a run's all-reduce probe, if any."""
    ar = run.allreduce
    if ar is None:
        return []
    return sorted((float(p.bytes), float(p.busbw)) for p in ar.points if p.bytes)


def allreduce_plot(mr: MachineReport) -> Plot | None:
    """Bus bandwidth vs message size for every run with all-reduce probe results."""
    series = [(r, pts) for r in mr.machine.runs if (pts := allreduce_points(r))]
    if not series:
        return None
    fig = Figure(figsize=(7.5, 4.4), layout="constrained")
    fig.suptitle(f"All-reduce bus bandwidth vs message size\n{mr.machine.hardware}, "
                 f"{mr.machine.dates}", fontsize=10)
    ax = fig.add_subplot(1, 1, 1)
    pal = palette(mr)
    for run, pts in series:
        impl = run.allreduce.implementation if run.allreduce is not None else None
        label = f"{run.strategy} N={run.replicas}" + (f" ({impl})" if impl else "")
        ax.plot([p[0] for p in pts], [p[1] / 1e9 for p in pts], marker=pal.marker(run.strategy),
                color=pal.color(run.strategy), label=label)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel("bus bandwidth (GB/s)")
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=7)
    return Plot("allreduce-busbw", "All-reduce bus bandwidth", _png(fig),
                "busbw = algbw x 2(N-1)/N, algbw = bytes / time (median): the nccl-tests "
                "convention, comparable across device counts.")
