"""Capture a profile of a few training steps and derive the communication split.

The capture runs after the throughput windows, never inside them, so the profiler
(which costs time per op) cannot distort the throughput figures; its own cost is
recorded instead as ``profiler_overhead``. Each step is wrapped in a ``train``
trace annotation with its step number, which is what TensorBoard's profile plugin
and ``bench.child.probes.trace`` use to find step boundaries.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.child.probes.trace import STEP_MARKER, Classifier, breakdown, find_xspace, read_xspace
from bench.results.schema import Communication


def capture(tf: Any, step: Callable[[], object], steps: int, logdir: Path, *,
            steps_per_call: int = 1, unprofiled_step_s: float | None = None,
            classifier: Classifier | None = None) -> Communication:
    """Profile ``steps`` calls of ``step`` (which must block until its call finished).

    Per-step seconds are means over the profiled calls divided by ``steps_per_call``
    (means, not medians, so that collective + compute + other = step exactly).
    """
    if steps < 1:
        raise ValueError(f"capture needs steps >= 1. Received: steps={steps}")
    logdir.mkdir(parents=True, exist_ok=True)
    times: list[float] = []
    tf.profiler.experimental.start(str(logdir))
    try:
        for i in range(steps):
            with tf.profiler.experimental.Trace(STEP_MARKER, step_num=i, _r=1):
                t0 = time.perf_counter()
                step()
                times.append((time.perf_counter() - t0) / steps_per_call)
    finally:
        tf.profiler.experimental.stop()
    rule = classifier or Classifier()
    ops, spans = read_xspace(find_xspace(logdir))
    split = breakdown(ops, spans, rule)
    if not split.steps:
        raise RuntimeError(f"the profile in {logdir} has no '{STEP_MARKER}' step annotations")
    n = len(split.steps) * steps_per_call

    def mean(attr: str) -> float:
        return sum(getattr(s, attr) for s in split.steps) / n

    step_s = mean("step_s")
    collective_s = mean("collective_s")
    overhead = (statistics.median(times) / unprofiled_step_s
                if unprofiled_step_s and unprofiled_step_s > 0 else None)
    return Communication(
        step_s=step_s, collective_s=collective_s, compute_s=mean("compute_s"),
        other_s=mean("other_s"), comm_fraction=collective_s / step_s if step_s > 0 else 0.0,
        op_types=split.op_types, profile_dir=str(logdir), profiled_steps=len(split.steps),
        profiler_overhead=overhead, counted_types=rule.counted_types())
