"""Throughput of processes that ran together, from the parts of their windows that overlap.

Independent copies of a run each measure their own windows. Their sum is the
run's throughput only for the time all of them were measuring: a copy that was
still warming up, or already done, while another measured would make the sum
describe a machine that was less loaded than the run claims. So the combined
windows are laid on the first copy's windows, cut to the span in which every copy
was measuring, and each copy contributes the rate it measured inside that span
(its windows' examples pro-rated by their overlap with it). Pure functions of
stored windows: no TensorFlow, testable on constructed times.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from bench.results.schema import Window

# A combined window is kept only if it keeps this much of the first copy's window,
# and every copy was inside one of its windows for this much of it (the rest being
# the short synchronisations between windows).
MIN_KEPT = 0.5
MIN_COVERED = 0.9


@dataclass(frozen=True)
class Span:
    start: float
    end: float
    examples: float

    @property
    def length(self) -> float:
        return self.end - self.start


def spans(windows: Sequence[Window]) -> list[Span] | None:
    """The windows as time spans, or None if any lacks its wall-clock edges."""
    out = []
    for w in windows:
        if w.start_ts is None or w.end_ts is None or w.end_ts <= w.start_ts:
            return None
        out.append(Span(w.start_ts, w.end_ts, float(w.examples)))
    return out


def common_span(copies: Sequence[Sequence[Span]]) -> tuple[float, float] | None:
    """From the last copy's first window start to the first copy's last window end."""
    if not copies or any(not c for c in copies):
        return None
    start = max(c[0].start for c in copies)
    end = min(c[-1].end for c in copies)
    return (start, end) if end > start else None


def rate_within(copy: Sequence[Span], start: float, end: float) -> tuple[float, float]:
    """(examples/s, seconds covered) of one copy inside [start, end].

    Each window's examples are spread evenly over it (all a window tells), so a window
    half inside the interval contributes half its examples and half its time.
    """
    examples = covered = 0.0
    for s in copy:
        inside = min(s.end, end) - max(s.start, start)
        if inside > 0:
            examples += s.examples * inside / s.length
            covered += inside
    return (examples / covered if covered > 0 else 0.0), covered


@dataclass(frozen=True)
class Concurrent:
    """One combined window: where it lies and every copy's rate inside it."""

    index: int  # of the first copy's window it was cut from
    start: float
    end: float
    rates: tuple[float, ...]  # examples/s per copy, in copy order

    @property
    def throughput(self) -> float:
        return sum(self.rates)

    @property
    def length(self) -> float:
        return self.end - self.start


def concurrent_windows(copies: Sequence[Sequence[Span]]) -> list[Concurrent]:
    """The first copy's windows, cut to the span where every copy measured.

    A window is dropped when less than ``MIN_KEPT`` of it remains, or when some copy
    was measuring for less than ``MIN_COVERED`` of what remains.
    """
    common = common_span(copies)
    if common is None:
        return []
    out = []
    for i, w in enumerate(copies[0]):
        start, end = max(w.start, common[0]), min(w.end, common[1])
        if end - start < MIN_KEPT * w.length:
            continue
        measured = [rate_within(c, start, end) for c in copies]
        if any(covered < MIN_COVERED * (end - start) for _, covered in measured):
            continue
        out.append(Concurrent(i, start, end, tuple(rate for rate, _ in measured)))
    return out


def as_windows(combined: Sequence[Concurrent], first_copy: Sequence[Window],
               examples_per_step: int, replicas: int) -> list[Window]:
    """Combined windows in the schema's form (loss, step times, memory: first copy's).

    ``examples`` is the run's throughput x the window's length and ``steps`` that in
    steps of the whole run (all copies), so examples / wall_s and wall_s / steps read
    as for any other run.
    """
    out = []
    for n, c in enumerate(combined):
        w = first_copy[c.index]
        examples = c.throughput * c.length
        out.append(Window(
            index=n, steps=max(1, round(examples / examples_per_step)),
            examples=round(examples), wall_s=c.length, global_throughput=c.throughput,
            per_replica_throughput=c.throughput / replicas, step_time=w.step_time,
            loss_first=w.loss_first, loss_last=w.loss_last,
            device_peak_bytes=w.device_peak_bytes, host_peak_rss_bytes=w.host_peak_rss_bytes,
            start_ts=c.start, end_ts=c.end))
    return out


def overlap_fraction(copies: Sequence[Sequence[Span]]) -> float:
    """Share of the first copy's measured time during which every copy measured."""
    total = sum(s.length for s in copies[0]) if copies else 0.0
    if not total or not math.isfinite(total):
        return 0.0
    return sum(c.length for c in concurrent_windows(copies)) / total
