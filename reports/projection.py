"""Scaling beyond the sizes measured: a latency-bandwidth model of ring all-reduce.

Pure functions of numbers and stored results (no TensorFlow, no launching).

Model (data parallelism, the per-replica batch ``b`` fixed as replicas grow):

    comm(n)        = 2(n-1)·alpha·(1 + c) + 2(n-1)/n · S/B  ring all-reduce of S bytes,
                                                            plus c small collectives
    step_none(n)   = compute + comm(n)                      no overlap
    step_full(n)   = compute + max(0, comm(n) - backward)   comm hidden behind backward
    throughput(n)  = n·b / step(n)
    efficiency(n)  = throughput(n) / (n · throughput(1)) = compute / step(n)

``compute`` is the measured step time of one replica at batch ``b`` (so it holds
the input pipeline, optimizer and framework overhead too); ``S`` the gradient
bytes all-reduced per step; ``c`` the other collectives a step makes, each a
small (latency-bound) all-reduce: the custom loop reduces its loss across
replicas once per call, so c = 1/steps_per_call; ``backward`` the backward
pass's share of compute (from the model's FLOPs: 1 - forward/train).

``alpha`` (per-hop latency) and ``B`` (bandwidth, bytes/s) come from an
all-reduce probe on the link in question, or are given. A straight line does not
fit a real link from 1 KiB to 128 MiB (on the emulated links here its residuals
reached 20-60%), so the fit is made where the model is used: alpha from the
latency regime (buffers up to 64 KiB, whose time is nearly all latency), B from
the probe's time at S itself (its all-reduce of the workload's own gradient
shapes, else interpolated between the sizes around S). Without S, a least-squares
fit on relative error over all sizes. The projection is a band: no overlap
(slowest) to full overlap (fastest).

In a report (``machine_projections``), each workload of a machine is projected from
that machine's own runs: a single-replica run (compute, S) and an all-reduce probe
(alpha, B), with the sweep's multi-replica runs of the probed strategy at the same
per-replica batch as the measured points.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from bench.answers.runs import ONE_DEVICE_BASELINES
from bench.results.schema import AllReduceFigures, RunResult

if TYPE_CHECKING:  # the report's views; `bench project` needs none of them
    from bench.answers.configs import ConfigView
    from bench.answers.runs import RunView, Variant
    from reports.report import MachineReport

FORMULAS = (
    "comm(n) = 2(n-1)*alpha*(1 + c) + 2(n-1)/n * S/B  (ring all-reduce of S bytes, plus c "
    "small collectives)",
    "step(n) = compute + comm(n)                    (no overlap)",
    "step(n) = compute + max(0, comm(n) - backward) (full overlap with the backward pass)",
    "throughput(n) = n*b / step(n);  efficiency(n) = compute / step(n)",
)
TOLERANCE = 0.10  # the projection is judged against this relative error
DEFAULT_BACKWARD_SHARE = 2.0 / 3.0  # backward ~ 2x forward FLOPs
LATENCY_REGIME_BYTES = 64 * 1024  # probe buffers this small take (nearly) latency alone


class ProjectionError(ValueError):
    """Inputs the model cannot use (the message names the input and its value)."""


@dataclass(frozen=True)
class Link:
    """A fitted or given link: per-hop latency ``alpha_s`` and bandwidth (bytes/s)."""

    alpha_s: float
    bandwidth_Bps: float
    source: str  # e.g. "fit of 19 probe points at n=2" or "given"
    max_rel_residual: float | None = None  # of the fit over its points
    # The probe's replicas, and the size whose measured time B was fitted to (the
    # model then reproduces the probe there): what the diagnosis may take as known.
    probe_replicas: int | None = None
    anchored_bytes: float | None = None

    def __post_init__(self) -> None:
        if not (self.alpha_s >= 0 and math.isfinite(self.alpha_s)):
            raise ProjectionError(f"Link.alpha_s must be >= 0. Received: alpha_s={self.alpha_s}")
        if not (self.bandwidth_Bps > 0 and math.isfinite(self.bandwidth_Bps)):
            raise ProjectionError(f"Link.bandwidth_Bps must be > 0. "
                                  f"Received: bandwidth_Bps={self.bandwidth_Bps}")

    def allreduce_s(self, n: int, nbytes: float, small: float = 0.0) -> float:
        """Ring all-reduce time of ``nbytes`` per replica over ``n`` replicas, plus
        ``small`` latency-bound collectives."""
        return sum(self.terms(n, nbytes, small))

    def terms(self, n: int, nbytes: float, small: float = 0.0) -> tuple[float, float]:
        """(latency term, bandwidth term) of ``allreduce_s``."""
        if n <= 1:
            return 0.0, 0.0
        return (2 * (n - 1) * self.alpha_s * (1 + small),
                2 * (n - 1) / n * nbytes / self.bandwidth_Bps)


def fit_link(points: Sequence[tuple[float, float]], replicas: int, source: str = "") -> Link:
    """alpha and B from all-reduce timings ``(bytes, seconds)`` at ``replicas``.

    t = a + c·S with a = 2(n-1)·alpha, c = 2(n-1)/(n·B): weighted least squares with
    weights 1/t² (relative error). A negative intercept (latency lost in noise) is
    pinned to 0 and the slope refitted.
    """
    if replicas < 2:
        raise ProjectionError(f"an all-reduce fit needs a probe over 2+ replicas. "
                              f"Received: replicas={replicas}")
    pts = [(float(s), float(t)) for s, t in points if s > 0 and t > 0]
    if len({s for s, _ in pts}) < 2:
        raise ProjectionError(f"an all-reduce fit needs timings of 2+ sizes. "
                              f"Received: {len(pts)} usable point(s)")
    w = [1.0 / t**2 for _, t in pts]
    sw = sum(w)
    sx = sum(wi * s for wi, (s, _) in zip(w, pts, strict=True))
    sy = sum(wi * t for wi, (_, t) in zip(w, pts, strict=True))
    sxx = sum(wi * s * s for wi, (s, _) in zip(w, pts, strict=True))
    sxy = sum(wi * s * t for wi, (s, t) in zip(w, pts, strict=True))
    det = sw * sxx - sx * sx
    slope = (sw * sxy - sx * sy) / det
    intercept = (sy - slope * sx) / sw
    if intercept < 0 or slope <= 0:
        intercept = 0.0
        slope = sxy / sxx
    if slope <= 0:
        raise ProjectionError("the all-reduce timings do not grow with size: no bandwidth "
                              "can be fitted")
    hops = 2 * (replicas - 1)
    link = Link(alpha_s=intercept / hops, bandwidth_Bps=hops / (replicas * slope),
                source=source or f"fit of {len(pts)} probe points at n={replicas}")
    return Link(link.alpha_s, link.bandwidth_Bps, link.source, _worst(link, pts, replicas),
                probe_replicas=replicas)


def fit_link_at(points: Sequence[tuple[float, float]], replicas: int, at_bytes: float,
                measured_at: float | None = None, source: str = "") -> Link:
    """alpha from the latency regime, B from the time at ``at_bytes`` (``measured_at``,
    else interpolated between the sizes around it, log-log).

    Falls back to ``fit_link`` where that cannot work: no buffer in the latency
    regime, ``at_bytes`` outside the probed sizes without a measurement there, or a
    time at ``at_bytes`` not above the latency.
    """
    pts = sorted((float(s), float(t)) for s, t in points if s > 0 and t > 0)
    hops = 2 * (replicas - 1)
    small = sorted(t for s, t in pts if s <= LATENCY_REGIME_BYTES)
    t_at = measured_at if measured_at else _interpolate(pts, at_bytes)
    if replicas < 2 or not small or t_at is None:
        return fit_link(pts, replicas, source)
    alpha = small[len(small) // 2] / hops  # median: robust to a slow first call
    exposed = t_at - hops * alpha
    if exposed <= 0:
        return fit_link(pts, replicas, source)
    bandwidth = hops / replicas * at_bytes / exposed
    where = "the probe's all-reduce of the gradients" if measured_at else "interpolated"
    link = Link(alpha, bandwidth, source or (
        f"alpha: median of {len(small)} buffers <= {LATENCY_REGIME_BYTES // 1024} KiB; "
        f"B: time at S = {at_bytes / 2**20:.2f} MiB ({where}); n={replicas}"),
        probe_replicas=replicas, anchored_bytes=at_bytes)
    return replace(link, max_rel_residual=_worst(link, pts, replicas))


def _worst(link: Link, pts: Sequence[tuple[float, float]], replicas: int) -> float:
    return max(abs(link.allreduce_s(replicas, s) - t) / t for s, t in pts)


def _interpolate(pts: Sequence[tuple[float, float]], at: float) -> float | None:
    """Time at ``at`` bytes, log-log between the two probed sizes around it."""
    for (s0, t0), (s1, t1) in itertools.pairwise(pts):
        if s0 <= at <= s1:
            if s1 == s0:
                return t0
            w = math.log(at / s0) / math.log(s1 / s0)
            return math.exp(math.log(t0) + w * (math.log(t1) - math.log(t0)))
    return None


def link_from_probe(probe: AllReduceFigures, at_bytes: float | None = None) -> Link:
    """The link of a stored all-reduce probe: fitted at ``at_bytes`` (the gradient
    bytes, see ``fit_link_at``; the probe's all-reduce of a workload's gradients is
    used when its size is ``at_bytes``), else over all its single-buffer sizes."""
    single = [p for p in probe.points if p.tensors == 1] or list(probe.points)
    pts = [(float(p.bytes), p.time_median_s) for p in single]
    if at_bytes is None:
        return fit_link(pts, probe.replicas, f"fit of {len(single)} probe points "
                                             f"({probe.implementation}, n={probe.replicas})")
    grads = [p for p in probe.points if p.label.startswith("gradients")
             and abs(p.bytes - at_bytes) <= 0.01 * at_bytes]
    return fit_link_at(pts, probe.replicas, at_bytes,
                       grads[0].time_median_s if grads else None)


@dataclass(frozen=True)
class Inputs:
    """One replica's measured step at the per-replica batch, and its gradients."""

    compute_s: float  # step time of one replica
    grad_bytes: float  # S: bytes all-reduced per step
    per_replica_batch: int
    backward_share: float = DEFAULT_BACKWARD_SHARE
    source: str = "given"
    small_collectives: float = 1.0  # c: the loss reduction, once per call

    def __post_init__(self) -> None:
        for name in ("compute_s", "grad_bytes"):
            value = getattr(self, name)
            if not (value > 0 and math.isfinite(value)):
                raise ProjectionError(f"Inputs.{name} must be > 0. Received: {name}={value}")
        if self.per_replica_batch < 1:
            raise ProjectionError(f"Inputs.per_replica_batch must be >= 1. "
                                  f"Received: per_replica_batch={self.per_replica_batch}")
        if not self.small_collectives >= 0:
            raise ProjectionError(f"Inputs.small_collectives must be >= 0. "
                                  f"Received: small_collectives={self.small_collectives}")
        if not 0 <= self.backward_share <= 1:
            raise ProjectionError(f"Inputs.backward_share must be in [0, 1]. "
                                  f"Received: backward_share={self.backward_share}")


def inputs_from_result(result: RunResult) -> Inputs:
    """Inputs from a stored single-replica training run (its median step time)."""
    f = result.figures
    if result.status != "ok" or f is None:
        raise ProjectionError(f"the single-replica run must be an ok training run. "
                              f"Received: status={result.status!r} ({result.key})")
    if result.replicas != 1:
        raise ProjectionError(f"the compute time must come from a single-replica run. "
                              f"Received: replicas={result.replicas} ({result.key})")
    m = f.model
    share = (1.0 - m.forward_flops_per_example / m.train_flops_per_example
             if m.train_flops_per_example > 0 else DEFAULT_BACKWARD_SHARE)
    return Inputs(compute_s=f.step_time.median_s, grad_bytes=float(m.grad_bytes_per_step),
                  per_replica_batch=result.per_replica_batch,
                  backward_share=min(1.0, max(0.0, share)),
                  source=f"{result.key} (median step of {f.step_time.samples} timed calls)",
                  small_collectives=1.0 / result.spec.steps_per_call)


@dataclass(frozen=True)
class Point:
    """The projection at ``n`` replicas: the band from no overlap to full overlap."""

    n: int
    comm_s: float
    step_no_overlap_s: float
    step_full_overlap_s: float
    throughput_low: float  # examples/s, no overlap
    throughput_high: float  # examples/s, full overlap
    efficiency_low: float
    efficiency_high: float


@dataclass(frozen=True)
class Projection:
    inputs: Inputs
    link: Link
    points: list[Point] = field(default_factory=list)

    def at(self, n: int) -> Point:
        return project_point(self.inputs, self.link, n)


def project_point(inputs: Inputs, link: Link, n: int) -> Point:
    """The model at ``n`` replicas (see the module docstring)."""
    if n < 1:
        raise ProjectionError(f"replicas must be >= 1. Received: n={n}")
    comm = link.allreduce_s(n, inputs.grad_bytes, inputs.small_collectives)
    compute = inputs.compute_s
    slow = compute + comm
    fast = compute + max(0.0, comm - inputs.backward_share * compute)
    examples = n * inputs.per_replica_batch
    return Point(n=n, comm_s=comm, step_no_overlap_s=slow, step_full_overlap_s=fast,
                 throughput_low=examples / slow, throughput_high=examples / fast,
                 efficiency_low=compute / slow, efficiency_high=compute / fast)


def project(inputs: Inputs, link: Link, max_replicas: int = 512) -> Projection:
    """The projection for n = 1..``max_replicas`` (every n)."""
    if max_replicas < 2:
        raise ProjectionError(f"max_replicas must be >= 2. Received: {max_replicas}")
    return Projection(inputs, link, [project_point(inputs, link, n)
                                     for n in range(1, max_replicas + 1)])


@dataclass(frozen=True)
class Check:
    """A measured point against the projection."""

    label: str
    n: int
    measured: float  # examples/s
    projected: float  # examples/s, no overlap (TensorFlow's custom loop all-reduces
    # after the backward pass: the edge expected here)
    projected_high: float  # full overlap
    error: float  # (projected - measured) / measured
    in_band: bool
    diagnosis: str  # which term is off, when |error| > TOLERANCE


def check(projection: Projection, n: int, measured: float, label: str = "") -> Check:
    """Compare a measured global throughput at ``n`` replicas with the projection."""
    if not measured > 0:
        raise ProjectionError(f"measured throughput must be > 0. Received: {measured}")
    p = projection.at(n)
    error = (p.throughput_low - measured) / measured
    in_band = p.throughput_low * (1 - 1e-9) <= measured <= p.throughput_high * (1 + 1e-9)
    return Check(label, n, measured, p.throughput_low, p.throughput_high, error, in_band,
                 diagnose(projection, n, measured, error))


def diagnose(projection: Projection, n: int, measured: float, error: float) -> str:
    """Which term of the model is off.

    The measured step time minus the single-replica compute is the communication the
    run implies. Where the link was fitted to the probe's own time at S at this
    replica count, the communication terms reproduce a measurement: the gap then
    belongs to the compute term (per-step work a lone replica does not do). Otherwise
    the gap is attributed to the larger of the latency and bandwidth terms, with the
    effective bandwidth or latency it implies.
    """
    if abs(error) <= TOLERANCE:
        return "within tolerance"
    inputs, link = projection.inputs, projection.link
    step = n * inputs.per_replica_batch / measured
    implied = step - inputs.compute_s
    lat, bw = link.terms(n, inputs.grad_bytes, inputs.small_collectives)
    p = projection.at(n)
    if implied <= 0:
        return (f"compute term: the measured step ({step * 1e3:.2f} ms) is faster than the "
                f"single-replica compute alone ({inputs.compute_s * 1e3:.2f} ms); the "
                f"reference run is slow for these hosts")
    if p.throughput_low <= measured <= p.throughput_high:
        return (f"overlap: the measurement lies inside the band; communication is partly "
                f"hidden ({implied * 1e3:.2f} ms of {p.comm_s * 1e3:.2f} ms exposed)")
    gap = implied - p.comm_s
    if link.anchored_bytes and link.probe_replicas == n:
        return (f"compute term: the communication terms reproduce the probe's all-reduce of "
                f"the gradients on this link ({p.comm_s * 1e3:.2f} ms per step with the "
                f"small collectives); the run spent {gap * 1e3:+.2f} ms per step ({gap / step:+.0%}"
                f" of its step) beyond compute + communication: per-step work a lone replica "
                f"does not do (collective set-up and coordination, hosts contending for the "
                f"machine)")
    hops = 2 * (n - 1)
    if bw >= lat:
        b_eff = (hops / n * inputs.grad_bytes) / max(implied - lat, 1e-12)
        return (f"bandwidth term: the run implies {implied * 1e3:.2f} ms of communication per "
                f"step vs {p.comm_s * 1e3:.2f} ms modelled (latency {lat * 1e3:.2f} ms + "
                f"bandwidth {bw * 1e3:.2f} ms): effective B = {b_eff * 8 / 1e9:.3g} Gbit/s "
                f"vs fitted {link.bandwidth_Bps * 8 / 1e9:.3g} Gbit/s")
    a_eff = max(implied - bw, 0.0) / (hops * (1 + inputs.small_collectives))
    return (f"latency term: the run implies {implied * 1e3:.2f} ms of communication per step "
            f"vs {p.comm_s * 1e3:.2f} ms modelled, mostly latency: effective alpha = "
            f"{a_eff * 1e6:.1f} us per hop vs fitted {link.alpha_s * 1e6:.1f} us")


def powers_of_two(upto: int) -> list[int]:
    """1, 2, 4, ... up to ``upto`` (and ``upto`` itself)."""
    out, n = [], 1
    while n < upto:
        out.append(n)
        n *= 2
    return [*out, upto]


def text(projection: Projection, checks: Sequence[Check] = ()) -> str:
    """Inputs, the fitted link, the formulas and the projection table (powers of two)."""
    i, link = projection.inputs, projection.link
    lines = ["inputs:",
             f"  compute  = {i.compute_s * 1e3:.3f} ms per step, one replica at b = "
             f"{i.per_replica_batch} ({i.source})",
             f"  S        = {i.grad_bytes / 2**20:.3f} MiB of gradients per step",
             f"  backward = {i.backward_share:.2f} of compute",
             f"  c        = {i.small_collectives:g} small collective(s) per step",
             f"link ({link.source}):",
             f"  alpha    = {link.alpha_s * 1e6:.2f} us per hop",
             f"  B        = {link.bandwidth_Bps * 8 / 1e9:.4g} Gbit/s "
             f"({link.bandwidth_Bps / 1e9:.4g} GB/s)"
             + (f"; fit's worst relative residual {link.max_rel_residual:.1%}"
                if link.max_rel_residual is not None else ""),
             "model:", *(f"  {f}" for f in FORMULAS), "",
             f"{'n':>5} {'comm ms':>9} {'step ms (none..full overlap)':>30} "
             f"{'examples/s':>24} {'efficiency':>16}"]
    last = projection.points[-1].n if projection.points else 512
    for n in powers_of_two(last):
        p = projection.at(n)
        lines.append(f"{n:>5} {p.comm_s * 1e3:>9.3f} {p.step_no_overlap_s * 1e3:>14.3f} .. "
                     f"{p.step_full_overlap_s * 1e3:<13.3f} {p.throughput_low:>11,.0f} .. "
                     f"{p.throughput_high:<10,.0f} {p.efficiency_low:>6.1%} .. "
                     f"{p.efficiency_high:<6.1%}")
    if checks:
        lines += ["", f"measured vs projected (no overlap; tolerance {TOLERANCE:.0%}):",
                  f"{'point':<28} {'n':>3} {'measured':>11} {'projected':>11} {'error':>8}  "
                  f"band?  diagnosis"]
        for c in checks:
            lines.append(f"{c.label:<28} {c.n:>3} {c.measured:>11,.1f} {c.projected:>11,.1f} "
                         f"{c.error:>+8.1%}  {'yes' if c.in_band else 'no ':<5}  "
                         f"{c.diagnosis}")
    return "\n".join(lines)


def plot(projection: Projection, checks: Sequence[Check] = (), title: str = "") -> bytes:
    """PNG: projected efficiency band and measured points vs replicas, each measured
    point annotated with the projection's error there."""
    import io

    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7.5, 4.5))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    pts = projection.points
    ns = [p.n for p in pts]
    ax.fill_between(ns, [p.efficiency_low for p in pts], [p.efficiency_high for p in pts],
                    color="#1f77b4", alpha=0.25, label="projected (no .. full overlap)")
    ax.plot(ns, [p.efficiency_low for p in pts], color="#1f77b4", lw=1.2)
    for c in checks:
        single = projection.inputs.per_replica_batch / projection.inputs.compute_s
        eff = c.measured / (c.n * single)
        ax.plot([c.n], [eff], "o", color="#d62728")
        ax.annotate(f"{c.label} {c.error:+.0%}".strip(), (c.n, eff), fontsize=7,
                    textcoords="offset points", xytext=(5, 5))
    if checks:
        ax.plot([], [], "o", color="#d62728", label="measured (error of the projection)")
    ax.set_xscale("log", base=2)
    ax.set_ylim(0, 1.05)
    ax.set_xlabel("replicas")
    ax.set_ylabel("scaling efficiency (throughput / (n x one replica))")
    ax.set_title(title or f"projected scaling, link {projection.link.bandwidth_Bps * 8 / 1e9:.3g}"
                          f" Gbit/s, alpha {projection.link.alpha_s * 1e6:.0f} us")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="lower left")
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    return buf.getvalue()


# -- a sweep's projections (the report's "Projected scaling") --------------------------
@dataclass(frozen=True)
class SweepProjection:
    """A workload's projection from a sweep: one replica's run and an all-reduce probe of
    the same machine; the sweep's multi-replica runs of the probe's strategy at the same
    per-replica batch are set against it."""

    workload: str  # the variant's label
    strategy: str  # the probe's strategy label, that of the checked runs
    projection: Projection
    checks: tuple[Check, ...]
    single: str  # result key of the single-replica configuration (compute, S)
    probe: str  # result key of the all-reduce probe (alpha, B)

    def limits(self, shared_cores: bool = False) -> str:
        """The model's assumptions and its measured error, in one sentence."""
        link = self.projection.link
        # An anchored fit misses other sizes by design (the model is used at S only), so
        # its residual over every size would only mislead here; the printout keeps it.
        if link.anchored_bytes:
            fit = " (alpha from its small buffers, B from its time at the gradient size)"
        elif link.max_rel_residual is not None:
            fit = f" (a line through its sizes, worst residual {link.max_rel_residual:.0%})"
        else:
            fit = ""
        shared = (", which logical devices sharing this machine's cores do not give (each "
                  "replica's compute slows as n grows)" if shared_cores else "")
        if self.checks:
            worst = max(self.checks, key=lambda c: abs(c.error))
            runs = "the run" if len(self.checks) == 1 else f"the {len(self.checks)} runs"
            error = (f"set against {runs} measured here its no-overlap edge is off by "
                     f"{worst.error:+.1%}" + (f" at worst (n={worst.n})" if len(self.checks) > 1
                                               else f" (n={worst.n})"))
        else:
            error = (f"no multi-replica {self.strategy} run at this per-replica batch was "
                     f"measured here, so its error is unknown")
        return (f"A model, not a measurement: a ring all-reduce whose latency and bandwidth "
                f"were fitted to one probe at n={link.probe_replicas}{fit}, the per-replica "
                f"batch fixed and one replica's compute unchanged at every n{shared}, "
                f"extrapolated beyond the replicas measured; {error}.")


def _single_choice(singles: Sequence[ConfigView], strategy: str) -> ConfigView:
    """The single-replica configuration whose step is the compute term: the probed
    strategy's own (its per-step framework work is then in compute, and the gap at n
    is what the model calls communication), else a one-device baseline, else the
    fastest."""
    for c in singles:
        if c.strategy == strategy:
            return c
    for name in ONE_DEVICE_BASELINES:
        for c in singles:
            if c.base_strategy == name and c.strategy == name:
                return c
    return max(singles, key=lambda c: (c.throughput or 0.0, c.key))


def _measured(configs: Sequence[ConfigView], strategy: str, batch: int
              ) -> list[ConfigView]:
    """The ok multi-replica configurations of ``strategy`` at per-replica ``batch``, one
    per replica count: unprofiled first (a profiler slows the steps it records), then a
    per-replica batch setting (the model's regime), then the most runs."""
    by_n: dict[int, ConfigView] = {}
    for c in sorted(configs, key=lambda c: (bool(c.result.spec.profile_steps),
                                            c.batch_mode != "per_replica", -c.n_runs, c.key)):
        if (c.ok and c.replicas >= 2 and c.strategy == strategy and not c.batch_per_worker
                and c.per_replica_batch == batch and (c.throughput or 0) > 0):
            by_n.setdefault(c.replicas, c)
    return [by_n[n] for n in sorted(by_n)]


def _sweep_inputs(single: ConfigView) -> Inputs:
    inputs = inputs_from_result(single.ok_runs[0].result)
    runs = len(single.ok_runs)
    if runs < 2 or single.step_s is None:
        return inputs
    return replace(inputs, compute_s=single.step_s,
                   source=f"{single.key} (median step over its {runs} runs)")


def _probe_rank(probe: RunView, variant: Variant) -> tuple[bool, int, int, str]:
    """Prefer a probe of the workload's own gradients, then more replicas, then the latest."""
    spec = probe.result.spec
    own = (spec.workload, spec.size, probe.variant.params) == (
        variant.workload, variant.size, variant.params)
    return own, probe.replicas, probe.result.replicate, probe.key


def workload_projections(variant: Variant, configs: Sequence[ConfigView],
                         probes: Sequence[RunView], max_replicas: int = 512
                         ) -> tuple[list[SweepProjection], list[str]]:
    """One projection per probed strategy for a workload's ``configs`` (one machine),
    and one line per input it lacks or cannot use."""
    label = variant.label()
    singles = [c for c in configs if c.ok and c.replicas == 1]
    if not singles:
        return [], [f"{label}: not projected: no single-replica training run (one "
                    f"replica's step time and gradient bytes)"]
    best: dict[str, RunView] = {}
    for p in probes:
        if p.strategy not in best or _probe_rank(p, variant) > _probe_rank(best[p.strategy],
                                                                           variant):
            best[p.strategy] = p
    found, missing = [], []
    for strategy, probe in sorted(best.items()):
        assert probe.allreduce is not None
        # The per-replica batch with the most measured points to check, then the largest.
        batch = max({c.per_replica_batch for c in singles},
                    key=lambda b: (len(_measured(configs, strategy, b)), b))
        single = _single_choice([c for c in singles if c.per_replica_batch == batch], strategy)
        try:
            inputs = _sweep_inputs(single)
            projection = project(inputs, link_from_probe(probe.allreduce, inputs.grad_bytes),
                                 max_replicas)
            checks = tuple(check(projection, c.replicas, c.throughput or 0.0,
                                 f"{strategy} n={c.replicas}")
                           for c in _measured(configs, strategy, batch))
        except ProjectionError as exc:
            missing.append(f"{label}: not projected from the {strategy} probe: {exc}")
            continue
        found.append(SweepProjection(label, strategy, projection, checks, single.key,
                                     probe.key))
    return found, missing


def machine_projections(machine: MachineReport, max_replicas: int = 512
                        ) -> tuple[list[SweepProjection], list[str]]:
    """Every training workload's projections on one machine (the link from its own
    all-reduce probes only), and one line per missing input."""
    probes = [r for r in machine.machine.runs if r.status == "ok" and r.allreduce is not None
              and r.allreduce.replicas >= 2]
    if not machine.workloads:
        return [], ["Not projected: no training run on this machine."]
    if not probes:
        return [], ["Not projected: no all-reduce probe on this machine to fit the link's "
                    "latency and bandwidth to (python -m bench allreduce --out SWEEP_DIR "
                    "adds one)."]
    found, missing = [], []
    for w in machine.workloads:
        f, m = workload_projections(w.variant, w.configs, probes, max_replicas)
        found += f
        missing += m
    return found, missing
