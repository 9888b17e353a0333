"""Scaling efficiency, computed from stored throughputs (one definition per figure).

N is the number of replicas of a configuration; T is its global throughput (examples/s,
the median of its runs' figures). Every figure is a ``Ratio`` with an interval from the
runs of both configurations (``bench.answers.configs.ratio_of``). The definitions printed with
each figure are in ``reports.columns.SCALING_FIGURES``. A baseline is always a
configuration of the same machine and variant (workload, size, parameters, precision,
XLA, accumulation, data), never one of another machine.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from bench.answers.configs import ConfigView, Ratio, ratio_of
from bench.answers.runs import IDEAL_BASELINE, ONE_DEVICE_BASELINES, Variant

Key = tuple[Variant, str, int, int]  # variant, strategy label, replicas, global batch


@dataclass(frozen=True)
class Scaling:
    """Scaling figures of one configuration; None where the sweep lacks the baseline."""

    speedup: Ratio | None = None
    strong_eff: Ratio | None = None
    weak_eff: Ratio | None = None
    speedup_vs_one: Ratio | None = None
    weak_eff_vs_one: Ratio | None = None
    vs_independent: Ratio | None = None
    one_device_name: str | None = None  # which single-device baseline was used

    def efficiencies(self) -> dict[str, Ratio]:
        """Every efficiency-type figure present (ratios, 1.0 = ideal)."""
        named = {"strong_eff": self.strong_eff, "weak_eff": self.weak_eff,
                 "weak_eff_vs_one": self.weak_eff_vs_one,
                 "vs_independent": self.vs_independent}
        return {k: v for k, v in named.items() if v is not None}


class Index:
    """Configurations with figures, by (variant, strategy, replicas, global batch)."""

    def __init__(self, configs: Sequence[ConfigView]) -> None:
        self._by: dict[Key, ConfigView] = {}
        # A profiled run pays the profiler's overhead: where an unprofiled twin exists,
        # it is the better baseline, so it goes first.
        for config in sorted(configs, key=lambda c: bool(c.result.spec.profile_steps)):
            if config.ok:
                # Configurations that differ only in how long they were looked at
                # (repeats, time limits) share a slot; the first stays, deterministically.
                self._by.setdefault((config.variant, config.strategy, config.replicas,
                                     config.global_batch), config)

    def get(self, variant: Variant, strategy: str, replicas: int,
            global_batch: int) -> ConfigView | None:
        return self._by.get((variant, strategy, replicas, global_batch))

    def throughput(self, variant: Variant, strategy: str, replicas: int,
                   global_batch: int) -> float | None:
        config = self.get(variant, strategy, replicas, global_batch)
        return config.throughput if config is not None else None

    def one_device(self, variant: Variant, global_batch: int) -> ConfigView | None:
        """The preferred single-device baseline measured at ``global_batch``."""
        for name in ONE_DEVICE_BASELINES:
            config = self.get(variant, name, 1, global_batch)
            if config is not None:
                return config
        return None


def _against(config: ConfigView, baseline: ConfigView | None, per: float = 1.0
             ) -> Ratio | None:
    if baseline is None:
        return None
    if baseline is config:  # a configuration against itself: exactly 1, no noise in it
        return Ratio(1.0 / per, None, None, False, None)
    return ratio_of(config, baseline, per)


def scaling_of(config: ConfigView, index: Index) -> Scaling:
    """The scaling figures of ``config`` against the baselines the sweep holds."""
    n, v = config.replicas, config.variant
    if config.throughput is None:
        return Scaling()
    same_global = index.get(v, config.strategy, 1, config.global_batch)
    same_per_replica = index.get(v, config.strategy, 1, config.per_replica_batch)
    one_global = index.one_device(v, config.global_batch)
    one_per_replica = index.one_device(v, config.per_replica_batch)
    independent = (index.get(v, IDEAL_BASELINE, n, config.global_batch)
                   if config.base_strategy != IDEAL_BASELINE else None)
    if independent is not None and not independent.concurrent:
        independent = None  # copies that never measured together set no ceiling
    one = one_global or one_per_replica
    return Scaling(
        speedup=_against(config, same_global),
        strong_eff=_against(config, same_global, n),
        weak_eff=_against(config, same_per_replica, n),
        speedup_vs_one=_against(config, one_global),
        weak_eff_vs_one=_against(config, one_per_replica, n),
        vs_independent=_against(config, independent),
        one_device_name=one.base_strategy if one is not None else None,
    )
