"""The scaling lab's report: speed-up curves, the out-of-sample check, the transfer ratio.

Pure functions of the results ``bench lab`` stored (every result with a recorded host
budget, ``launcher["budget"]``, below the lab directory); nothing is launched.

- Strong scaling (MultiWorkerMirrored, global batch fixed): throughput and speed-up
  over one host at 1..4 hosts per workload and link rate; each point's interval from
  the run-to-run noise pooled over the workload's points (``reports.lab_fit``).
- Weak scaling (ParameterServer, batch per step fixed), in a table of its own: more
  workers do more work, not the same work faster, so its "speed-up" ranks apart.
- The out-of-sample check: the model (``reports.lab_fit``) fitted from one- and
  two-host runs and the two-host probes away from the gradient sizes, set against
  the three- and four-host measurements, both with intervals; whether the predicted
  order of the held-out configurations is the measured one.
- The lab's compute-to-link ratio: a host's peak FLOP/s over its link's bytes/s, so
  that a target cluster's ratio names the lab link rate whose curve stands for it.
"""

from __future__ import annotations

import io
import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from bench.results.schema import RunResult
from bench.results.stats.runs import run_figure
from bench.results.store import SweepStore
from reports.lab_fit import (
    FitInputs,
    LabModel,
    Measured,
    OrderCheck,
    bootstrap,
    fit,
    interval,
    measured,
    order_check,
    overlap_step,
    pooled_log_sd,
    ratio,
)
from reports.projection import TOLERANCE, Link, ProjectionError, powers_of_two

MWMS, PS = "multi_worker_mirrored", "parameter_server"
HELD_OUT = (3, 4)  # host counts the fit never sees
FITTED = (1, 2)


def rate_label(bps: float | None) -> str:
    """``1e9`` -> ``"1 Gbit/s"``; None -> ``"no link"``."""
    if bps is None:
        return "no link"
    scale, unit = next(((s, u) for s, u in ((1e9, "Gbit/s"), (1e6, "Mbit/s"), (1e3, "kbit/s"))
                        if bps >= s), (1.0, "bit/s"))
    return f"{bps / scale:g} {unit}"


@dataclass(frozen=True)
class LabRun:
    """One stored lab run, as the report reads it."""

    workload: str
    strategy: str
    hosts: int  # training hosts (ParameterServer: worker hosts)
    batch: int  # spec batch: global (MultiWorkerMirrored) or per step (ParameterServer)
    rate_bps: float | None  # the link as applied (None: unshaped, e.g. one host)
    cpus: float | None
    mode: str  # "train" or "allreduce"
    result: RunResult

    @property
    def ok(self) -> bool:
        f = self.result.figures
        return self.result.status == "ok" and (
            (self.mode == "allreduce" and self.result.allreduce is not None)
            or (f is not None and bool(f.windows)))

    @property
    def throughput(self) -> float:
        """The run's figure: the median of its windows' global throughput."""
        assert self.result.figures is not None
        return run_figure([w.global_throughput for w in self.result.figures.windows])

    @property
    def host_peaks(self) -> list[float]:
        return [float(h["peak_flops_per_s"]) for h in self.result.launcher.get("hosts", [])
                if h.get("peak_flops_per_s")]


def lab_run(result: RunResult) -> LabRun | None:
    """The lab's view of a stored result, or None for a result without a host budget."""
    budget = result.launcher.get("budget")
    if not isinstance(budget, dict):
        return None
    cpu = budget.get("cpu") or {}
    link = budget.get("link") or {}
    spec = result.spec
    return LabRun(spec.workload, spec.strategy, spec.devices, spec.batch,
                  link.get("rate_bps"), cpu.get("cpus"), spec.mode, result)


def load_lab(out: Path) -> tuple[list[LabRun], list[str]]:
    """Every lab run stored below ``out`` (each sweep directory of it) and warnings."""
    runs, warnings = [], []
    for results in sorted(Path(out).rglob("results")):
        if not results.is_dir() or "hosts" in results.relative_to(out).parts:
            continue
        loaded = SweepStore(results.parent).load()
        warnings += loaded.warnings
        runs += [r for r in map(lab_run, loaded.results) if r is not None]
    return runs, warnings


# -- points ------------------------------------------------------------------------------
@dataclass
class Point:
    """Runs of one configuration: workload, strategy, hosts, batch, link."""

    workload: str
    strategy: str
    hosts: int
    batch: int
    rate_bps: float | None
    runs: list[LabRun] = field(default_factory=list)

    @property
    def figures(self) -> list[float]:
        return [r.throughput for r in self.runs if r.ok]

    @property
    def failed(self) -> int:
        return sum(not r.ok for r in self.runs)


@dataclass
class Lab:
    """Everything ``bench lab`` stored, grouped."""

    points: dict[tuple[Any, ...], Point]
    probes: dict[float, list[LabRun]]  # link rate -> all-reduce probes over 2+ hosts
    cpus: list[float]

    def training(self, strategy: str) -> list[Point]:
        return [p for p in self.points.values() if p.strategy == strategy]

    def workloads(self, strategy: str = MWMS) -> list[str]:
        return sorted({p.workload for p in self.training(strategy)})

    def rates(self, strategy: str = MWMS) -> list[float]:
        return sorted({p.rate_bps for p in self.training(strategy) if p.rate_bps is not None})

    def scaling_batch(self, workload: str) -> int | None:
        """The global batch of the workload's multi-host MultiWorkerMirrored runs."""
        batches = [p.batch for p in self.training(MWMS)
                   if p.workload == workload and p.hosts > 1 and p.figures]
        return max(set(batches), key=batches.count) if batches else None

    def point(self, workload: str, strategy: str, hosts: int, batch: int,
              rate: float | None) -> Point | None:
        if strategy == MWMS and hosts == 1:
            rate = None  # one host sends nothing: its runs stand for every link
        p = self.points.get((workload, strategy, hosts, batch, rate))
        return p if p is not None and p.figures else None

    def noise(self, workload: str, strategy: str = MWMS) -> tuple[float, int]:
        """Run-to-run log SD pooled over the workload's points of ``strategy``, and its
        df (the points share the machine and the code, so they share one noise)."""
        return pooled_log_sd([p.figures for p in self.training(strategy)
                              if p.workload == workload])

    def grad_bytes(self, workload: str) -> float | None:
        for p in self.training(MWMS):
            for r in p.runs:
                if p.workload == workload and r.ok and r.result.figures is not None:
                    return float(r.result.figures.model.grad_bytes_per_step)
        return None

    def small_collectives(self, workload: str) -> float:
        for p in self.training(MWMS):
            if p.workload == workload and p.runs:
                return 1.0 / p.runs[0].result.spec.steps_per_call
        return 1.0

    def host_peak(self) -> float | None:
        """Median measured peak FLOP/s of one host (its CPU budget), over the runs."""
        peaks = [v for p in self.training(MWMS) for r in p.runs if r.ok for v in r.host_peaks]
        return float(np.median(peaks)) if peaks else None


def group(runs: Sequence[LabRun]) -> Lab:
    """Runs grouped into points (one-host MultiWorkerMirrored runs under rate None)."""
    points: dict[tuple[Any, ...], Point] = {}
    probes: dict[float, list[LabRun]] = defaultdict(list)
    for r in runs:
        if r.mode == "allreduce":
            if r.ok and r.rate_bps is not None and r.result.allreduce is not None \
                    and r.result.allreduce.replicas >= 2:
                probes[r.rate_bps].append(r)
            continue
        rate = None if r.strategy == MWMS and r.hosts == 1 else r.rate_bps
        key = (r.workload, r.strategy, r.hosts, r.batch, rate)
        points.setdefault(key, Point(r.workload, r.strategy, r.hosts, r.batch, rate)
                          ).runs.append(r)
    cpus = sorted({r.cpus for r in runs if r.cpus is not None})
    return Lab(points, dict(probes), cpus)


# -- speed-up tables ------------------------------------------------------------------------
@dataclass(frozen=True)
class Cell:
    hosts: int
    throughput: Measured
    speedup: Measured | None  # None for the baseline itself


@dataclass(frozen=True)
class Curve:
    """One workload's scaling at one link rate."""

    workload: str
    strategy: str
    rate_bps: float
    batch: int
    cells: tuple[Cell, ...]
    failed: int


def curves(lab: Lab, strategy: str, hosts: Sequence[int] = (1, 2, 3, 4)) -> list[Curve]:
    """Throughput and speed-up over one host per workload and link rate."""
    out = []
    for w in lab.workloads(strategy):
        sd, df = lab.noise(w, strategy)
        for rate in lab.rates(strategy):
            batches = {p.batch for p in lab.training(strategy) if p.workload == w}
            batch = lab.scaling_batch(w) if strategy == MWMS else max(batches, default=None)
            if batch is None:
                continue
            base = lab.point(w, strategy, 1, batch, rate)
            cells, failed = [], 0
            for n in hosts:
                p = lab.point(w, strategy, n, batch, rate)
                raw = lab.points.get((w, strategy, n, batch,
                                      None if strategy == MWMS and n == 1 else rate))
                failed += raw.failed if raw else 0
                if p is None:
                    continue
                speed = ratio(p.figures, base.figures, sd, df) if base and n > 1 else None
                cells.append(Cell(n, measured(p.figures, sd, df), speed))
            if cells:
                out.append(Curve(w, strategy, rate, batch, tuple(cells), failed))
    return out


def rate_format(value: float) -> str:
    """A throughput's format: three significant digits for slow workloads (ResNet50
    here runs ~5 examples/s), whole numbers from 100 up."""
    return ",.0f" if abs(value) >= 100 else ".1f" if abs(value) >= 10 else ".2f"


def _iv(m: Measured, fmt: str) -> str:
    if not math.isfinite(m.low):
        return f"{m.median:{fmt}} (n={m.runs}, no interval)"
    return f"{m.median:{fmt}} [{m.low:{fmt}}, {m.high:{fmt}}]"


def curves_table(cs: Sequence[Curve], hosts: Sequence[int] = (1, 2, 3, 4)) -> str:
    """Markdown: one row per workload and link, one column per host count."""
    head = ["workload", "link", "batch", *[f"{n} host{'s' if n > 1 else ''}" for n in hosts]]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for c in cs:
        by_n = {cell.hosts: cell for cell in c.cells}
        row = [c.workload, rate_label(c.rate_bps), str(c.batch)]
        for n in hosts:
            cell = by_n.get(n)
            if cell is None:
                row.append("-")
            elif cell.speedup is None:
                fmt = rate_format(cell.throughput.median)
                row.append(f"{_iv(cell.throughput, fmt)} ex/s ({cell.throughput.runs} runs)")
            else:
                row.append(f"{_iv(cell.speedup, '.2f')}x ({cell.speedup.runs} runs)")
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def speedup_plot(cs: Sequence[Curve], title: str) -> bytes:
    """PNG: speed-up over one host against hosts, a panel per workload, a line per
    link rate with its interval, and the ideal (speed-up = hosts)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    workloads = sorted({c.workload for c in cs})
    fig = Figure(figsize=(4.2 * max(1, len(workloads)), 3.8))
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, max(1, len(workloads)), squeeze=False)[0]
    for ax, w in zip(axes, workloads, strict=False):
        top = 1
        for c in (c for c in cs if c.workload == w):
            pts = [(cell.hosts, cell.speedup if cell.speedup else None) for cell in c.cells]
            xs = [n for n, _ in pts]
            ys = [s.center if s else 1.0 for _, s in pts]
            lo = [y - (s.low if s and math.isfinite(s.low) else y) for y, (_, s) in zip(ys, pts,
                                                                                     strict=True)]
            hi = [(s.high if s and math.isfinite(s.high) else y) - y for y, (_, s) in zip(ys, pts,
                                                                                       strict=True)]
            ax.errorbar(xs, ys, yerr=[lo, hi], marker="o", capsize=3,
                        label=rate_label(c.rate_bps))
            top = max(top, *xs)
        ax.plot([1, top], [1, top], ls="--", color="grey", lw=1, label="ideal")
        ax.set_title(w)
        ax.set_xlabel("hosts")
        ax.set_ylabel("speed-up over one host")
        ax.set_xticks(range(1, top + 1))
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    return buf.getvalue()


# -- the out-of-sample check ------------------------------------------------------------------
@dataclass(frozen=True)
class Held:
    """A held-out point: measured against predicted, both with intervals."""

    workload: str
    rate_bps: float
    hosts: int
    measured: Measured
    predicted: float
    low: float
    high: float

    @property
    def error(self) -> float:
        """predicted / measured median - 1."""
        return self.predicted / self.measured.median - 1

    @property
    def within(self) -> bool:
        return abs(self.error) <= TOLERANCE

    @property
    def overlap(self) -> bool:
        """The intervals meet: the miss, if any, is within what was measured."""
        m = self.measured
        return math.isfinite(m.low) and self.low <= m.high and m.low <= self.high

    def label(self) -> str:
        if self.hosts == 1:
            return "1 host"  # sends nothing: the same on every link
        return f"{self.hosts} hosts, {rate_label(self.rate_bps)}"


@dataclass(frozen=True)
class WorkloadCheck:
    """One workload's fit (from 1 and 2 hosts) and its held-out points."""

    workload: str
    model: LabModel
    held: tuple[Held, ...]
    order: OrderCheck
    fitted: tuple[Held, ...]  # the points it was fitted to, for comparison


def fit_inputs(lab: Lab, workload: str) -> FitInputs:
    """What the fit of ``workload`` may see (one- and two-host runs, probes away from
    every lab workload's gradient size). Raises ProjectionError naming what is missing."""
    batch = lab.scaling_batch(workload)
    grad = lab.grad_bytes(workload)
    if batch is None or grad is None:
        raise ProjectionError(f"{workload}: no multi-host MultiWorkerMirrored run")
    single = {p.batch: p.figures for p in lab.training(MWMS)
              if p.workload == workload and p.hosts == 1 and p.figures}
    two = {rate: p.figures for rate in lab.rates() if rate in lab.probes
           and (p := lab.point(workload, MWMS, 2, batch, rate)) is not None}
    probes = {}
    for rate in two:
        probe = max(lab.probes[rate], key=lambda r: r.result.allreduce.replicas
                    if r.result.allreduce else 0)
        ar = probe.result.allreduce
        assert ar is not None
        probes[rate] = [(float(p.bytes), p.time_median_s) for p in ar.points if p.tensors == 1
                        and not p.label.startswith("gradients")]
    if len(single) < 2 or not two:
        raise ProjectionError(f"{workload}: the fit needs one-host runs at 2 batch sizes "
                              f"(have {sorted(single)}) and two-host runs on a probed link "
                              f"(have {sorted(rate_label(r) for r in two)})")
    avoid = [g for w in lab.workloads() if (g := lab.grad_bytes(w))]
    replicas = next(iter(lab.probes[next(iter(two))])).result.allreduce
    return FitInputs(batch, grad, single, two, probes, avoid, lab.small_collectives(workload),
                     replicas.replicas if replicas else 2)


def check_workload(lab: Lab, workload: str, resamples: int = 2000) -> WorkloadCheck:
    """Fit on one and two hosts, predict three and four (with bootstrap intervals)."""
    inputs = fit_inputs(lab, workload)
    model = fit(inputs)
    sd, df = lab.noise(workload)
    rates = sorted(inputs.two_hosts)
    # One host sends nothing: its point is the same on every link, listed once.
    where = [(n, rate) for rate in rates for n in (*FITTED, *HELD_OUT)
             if n > 1 or rate == rates[0]]
    rows = bootstrap(inputs, lambda m: [m.throughput(n, r) for n, r in where], resamples)
    low, high = interval(rows)
    held: list[Held] = []
    fitted: list[Held] = []
    for k, (n, rate) in enumerate(where):
        p = lab.point(workload, MWMS, n, inputs.global_batch, rate)
        if p is None:
            continue
        h = Held(workload, rate, n, measured(p.figures, sd, df), model.throughput(n, rate),
                 float(low[k]), float(high[k]))
        (held if n in HELD_OUT else fitted).append(h)
    order = order_check([h.label() for h in held], [h.predicted for h in held],
                        [h.measured for h in held])
    return WorkloadCheck(workload, model, tuple(held), order, tuple(fitted))


def checks(lab: Lab, resamples: int = 2000) -> tuple[list[WorkloadCheck], list[str]]:
    """Every workload's check, and why a workload could not be checked."""
    found, missing = [], []
    for w in lab.workloads():
        try:
            found.append(check_workload(lab, w, resamples))
        except ProjectionError as exc:
            missing.append(str(exc))
    return found, missing


def checks_table(cs: Sequence[WorkloadCheck]) -> str:
    """Markdown: every held-out point, measured and predicted with intervals."""
    lines = ["| workload | link | hosts | measured ex/s (median [95% CI]) | predicted ex/s "
             "[95% CI] | error | within 10% | intervals meet |", "|---" * 8 + "|"]
    for c in cs:
        for h in c.held:
            f = rate_format(h.measured.median)
            lines.append(f"| {h.workload} | {rate_label(h.rate_bps)} | {h.hosts} | "
                         f"{_iv(h.measured, f)} | {h.predicted:{f}} [{h.low:{f}}, "
                         f"{h.high:{f}}] | {h.error:+.1%} | {'yes' if h.within else 'NO'} | "
                         f"{'yes' if h.overlap else 'no'} |")
    return "\n".join(lines)


def model_lines(c: WorkloadCheck) -> list[str]:
    """The fitted parameters and the order check of one workload, in words."""
    m = c.model
    links = "; ".join(f"{rate_label(r)}: alpha {lk.alpha_s * 1e6:.0f} us, B "
                      f"{lk.bandwidth_Bps * 8 / 1e9:.3g} Gbit/s (worst probe residual "
                      f"{(lk.max_rel_residual or 0):.0%})" for r, lk in sorted(m.links.items()))
    o = c.order
    order = ("order preserved" if o.preserved else
             f"ORDER BROKEN in {o.discordant} pair(s): "
             + ", ".join(f"{a} vs {b}" for a, b in o.discordant_pairs))
    fitted = ", ".join(f"{h.label()} {h.error:+.1%}" for h in c.fitted)
    return [f"- **{c.workload}**: compute({m.global_batch}/n) = {m.compute.fixed_s * 1e3:.2f} ms "
            f"+ {m.compute.per_example_s * 1e3:.4f} ms x batch; S = "
            f"{m.grad_bytes / 2**20:.2f} MiB; g = {m.g:.2f}; {links}",
            f"  - fitted points (in sample): {fitted or '-'}",
            f"  - held-out order by throughput: {order} ({o.concordant} concordant, "
            f"{o.ties} tied within the measurement, Kendall tau {o.kendall_tau:+.2f})"]


def overall_order(cs: Sequence[WorkloadCheck]) -> OrderCheck:
    """Every held-out point of every workload by speed-up over its one-host fit: the
    order a recommender needs across workloads and links."""
    held = [(c, h) for c in cs for h in c.held]
    base = {c.workload: c.model.throughput(1, next(iter(c.model.links))) for c in cs}
    labels = [f"{h.workload} {h.label()}" for _, h in held]
    pred = [h.predicted / base[c.workload] for c, h in held]
    meas = [Measured(h.measured.runs, h.measured.median / base[c.workload],
                     h.measured.center / base[c.workload], h.measured.low / base[c.workload],
                     h.measured.high / base[c.workload]) for c, h in held]
    return order_check(labels, pred, meas)


# -- the ratio ----------------------------------------------------------------------------------
def ratio_lines(lab: Lab, cs: Sequence[WorkloadCheck]) -> list[str]:
    """The lab's compute-to-link ratio per link rate (nominal and effective)."""
    peak = lab.host_peak()
    if peak is None:
        return ["- no host peak FLOP/s recorded: the ratio cannot be stated"]
    effective: dict[float, float] = {}
    for c in cs:
        for r, lk in c.model.links.items():
            effective.setdefault(r, lk.bandwidth_Bps)
    lines = [f"- one host's measured peak: {peak / 1e9:.1f} GFLOP/s "
             f"(float32 matmuls under its {', '.join(f'{c:g}' for c in lab.cpus)}-CPU budget)"]
    for rate in lab.rates():
        eff = effective.get(rate)
        lines.append(f"- {rate_label(rate)}: {peak / (rate / 8):,.0f} FLOP per byte/s of link "
                     f"(nominal)" + (f", {peak / eff:,.0f} at the probe's effective "
                                     f"{eff * 8 / 1e9:.3g} Gbit/s" if eff else ""))
    lines.append("- a target with peak F per replica and link B (bytes/s) matches the lab "
                 "link rate 8 x host peak / (F/B) bits/s: read the lab's curve there, or "
                 "give F and B to `bench project --lab`")
    return lines


# -- the whole report ---------------------------------------------------------------------------
@dataclass
class LabReport:
    markdown: str
    plots: dict[str, bytes]


def report(out: Path, resamples: int = 2000) -> LabReport:
    """The lab report of everything stored below ``out``."""
    runs, warnings = load_lab(out)
    lab = group(runs)
    cpus = ", ".join(f"{c:g}" for c in lab.cpus) or "?"
    strong, weak = curves(lab, MWMS), curves(lab, PS)
    found, missing = checks(lab, resamples)
    md = [f"# Scaling lab ({cpus} CPU per host)", "",
          f"{len(runs)} stored runs below {out}; each host a network namespace with a "
          f"cgroup CPU quota of {cpus} CPU, links shaped with tbf.", ""]
    plots: dict[str, bytes] = {}
    sections = (
        (strong, "speedup-mwms.png", "MultiWorkerMirrored, strong scaling (global batch fixed)",
         "## Strong scaling: MultiWorkerMirrored (global batch fixed)",
         "One host: throughput; more hosts: speed-up over one host (ratio of geometric means "
         "of run figures), median [95% CI from the run-to-run noise pooled over the "
         "workload's points]."),
        (weak, "speedup-ps.png", "ParameterServer, weak scaling (batch per step fixed)",
         "## Weak scaling: ParameterServer (batch per step fixed), ranked apart",
         "More worker hosts do more steps of the same batch: a speed-up here is more work "
         "done, not the same work done faster, so it is not ranked with the strong-scaling "
         "curves."))
    for cs, png, title, heading, words in sections:
        if cs:
            plots[png] = speedup_plot(cs, title)
            md += [heading, "", words, "", curves_table(cs), "", f"![speed-up]({png})", ""]
    if found:
        overall = overall_order(found)
        md += ["## Out of sample: fitted on 1-2 hosts, predicted at 3-4", "",
               "step(n) = (compute(G/n)^g + comm(n)^g)^(1/g): compute from one-host runs at "
               "G and G/2, comm from the two-host all-reduce probe at sizes away from every "
               "gradient size, g (Pollux's overlap term) from the two-host runs. Predicted "
               "intervals: bootstrap over runs and probe sizes.", "", checks_table(found), "",
               *[line for c in found for line in model_lines(c)], "",
               f"Across workloads, held-out points by speed-up over one host: "
               f"{'order preserved' if overall.preserved else 'ORDER BROKEN'} "
               f"({overall.concordant} concordant, {overall.discordant} discordant, "
               f"{overall.ties} tied within the measurement; Kendall tau "
               f"{overall.kendall_tau:+.2f})", ""]
    md += ["## Compute-to-link ratio", "", *ratio_lines(lab, found), ""]
    if missing or warnings:
        md += ["## Not shown", "", *[f"- {m}" for m in [*missing, *warnings]], ""]
    return LabReport("\n".join(md), plots)


def write(rep: LabReport, directory: Path) -> Path:
    """Write the report (lab.md and its plots) into ``directory``; returns lab.md."""
    directory.mkdir(parents=True, exist_ok=True)
    for name, png in rep.plots.items():
        (directory / name).write_bytes(png)
    path = directory / "lab.md"
    path.write_text(rep.markdown, encoding="utf-8")
    return path


# -- transfer to a target cluster -------------------------------------------------------------
@dataclass(frozen=True)
class TransferPoint:
    """The projection at ``n`` replicas of the target, with its bootstrap interval."""

    n: int
    step_s: float
    throughput: float
    low: float
    high: float
    efficiency: float


@dataclass(frozen=True)
class Transfer:
    """A workload's lab model carried to a target by the ratio of peaks and its link."""

    workload: str
    points: tuple[TransferPoint, ...]
    notes: tuple[str, ...]

    def text(self) -> str:
        head = (f"{'n':>5} {'step ms':>10} {'examples/s [95% CI]':>36} {'efficiency':>11}")
        rows = [f"{p.n:>5} {p.step_s * 1e3:>10.3f} {p.throughput:>13,.0f} "
                f"[{p.low:>9,.0f}, {p.high:>9,.0f}] {p.efficiency:>11.1%}" for p in self.points]
        return "\n".join([*self.notes, "", head, *rows])


def transfer(lab: Lab, workload: str, peak_flops: float, bandwidth_Bps: float,
             latency_s: float | None = None, batch: int | None = None,
             max_replicas: int = 512, resamples: int = 2000) -> Transfer:
    """The lab's model of ``workload`` on a target whose replica has ``peak_flops`` and
    whose link carries ``bandwidth_Bps``, per-replica batch fixed (weak scaling) to
    ``max_replicas``.

    Compute is the lab host's, scaled by the ratio of peaks (the same share of peak
    on the target); communication the ring model on the target's link, with its
    latency given or else the lab link's whose compute-to-link ratio is nearest the
    target's; the overlap exponent g the lab's. The interval comes from refitting the
    lab model on resampled inputs. Raises ProjectionError when an input is missing.
    """
    if not (peak_flops > 0 and bandwidth_Bps > 0):
        raise ProjectionError(f"the target needs a positive peak and bandwidth. Received: "
                              f"peak_flops={peak_flops}, bandwidth_Bps={bandwidth_Bps}")
    host = lab.host_peak()
    if host is None:
        raise ProjectionError("the lab recorded no host peak FLOP/s: the compute cannot be "
                              "carried to the target")
    inputs = fit_inputs(lab, workload)
    model = fit(inputs)
    per_replica = batch or inputs.global_batch // 2
    target_ratio = peak_flops / bandwidth_Bps
    nearest = min(model.links, key=lambda r: abs(math.log(host / (r / 8) / target_ratio)))
    alpha = latency_s if latency_s is not None else model.links[nearest].alpha_s
    link = Link(alpha, bandwidth_Bps, "target")
    scale = host / peak_flops
    grid = powers_of_two(max_replicas)

    def curve(m: LabModel) -> list[float]:
        compute = m.compute.at(per_replica) * scale
        return [n * per_replica / overlap_step(compute, link.allreduce_s(
            n, m.grad_bytes, m.small_collectives) if n > 1 else 0.0, m.g) for n in grid]

    center = curve(model)
    low, high = interval(bootstrap(inputs, curve, resamples))
    compute = model.compute.at(per_replica) * scale
    points = tuple(TransferPoint(n, n * per_replica / c, c, float(lo), float(hi),
                                 compute / (n * per_replica / c))
                   for n, c, lo, hi in zip(grid, center, low, high, strict=True))
    notes = (
        f"{workload} on the target: per-replica batch {per_replica}, S = "
        f"{model.grad_bytes / 2**20:.2f} MiB, g = {model.g:.2f} (the lab's)",
        f"compute: the lab host's {model.compute.at(per_replica) * 1e3:.2f} ms x (lab host "
        f"peak {host / 1e9:.1f} GFLOP/s / target {peak_flops / 1e12:.4g} TFLOP/s) = "
        f"{compute * 1e3:.4g} ms (the same share of peak on the target)",
        f"link: {bandwidth_Bps * 8 / 1e9:.4g} Gbit/s, alpha {alpha * 1e6:.1f} us "
        + ("(given)" if latency_s is not None else
           f"(the lab's at {rate_label(nearest)}, whose ratio "
           f"{host / (nearest / 8):,.0f} FLOP per byte/s is nearest the target's "
           f"{target_ratio:,.0f})"),
        "interval: 95% bootstrap over the lab's runs and probe sizes (the target's figures "
        "are taken as given)")
    return Transfer(workload, points, notes)
