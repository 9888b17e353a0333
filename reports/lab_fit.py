"""The lab's scaling model, fitted where it is allowed to look and used where it is not.

Pure numbers (no results, no TensorFlow): the report (``reports.lab``) and ``bench
project`` feed it. Strong scaling of a synchronous data-parallel step at a fixed
global batch ``G`` on ``n`` hosts of equal compute:

    compute(b) = fixed + per_example * b         one host's step at batch b
    comm(n)    = 2(n-1)*alpha*(1 + c) + 2(n-1)/n * S/B   ring all-reduce of S bytes
    step(n)    = (compute(G/n)^g + comm(n)^g)^(1/g)      Pollux's overlap term
    throughput(n) = G / step(n)

``g`` is Pollux's gamma (Qiao et al., OSDI 2021, the goodput model's T_iter): g = 1
adds compute and communication (no overlap), a larger g hides the smaller behind the
larger (g -> infinity: max), a g below 1 says the step costs more than the two
together (per-step work neither term holds). Pollux bounds gamma to [1, 10]; here it
may fall below 1 so the fit can say so rather than pin at the bound.

What each parameter is fitted from (the out-of-sample rule): the compute line from
one-host runs at two batch sizes (``G`` and ``G/2``), alpha and B from an
all-reduce probe over two hosts at buffer sizes away from the workloads' gradient
sizes (``fit_link_away``: the probe's own all-reduce at S is never used, so the
communication term does not reproduce a measurement by construction), and g from
the two-host runs. Three and four hosts are then predictions. ``bootstrap``
resamples every input (runs, probe sizes) and refits, for the interval of each
prediction.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import optimize
from scipy import stats as sps

from reports.projection import Link, ProjectionError, fit_link

G_BOUNDS = (0.25, 10.0)  # the overlap exponent's search range
NEAR = 0.3  # a probe size within 30% of a gradient size is too close to use
RESAMPLES = 2000
SEED = 0


# -- the parts ---------------------------------------------------------------------------
@dataclass(frozen=True)
class ComputeLine:
    """One host's step time at batch b: ``fixed_s + per_example_s * b``."""

    fixed_s: float
    per_example_s: float

    def at(self, batch: float) -> float:
        return self.fixed_s + self.per_example_s * batch


def fit_compute(points: Sequence[tuple[float, float]]) -> ComputeLine:
    """The line through ``(batch, step seconds)`` points (least squares on relative
    error; two batches give it exactly). A negative fixed part, which no host has, is
    pinned to 0 and the slope refitted."""
    pts = [(float(b), float(s)) for b, s in points if b > 0 and s > 0]
    if len({b for b, _ in pts}) < 2:
        raise ProjectionError(f"the compute line needs steps at 2+ batch sizes. "
                              f"Received: {sorted({b for b, _ in pts})}")
    b = np.array([p[0] for p in pts])
    s = np.array([p[1] for p in pts])
    w = 1.0 / s
    (fixed, slope), *_ = np.linalg.lstsq(np.stack([w, w * b], axis=1), w * s, rcond=None)
    if fixed < 0 or slope <= 0:
        fixed, slope = 0.0, float(np.sum(w * w * b * s) / np.sum(w * w * b * b))
    return ComputeLine(float(fixed), float(slope))


def fit_link_away(points: Sequence[tuple[float, float]], replicas: int,
                  avoid: Sequence[float], near: float = NEAR) -> tuple[Link, int]:
    """alpha and B from probe timings ``(bytes, seconds)`` over ``replicas`` hosts,
    leaving out every size within ``near`` (relative) of a size in ``avoid``.

    One line through the sizes kept (``reports.projection.fit_link``: least squares on
    relative error, so the small buffers set alpha and the large ones B). Returns the
    link and how many points were left out.
    """
    kept = [(float(s), float(t)) for s, t in points if s > 0 and t > 0
            and not any(abs(s / a - 1) < near or abs(a / s - 1) < near for a in avoid if a > 0)]
    dropped = len(points) - len(kept)
    link = fit_link(kept, replicas, f"a line through {len(kept)} probe sizes, {dropped} near a "
                                    f"gradient size left out; n={replicas}")
    return link, dropped


def overlap_step(compute: float, comm: float, g: float) -> float:
    """Pollux's iteration time: ``(compute^g + comm^g)^(1/g)``."""
    if comm <= 0:
        return compute
    hi = max(compute, comm)  # scaled to avoid overflow at large g
    return hi * ((compute / hi) ** g + (comm / hi) ** g) ** (1.0 / g)


def fit_overlap(points: Sequence[tuple[float, float, float]],
                bounds: tuple[float, float] = G_BOUNDS) -> float:
    """g that best maps ``(compute, comm, measured step)`` triples (least squares on
    log step; one g for all)."""
    pts = [(c, m, s) for c, m, s in points if c > 0 and m > 0 and s > 0]
    if not pts:
        raise ProjectionError("the overlap term needs a multi-host run with compute and "
                              "communication. Received: none")

    def loss(log_g: float) -> float:
        g = math.exp(log_g)
        return sum((math.log(overlap_step(c, m, g)) - math.log(s)) ** 2 for c, m, s in pts)

    res = optimize.minimize_scalar(loss, bounds=tuple(math.log(b) for b in bounds),
                                   method="bounded", options={"xatol": 1e-6})
    return float(math.exp(res.x))


# -- the model -------------------------------------------------------------------------
@dataclass(frozen=True)
class LabModel:
    """One workload's fitted model: compute line, a link per rate, gradient bytes, g."""

    compute: ComputeLine
    links: Mapping[float, Link]  # link rate (bits/s) -> fitted link
    grad_bytes: float
    global_batch: int
    g: float
    small_collectives: float = 1.0

    def comm(self, n: int, rate: float) -> float:
        return self.links[rate].allreduce_s(n, self.grad_bytes, self.small_collectives) \
            if n > 1 else 0.0

    def step(self, n: int, rate: float) -> float:
        return overlap_step(self.compute.at(self.global_batch / n), self.comm(n, rate), self.g)

    def throughput(self, n: int, rate: float) -> float:
        return self.global_batch / self.step(n, rate)


@dataclass(frozen=True)
class FitInputs:
    """What a workload's fit may see: run figures (examples/s, one per run) of the
    one-host runs per batch, of the two-host runs per link rate, and each link's probe
    timings over two hosts."""

    global_batch: int
    grad_bytes: float
    single: Mapping[int, Sequence[float]]  # batch -> one-host throughputs
    two_hosts: Mapping[float, Sequence[float]]  # rate -> two-host throughputs
    probes: Mapping[float, Sequence[tuple[float, float]]]  # rate -> (bytes, s)
    avoid: Sequence[float] = ()  # every lab workload's gradient bytes
    small_collectives: float = 1.0
    probe_replicas: int = 2


def _geo(values: Sequence[float]) -> float:
    return float(np.exp(np.mean(np.log(np.asarray(values, dtype=float)))))


def fit(inputs: FitInputs) -> LabModel:
    """The model from the inputs' centres (geometric means of the run figures)."""
    compute = fit_compute([(b, b / _geo(t)) for b, t in inputs.single.items() if t])
    links = {rate: fit_link_away(pts, inputs.probe_replicas, inputs.avoid)[0]
             for rate, pts in inputs.probes.items()}
    model = LabModel(compute, links, inputs.grad_bytes, inputs.global_batch, 1.0,
                     inputs.small_collectives)
    triples = [(compute.at(inputs.global_batch / 2), model.comm(2, rate),
                inputs.global_batch / _geo(t))
               for rate, t in inputs.two_hosts.items() if t and rate in links]
    return LabModel(compute, links, inputs.grad_bytes, inputs.global_batch,
                    fit_overlap(triples), inputs.small_collectives)


def _resample(values: Sequence[Any], rng: np.random.Generator) -> list[Any]:
    return [values[i] for i in rng.integers(0, len(values), len(values))]


def bootstrap(inputs: FitInputs, predict: Callable[[LabModel], Sequence[float]],
              resamples: int = RESAMPLES, seed: int = SEED) -> np.ndarray:
    """``predict`` of the model refitted on ``resamples`` resamples of the inputs (each
    group of runs, and each probe's sizes, drawn with replacement): one row each.
    Resamples the fit cannot use (e.g. too few probe sizes drawn) are skipped."""
    rng = np.random.default_rng(seed)
    rows = []
    for _ in range(resamples):
        drawn = FitInputs(
            inputs.global_batch, inputs.grad_bytes,
            {b: _resample(t, rng) for b, t in inputs.single.items()},
            {r: _resample(t, rng) for r, t in inputs.two_hosts.items()},
            {r: sorted(_resample(list(p), rng)) for r, p in inputs.probes.items()},
            inputs.avoid, inputs.small_collectives, inputs.probe_replicas)
        try:
            rows.append(list(predict(fit(drawn))))
        except ProjectionError:
            continue
    if not rows:  # no usable resample: no rows, as many columns as predictions
        return np.empty((0, len(predict(fit(inputs)))))
    return np.array(rows)


def interval(samples: np.ndarray, confidence: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """Percentile interval of bootstrap rows, column by column (NaN without rows)."""
    if not len(samples):
        return np.full(samples.shape[1], np.nan), np.full(samples.shape[1], np.nan)
    tail = (1 - confidence) / 2 * 100
    return np.percentile(samples, tail, axis=0), np.percentile(samples, 100 - tail, axis=0)


# -- measured side: run figures with a pooled noise -------------------------------------------
@dataclass(frozen=True)
class Measured:
    """A point's run figures: median, and the interval of their centre (geometric mean)
    from the run-to-run noise pooled over the points of the same workload."""

    runs: int
    median: float
    center: float
    low: float
    high: float


def pooled_log_sd(groups: Sequence[Sequence[float]]) -> tuple[float, int]:
    """Run-to-run SD of log run figures pooled over groups (same machine, same
    workload: one noise) and its degrees of freedom."""
    ss, df = 0.0, 0
    for g in groups:
        if len(g) >= 2:
            logs = np.log(np.asarray(g, dtype=float))
            ss += float(np.sum((logs - logs.mean()) ** 2))
            df += len(g) - 1
    return (math.sqrt(ss / df), df) if df else (math.nan, 0)


def measured(values: Sequence[float], sd: float, df: int,
             confidence: float = 0.95) -> Measured:
    """``values``' median and the t interval of their geometric mean at the pooled
    ``sd`` (no interval, NaN, without a pooled noise)."""
    logs = np.log(np.asarray(values, dtype=float))
    center = float(np.exp(logs.mean()))
    if not df or not math.isfinite(sd):
        return Measured(len(values), float(np.median(values)), center, math.nan, math.nan)
    half = float(sps.t.ppf(0.5 + confidence / 2, df)) * sd / math.sqrt(len(values))
    return Measured(len(values), float(np.median(values)), center,
                    float(np.exp(logs.mean() - half)), float(np.exp(logs.mean() + half)))


def ratio(num: Sequence[float], den: Sequence[float], sd: float, df: int,
          confidence: float = 0.95) -> Measured:
    """num / den of geometric means (e.g. a speed-up) with its t interval at the pooled
    ``sd``; ``median`` is the ratio of the medians."""
    a, b = np.log(np.asarray(num, dtype=float)), np.log(np.asarray(den, dtype=float))
    center = float(np.exp(a.mean() - b.mean()))
    med = float(np.median(num) / np.median(den))
    if not df or not math.isfinite(sd):
        return Measured(len(num), med, center, math.nan, math.nan)
    half = float(sps.t.ppf(0.5 + confidence / 2, df)) * sd * math.sqrt(1 / len(a) + 1 / len(b))
    return Measured(len(num), med, center, center * math.exp(-half), center * math.exp(half))


# -- order ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class OrderCheck:
    """Whether predictions order configurations as the measurements do.

    ``concordant``/``discordant`` count pairs the measurement separates (intervals
    apart); ``ties`` pairs it cannot (overlapping intervals: either order is right).
    ``kendall_tau`` over every pair, of predicted vs measured centres."""

    concordant: int
    discordant: int
    ties: int
    kendall_tau: float
    discordant_pairs: tuple[tuple[str, str], ...]

    @property
    def preserved(self) -> bool:
        return self.discordant == 0


def order_check(labels: Sequence[str], predicted: Sequence[float],
                measured_points: Sequence[Measured]) -> OrderCheck:
    """Pairwise order of ``predicted`` against the measured points."""
    conc = disc = ties = 0
    wrong = []
    for i in range(len(labels)):
        for j in range(i + 1, len(labels)):
            mi, mj = measured_points[i], measured_points[j]
            apart = (mi.low > mj.high or mj.low > mi.high) if math.isfinite(mi.low) and \
                math.isfinite(mj.low) else mi.center != mj.center
            if not apart:
                ties += 1
                continue
            if (predicted[i] - predicted[j]) * (mi.center - mj.center) > 0:
                conc += 1
            else:
                disc += 1
                wrong.append((labels[i], labels[j]))
    tau = float(sps.kendalltau(predicted, [m.center for m in measured_points]).statistic) \
        if len(labels) >= 2 else math.nan
    return OrderCheck(conc, disc, ties, tau, tuple(wrong))
