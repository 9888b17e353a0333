"""Rank strategies per workload and batch setting, and say which to use and why.

Runs are compared only within one machine and one variant, at one batch setting
(the ``--batch`` value, read as global or per-replica by its ``batch_mode``), so a
ranking never mixes different amounts of work per step.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from reports.columns import fmt_rate
from reports.machines import Machine
from reports.runs import BASELINES, ONE_DEVICE_BASELINES, RunView, Variant, trait_of
from reports.scaling import Scaling
from reports.verdicts import Verdict

NOISE_SPREADS = 2.0  # differences within 2x the combined window spread are called noise


def devices(n: int) -> str:
    return f"{n} device" if n == 1 else f"{n} devices"


@dataclass
class Ranking:
    """Runs of one batch setting, grouped by replica count, best first."""

    batch_mode: str
    batch: int
    by_replicas: dict[int, list[RunView]] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return f"{'global' if self.batch_mode == 'global' else 'per-replica'} batch {self.batch}"

    def ok_runs(self) -> list[RunView]:
        return [r for rs in self.by_replicas.values() for r in rs if r.ok]


@dataclass
class Recommendation:
    ranking: Ranking
    best: RunView | None
    text: str
    others: list[str] = field(default_factory=list)


@dataclass
class WorkloadAnswer:
    """A workload variant's rankings and what to use at each batch setting."""

    variant: Variant
    runs: list[RunView]
    rankings: list[Ranking]
    recommendations: list[Recommendation]

    @property
    def short(self) -> str:
        """The winners only, e.g. ``global batch 64: one_device on 1 device (1,104 ex/s)``."""
        return "; ".join(
            f"{r.ranking.label}: " + (f"{r.best.strategy} on {devices(r.best.replicas)} "
                                      f"({fmt_rate(r.best.throughput or 0)} examples/s)"
                                      if r.best else r.text)
            for r in self.recommendations)


def _rank_key(run: RunView) -> tuple[int, float, str]:
    return (0 if run.ok else 1, -(run.throughput or 0.0), run.strategy)


def rankings_for(runs: Sequence[RunView]) -> list[Ranking]:
    settings: dict[tuple[str, int], Ranking] = {}
    for run in runs:
        rk = settings.setdefault((run.batch_mode, run.batch_setting),
                                 Ranking(run.batch_mode, run.batch_setting))
        rk.by_replicas.setdefault(run.replicas, []).append(run)
    for rk in settings.values():
        rk.by_replicas = {n: sorted(rs, key=_rank_key) for n, rs in sorted(rk.by_replicas.items())}
    return [settings[k] for k in sorted(settings)]


def _within_noise(a: RunView, b: RunView) -> bool:
    ta, tb = a.throughput or 0.0, b.throughput or 0.0
    spread = NOISE_SPREADS * ((a.cv or 0.0) + (b.cv or 0.0)) / 2
    return abs(ta - tb) <= spread * max(ta, tb)


def _why(run: RunView, best: RunView, verdicts: dict[str, list[Verdict]]) -> str:
    if run.base_strategy in ONE_DEVICE_BASELINES and best.base_strategy in ONE_DEVICE_BASELINES:
        return (f"of something other than the strategy: {run.strategy} and {best.strategy} run "
                f"the same single-device computation, so a gap this large points at "
                f"interference during the run (other processes on the machine); re-run both")
    trait = trait_of(run.base_strategy)
    serious = [v for v in verdicts.get(run.key, []) if v.severity in ("high", "moderate")
               and v.kind not in ("noisy", "suspicious efficiency", "suspicious MFU",
                                  "not measured")]
    return f"{trait} ({serious[0].kind})" if serious else trait


def recommend(ranking: Ranking, machine: Machine, scaling: dict[str, Scaling],
              verdicts: dict[str, list[Verdict]]) -> Recommendation:
    """Best run of the batch setting and why every other strategy loses to it."""
    everything = ranking.ok_runs()
    ok = [r for r in everything if r.base_strategy not in BASELINES]
    ceilings = [r for r in everything if r.base_strategy in BASELINES]
    if not ok:
        text = ("only the no-communication baseline ran: " + "; ".join(
            f"{r.strategy} on {devices(r.replicas)}: {fmt_rate(r.throughput or 0)} examples/s"
            for r in ceilings) if ceilings else "no successful run (see the runs without figures)")
        return Recommendation(ranking, None, text)
    best = max(ok, key=lambda r: (r.throughput or 0.0, -r.replicas))
    sc = scaling.get(best.key, Scaling())
    text = f"{best.strategy} on {devices(best.replicas)}: {fmt_rate(best.throughput or 0)} " \
           f"examples/s"
    if best.replicas > 1 and best.batch_mode == "per_replica" and sc.weak_eff_vs_one:
        text += (f", {sc.weak_eff_vs_one * best.replicas:.2f}x {sc.one_device_name} on 1 "
                 f"device at the same per-replica batch, {sc.weak_eff_vs_one:.0%} weak-scaling "
                 f"efficiency")
    elif best.replicas > 1 and sc.speedup_vs_one is not None:
        text += (f", {sc.speedup_vs_one:.2f}x {sc.one_device_name} on 1 device, "
                 f"{sc.speedup_vs_one / best.replicas:.0%} efficiency")
    elif best.replicas > 1 and sc.speedup is not None:
        text += f", {sc.speedup:.2f}x itself on 1 device, {sc.strong_eff:.0%} efficiency"
    multi = [r for r in ok if r.replicas > 1]
    if best.replicas == 1 and multi:
        top = max(multi, key=lambda r: r.throughput or 0.0)
        loss = 1 - (top.throughput or 0.0) / (best.throughput or 1.0)
        text += (f"; more devices do not pay off: the best multi-device run ({top.strategy} on "
                 f"{top.replicas}) is {loss:.0%} slower")
        if machine.cpu_only:
            text += " (expected on logical CPU devices sharing the same cores)"
    others = []
    per_strategy: dict[str, RunView] = {}
    for run in sorted(ok, key=lambda r: -(r.throughput or 0.0)):
        per_strategy.setdefault(run.strategy, run)
    for strategy, run in per_strategy.items():
        if strategy == best.strategy:
            continue
        slower = 1 - (run.throughput or 0.0) / (best.throughput or 1.0)
        head = (f"{strategy} {slower:.0%} slower (best {fmt_rate(run.throughput or 0)} "
                f"examples/s on {devices(run.replicas)})")
        if _within_noise(run, best):
            others.append(f"{head}: within measurement noise of {best.strategy} (window "
                          f"spreads: cv {run.cv or 0:.0%} and {best.cv or 0:.0%})")
        else:
            others.append(f"{head} because {_why(run, best, verdicts)}")
    for run in sorted(ceilings, key=lambda r: r.replicas):
        others.append(f"{run.strategy} on {devices(run.replicas)}: "
                      f"{fmt_rate(run.throughput or 0)} examples/s, the no-communication "
                      f"ceiling (a baseline, not a way to train one model)")
    for strategy in sorted({r.strategy for rs in ranking.by_replicas.values() for r in rs
                            if r.base_strategy not in BASELINES} - set(per_strategy)):
        others.append(f"{strategy}: no successful run (see the failures below)")
    return Recommendation(ranking, best, text, others)


def answer_workload(variant: Variant, runs: list[RunView], machine: Machine,
                    scaling: dict[str, Scaling],
                    verdicts: dict[str, list[Verdict]]) -> WorkloadAnswer:
    """Rank ``runs`` of one variant per batch setting and recommend at each."""
    rankings = rankings_for(runs)
    return WorkloadAnswer(variant, runs, rankings,
                           [recommend(rk, machine, scaling, verdicts) for rk in rankings])
