"""Scaling efficiency, computed from stored throughputs (one definition per figure).

N is the number of replicas of a run; T is its global throughput (examples/s, the
median of its windows). The definitions printed with each figure are in
``reports.columns.SCALING_FIGURES``. A baseline is always a run of the same machine and variant
(workload, size, parameters, precision, XLA, accumulation, data), never a run of
another machine.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from reports.runs import IDEAL_BASELINE, ONE_DEVICE_BASELINES, RunView, Variant

Key = tuple[Variant, str, int, int]  # variant, strategy label, replicas, global batch


@dataclass(frozen=True)
class Scaling:
    """Scaling figures of one run; None where the sweep lacks the baseline."""

    speedup: float | None = None
    strong_eff: float | None = None
    weak_eff: float | None = None
    speedup_vs_one: float | None = None
    weak_eff_vs_one: float | None = None
    vs_independent: float | None = None
    one_device_name: str | None = None  # which single-device baseline was used

    def efficiencies(self) -> dict[str, float]:
        """Every efficiency-type figure present (ratios, 1.0 = ideal)."""
        named = {"strong_eff": self.strong_eff, "weak_eff": self.weak_eff,
                 "weak_eff_vs_one": self.weak_eff_vs_one,
                 "vs_independent": self.vs_independent}
        return {k: v for k, v in named.items() if v is not None}


class Index:
    """OK runs of one sweep, looked up by (variant, strategy, replicas, global batch)."""

    def __init__(self, runs: Sequence[RunView]) -> None:
        self._by: dict[Key, RunView] = {}
        # A profiled run pays the profiler's overhead: where an unprofiled twin exists,
        # it is the better baseline, so it goes first.
        for run in sorted(runs, key=lambda r: bool(getattr(r.result.spec, "profile_steps",
                                                           0))):
            if run.ok:
                # Two results with the same key cannot exist in one sweep; across machines
                # the variant differs. Keep the first to stay deterministic regardless.
                self._by.setdefault((run.variant, run.strategy, run.replicas,
                                     run.global_batch), run)

    def get(self, variant: Variant, strategy: str, replicas: int,
            global_batch: int) -> RunView | None:
        return self._by.get((variant, strategy, replicas, global_batch))

    def throughput(self, variant: Variant, strategy: str, replicas: int,
                   global_batch: int) -> float | None:
        run = self.get(variant, strategy, replicas, global_batch)
        return run.throughput if run is not None else None

    def one_device(self, variant: Variant, global_batch: int) -> tuple[str, float] | None:
        for name in ONE_DEVICE_BASELINES:
            t = self.throughput(variant, name, 1, global_batch)
            if t:
                return name, t
        return None


def _ratio(num: float | None, den: float | None) -> float | None:
    return num / den if num is not None and den else None


def scaling_of(run: RunView, index: Index) -> Scaling:
    """The scaling figures of ``run`` against the baselines the sweep holds."""
    t, n, v = run.throughput, run.replicas, run.variant
    if t is None:
        return Scaling()
    same_global = index.throughput(v, run.strategy, 1, run.global_batch)
    same_per_replica = index.throughput(v, run.strategy, 1, run.per_replica_batch)
    speedup = _ratio(t, same_global)
    one_global = index.one_device(v, run.global_batch)
    one_per_replica = index.one_device(v, run.per_replica_batch)
    independent = index.throughput(v, IDEAL_BASELINE, n, run.global_batch)
    return Scaling(
        speedup=speedup,
        strong_eff=speedup / n if speedup is not None else None,
        weak_eff=_ratio(t, n * same_per_replica if same_per_replica else None),
        speedup_vs_one=_ratio(t, one_global[1] if one_global else None),
        weak_eff_vs_one=_ratio(t, n * one_per_replica[1] if one_per_replica else None),
        vs_independent=_ratio(t, independent) if run.base_strategy != IDEAL_BASELINE else None,
        one_device_name=(one_global or one_per_replica or (None, 0.0))[0],
    )
