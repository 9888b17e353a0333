"""Rank configurations per workload and batch setting, and say which to use and why.

One answer per place (machine, workload, batch setting), comparing configurations of
one variant only. The answer is never a configuration the data shows slower; it is
FASTER, EQUIVALENT, STANDS, NOT SETTLED at this precision, or ALONE, and a "because"
comes only from both configurations' profiles (``reports.explain``). The rules, and
why they are so: docs/how-it-decides.md ("The answer").
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from bench.results.stats import (
    DEFAULT_ALPHA,
    DEFAULT_MARGIN,
    EQUIVALENT,
    FASTER,
    NOT_SETTLED,
    PAIRS,
    SLOWER,
    Settlement,
    holm_adjusted,
    level,
)
from bench.strategies import STRATEGIES
from reports.columns import change_ci, fmt_rate, pct_ci, times_ci
from reports.configs import ConfigView, Noise, Ratio, noise_of, settle_of
from reports.explain import because, compared, why_not
from reports.machines import Machine
from reports.runs import Variant
from reports.scaling import Scaling
from reports.sequential import Looks
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
    holds every other candidate against ``best`` (by key); ``equivalent`` those no
    candidate is shown faster than and shown within the margin of it, ``unsettled``
    those of them neither shown apart from it nor within the margin, ``bounded`` those
    open but unable to change it (``best`` excluded from all three).
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
    spread: Noise | None = None  # the candidates' noise, as figures (``noise``: in words)
    super_ideal: list[ConfigView] = field(default_factory=list)  # flagged, kept
    margin: float = DEFAULT_MARGIN
    # Open against the answer, but shown unable to change it (kind STANDS).
    bounded: list[ConfigView] = field(default_factory=list)
    # Candidates another candidate is shown faster than beyond the noise (none of them
    # can be the answer, settled or for now): key -> (that other, candidate / other).
    beaten: dict[str, tuple[ConfigView, Settlement]] = field(default_factory=dict)
    alpha: float = DEFAULT_ALPHA  # the level its comparisons were read at

    @property
    def settled(self) -> bool:
        return self.kind in (FASTER, EQUIVALENT, STANDS, ALONE)

    @property
    def noise(self) -> str:
        """``run-to-run cv 4% (3 runs each); windows 2%``: the noise behind the answer."""
        return self.spread.text if self.spread is not None else "no runs"

    @property
    def verb(self) -> str:
        """How a rendering introduces ``text``: a settled answer is an instruction."""
        return "use " if self.best is not None and self.settled else ""

    @property
    def deciding(self) -> Settlement | None:
        """The comparison the answer rests on, against the answer: the fastest measured
        where it is not the answer, else the next best."""
        if self.best is None or self.fastest is None:
            return None
        if self.best is not self.fastest:
            return self.settlements.get(self.fastest.key)
        return self.settlements[self.runner.key] if self.runner is not None else None

    @property
    def shown_faster_than_it(self) -> list[ConfigView]:
        """Candidates its own comparisons show faster than the answer beyond the noise
        (none, by the rule that picks it: a check a reader of two sweeps can run)."""
        return [c for c in self.ranking.ok_configs() if c.key in self.settlements
                and self.settlements[c.key].direction == FASTER]

    @property
    def runner(self) -> ConfigView | None:
        """The next best after the answer: the highest headline among the others."""
        rivals = [c for c in self.ranking.ok_configs() if c.key in self.settlements]
        return max(rivals, key=lambda c: c.speed) if rivals else None

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


def answer_line(r: Recommendation) -> str:
    """One answer in a sentence: what ``--explain`` and the reports' collapsed details show
    under the answers' table (``reports.answers``), and what stability compares."""
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
        assert r.runner is not None
        return (f"{head}; faster beyond the noise than {r.runner.choice}, "
                f"{change_of(d.flipped())}{_against_margin(d)}; {r.noise})")
    slower = _beaten_phrase(r)
    if r.kind == EQUIVALENT:
        return (f"{head}; equivalent within {m} to {_listed([c.choice for c in r.equivalent])}"
                f", the simplest wins{slower}; {r.noise})")
    if r.kind == STANDS:
        return (f"{head}; stands: {_listed([_bounded_phrase(c, r) for c in r.bounded])} "
                f"not settled against it, but shown not to beat it by more than {m}, and "
                f"no simpler{slower}; {r.noise})")
    open_ = _listed([f"{c.choice} {change_of(s)}" for c, s in _open(r)])
    return (f"{r.ranking.label}: NOT SETTLED at this precision, {r.best.choice} for now "
            f"({fmt_rate(r.best.throughput or 0)} examples/s; no configuration is shown "
            f"faster; not settled against it: {open_} (neither beyond the noise nor within "
            f"{m}){slower}; {_needed(r)}; {r.noise})")


def _against_margin(s: Settlement) -> str:
    """What a comparison shown beyond the noise says about the margin."""
    m = f"+-{s.margin:.0%}"
    if s.verdict in (FASTER, SLOWER):
        return f", beyond the {m} margin too"
    if s.verdict == EQUIVALENT:
        return f", by less than the margin (shown within {m})"
    return f"; not yet shown beyond the {m} margin"


def _beaten_phrase(r: Recommendation) -> str:
    """``; shown slower beyond the noise: default on 1 device -7% [-11%, -4%] vs
    central_storage on 2 devices`` for the candidates set aside by a gap the margin
    does not yet call (those beyond it are in the report's list)."""
    near = [(c, by, s) for c in r.ranking.ok_configs() if c.key in r.beaten
            for by, s in (r.beaten[c.key],) if s.verdict != SLOWER]
    if not near:
        return ""
    return "; shown slower beyond the noise: " + _listed(
        [f"{c.choice} {change_of(s)} vs {by.choice}" for c, by, s in near])


def _bounded_phrase(c: ConfigView, r: Recommendation) -> str:
    """``central_storage on 2 devices -5% [90%: -7%, -3%] vs default on 1 device``."""
    assert r.best is not None
    s = r.settlements.get(c.key)
    return f"{c.choice} {shown_change(s) if s else '-'} vs {r.best.choice}"


def _rank_key(config: ConfigView) -> tuple[int, float, str]:
    return (0 if config.ok else 1, -config.speed, config.strategy)


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
    """What an interval rests on: ``3 and 2 runs`` or ``4 sessions measuring both, ...``
    (a session: the arms' process, with any member's processes beside it)."""
    pooled = (f"; noise pooled over the sweep's configurations, {s.pooled_df:.0f} degrees of "
              f"freedom" if s.pooled_df is not None else
              f"; noise their rounds predict, guarded by the workload's sessions, "
              f"{s.rounds_df:.0f} degrees of freedom" if s.rounds_df is not None else "")
    if s.evidence == PAIRS:
        return f"{s.sizes[0]} sessions measuring both, windows interleaved{pooled}"
    return f"{s.sizes[1]} and {s.sizes[0]} runs{pooled}"


def change_of(s: Settlement) -> str:
    """``-3% [-9%, +4%]`` (the 95% interval); another level is named: ``[96%: ...]``
    (a budget's look reads at its own alpha, ``reports.sequential``)."""
    text = change_ci(_as_ratio(s))
    if not s.decided or s.alpha == DEFAULT_ALPHA:
        return text
    return text.replace(" [", f" [{level(1 - s.alpha)}: ", 1)


def shown_change(s: Settlement) -> str:
    """``-2% [90%: -4%, +0%]``: the interval an equivalence test puts inside the margin."""
    text = change_ci(_as_ratio(s, shown=True))
    return text.replace(" [", f" [{level(1 - 2 * s.alpha)}: ", 1) if s.decided else text


def _open(r: Recommendation) -> list[tuple[ConfigView, Settlement]]:
    """The comparisons an unsettled answer leaves open, each against the answer."""
    return [(c, r.settlements[c.key]) for c in r.unsettled]


def hardest_open(r: Recommendation) -> tuple[ConfigView, Settlement] | None:
    """The open comparison that takes the most to settle (noise unmeasured, then a plan
    beyond reach, then the most runs or pairs): what the answer waits for."""
    def hardness(pair: tuple[ConfigView, Settlement]) -> tuple[int, int]:
        s = pair[1]
        return (2, 0) if s.sd_log is None else (1, 0) if s.needed is None else (0, s.needed)

    return max(_open(r), key=hardness, default=None)


def _needed(r: Recommendation) -> str:
    """What would settle an answer: the plan of its hardest open comparison."""
    hardest = hardest_open(r)
    return hardest[1].plan if hardest is not None else ""


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
        d, runner = r.deciding, r.runner
        assert d is not None and runner is not None
        beyond_margin = all(x.verdict == SLOWER for x in r.settlements.values())
        text += ((f" Faster beyond the noise and by more than the {m} margin than every "
                  f"other configuration: " if beyond_margin else
                  f" Faster beyond the noise than every other configuration, not by more "
                  f"than the {m} margin everywhere: ")
                 + f"the next best, {runner.choice}, is {change_of(d)}{_against_margin(d)} "
                 f"({level(1 - d.alpha)} interval from {evidence_of(d)}).")
    elif r.kind == EQUIVALENT:
        shown = [f"{c.choice} {shown_change(r.settlements[c.key])}" for c in r.equivalent]
        test = "an equivalence test: the interval lies inside the margin"
        text += (f" Equivalent within {m} to {_listed(shown)} (each vs {best.choice}, shown "
                 f"by {test}), and no configuration is shown faster than it beyond the "
                 f"noise; the simplest of them is chosen"
                 + (f" (the fastest measured is {fastest.choice}, "
                    f"{fmt_rate(fastest.throughput or 0)} examples/s)." if best is not fastest
                    else ", and it is also the fastest measured."))
    elif r.kind == STANDS:
        text += ((f" Equivalent within {m} to {_listed([c.choice for c in r.equivalent])}, "
                  f"the simplest wins." if r.equivalent else "")
                 + f" Not every comparison is settled, but none can change this answer: "
                 f"{_listed([_bounded_phrase(c, r) for c in r.bounded])} "
                 f"{'is' if len(r.bounded) == 1 else 'are'} shown not to beat it by more "
                 f"than the {m} margin (the upper end of the {level(1 - 2 * r.alpha)} "
                 f"interval), and no simpler: "
                 f"slower or within the margin, {best.choice} is the answer either way.")
    else:
        open_ = [f"{c.choice} ({change_of(s)} vs {best.choice})" for c, s in _open(r)]
        text = (f"NOT SETTLED at this precision; for now {text} "
                f"{_listed(open_)} {'is' if len(open_) == 1 else 'are'} neither shown faster "
                f"nor slower beyond the noise nor shown within {m}, so this is the simplest of "
                f"the configurations that no other is shown faster than, not an answer: "
                f"{_needed(r)}.")
    near = _beaten_phrase(r)
    if near and r.kind != FASTER:
        text += f" Set aside,{near.removeprefix(';')} (not yet shown beyond the {m} margin)."
    slower_multi = [c for c in candidates if c.replicas > 1 and c.key in r.settlements
                    and r.settlements[c.key].verdict == SLOWER]
    if best.replicas == 1 and slower_multi and r.settled:
        top = max(slower_multi, key=lambda c: c.speed)
        s = r.settlements[top.key]
        cause = because(top, fastest)
        text += (f" More devices do not pay off: the best multi-device configuration "
                 f"({top.choice}) is {change_of(s)} vs {fastest.choice}, slower beyond the noise"
                 + (" (expected on logical CPU devices sharing the same cores)"
                    if machine.cpu_only else "")
                 + (f", because {cause}." if cause else f"; {why_not(top, fastest)}."))
    elif best.replicas == 1 and (multi := [c for c in candidates if c.replicas > 1]):
        # The best multi-device configuration against the single-device answer is
        # explained even where the runs do not call them apart: what its profile shows.
        top = max(multi, key=lambda c: c.speed)
        found = compared(top, best)
        if found:
            text += (f" Against the best multi-device configuration ({top.choice}), by "
                     f"their profiles: {found}.")
    if best in r.super_ideal:
        text += (f" Flagged super-ideal: its speed-up is above the {best.replicas}x that "
                 f"{devices(best.replicas)} can give (what that means is below).")
    return f"{text} Noise: {r.noise}."


def _other_line(c: ConfigView, best: ConfigView, s: Settlement | None, margin: float,
                inputs: RuleInputs) -> str:
    """One other configuration's line, from its comparison with the answer (``s``:
    c / best, as the answer read it)."""
    head = f"{c.strategy} (best {fmt_rate(c.throughput or 0)} examples/s on {devices(c.replicas)})"
    if s is None:
        return head
    m = f"+-{margin:.0%}"
    if s.verdict == EQUIVALENT:
        return f"{head}: {shown_change(s)} vs {best.choice}, shown within {m} (equivalent)"
    if s.verdict == NOT_SETTLED and s.direction is None:
        return f"{head}: {change_of(s)} vs {best.choice}, not settled at this precision ({s.plan})"
    if s.direction == FASTER:
        return (f"{head}: {change_of(s)} vs {best.choice}, faster beyond the noise"
                f"{_against_margin(s)}")
    if s.verdict == NOT_SETTLED:
        return (f"{head}: {change_of(s)} vs {best.choice}, slower beyond the noise"
                f"{_against_margin(s)}")
    slower = (f"{head}: {1 - s.ratio:.0%} slower [{1 - s.high:.0%}-{1 - s.low:.0%}] than "
              f"{best.choice}, beyond the noise")
    # "because" is followed by the two profiles' difference only (reports.explain); a
    # measurement of the slower side alone is stated, not given as the cause.
    cause = because(c, best)
    if cause is not None:
        return f"{slower}, because {cause}"
    seen = measured_cause(c, inputs)
    return f"{slower}{f'; {seen}' if seen else ''}; {why_not(c, best)}"


def _circle(ranking: Ranking, candidates: Sequence[ConfigView],
            beaten: dict[str, tuple[ConfigView, Settlement]], others: list[str],
            margin: float, alpha: float) -> Recommendation:
    """NOT SETTLED with no answer: every candidate is shown slower than another, so the
    evidence runs in a circle (runs against pairs, or sessions holding different arms);
    the circle is named, and its configurations are what to measure again."""
    by_key = {c.key: c for c in candidates}
    path: list[str] = [max(candidates, key=lambda c: c.speed).key]
    while (nxt := beaten[path[-1]][0].key) not in path:
        path.append(nxt)
    loop = path[path.index(nxt):]
    steps = [f"{beaten[k][0].choice} is shown faster than {by_key[k].choice} "
             f"({change_of(beaten[k][1].flipped())})" for k in loop]
    text = (f"NOT SETTLED: the evidence runs in a circle: {'; '.join(steps)}. No "
            f"configuration can be the answer until more measurement breaks the circle")
    members = sorted((by_key[k] for k in loop), key=lambda c: c.simplicity)
    return Recommendation(ranking, None, text, others, NOT_SETTLED, by_key[path[0]],
                          unsettled=members, spread=noise_of(candidates), margin=margin,
                          beaten=beaten, alpha=alpha)


def _per_worker_line(c: ConfigView, pool: Sequence[ConfigView], margin: float,
                     alpha: float) -> str:
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
    s = settle_of(c, ref, margin, alpha)
    verdict = ("not compared" if s is None else
               f"{s.verdict} beyond the noise" if s.verdict in (FASTER, SLOWER) else
               f"shown within +-{margin:.0%}" if s.verdict == EQUIVALENT else
               f"not settled at this precision ({s.plan})")
    return (f"{text}; on equal per-device work it is {change_of(s) if s else '-'} vs "
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
              margin: float = DEFAULT_MARGIN, alpha: float = DEFAULT_ALPHA) -> Recommendation:
    """The configuration to use at one batch setting, what settled it, and every other's
    place.

    ``pool``: every configuration of the workload variant (other batch settings too),
    where per-worker-batch configurations find synchronous ones of equal work.
    ``margin``: the relative change within which two configurations count as equivalent.
    ``alpha``: the level the comparisons are read at (a budget's look:
    ``reports.sequential``).
    """
    everything = ranking.ok_configs()
    ceilings = [c for c in everything if not is_choice(c)]
    choices = [c for c in everything if is_choice(c)]
    # In a global-batch ranking a per-worker batch is more work per step: apart.
    apart = [c for c in choices if c.batch_per_worker and ranking.batch_mode == "global"]
    candidates = _unprofiled([c for c in choices if c not in apart])
    flagged = [(c, r) for c in candidates if (r := super_ideal(c, scaling)) is not None]
    others = [_super_ideal_line(c, r, scaling[c.key], machine) for c, r in flagged]
    others += [_per_worker_line(c, pool or everything, margin, alpha) for c in apart]
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

    # Only a configuration no other is shown faster than beyond the noise may be the
    # answer, settled or for now: the simplest of the rest would otherwise win while the
    # data shows it slower by a gap not yet pinned against the margin. "Shown" is read
    # over the place's comparisons together (Holm): each pair at 95% set one of five
    # equal configurations aside in 21% of places.
    family = PlaceComparisons.of(candidates, margin, alpha)
    beaten = family.beaten()
    eligible = [c for c in candidates if c.key not in beaten]
    if not eligible:
        return _circle(ranking, candidates, beaten, others, margin, alpha)
    fastest = max(eligible, key=lambda c: (c.speed, -c.replicas))
    best = fastest if len(eligible) == 1 else min(eligible, key=lambda c: c.simplicity)
    settlements = {c.key: s for c in candidates
                   if c is not best and (s := family.against(c, best)) is not None}
    rest = [c for c in eligible if c is not best]
    equivalent = [c for c in rest if c.key in settlements
                  and settlements[c.key].verdict == EQUIVALENT]
    unsettled = [c for c in rest if c not in equivalent]
    # Open comparisons that cannot change the answer: see STANDS.
    bounded = [c for c in unsettled if cannot_displace(c, best, settlements.get(c.key))]
    open_ = [c for c in unsettled if c not in bounded]
    kind = (ALONE if len(candidates) == 1 else FASTER if not rest else
            NOT_SETTLED if open_ else STANDS if bounded else EQUIVALENT)
    rec = Recommendation(
        ranking, best, "", others, kind, fastest,
        sorted(equivalent, key=lambda c: c.simplicity),
        sorted(open_, key=lambda c: c.simplicity),
        settlements, noise_of(candidates), [c for c, _ in flagged], margin,
        sorted(bounded, key=lambda c: c.simplicity), beaten, alpha)
    rec.text = _answer(rec, candidates, scaling.get(best.key, Scaling()), machine)

    per_strategy: dict[str, ConfigView] = {}
    for c in sorted(candidates, key=lambda c: -c.speed):
        per_strategy.setdefault(c.strategy, c)
    lines = [_other_line(c, best, settlements.get(c.key), margin, inputs)
             for st, c in per_strategy.items() if st != best.strategy]
    for strategy in sorted({c.strategy for c in ranking.configs() if is_choice(c)}
                           - {c.strategy for c in choices}):
        lines.append(f"{strategy}: no successful run (see the failures below)")
    rec.others = lines + others
    return rec


@dataclass(frozen=True)
class PlaceComparisons:
    """Every pair of a place's candidates compared once, by its own evidence (the
    sessions that measured both, else their runs), at ``alpha``, with Holm's adjusted
    p-values over the place's comparisons (those with a measured noise), in two
    families: the direction claims (which one is faster: ``Settlement.p_value``) and
    the claims against the margin (beyond it, or shown within it:
    ``Settlement.margin_p``). A pair is shown apart, for the place, where its adjusted
    p-value is at most ``alpha``, and its margin claim stands for the place where that
    family's adjusted p-value is. So the chance that any configuration of a place is set
    aside, or an answer called faster, by a difference that is not there stays at most
    ``alpha`` per place; and a place's rows, read together, say "beyond the margin" or
    "within it" wrongly no more often than one comparison alone would (Holm over the
    comparisons whose margin claim is false). Pair by pair, four configurations exactly
    at the margin below the simplest gave 16.7% of places a false margin row
    (``scripts.error_rates``, case ``margin``): each more comparison added its own
    chance to the place's."""

    by_pair: Mapping[tuple[str, str], tuple[Settlement, float]]
    configs: Mapping[str, ConfigView]
    alpha: float
    margin: float
    # Holm's adjusted p-value of each pair's margin claim (absent: none measured).
    margin_adjusted: Mapping[tuple[str, str], float] = field(default_factory=dict)

    @classmethod
    def of(cls, candidates: Sequence[ConfigView], margin: float,
           alpha: float = DEFAULT_ALPHA) -> PlaceComparisons:
        """Compare every pair of ``candidates`` (candidate / reference = later / earlier
        in their order by speed: ``ConfigView.speed``)."""
        ordered = sorted(candidates, key=lambda c: -c.speed)
        found = [((a.key, b.key), s) for i, a in enumerate(ordered) for b in ordered[i + 1:]
                 if (s := settle_of(b, a, margin, alpha)) is not None]
        return cls({pair: (s, adjusted) for (pair, s), adjusted in
                    zip(found, _holm([s.p_value for _, s in found]), strict=True)},
                   {c.key: c for c in candidates}, alpha, margin,
                   {pair: adjusted for (pair, s), adjusted in
                    zip(found, _holm([s.margin_p for _, s in found]), strict=True)
                    if s.margin_p is not None})

    def _pair(self, a: ConfigView, b: ConfigView) -> tuple[Settlement, float, float] | None:
        """b / a's settlement and its adjusted p-values, of its direction and of its
        margin claim (None: not compared)."""
        if (a.key, b.key) in self.by_pair:
            s, adjusted = self.by_pair[(a.key, b.key)]
            return s, adjusted, self.margin_adjusted.get((a.key, b.key), 1.0)
        if (b.key, a.key) in self.by_pair:
            s, adjusted = self.by_pair[(b.key, a.key)]
            return s.flipped(), adjusted, self.margin_adjusted.get((b.key, a.key), 1.0)
        return None

    def beaten(self) -> dict[str, tuple[ConfigView, Settlement]]:
        """The candidates some other is shown faster than for the place (Holm), each with
        the fastest such other and the comparison (candidate / other), read as the place
        reads it (``place_level``)."""
        out: dict[str, tuple[ConfigView, Settlement]] = {}
        for (a_key, b_key), (s, adjusted) in self.by_pair.items():
            if s.direction is None or adjusted > self.alpha:
                continue
            slow, fast = ((b_key, a_key) if s.direction == SLOWER else (a_key, b_key))
            if slow not in out or self.configs[fast].speed > out[slow][0].speed:
                raw = s if s.direction == SLOWER else s.flipped()
                seen = self.against(self.configs[slow], self.configs[fast])
                # The direction is what sets it aside: kept, where the margin claim the
                # place does not keep could not be dropped without it.
                out[slow] = (self.configs[fast],
                             seen if seen is not None and seen.direction == SLOWER else raw)
        return out

    def against(self, c: ConfigView, best: ConfigView) -> Settlement | None:
        """c / best, read at the level where the place shows what it says
        (``place_level``): a comparison whose 95% interval leaves out 1 but that Holm's
        correction does not show apart, or whose margin claim the correction of those
        does not keep, is read again at that lower level, so that no line says "beyond
        the noise", "beyond the margin" or "within the margin" where the place does
        not."""
        found = self._pair(best, c)
        if found is None:
            return None
        s, adjusted, margin_adjusted = found
        level = place_level(s, adjusted, margin_adjusted, self.alpha)
        return s if level >= self.alpha else settle_of(c, best, self.margin, level)


def _holm(p_values: Sequence[float | None]) -> list[float]:
    """Holm's adjusted p-values of those measured, 1 for the others (None)."""
    tested = [i for i, p in enumerate(p_values) if p is not None]
    adjusted = holm_adjusted([p for p in p_values if p is not None])
    out = [1.0] * len(p_values)
    for i, a in zip(tested, adjusted, strict=True):
        out[i] = a
    return out


def place_level(s: Settlement, adjusted: float, margin_adjusted: float,
                alpha: float) -> float:
    """The level a comparison ``s`` (read at ``alpha``) is read at for its place, given
    Holm's adjusted p-values of its direction and its margin claim: ``alpha`` where the
    place keeps every claim ``s`` makes; else, for each claim the place does not keep,
    where its adjusted p-value would reach alpha (alpha x p / adjusted p), the lowest.
    A direction the place keeps is kept: where that level would lose it (the margin
    claim goes, the direction stays), the level lies between the two p-values."""
    levels = [alpha]
    direction_kept = s.direction is not None and adjusted <= alpha
    if s.direction is not None and not direction_kept and s.p_value is not None:
        levels.append(alpha * s.p_value / adjusted)
    margin_claim = s.verdict != NOT_SETTLED and s.margin_p is not None
    if margin_claim and margin_adjusted > alpha and s.margin_p is not None:
        levels.append(alpha * s.margin_p / margin_adjusted)
        if direction_kept and s.p_value is not None and s.p_value < s.margin_p:
            levels[-1] = max(levels[-1], math.sqrt(s.p_value * s.margin_p))
    return min(levels)


def beaten_by(candidates: Sequence[ConfigView], margin: float,
              alpha: float = DEFAULT_ALPHA) -> dict[str, tuple[ConfigView, Settlement]]:
    """The candidates some other candidate is shown faster than beyond the noise, over
    the place's comparisons (``PlaceComparisons``), each with the fastest such other and
    the comparison (candidate / other)."""
    return PlaceComparisons.of(candidates, margin, alpha).beaten()


def cannot_displace(c: ConfigView, best: ConfigView, s: Settlement | None) -> bool:
    """``c`` cannot change an answer of ``best``: it is no simpler, and the evidence
    (``s``: c / best) shows it does not beat ``best`` by more than the margin (the upper
    end of its 90% interval against ``best`` below 1 + margin: a one-sided test at 5%).
    Slower, or within the margin where the simplest wins: ``best`` either way."""
    if c.simplicity <= best.simplicity:
        return False
    return s is not None and s.decided and s.eq_high < 1.0 + s.margin


def place_of(machine_id: str, variant: Variant, ranking: Ranking) -> str:
    """Where an answer applies, machine first: ``[b6cb04ca4bdc] mlp, global batch 256``."""
    return f"[{machine_id}] {variant.label()}, {ranking.label}"


def answer_workload(variant: Variant, configs: list[ConfigView], machine: Machine,
                    scaling: dict[str, Scaling], inputs: RuleInputs,
                    looks: Looks | None = None) -> WorkloadAnswer:
    """Rank ``configs`` of one variant per batch setting and recommend at each, each
    read at the alpha of its place's last look (``looks``; the full alpha without)."""
    looks = looks or Looks()
    rankings = rankings_for(configs)
    return WorkloadAnswer(variant, configs, rankings, [
        recommend(rk, machine, scaling, inputs, configs,
                  alpha=looks.alpha(place_of(machine.machine_id, variant, rk)))
        for rk in rankings])
