"""Rank configurations per workload and batch setting, and say which to use and why.

Configurations are compared only within one machine and one variant, at one batch
setting (the ``--batch`` value, read as global or per-replica by its ``batch_mode``),
so a ranking never mixes different amounts of work per step.

The answer earns its conclusions from the runs:

- every ratio it states carries its interval from the runs of both configurations;
- configurations whose throughput cannot be told apart from the fastest one (the
  interval of their ratio includes 1, or one run a side leaves the noise unmeasured)
  are *tied*, and among ties the simplest wins: fewest devices, then processes, then
  the plainest strategy (registry ``plainness``); the answer says it was a tie and with
  what;
- a configuration faster than its hardware's ideal (1.0x the single-device baseline on
  logical CPU devices sharing the cores, N x on N real devices) is never recommended:
  it is reported as noise;
- a cause ("because <trait>") is given only for a significant difference whose cause
  was measured (``verdicts.measured_cause``), never as a template over noise;
- a configuration whose batch is per worker (asynchronous training) does more work
  per step than a synchronous one at the same global batch: it is ranked apart, and
  compared with synchronous configurations on equal per-device work where the sweep
  has them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from bench.strategies import STRATEGIES
from reports.columns import change_ci, fmt_rate, pct_ci, times_ci
from reports.configs import ConfigView, Ratio, describe_noise, ratio_of
from reports.machines import Machine
from reports.runs import Variant, trait_of
from reports.scaling import Scaling
from reports.verdicts import RuleInputs, measured_cause


def devices(n: int) -> str:
    return f"{n} device" if n == 1 else f"{n} devices"


def is_choice(config: ConfigView) -> bool:
    """A way to train one model a user can pick (baselines are ceilings only)."""
    name = config.base_strategy
    return STRATEGIES.get(name).is_choice if name in STRATEGIES else True


@dataclass
class Ranking:
    """Configurations of one batch setting, grouped by replica count, best first."""

    batch_mode: str
    batch: int
    by_replicas: dict[int, list[ConfigView]] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return f"{'global' if self.batch_mode == 'global' else 'per-replica'} batch {self.batch}"

    def ok_configs(self) -> list[ConfigView]:
        return [c for cs in self.by_replicas.values() for c in cs if c.ok]

    def configs(self) -> list[ConfigView]:
        return [c for cs in self.by_replicas.values() for c in cs]


@dataclass
class Recommendation:
    """What to use at one batch setting, and how sure the runs make it."""

    ranking: Ranking
    best: ConfigView | None  # the recommended configuration
    text: str
    others: list[str] = field(default_factory=list)
    tied_with: list[ConfigView] = field(default_factory=list)  # within the noise of best
    fastest: ConfigView | None = None  # highest headline among the candidates
    noise: str = ""
    above_ideal: list[ConfigView] = field(default_factory=list)  # reported as noise

    @property
    def tie(self) -> bool:
        return bool(self.tied_with)


@dataclass
class WorkloadAnswer:
    """A workload variant's rankings and what to use at each batch setting."""

    variant: Variant
    configs: list[ConfigView]
    rankings: list[Ranking]
    recommendations: list[Recommendation]

    def lines(self) -> list[str]:
        """The answers only, one per batch setting: ``global batch 64: one_device on 1
        device (1,104 examples/s; tie with default on 1 device; run-to-run cv 4% (3 runs
        each))``."""
        parts = []
        for r in self.recommendations:
            if r.best is None:
                parts.append(f"{r.ranking.label}: {r.text}")
                continue
            tie = (f"; tie with {_listed([c.choice for c in r.tied_with])}"
                   if r.tied_with else "")
            parts.append(f"{r.ranking.label}: {r.best.choice} "
                         f"({fmt_rate(r.best.throughput or 0)} examples/s{tie}; {r.noise})")
        return parts

    @property
    def short(self) -> str:
        return "; ".join(self.lines())


def _rank_key(config: ConfigView) -> tuple[int, float, str]:
    return (0 if config.ok else 1, -(config.throughput or 0.0), config.strategy)


def rankings_for(configs: Sequence[ConfigView]) -> list[Ranking]:
    settings: dict[tuple[str, int], Ranking] = {}
    for c in configs:
        rk = settings.setdefault((c.batch_mode, c.batch_setting),
                                 Ranking(c.batch_mode, c.batch_setting))
        rk.by_replicas.setdefault(c.replicas, []).append(c)
    for rk in settings.values():
        rk.by_replicas = {n: sorted(cs, key=_rank_key) for n, cs in sorted(rk.by_replicas.items())}
    return [settings[k] for k in sorted(settings)]


def ideal_speedup(config: ConfigView, machine: Machine) -> float:
    """The most N devices can give over one: 1.0 when logical devices share the cores."""
    return 1.0 if machine.cpu_only else float(config.replicas)


def above_ideal(config: ConfigView, scaling: dict[str, Scaling], machine: Machine
                ) -> Ratio | None:
    """The speed-up over the single-device baseline if it exceeds the hardware's ideal."""
    if config.replicas <= 1:
        return None
    r = scaling.get(config.key, Scaling()).speedup_vs_one
    return r if r is not None and r.value > ideal_speedup(config, machine) else None


def _listed(items: Sequence[str], limit: int = 3) -> str:
    """``a, b and c`` / ``a, b, c and 4 more``."""
    shown = list(items[:limit])
    rest = len(items) - len(shown)
    if rest:
        return f"{', '.join(shown)} and {rest} more"
    return shown[0] if len(shown) == 1 else f"{', '.join(shown[:-1])} and {shown[-1]}"


def _versus(c: ConfigView, pick: ConfigView) -> str:
    """``default on 1 device (-3% [-9%, +4%])``."""
    return f"{c.choice} ({change_ci(ratio_of(c, pick))})"


def _scaling_phrase(best: ConfigView, sc: Scaling) -> str:
    if best.replicas <= 1:
        return ""
    n = best.replicas
    if best.batch_mode == "per_replica" and sc.weak_eff_vs_one is not None:
        return (f", {times_ci(sc.weak_eff_vs_one.scaled(1 / n))} {sc.one_device_name} on 1 "
                f"device at the same per-replica batch, {pct_ci(sc.weak_eff_vs_one)} "
                f"weak-scaling efficiency")
    if sc.speedup_vs_one is not None:
        return (f", {times_ci(sc.speedup_vs_one)} {sc.one_device_name} on 1 device, "
                f"{pct_ci(sc.speedup_vs_one.scaled(n))} efficiency")
    if sc.speedup is not None and sc.strong_eff is not None:
        return (f", {times_ci(sc.speedup)} itself on 1 device, {pct_ci(sc.strong_eff)} "
                f"efficiency")
    return ""


def _undecided(c: ConfigView, best: ConfigView) -> bool:
    r = ratio_of(c, best)
    return r is None or not r.decided


def _answer(best: ConfigView, fastest: ConfigView, tied: list[ConfigView],
            candidates: list[ConfigView], sc: Scaling, machine: Machine, noise: str) -> str:
    text = (f"{best.choice}: {fmt_rate(best.throughput or 0)} examples/s"
            f"{_scaling_phrase(best, sc)}.")
    within = [c for c in tied if not _undecided(c, best)]
    unknown = [c for c in tied if _undecided(c, best)]
    if within:
        text += f" A tie: within the noise of {_listed([_versus(c, best) for c in within])}"
        text += (", so the simplest was chosen." if fastest is not best else
                 "; it is both the fastest measured and the simplest.")
    if unknown:
        text += (f" {'It also' if within else 'It'} cannot be told apart from "
                 f"{_listed([c.choice for c in unknown])}: with one run a side the "
                 f"run-to-run noise is not measured, so no difference can be called and the "
                 f"simplest is shown; measure 2 or more runs per configuration.")
    if fastest is not best:
        text += (f" The fastest measured was {fastest.choice} "
                 f"({fmt_rate(fastest.throughput or 0)} examples/s)"
                 + ("." if _undecided(fastest, best) else
                    ", not faster beyond the noise."))
    if not tied:
        rivals = [c for c in candidates if c is not best]
        if rivals:
            runner = max(rivals, key=lambda c: c.throughput or 0.0)
            text += (f" Faster beyond the noise than the next best, "
                     f"{_versus(runner, best)}.")
    multi = [c for c in candidates if c.replicas > 1 and c not in tied]
    if best.replicas == 1 and multi:
        top = max(multi, key=lambda c: c.throughput or 0.0)
        r = ratio_of(top, best)
        if r is not None and r.significant and r.value < 1:
            text += (f" More devices do not pay off: the best multi-device configuration "
                     f"({top.choice}) is {1 - r.value:.0%}"
                     + (f" [{1 - r.high:.0%}-{1 - r.low:.0%}]"
                        if r.high is not None and r.low is not None else "")
                     + " slower"
                     + (" (expected on logical CPU devices sharing the same cores)"
                        if machine.cpu_only else "") + ".")
    return f"{text} Noise: {noise}."


def _other_line(c: ConfigView, best: ConfigView, tied: list[ConfigView],
                inputs: RuleInputs) -> str:
    r = ratio_of(c, best)
    head = f"{c.strategy} (best {fmt_rate(c.throughput or 0)} examples/s on {devices(c.replicas)})"
    if r is None:
        return head
    if c in tied or not r.significant:
        why = ("within the noise" if r.decided else
               "cannot tell: one run a side, the run-to-run noise is not measured")
        return f"{head}: {change_ci(r)} vs {best.choice}, {why}"
    if r.value >= 1:
        return f"{head}: {change_ci(r)} vs {best.choice}"
    slower = (f"{1 - r.value:.0%} slower" + (f" [{1 - r.high:.0%}-{1 - r.low:.0%}]"
                                             if r.high is not None and r.low is not None
                                             else ""))
    cause = measured_cause(c, inputs)
    if cause is None:
        return (f"{head}: {slower} than {best.choice}, beyond the noise; cause not measured "
                f"(profile it, --profile-steps, to see where the time goes)")
    return (f"{head}: {slower} than {best.choice}, beyond the noise, because "
            f"{trait_of(c.base_strategy)} ({cause})")


def _per_worker_line(c: ConfigView, pool: Sequence[ConfigView]) -> str:
    """A per-worker-batch configuration, labelled, against equal per-device work."""
    text = (f"{c.choice}: {fmt_rate(c.throughput or 0)} examples/s with a batch of "
            f"{c.per_replica_batch} per worker ({c.replicas} workers step asynchronously: "
            f"weak scaling, {c.replicas * c.per_replica_batch} examples per round), so it is "
            f"ranked apart from the synchronous strategies")
    same_work = [s for s in pool if s.ok and is_choice(s) and not s.batch_per_worker
                 and s.replicas == c.replicas and s.per_replica_batch == c.per_replica_batch]
    if not same_work:
        return (f"{text}; no synchronous configuration with {c.per_replica_batch} examples "
                f"per device on {devices(c.replicas)} in this sweep to compare it with")
    ref = max(same_work, key=lambda s: s.throughput or 0.0)
    r = ratio_of(c, ref)
    verdict = ("beyond the noise" if r is not None and r.significant else
               "within the noise" if r is not None and r.decided else
               "cannot tell with one run a side")
    return (f"{text}; on equal per-device work it is {change_ci(r)} vs {ref.choice} at "
            f"global batch {ref.global_batch}, {verdict}")


def _unprofiled(configs: list[ConfigView]) -> list[ConfigView]:
    """One configuration per choice: a profiled run pays the profiler's overhead, so an
    unprofiled twin stands for the choice where there is one."""
    by_choice: dict[str, ConfigView] = {}
    for c in sorted(configs, key=lambda c: bool(c.result.spec.profile_steps)):
        by_choice.setdefault(c.choice, c)
    return [c for c in configs if by_choice[c.choice] is c]


def recommend(ranking: Ranking, machine: Machine, scaling: dict[str, Scaling],
              inputs: RuleInputs, pool: Sequence[ConfigView] = ()) -> Recommendation:
    """The configuration to use at one batch setting, the ties, and every other's place.

    ``pool``: every configuration of the workload variant (other batch settings too),
    where per-worker-batch configurations find synchronous ones of equal work.
    """
    everything = ranking.ok_configs()
    ceilings = [c for c in everything if not is_choice(c)]
    choices = [c for c in everything if is_choice(c)]
    # In a global-batch ranking a per-worker batch is more work per step: apart.
    apart = [c for c in choices if c.batch_per_worker and ranking.batch_mode == "global"]
    impossible = [c for c in choices if c not in apart and above_ideal(c, scaling, machine)]
    candidates = _unprofiled([c for c in choices if c not in apart and c not in impossible])
    others: list[str] = []
    for c in impossible:
        r = above_ideal(c, scaling, machine)
        others.append(f"{c.choice}: {times_ci(r)} {scaling[c.key].one_device_name} on 1 device, "
                      f"above the {ideal_speedup(c, machine):.1f}x ideal of this hardware: "
                      f"noise (a disturbed run on either side), not a gain; not recommended")
    others += [_per_worker_line(c, pool or everything) for c in apart]
    others += [f"{c.choice}: {fmt_rate(c.throughput or 0)} examples/s, the no-communication "
               f"ceiling (a baseline, not a way to train one model)"
               for c in sorted(ceilings, key=lambda c: c.replicas)]
    if not candidates:
        if ceilings and not choices:
            text = "only the no-communication baseline ran"
        elif choices:
            text = "no configuration to recommend: every successful one is listed below"
        else:
            text = "no successful run (see the runs without figures)"
        return Recommendation(ranking, None, text, others)

    fastest = max(candidates, key=lambda c: (c.throughput or 0.0, -c.replicas))
    tied_all = [c for c in candidates if c is fastest
                or not (r := ratio_of(c, fastest)) or not r.significant]
    best = min(tied_all, key=lambda c: c.simplicity)
    tied = sorted((c for c in tied_all if c is not best), key=lambda c: c.simplicity)
    noise = describe_noise(candidates)
    text = _answer(best, fastest, tied, candidates, scaling.get(best.key, Scaling()),
                   machine, noise)

    per_strategy: dict[str, ConfigView] = {}
    for c in sorted(candidates, key=lambda c: -(c.throughput or 0.0)):
        per_strategy.setdefault(c.strategy, c)
    lines = [_other_line(c, best, tied, inputs) for s, c in per_strategy.items()
             if s != best.strategy]
    for strategy in sorted({c.strategy for c in ranking.configs() if is_choice(c)}
                           - {c.strategy for c in choices}):
        lines.append(f"{strategy}: no successful run (see the failures below)")
    return Recommendation(ranking, best, text, lines + others, tied, fastest, noise,
                          impossible)


def answer_workload(variant: Variant, configs: list[ConfigView], machine: Machine,
                    scaling: dict[str, Scaling], inputs: RuleInputs) -> WorkloadAnswer:
    """Rank ``configs`` of one variant per batch setting and recommend at each."""
    rankings = rankings_for(configs)
    return WorkloadAnswer(variant, configs, rankings,
                          [recommend(rk, machine, scaling, inputs, configs) for rk in rankings])
