"""Rank configurations per workload and batch setting, and say which to use and why.

Configurations are compared only within one machine and one variant, at one batch
setting (the ``--batch`` value, read as global or per-replica by its ``batch_mode``),
so a ranking never mixes different amounts of work per step.

The answer earns its conclusions from the runs. Every other configuration is settled
against the fastest measured one (``configs.settle_of``: ``stats.settle_runs`` on their
runs), and the answer is one of four:

- FASTER: every other configuration is slower beyond the noise and by more than the
  margin (default +-5%), its whole 95% interval beyond it: the fastest is recommended,
  with the interval to the next best;
- EQUIVALENT: those not slower are *shown* to lie within the margin of the fastest (an
  equivalence test, not a failure to find a difference), and the simplest of them wins:
  fewest devices, then processes, then the plainest strategy (registry ``plainness``);
- STANDS: some comparison is open, but each open configuration is no simpler than the
  answer and is shown not to beat it by more than the margin, so no outcome changes it;
- NOT SETTLED at this precision: some configuration is neither shown slower nor shown
  within the margin, and could change the answer. The simplest of those not shown apart
  is shown for now, marked as such, with the runs a configuration that would settle it
  at the noise measured.

Also:

- a speed-up above the device count (super-ideal) is flagged with what it means and
  kept in the ranking: on logical CPU devices a speed-up below the device count is
  possible (one process may use the cores worse than several) and is never discarded;
- a cause ("because ...") is given only for a difference beyond the noise, and only
  from both configurations' profiles (``reports.explain``: the step-time difference
  by part and by op), never as a template over noise nor from a strategy's
  description; the best multi-device configuration against a single-device answer
  is compared by its profile even where the runs do not call them apart;
- a configuration whose batch is per worker (asynchronous training) does more work
  per step than a synchronous one at the same global batch: it is ranked apart, and
  compared with synchronous configurations on equal per-device work where the sweep
  has them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from bench.results.stats import (
    DEFAULT_MARGIN,
    EQUIVALENT,
    FASTER,
    NOT_SETTLED,
    PAIRS,
    SLOWER,
    Settlement,
)
from bench.strategies import STRATEGIES
from reports.columns import change_ci, fmt_rate, pct_ci, times_ci
from reports.configs import ConfigView, Ratio, describe_noise, settle_of
from reports.explain import because, compared, why_not
from reports.machines import Machine
from reports.runs import Variant
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


# The answer's kinds: the three of stats.SETTLE_VERDICTS an answer can be, and a
# configuration alone at its batch setting (nothing to compare it with).
ALONE = "alone"
# Some comparison is open, yet no outcome of it can change the answer: every open
# configuration is no simpler than the answer and is shown not to beat it by more than
# the margin (slower, or within the margin, where the simplest wins anyway).
STANDS = "stands"
ANSWER_KINDS = (FASTER, EQUIVALENT, STANDS, NOT_SETTLED, ALONE)


@dataclass
class Recommendation:
    """What to use at one batch setting, and what the runs settled.

    ``kind`` is one of ``ANSWER_KINDS`` ("" without a recommendation). ``settlements``
    holds every other candidate against ``fastest`` (by key); ``equivalent`` those
    shown within the margin of it, ``unsettled`` those neither shown slower nor within
    the margin (``best`` excluded from both).
    """

    ranking: Ranking
    best: ConfigView | None  # the recommended configuration (for now, when not settled)
    text: str
    others: list[str] = field(default_factory=list)
    kind: str = ""
    fastest: ConfigView | None = None  # highest headline among the candidates
    equivalent: list[ConfigView] = field(default_factory=list)
    unsettled: list[ConfigView] = field(default_factory=list)
    settlements: dict[str, Settlement] = field(default_factory=dict)
    noise: str = ""
    super_ideal: list[ConfigView] = field(default_factory=list)  # flagged, kept
    margin: float = DEFAULT_MARGIN
    # Open against the fastest, but shown unable to change the answer (kind STANDS).
    bounded: list[ConfigView] = field(default_factory=list)

    @property
    def settled(self) -> bool:
        return self.kind in (FASTER, EQUIVALENT, STANDS, ALONE)

    @property
    def verb(self) -> str:
        """How a rendering introduces ``text``: a settled answer is an instruction."""
        return "use " if self.best is not None and self.settled else ""

    @property
    def deciding(self) -> Settlement | None:
        """The comparison the answer rests on: the recommended configuration against the
        fastest where they differ, else the next best against the fastest."""
        if self.best is None or self.fastest is None:
            return None
        if self.best is not self.fastest:
            return self.settlements.get(self.best.key)
        rivals = [c for c in self.ranking.ok_configs() if c.key in self.settlements]
        if not rivals:
            return None
        return self.settlements[max(rivals, key=lambda c: c.throughput or 0.0).key]

    @property
    def half_width(self) -> float | None:
        """The relative half-width of the deciding comparison's interval."""
        d = self.deciding
        return d.half_width if d is not None else None

    @property
    def runs_needed(self) -> int | None:
        """NOT SETTLED: the runs a configuration (or pairs) that would settle every open
        comparison at the noise measured; None when some noise is unmeasured or a plan
        is beyond reach."""
        plans = [self.settlements[c.key].needed for c in self.unsettled]
        if self.best is not None and self.best is not self.fastest \
                and self.best.key in self.settlements \
                and not self.settlements[self.best.key].settled:
            plans.append(self.settlements[self.best.key].needed)
        if not plans or any(n is None for n in plans):
            return None
        return max(n for n in plans if n is not None)


@dataclass
class WorkloadAnswer:
    """A workload variant's rankings and what to use at each batch setting."""

    variant: Variant
    configs: list[ConfigView]
    rankings: list[Ranking]
    recommendations: list[Recommendation]

    def lines(self) -> list[str]:
        """The answers only, one per batch setting, each saying what was shown:
        ``global batch 64: one_device on 1 device (1,104 examples/s; equivalent within
        +-5% to mirrored on 2 devices, the simplest wins; run-to-run cv 4% (3 runs
        each))``."""
        return [answer_line(r) for r in self.recommendations]

    @property
    def short(self) -> str:
        return "; ".join(self.lines())


def answer_line(r: Recommendation) -> str:
    """One answer in a line, for the terminal, the Markdown answers and stability."""
    if r.best is None:
        return f"{r.ranking.label}: {r.text}"
    m = f"+-{r.margin:.0%}"
    head = f"{r.ranking.label}: {r.best.choice} ({fmt_rate(r.best.throughput or 0)} examples/s"
    d = r.deciding
    if r.best in r.super_ideal:  # flagged where it is read, never dropped
        head += f"; super-ideal: above the {r.best.replicas}x ideal, see the report"
    if r.kind == ALONE or d is None:
        return f"{head}; the only configuration measured; {r.noise})"
    if r.kind == FASTER:
        runner = next(c for c in r.ranking.ok_configs() if r.settlements.get(c.key) is d)
        return (f"{head}; faster beyond the noise than {runner.choice}, "
                f"{_change(d.flipped())}; {r.noise})")
    if r.kind == EQUIVALENT:
        return (f"{head}; equivalent within {m} to "
                f"{_listed([c.choice for c in _equivalent_to_best(r)])}, the simplest wins; "
                f"{r.noise})")
    if r.kind == STANDS:
        return (f"{head}; stands: {_listed([_bounded_phrase(c, r) for c in r.bounded])} "
                f"not settled against it, but shown not to beat it by more than {m}, and "
                f"no simpler; {r.noise})")
    open_ = _listed([f"{c.choice} {_change(s)}" for c, s in _open(r)])
    fastest = r.fastest.choice if r.fastest is not None else "-"
    against = ("the fastest measured; not settled against it:" if r.best is r.fastest else
               f"not settled against the fastest measured, {fastest}:")
    return (f"{r.ranking.label}: NOT SETTLED at this precision, {r.best.choice} for now "
            f"({fmt_rate(r.best.throughput or 0)} examples/s; {against} {open_} (neither "
            f"beyond the noise nor within {m}); {_needed(r)}; {r.noise})")


def _bounded_phrase(c: ConfigView, r: Recommendation) -> str:
    """``central_storage on 2 devices -5% [90%: -7%, -3%] vs default on 1 device``."""
    assert r.best is not None
    s = settle_of(c, r.best, r.margin)
    return f"{c.choice} {_change_shown(s) if s else '-'} vs {r.best.choice}"


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


def super_ideal(config: ConfigView, scaling: dict[str, Scaling]) -> Ratio | None:
    """The speed-up over the single-device baseline where it exceeds the device count:
    more than the added devices can give (flagged and kept, never discarded)."""
    if config.replicas <= 1:
        return None
    r = scaling.get(config.key, Scaling()).speedup_vs_one
    return r if r is not None and r.value > config.replicas else None


def _super_ideal_line(c: ConfigView, r: Ratio, sc: Scaling, machine: Machine) -> str:
    n = c.replicas
    beyond = ("beyond the noise" if r.low is not None and r.low > n else
              "though its interval reaches the ideal" if r.low is not None else
              "with one run a side, so the noise is not measured")
    meaning = (
        f"on logical devices sharing the same cores more than {n}x cannot come from the "
        f"hardware: the single-device baseline ran slowed (a disturbed run) or uses the "
        f"cores far worse; re-run both before relying on it" if machine.cpu_only else
        "a super-linear speed-up: each device's share of the work got cheaper (the split "
        "batch fits caches or memory better), or the single-device baseline ran slowed; "
        "check that baseline before relying on it")
    return (f"{c.choice}: super-ideal, {times_ci(r)} {sc.one_device_name} on 1 device, above "
            f"the {n}x ideal of {devices(n)} ({beyond}): {meaning}. Kept in the ranking")


def _listed(items: Sequence[str], limit: int = 3) -> str:
    """``a, b and c`` / ``a, b, c and 4 more``."""
    shown = list(items[:limit])
    rest = len(items) - len(shown)
    if rest:
        return f"{', '.join(shown)} and {rest} more"
    return shown[0] if len(shown) == 1 else f"{', '.join(shown[:-1])} and {shown[-1]}"


def _as_ratio(s: Settlement, shown: bool = False) -> Ratio:
    """The Settlement's 95% interval (``shown``: the 90% one equivalence is shown by)."""
    low, high = (s.eq_low, s.eq_high) if shown else (s.low, s.high)
    return Ratio(s.ratio, low if s.decided else None, high if s.decided else None,
                 s.verdict in (FASTER, SLOWER), None)


def evidence_of(s: Settlement) -> str:
    """What an interval rests on: ``3 and 2 runs`` or ``4 processes measuring both, ...``."""
    pooled = (f"; noise pooled over the sweep's configurations, {s.pooled_df:.0f} degrees of "
              f"freedom" if s.pooled_df is not None else "")
    if s.evidence == PAIRS:
        return f"{s.sizes[0]} processes measuring both, windows interleaved{pooled}"
    return f"{s.sizes[1]} and {s.sizes[0]} runs{pooled}"


def _change(s: Settlement) -> str:
    """``-3% [-9%, +4%]`` (the 95% interval)."""
    return change_ci(_as_ratio(s))


def _change_shown(s: Settlement) -> str:
    """``-2% [90%: -4%, +0%]``: the interval an equivalence test puts inside the margin."""
    text = change_ci(_as_ratio(s, shown=True))
    return text.replace(" [", f" [{1 - 2 * s.alpha:.0%}: ", 1) if s.decided else text


def _equivalent_to_best(r: Recommendation) -> list[ConfigView]:
    """The configurations shown within the margin, seen from the answer: the fastest
    (when it is not the answer) and the others within the margin of it."""
    head = [r.fastest] if r.fastest is not None and r.fastest is not r.best else []
    return head + [c for c in r.equivalent if c is not r.best]


def _open(r: Recommendation) -> list[tuple[ConfigView, Settlement]]:
    """The comparisons an unsettled answer leaves open, each against the fastest."""
    out = [(c, r.settlements[c.key]) for c in r.unsettled]
    if r.best is not None and r.best is not r.fastest and r.best.key in r.settlements \
            and not r.settlements[r.best.key].settled:
        out.insert(0, (r.best, r.settlements[r.best.key]))
    return out


def _needed(r: Recommendation) -> str:
    """What would settle an answer: the plan of its hardest open comparison."""
    plans = [s for _, s in _open(r)]
    if not plans:
        return ""

    def hardness(s: Settlement) -> tuple[int, int]:
        return (2, 0) if s.sd_log is None else (1, 0) if s.needed is None else (0, s.needed)

    return max(plans, key=hardness).plan


def _scaling_phrase(best: ConfigView, sc: Scaling, machine: Machine) -> str:
    if best.replicas <= 1:
        return ""
    n = best.replicas
    if best.batch_mode == "per_replica" and sc.weak_eff_vs_one is not None:
        return (f", {times_ci(sc.weak_eff_vs_one.scaled(1 / n))} {sc.one_device_name} on 1 "
                f"device at the same per-replica batch, {pct_ci(sc.weak_eff_vs_one)} "
                f"weak-scaling efficiency")
    if sc.speedup_vs_one is not None:
        text = (f", {times_ci(sc.speedup_vs_one)} {sc.one_device_name} on 1 device, "
                f"{pct_ci(sc.speedup_vs_one.scaled(n))} efficiency")
        if machine.cpu_only and sc.speedup_vs_one.value > 1.0:
            # Logical devices add no hardware: what a speed-up means there.
            text += (f" (on logical devices sharing the same cores a speed-up is no added "
                     f"hardware: the one-device configuration uses the cores less well "
                     f"than {n} devices do)")
        return text
    if sc.speedup is not None and sc.strong_eff is not None:
        return (f", {times_ci(sc.speedup)} itself on 1 device, {pct_ci(sc.strong_eff)} "
                f"efficiency")
    return ""


def _answer(r: Recommendation, candidates: list[ConfigView], sc: Scaling,
            machine: Machine) -> str:
    best, fastest = r.best, r.fastest
    assert best is not None and fastest is not None
    m = f"+-{r.margin:.0%}"
    text = (f"{best.choice}: {fmt_rate(best.throughput or 0)} examples/s"
            f"{_scaling_phrase(best, sc, machine)}.")
    if r.kind == ALONE:
        text += " The only configuration measured at this batch: nothing to compare it with."
    elif r.kind == FASTER:
        d = r.deciding
        assert d is not None
        runner = next(c for c in candidates if r.settlements.get(c.key) is d)
        text += (f" Faster beyond the noise and by more than the {m} margin than every other "
                 f"configuration: the next best, {runner.choice}, is {_change(d)} (95% "
                 f"interval from {evidence_of(d)}).")
    elif r.kind == EQUIVALENT:
        within = ([best] if best is not fastest else []) + r.equivalent
        shown = [f"{c.choice} {_change_shown(r.settlements[c.key])}" for c in within]
        test = "an equivalence test: the interval lies inside the margin"
        if best is fastest:
            text += (f" Equivalent within {m} to {_listed(shown)} (each vs {fastest.choice}, "
                     f"shown by {test}); it is both the fastest measured and the simplest.")
        else:
            text += (f" The fastest measured, {fastest.choice} "
                     f"({fmt_rate(fastest.throughput or 0)} examples/s), is not faster by more "
                     f"than the margin: vs it, {_listed(shown)}, shown within {m} by "
                     f"{test}; so the simplest was chosen.")
    elif r.kind == STANDS:
        within = _equivalent_to_best(r)
        text += ((f" Equivalent within {m} to {_listed([c.choice for c in within])}, the "
                  f"simplest wins." if within else "")
                 + f" Not every comparison is settled, but none can change this answer: "
                 f"{_listed([_bounded_phrase(c, r) for c in r.bounded])} "
                 f"{'is' if len(r.bounded) == 1 else 'are'} shown not to beat it by more "
                 f"than the {m} margin (the upper end of the 90% interval), and no simpler: "
                 f"slower or within the margin, {best.choice} is the answer either way.")
    else:
        open_ = [f"{c.choice} ({_change(s)} vs {fastest.choice})" for c, s in _open(r)]
        text = (f"NOT SETTLED at this precision; for now {text} "
                f"{_listed(open_)} {'is' if len(open_) == 1 else 'are'} neither shown slower "
                f"beyond the noise nor shown within {m}, so this is the simplest of the "
                f"configurations not shown apart from the fastest measured, not an answer: "
                f"{_needed(r)}.")
    slower_multi = [c for c in candidates if c.replicas > 1 and c.key in r.settlements
                    and r.settlements[c.key].verdict == SLOWER]
    if best.replicas == 1 and slower_multi and r.settled:
        top = max(slower_multi, key=lambda c: c.throughput or 0.0)
        s = r.settlements[top.key]
        cause = because(top, fastest)
        text += (f" More devices do not pay off: the best multi-device configuration "
                 f"({top.choice}) is {_change(s)} vs {fastest.choice}, slower beyond the noise"
                 + (" (expected on logical CPU devices sharing the same cores)"
                    if machine.cpu_only else "")
                 + (f", because {cause}." if cause else f"; {why_not(top, fastest)}."))
    elif best.replicas == 1 and (multi := [c for c in candidates if c.replicas > 1]):
        # The best multi-device configuration against the single-device answer is
        # explained even where the runs do not call them apart: what its profile shows.
        top = max(multi, key=lambda c: c.throughput or 0.0)
        found = compared(top, best)
        if found:
            text += (f" Against the best multi-device configuration ({top.choice}), by "
                     f"their profiles: {found}.")
    if best in r.super_ideal:
        text += (f" Flagged super-ideal: its speed-up is above the {best.replicas}x that "
                 f"{devices(best.replicas)} can give (what that means is below).")
    return f"{text} Noise: {r.noise}."


def _other_line(c: ConfigView, best: ConfigView, margin: float, inputs: RuleInputs) -> str:
    s = settle_of(c, best, margin)
    head = f"{c.strategy} (best {fmt_rate(c.throughput or 0)} examples/s on {devices(c.replicas)})"
    if s is None:
        return head
    m = f"+-{margin:.0%}"
    if s.verdict == EQUIVALENT:
        return f"{head}: {_change_shown(s)} vs {best.choice}, shown within {m} (equivalent)"
    if s.verdict == NOT_SETTLED:
        return f"{head}: {_change(s)} vs {best.choice}, not settled at this precision ({s.plan})"
    if s.verdict == FASTER:
        return f"{head}: {_change(s)} vs {best.choice}, faster beyond the noise"
    slower = (f"{head}: {1 - s.ratio:.0%} slower [{1 - s.high:.0%}-{1 - s.low:.0%}] than "
              f"{best.choice}, beyond the noise")
    # "because" is followed by the two profiles' difference only (reports.explain); a
    # measurement of the slower side alone is stated, not given as the cause.
    cause = because(c, best)
    if cause is not None:
        return f"{slower}, because {cause}"
    seen = measured_cause(c, inputs)
    return f"{slower}{f'; {seen}' if seen else ''}; {why_not(c, best)}"


def _per_worker_line(c: ConfigView, pool: Sequence[ConfigView], margin: float) -> str:
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
    s = settle_of(c, ref, margin)
    verdict = ("not compared" if s is None else
               f"{s.verdict} beyond the noise" if s.verdict in (FASTER, SLOWER) else
               f"shown within +-{margin:.0%}" if s.verdict == EQUIVALENT else
               f"not settled at this precision ({s.plan})")
    return (f"{text}; on equal per-device work it is {_change(s) if s else '-'} vs "
            f"{ref.choice} at global batch {ref.global_batch}, {verdict}")


def _unprofiled(configs: list[ConfigView]) -> list[ConfigView]:
    """One configuration per choice: a profiled run pays the profiler's overhead, so an
    unprofiled twin stands for the choice where there is one."""
    by_choice: dict[str, ConfigView] = {}
    for c in sorted(configs, key=lambda c: bool(c.result.spec.profile_steps)):
        by_choice.setdefault(c.choice, c)
    return [c for c in configs if by_choice[c.choice] is c]


def recommend(ranking: Ranking, machine: Machine, scaling: dict[str, Scaling],
              inputs: RuleInputs, pool: Sequence[ConfigView] = (),
              margin: float = DEFAULT_MARGIN) -> Recommendation:
    """The configuration to use at one batch setting, what settled it, and every other's
    place.

    ``pool``: every configuration of the workload variant (other batch settings too),
    where per-worker-batch configurations find synchronous ones of equal work.
    ``margin``: the relative change within which two configurations count as equivalent.
    """
    everything = ranking.ok_configs()
    ceilings = [c for c in everything if not is_choice(c)]
    choices = [c for c in everything if is_choice(c)]
    # In a global-batch ranking a per-worker batch is more work per step: apart.
    apart = [c for c in choices if c.batch_per_worker and ranking.batch_mode == "global"]
    candidates = _unprofiled([c for c in choices if c not in apart])
    flagged = [(c, r) for c in candidates if (r := super_ideal(c, scaling)) is not None]
    others = [_super_ideal_line(c, r, scaling[c.key], machine) for c, r in flagged]
    others += [_per_worker_line(c, pool or everything, margin) for c in apart]
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
        return Recommendation(ranking, None, text, others, margin=margin)

    fastest = max(candidates, key=lambda c: (c.throughput or 0.0, -c.replicas))
    settlements = {c.key: s for c in candidates
                   if c is not fastest and (s := settle_of(c, fastest, margin)) is not None}
    verdict = {c.key: settlements[c.key].verdict if c.key in settlements else NOT_SETTLED
               for c in candidates if c is not fastest}
    equivalent = [c for c in candidates if verdict.get(c.key) == EQUIVALENT]
    # Neither slower beyond the noise nor within the margin (a "faster" than the fastest
    # headline means the runs' medians and means disagree: not settled either).
    unsettled = [c for c in candidates if verdict.get(c.key) in (NOT_SETTLED, FASTER)]
    best = min([fastest, *equivalent, *unsettled], key=lambda c: c.simplicity)
    # Open comparisons that cannot change the answer: see STANDS.
    bounded = [c for c in unsettled if c is not best and cannot_displace(c, best, margin)]
    open_ = [c for c in unsettled if c not in bounded]
    kind = (ALONE if len(candidates) == 1 else NOT_SETTLED if open_ else
            STANDS if bounded else EQUIVALENT if equivalent else FASTER)
    rec = Recommendation(
        ranking, best, "", others, kind, fastest,
        sorted((c for c in equivalent if c is not best), key=lambda c: c.simplicity),
        sorted((c for c in open_ if c is not best), key=lambda c: c.simplicity),
        settlements, describe_noise(candidates), [c for c, _ in flagged], margin,
        sorted(bounded, key=lambda c: c.simplicity))
    rec.text = _answer(rec, candidates, scaling.get(best.key, Scaling()), machine)

    per_strategy: dict[str, ConfigView] = {}
    for c in sorted(candidates, key=lambda c: -(c.throughput or 0.0)):
        per_strategy.setdefault(c.strategy, c)
    lines = [_other_line(c, best, margin, inputs) for st, c in per_strategy.items()
             if st != best.strategy]
    for strategy in sorted({c.strategy for c in ranking.configs() if is_choice(c)}
                           - {c.strategy for c in choices}):
        lines.append(f"{strategy}: no successful run (see the failures below)")
    rec.others = lines + others
    return rec


def cannot_displace(c: ConfigView, best: ConfigView, margin: float) -> bool:
    """``c`` cannot change an answer of ``best``: it is no simpler, and the evidence
    shows it does not beat ``best`` by more than ``margin`` (the upper end of its 90%
    interval against ``best`` below 1 + margin: a one-sided test at 5%). Slower, or
    within the margin where the simplest wins: ``best`` either way."""
    if c.simplicity <= best.simplicity:
        return False
    s = settle_of(c, best, margin)
    return s is not None and s.decided and s.eq_high < 1.0 + margin


def answer_workload(variant: Variant, configs: list[ConfigView], machine: Machine,
                    scaling: dict[str, Scaling], inputs: RuleInputs) -> WorkloadAnswer:
    """Rank ``configs`` of one variant per batch setting and recommend at each."""
    rankings = rankings_for(configs)
    return WorkloadAnswer(variant, configs, rankings,
                          [recommend(rk, machine, scaling, inputs, configs) for rk in rankings])
