"""Steps in a series of nightly candidate/baseline ratios: the gate's second line of defence.

Each A/B nightly stores its candidate/baseline throughput ratio (``bench.regress.
history``, table ``ab_sessions``). Both sides ran in the same session, so the ratio is
free of the night-to-night drift of the machine, and a lasting change shows as a step
in the series even when no single night could call it (each night's interval is
wider than the step). ``find_steps`` looks for such steps, and is read every night:
its false-alarm rate is the one over the nights it is read, not the one of a read.

1. One read tests the whole series (log ratios) for a change of mean anywhere in it:
   the statistic is the largest standardized difference of means over every split
   with at least ``min_nights`` nights each side (``split_statistics``: the
   difference over its standard error at the night-to-night noise), and its null
   distribution comes from permutations of the series itself (exchangeable nights: no
   normality, an odd night is accounted for wherever it falls). The p-value is that
   of the maximum over the splits, so the choice of the split is inside it: never a
   t-test of the split found.
2. Each read is tested at ``read_level``: ``alpha`` shared equally (Bonferroni) among
   the reads of a horizon of ``HORIZON_NIGHTS`` nights (a read a night from the night
   the first split exists, 2 x ``min_nights``). So a series without a step prints a
   false step on some night of its first ``HORIZON_NIGHTS`` with probability at most
   ``alpha``, however its reads depend on one another; every further as many reads
   spend another ``alpha`` at most (a rate per night, as a control chart's run
   length, rather than a total that would leave a year-old series blind).
3. Where a read finds a step, the segments either side are tested the same way
   (binary segmentation), so a series with several steps reports each.
4. A step is reported only once it persists: the split needs ``min_nights`` nights
   after it, so one night that looks off cannot make one alone.
5. A step smaller than ``threshold`` is a change of level, not reported.

The permutations are drawn in batches until ``EXCEEDANCES`` of them reach the observed
statistic (Besag and Clifford's sequential p-value: a read of a series without a step
stops after a batch or two), or until enough permutations to resolve the read's level;
their generator is seeded from the series, so a read of the same nights gives the
same answer, and reading a series again (``bench history changes``) adds no alarm.

Calibration (seeded simulations, each series read every night as the A/B nightly
reads it, ``tests/test_changes.py``; the figures in docs/regression-tracking.md): a
series without a step printed one on some night of 6..40 in 1.2% of series, against
the 5% bound (a search at 5% per read, read so, in 22%); a 10% step was reported
within 5, 8 and 20 nights of it in 90% of series or more at a night-to-night noise
of 2%, 3.5% and 5% in log ratio (0.035 is what 33 pairs at SD 0.196 give).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from bench.regress.history import AbRecord

# The false-alarm probability of a series without a step, over HORIZON_NIGHTS nights of
# reads (a read a night).
DEFAULT_ALPHA = 0.05
DEFAULT_THRESHOLD = 0.05
# Nights each side of a step: fewer cannot tell a step from one odd night.
DEFAULT_MIN_NIGHTS = 3
# The horizon alpha is spent over: 40 nights, 35 reads at 3 nights a side.
HORIZON_NIGHTS = 40
# Besag-Clifford: a read stops once this many permutations reach its statistic.
EXCEEDANCES = 10
PERMUTATION_BATCH = 128


@dataclass(frozen=True)
class Step:
    """A lasting change in the series at night ``index`` (the first night after it).

    ``p_value`` is the max-statistic permutation p-value of the read that found it
    (the split chosen inside it), ``level`` what that read was tested at."""

    index: int
    before: float  # geometric mean ratio of the segment before
    after: float  # and after
    p_value: float
    nights_before: int
    nights_after: int
    level: float

    @property
    def change(self) -> float:
        """Relative change of the ratio, after / before - 1 (negative: slower)."""
        return self.after / self.before - 1.0


@dataclass(frozen=True)
class SplitTest:
    """One read's test of a segment: the best split (``index``: nights before it), its
    statistic, the permutation p-value of the maximum and how many permutations it
    took."""

    index: int
    statistic: float
    p_value: float
    permutations: int


def read_level(alpha: float = DEFAULT_ALPHA, min_nights: int = DEFAULT_MIN_NIGHTS,
               horizon: int = HORIZON_NIGHTS) -> float:
    """The level one night's read is tested at: ``alpha`` over the reads of ``horizon``
    nights (the first read needs ``2 x min_nights`` nights)."""
    return alpha / max(1, horizon - 2 * min_nights + 1)


def split_statistics(log_ratios: np.ndarray, min_nights: int) -> np.ndarray:
    """The difference of means at every split with ``min_nights`` nights each side, in
    units of its standard error at the series' night-to-night noise (last axis: nights;
    one value per split, the first after ``min_nights``).

    The noise is the mean square of successive differences over 2 (von Neumann's): a
    step adds one difference to it, where it would add its whole size to the series'
    spread, so a series that went down and came back is not hidden by its own two
    steps (15% down for 15 of 45 nights: both steps found in 2 of 40 such series
    with the spread, in 40 with this)."""
    n = log_ratios.shape[-1]
    k = np.arange(min_nights, n - min_nights + 1)
    centred = log_ratios - log_ratios.mean(axis=-1, keepdims=True)
    sums = np.cumsum(centred, axis=-1)[..., k - 1]
    diffs = np.diff(log_ratios, axis=-1)
    noise = np.sqrt((diffs * diffs).mean(axis=-1, keepdims=True) / 2.0)
    return np.abs(sums) / np.sqrt(k * (n - k) / n) / np.maximum(noise, 1e-12)


def _seed(x: np.ndarray) -> int:
    """A seed from the nights themselves: the same series reads the same way."""
    digest = hashlib.blake2b(np.ascontiguousarray(x, dtype=np.float64).tobytes(),
                             digest_size=8).digest()
    return int.from_bytes(digest, "little")


def max_split_test(log_ratios: np.ndarray, min_nights: int, level: float) -> SplitTest:
    """The permutation test of "no change of mean anywhere" on one segment, by the
    maximum over its splits (see the module doc), resolved down to ``level``."""
    x = np.asarray(log_ratios, dtype=np.float64)
    stats = split_statistics(x, min_nights)
    best = int(np.argmax(stats))
    observed = float(stats[best])
    reach = observed - 1e-12 * max(1.0, observed)  # ties count as reaching it
    rng = np.random.default_rng(_seed(x))
    most = math.ceil(EXCEEDANCES / level)
    drawn = exceed = 0
    while drawn < most:
        size = min(PERMUTATION_BATCH, most - drawn)
        permuted = rng.permuted(np.broadcast_to(x, (size, x.size)), axis=1)
        hits = split_statistics(permuted, min_nights).max(axis=1) >= reach
        if exceed + int(hits.sum()) >= EXCEEDANCES:
            # Stopped at the EXCEEDANCES-th: p = EXCEEDANCES / permutations drawn.
            at = int(np.flatnonzero(hits)[EXCEEDANCES - exceed - 1]) + 1
            return SplitTest(min_nights + best, observed, EXCEEDANCES / (drawn + at),
                             drawn + at)
        exceed += int(hits.sum())
        drawn += size
    return SplitTest(min_nights + best, observed, (exceed + 1) / (drawn + 1), drawn)


def _check(alpha: float, threshold: float, min_nights: int) -> None:
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must lie between 0 and 1. Received: alpha={alpha!r}")
    if threshold < 0:
        raise ValueError(f"threshold must be >= 0. Received: threshold={threshold!r}")
    if min_nights < 2:
        raise ValueError(f"min_nights must be >= 2. Received: min_nights={min_nights!r}")


def find_steps(ratios: Sequence[float], *, alpha: float = DEFAULT_ALPHA,
               threshold: float = DEFAULT_THRESHOLD, min_nights: int = DEFAULT_MIN_NIGHTS,
               horizon: int = HORIZON_NIGHTS) -> list[Step]:
    """Steps in a series of candidate/baseline ratios (oldest first): tonight's read, see
    the module doc. ``alpha``: the false-alarm probability of a series without a step
    over ``horizon`` nights of reads (``horizon`` 2 x ``min_nights``: one read, all of
    ``alpha`` on it)."""
    _check(alpha, threshold, min_nights)
    if any(not r > 0 for r in ratios):
        raise ValueError(f"ratios must be > 0. Received: {list(ratios)!r}")
    x = np.log(np.asarray(ratios, dtype=float))
    level = read_level(alpha, min_nights, horizon)
    found: dict[int, float] = {}
    pending = [(0, x.size)]
    while pending:  # binary segmentation: each significant split opens both sides
        lo, hi = pending.pop()
        if hi - lo < 2 * min_nights:
            continue
        test = max_split_test(x[lo:hi], min_nights, level)
        if test.p_value > level:
            continue
        k = lo + test.index
        found[k] = test.p_value
        pending += [(lo, k), (k, hi)]
    edges = [0, *sorted(found), x.size]
    steps = []
    for i, k in enumerate(edges[1:-1]):
        a, b = x[edges[i]:k], x[k:edges[i + 2]]
        step = Step(k, math.exp(a.mean()), math.exp(b.mean()), found[k], a.size, b.size,
                    level)
        if abs(step.change) >= threshold:
            steps.append(step)
    return steps


def nightly_reads(ratios: Sequence[float], *, alpha: float = DEFAULT_ALPHA,
                  threshold: float = DEFAULT_THRESHOLD, min_nights: int = DEFAULT_MIN_NIGHTS,
                  horizon: int = HORIZON_NIGHTS) -> Iterator[tuple[int, list[Step]]]:
    """Each night's read of the series as the A/B nightly makes it: (nights so far,
    the steps that read prints), from the first night a split exists. Lazy: a caller
    that stops at the first report reads no further night."""
    for n in range(2 * min_nights, len(ratios) + 1):
        yield n, find_steps(ratios[:n], alpha=alpha, threshold=threshold,
                            min_nights=min_nights, horizon=horizon)


def first_report(ratios: Sequence[float], *, alpha: float = DEFAULT_ALPHA,
                 threshold: float = DEFAULT_THRESHOLD, min_nights: int = DEFAULT_MIN_NIGHTS,
                 horizon: int = HORIZON_NIGHTS) -> tuple[int, list[Step]] | None:
    """The first night whose read prints a step, with its steps (None: no night does)."""
    reads = nightly_reads(ratios, alpha=alpha, threshold=threshold, min_nights=min_nights,
                          horizon=horizon)
    return next(((n, steps) for n, steps in reads if steps), None)


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
            f"{step.nights_after} (p={step.p_value:.2g}: a permutation test of the largest "
            f"difference over every split of those nights; a night's read needs "
            f"p <= {step.level:.2g}); single nights called "
            f"{caught} of those {step.nights_after} {called}"
            + (f"; changed that night: {', '.join(changed)}" if changed
               else "; neither side's identity changed that night"))
