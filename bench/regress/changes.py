"""Steps in a series of nightly candidate/baseline ratios: the gate's second line of defence.

Each A/B nightly stores its candidate/baseline throughput ratio (``bench.regress.
history``, table ``ab_sessions``). Both sides ran in the same session, so the ratio is
free of the night-to-night drift of the machine, and a lasting change shows as a step
in the series even when no single night could call it (each night's interval is
wider than the step). ``find_steps`` looks for such steps:

1. change points of the mean of the log ratios, by PELT with an L2 cost (ruptures'
   ``KernelCPD`` with the linear kernel: the same cost as ``Pelt(model="l2")``, in C,
   about 20 times faster), penalised by ``PENALTY_FACTOR * sigma^2 * ln(n)`` per change,
   sigma being the night-to-night noise estimated robustly from the successive
   differences (median absolute deviation), so that a step does not inflate it;
2. each change point is kept only if the nights either side of it differ
   significantly (Welch's t, at ``alpha`` divided among the change points found) and
   by at least ``threshold``.

Why ruptures: a maintained library (1.1.10, 2025) whose only dependencies are numpy
and scipy, which this project already has. Apache Otava (formerly Hunter: E-Divisive
means with a significance test, built for exactly this use) is a service-minded
application: installing 0.8.0 would downgrade numpy and scipy and bring BigQuery,
Postgres and Slack clients into the benchmark's environment. PELT with a penalty
and a t-test per change point is the same decision in a few lines on a library.

Calibration (seeded simulations, ``tests/test_changes.py``; 40 nights at a nightly
noise of 0.035 in log ratio, what 33 pairs at SD 0.196 give): series without a step
report one 1-2% of the time; a 10% step 15 nights before the end is found within a
night of where it is 96% of the time, an 8% step 90%.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from bench.regress.history import AbRecord

DEFAULT_ALPHA = 0.05
DEFAULT_THRESHOLD = 0.05
# Nights each side of a step: fewer cannot tell a step from one odd night.
DEFAULT_MIN_NIGHTS = 3
# Penalty per change point in units of sigma^2 ln(n). 2 is BIC's; 3 keeps series without
# a step at 1-2% false steps after the t filter (2 gave 6%).
PENALTY_FACTOR = 3.0
# MAD of normal data / its SD.
_MAD_TO_SD = 0.6745


@dataclass(frozen=True)
class Step:
    """A lasting change in the series at night ``index`` (the first night after it)."""

    index: int
    before: float  # geometric mean ratio of the segment before
    after: float  # and after
    p_value: float
    nights_before: int
    nights_after: int

    @property
    def change(self) -> float:
        """Relative change of the ratio, after / before - 1 (negative: slower)."""
        return self.after / self.before - 1.0


def night_noise(log_ratios: np.ndarray) -> float:
    """Night-to-night SD of the log ratios, from successive differences (robust to steps)."""
    diffs = np.diff(log_ratios)
    mad = float(np.median(np.abs(diffs - np.median(diffs))))
    return mad / _MAD_TO_SD / math.sqrt(2.0)


def find_steps(ratios: Sequence[float], *, alpha: float = DEFAULT_ALPHA,
               threshold: float = DEFAULT_THRESHOLD,
               min_nights: int = DEFAULT_MIN_NIGHTS) -> list[Step]:
    """Steps in a series of candidate/baseline ratios (oldest first), see the module doc."""
    import ruptures
    from scipy import stats

    if not 0 < alpha < 1:
        raise ValueError(f"alpha must lie between 0 and 1. Received: alpha={alpha!r}")
    if threshold < 0:
        raise ValueError(f"threshold must be >= 0. Received: threshold={threshold!r}")
    if min_nights < 2:
        raise ValueError(f"min_nights must be >= 2. Received: min_nights={min_nights!r}")
    if any(not r > 0 for r in ratios):
        raise ValueError(f"ratios must be > 0. Received: {list(ratios)!r}")
    x = np.log(np.asarray(ratios, dtype=float))
    n = len(x)
    if n < 2 * min_nights:
        return []
    # A perfectly flat stretch gives sigma 0; a tiny floor keeps the penalty positive.
    sigma = max(night_noise(x), 1e-9)
    algo = ruptures.KernelCPD(kernel="linear", min_size=min_nights).fit(x.reshape(-1, 1))
    ends = algo.predict(pen=PENALTY_FACTOR * sigma**2 * math.log(n))
    edges = [0, *ends]
    points = [int(k) for k in ends[:-1]]  # ruptures gives numpy integers
    steps = []
    for i, k in enumerate(points):
        a, b = x[edges[i]:k], x[k:edges[i + 2]]
        p = float(stats.ttest_ind(b, a, equal_var=False).pvalue)
        step = Step(k, math.exp(a.mean()), math.exp(b.mean()), p, len(a), len(b))
        if p < alpha / len(points) and abs(step.change) >= threshold:
            steps.append(step)
    return steps


# -- the stored series ---------------------------------------------------------------------
# Identity fields of a side whose change at a step is worth naming (``side_identity``).
IDENTITY_FIELDS = ("interpreter", "tensorflow", "python_version", "software_id", "git_commit",
                   "env", "params")


@dataclass
class Series:
    """One configuration's nightly ratios on one machine, oldest first, and its steps."""

    spec_key: str
    label: str
    machine_id: str | None
    records: list[AbRecord]
    steps: list[Step]


def find_changes(records: Sequence[AbRecord], *, alpha: float = DEFAULT_ALPHA,
                 threshold: float = DEFAULT_THRESHOLD,
                 min_nights: int = DEFAULT_MIN_NIGHTS) -> list[Series]:
    """Every (configuration, machine) series of ``records`` with the steps found in it.

    Nights whose runs failed have no ratio and are left out of the series.
    """
    groups: dict[tuple[str, str | None], list[AbRecord]] = {}
    for r in sorted(records, key=lambda r: r.started_at):
        if r.ratio is not None:
            groups.setdefault((r.spec_key, r.machine_id), []).append(r)
    return [Series(key, rs[-1].label, machine, rs,
                   find_steps([r.ratio or 0.0 for r in rs], alpha=alpha, threshold=threshold,
                              min_nights=min_nights))
            for (key, machine), rs in groups.items()]


def identity_changes(before: AbRecord, after: AbRecord) -> list[str]:
    """What either side changed between two nights: ``candidate tensorflow 2.16.1 -> 2.17.0``."""
    out = []
    for side in ("baseline", "candidate"):
        old, new = getattr(before, side), getattr(after, side)
        out += [f"{side} {name} {old.get(name)} -> {new.get(name)}"
                for name in IDENTITY_FIELDS if old.get(name) != new.get(name)]
    return out


def describe_step(series: Series, step: Step) -> str:
    """The step in words: where, how large, what single nights said, what changed there."""
    at = series.records[step.index]
    after = series.records[step.index:step.index + step.nights_after]
    called = "regressed" if step.change < 0 else "improved"
    caught = sum(r.verdict == called for r in after)
    changed = identity_changes(series.records[step.index - 1], at)
    return (f"{series.label} (machine {series.machine_id or '?'}): "
            f"{'slower' if step.change < 0 else 'faster'} by {abs(step.change):.1%} from the "
            f"night of {at.started_at} ({at.session}): candidate/baseline {step.before:.3f} "
            f"over {step.nights_before} nights, then {step.after:.3f} over "
            f"{step.nights_after} (Welch p={step.p_value:.2g}); single nights called "
            f"{caught} of those {step.nights_after} {called}"
            + (f"; changed that night: {', '.join(changed)}" if changed
               else "; neither side's identity changed that night"))
