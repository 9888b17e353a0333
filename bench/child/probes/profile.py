"""Capture a profile of a few training steps and derive the step breakdown from it.

The capture runs after the throughput windows, never inside them, so the profiler
(which costs time per op) cannot distort the throughput figures; its own cost is
recorded instead: ``profiler_overhead`` (how much slower the profiled steps ran) and
``capture_s`` (what the capture added to the run's wall time). Each step is wrapped
in a ``train`` trace annotation with its step number, which is what TensorBoard's
profile plugin and ``bench.child.probes.trace`` use to find step boundaries.

A trainer drives its own steps (``StepDriver``): the custom loop calls its compiled
function, ``fit`` runs a short ``model.fit`` whose callbacks open and close the
annotations, so both loops are split into the same parts.
"""

from __future__ import annotations

import contextlib
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from bench.child.probes.trace import (
    PARTS,
    STEP_MARKER,
    Classifier,
    Split,
    find_xspace,
    read_xspace,
    split,
)
from bench.results.schema import Breakdown, Communication, PartTime

# Op types (or host activities) kept per part: enough for the differences between two
# configurations to name the ops that grew, few enough to keep a result readable.
TOP_PER_PART = 10

# Opens the annotation of profiled step i (a context manager).
Annotate = Callable[[int], AbstractContextManager[Any]]
# Runs n steps (calls), each inside annotate(i) and finished (synchronised) before the
# annotation closes; returns each call's seconds.
StepDriver = Callable[[int, Annotate], list[float]]


def call_steps(call: Callable[[], object]) -> StepDriver:
    """The driver of a loop that is one blocking ``call`` per step (the custom loop)."""
    def drive(steps: int, annotate: Annotate) -> list[float]:
        times = []
        for i in range(steps):
            with annotate(i):
                t0 = time.perf_counter()
                call()
                times.append(time.perf_counter() - t0)
        return times
    return drive


@contextlib.contextmanager
def _profiling(tf: Any, logdir: Path) -> Iterator[None]:
    tf.profiler.experimental.start(str(logdir))
    try:
        yield
    finally:
        tf.profiler.experimental.stop()


def capture(tf: Any, drive: StepDriver, steps: int, logdir: Path, *,
            steps_per_call: int = 1, unprofiled_step_s: float | None = None,
            classifier: Classifier | None = None, loop: str = "custom"
            ) -> tuple[Breakdown, Communication]:
    """Profile ``steps`` calls driven by ``drive`` and split them into parts.

    Per-step seconds are means over the profiled calls divided by ``steps_per_call``
    (means, not medians, so that the parts add up to the step exactly). Returns the
    breakdown and the communication figures derived from the same split.
    """
    if steps < 1:
        raise ValueError(f"capture needs steps >= 1. Received: steps={steps}")
    t_start = time.perf_counter()
    logdir.mkdir(parents=True, exist_ok=True)
    with _profiling(tf, logdir):
        times = drive(steps, lambda i: tf.profiler.experimental.Trace(STEP_MARKER,
                                                                      step_num=i, _r=1))
    rule = classifier or Classifier()
    events, spans = read_xspace(find_xspace(logdir))
    parts = split(events, spans, rule)
    if not parts.steps:
        raise RuntimeError(f"the profile in {logdir} has no '{STEP_MARKER}' step annotations")
    overhead = (statistics.median(times) / steps_per_call / unprofiled_step_s
                if times and unprofiled_step_s and unprofiled_step_s > 0 else None)
    breakdown = summarize(parts, steps_per_call, loop=loop, profile_dir=str(logdir),
                          profiler_overhead=overhead)
    breakdown.capture_s = time.perf_counter() - t_start
    return breakdown, communication_of(breakdown, parts, rule)


def summarize(parts: Split, steps_per_call: int = 1, *, loop: str = "custom",
              profile_dir: str = "", profiler_overhead: float | None = None,
              top: int = TOP_PER_PART) -> Breakdown:
    """Per-step means of every part and of the busiest op types of each."""
    n = len(parts.steps) * steps_per_call
    step_s = sum(s.step_s for s in parts.steps) / n
    seconds = {p: sum(s.parts[p] for s in parts.steps) / n for p in PARTS}
    by_label: dict[tuple[str, str], float] = {}
    for s in parts.steps:
        for where, value in s.labels.items():
            key = (where.part, where.label)
            by_label[key] = by_label.get(key, 0.0) + value / n
    kept: list[PartTime] = []
    for part in PARTS:
        mine = sorted(((name, v) for (p, name), v in by_label.items() if p == part),
                      key=lambda kv: -kv[1])
        kept += [PartTime(part, name, v) for name, v in mine[:top]]

    def share(part: str) -> float:
        return seconds[part] / step_s if step_s > 0 else 0.0

    return Breakdown(
        step_s=step_s, input_s=seconds["input"], compute_s=seconds["compute"],
        communication_s=seconds["communication"], host_s=seconds["host"],
        idle_s=seconds["idle"], input_share=share("input"), compute_share=share("compute"),
        communication_share=share("communication"), host_share=share("host"),
        idle_share=share("idle"), top=kept, loop=loop, profile_dir=profile_dir,
        profiled_steps=len(parts.steps), profiler_overhead=profiler_overhead)


def communication_of(b: Breakdown, parts: Split, rule: Classifier) -> Communication:
    """The communication figures of a breakdown (collective + compute + other = step)."""
    return Communication(
        step_s=b.step_s, collective_s=b.communication_s, compute_s=b.compute_s,
        other_s=b.input_s + b.host_s + b.idle_s, comm_fraction=b.communication_share,
        op_types=parts.op_types, profile_dir=b.profile_dir, profiled_steps=b.profiled_steps,
        profiler_overhead=b.profiler_overhead, counted_types=rule.counted_types())
