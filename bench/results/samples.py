"""Summaries of one run's own samples: per-step times and the spread of its windows.

The child computes these while it measures, so this module needs numpy only: scipy
(``bench.results.stats``, the comparisons of runs) stays on the parent side, out of
the measured process's import time and memory.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from bench.results.schema import StepTimes


def step_time_stats(samples: Sequence[float]) -> StepTimes:
    """Median, p90, p99, mean, std (population), min and max of per-step times."""
    if not samples:
        raise ValueError("step_time_stats needs at least one sample. Received: []")
    a = np.asarray(samples, dtype=np.float64)
    p50, p90, p99 = np.percentile(a, [50, 90, 99])
    return StepTimes(median_s=float(p50), p90_s=float(p90), p99_s=float(p99),
                     mean_s=float(a.mean()), std_s=float(a.std()), min_s=float(a.min()),
                     max_s=float(a.max()), samples=int(a.size))


def coefficient_of_variation(values: Sequence[float]) -> float:
    """std / mean (0 for fewer than two values)."""
    if len(values) < 2:
        return 0.0
    a = np.asarray(values, dtype=np.float64)
    return float(a.std(ddof=1) / a.mean()) if a.mean() else 0.0
