"""The decision of each place: rank its configurations and say which one to use.

One answer per place (machine, workload, batch setting), comparing configurations of
one variant only. The answer is never a configuration the data shows slower; it is
FASTER, EQUIVALENT, STANDS, NOT SETTLED at this precision, or ALONE. This module
decides; the sentences that say why (``reports.recommend``) are written from the
``Recommendation`` it returns. The rules, and why they are so:
docs/how-it-decides.md ("The answer").
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from bench.answers.basis import Basis
from bench.answers.configs import ConfigView, Noise, Ratio, noise_of, settle_of
from bench.answers.runs import Variant
from bench.answers.scaling import Scaling
from bench.answers.sequential import Looks
from bench.results.levels import DEFAULT_ALPHA
from bench.results.stats.distributions import holm_adjusted
from bench.results.stats.settlement import (
    DEFAULT_MARGIN,
    EQUIVALENT,
    FASTER,
    NOT_SETTLED,
    SLOWER,
    Settlement,
)
from bench.strategies import STRATEGIES


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
    # What it was decided from: its machine's configurations (``Basis``) and every
    # configuration of its workload variant (``pool``, other batch settings too). The
    # reports write its sentences from them (``reports.recommend.phrased``).
    basis: Basis | None = field(default=None, repr=False, compare=False)
    pool: Sequence[ConfigView] = field(default=(), repr=False, compare=False)
    # Its sentences, written by the reports: the answer in full, and a line for every
    # other configuration of the ranking ("" and none where only decided).
    text: str = ""
    others: list[str] = field(default_factory=list)
    # Runs of its place that finished after the look that settled it: the answer is
    # the one that look read (``bench.answers.places``), and says how many it left.
    unread: int = 0

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



def open_comparisons(r: Recommendation) -> list[tuple[ConfigView, Settlement]]:
    """The comparisons an unsettled answer leaves open, each against the answer."""
    return [(c, r.settlements[c.key]) for c in r.unsettled]


def hardest_open(r: Recommendation) -> tuple[ConfigView, Settlement] | None:
    """The open comparison that takes the most to settle (noise unmeasured, then a plan
    beyond reach, then the most runs or pairs): what the answer waits for."""
    def hardness(pair: tuple[ConfigView, Settlement]) -> tuple[int, int]:
        s = pair[1]
        return (2, 0) if s.sd_log is None else (1, 0) if s.needed is None else (0, s.needed)

    return max(open_comparisons(r), key=hardness, default=None)



def circle_of(start: str, beaten: Mapping[str, tuple[ConfigView, Settlement]]) -> list[str]:
    """The keys of the circle the evidence runs in, from ``start`` on: each is shown
    slower than the next (``beaten``), the last than the first."""
    path = [start]
    while (nxt := beaten[path[-1]][0].key) not in path:
        path.append(nxt)
    return path[path.index(nxt):]


def _circle(ranking: Ranking, candidates: Sequence[ConfigView],
            beaten: dict[str, tuple[ConfigView, Settlement]], margin: float,
            alpha: float) -> Recommendation:
    """NOT SETTLED with no answer: every candidate is shown slower than another, so the
    evidence runs in a circle (runs against pairs, or sessions holding different arms);
    its configurations (``unsettled``) are what to measure again."""
    by_key = {c.key: c for c in candidates}
    fastest = max(candidates, key=lambda c: c.speed)
    members = sorted((by_key[k] for k in circle_of(fastest.key, beaten)),
                     key=lambda c: c.simplicity)
    return Recommendation(ranking, None, NOT_SETTLED, fastest, unsettled=members,
                          spread=noise_of(candidates), margin=margin, beaten=beaten,
                          alpha=alpha)


def _unprofiled(configs: list[ConfigView]) -> list[ConfigView]:
    """One configuration per choice: a profiled run pays the profiler's overhead, so an
    unprofiled twin stands for the choice where there is one."""
    by_choice: dict[str, ConfigView] = {}
    for c in sorted(configs, key=lambda c: bool(c.result.spec.profile_steps)):
        by_choice.setdefault(c.choice, c)
    return [c for c in configs if by_choice[c.choice] is c]



@dataclass(frozen=True)
class Candidates:
    """A ranking's successful configurations, as an answer sorts them: the baselines
    (``ceilings``: not a way to train one model), the ``choices``, those of them
    ``apart`` (a per-worker batch in a global-batch ranking is more work per step), and
    the ``candidates`` the answer is chosen among (the rest, one per choice)."""

    everything: list[ConfigView]
    ceilings: list[ConfigView]
    choices: list[ConfigView]
    apart: list[ConfigView]
    candidates: list[ConfigView]

    @classmethod
    def of(cls, ranking: Ranking) -> Candidates:
        everything = ranking.ok_configs()
        choices = [c for c in everything if is_choice(c)]
        apart = [c for c in choices if c.batch_per_worker and ranking.batch_mode == "global"]
        return cls(everything, [c for c in everything if not is_choice(c)], choices, apart,
                   _unprofiled([c for c in choices if c not in apart]))


def decide(ranking: Ranking, basis: Basis, pool: Sequence[ConfigView] = (),
           margin: float = DEFAULT_MARGIN, alpha: float = DEFAULT_ALPHA) -> Recommendation:
    """The configuration to use at one batch setting, and what settled it.

    ``basis``: the machine's configurations and their scaling (a super-ideal speed-up
    is flagged, never dropped). ``pool``: every configuration of the workload variant
    (other batch settings too), kept for the sentences about per-worker batches.
    ``margin``: the relative change within which two configurations count as
    equivalent. ``alpha``: the level the comparisons are read at (a budget's look:
    ``bench.answers.sequential``).
    """
    candidates = Candidates.of(ranking).candidates
    if not candidates:
        return Recommendation(ranking, None, margin=margin, alpha=alpha, basis=basis,
                              pool=pool)
    flagged = [c for c in candidates if super_ideal(c, basis.scaling) is not None]
    # Only a configuration no other is shown faster than beyond the noise may be the
    # answer, settled or for now: the simplest of the rest would otherwise win while the
    # data shows it slower by a gap not yet pinned against the margin. "Shown" is read
    # over the place's comparisons together (Holm): each pair at 95% set one of five
    # equal configurations aside in 21% of places.
    family = PlaceComparisons.of(candidates, margin, alpha)
    beaten = family.beaten()
    eligible = [c for c in candidates if c.key not in beaten]
    if not eligible:
        return replace(_circle(ranking, candidates, beaten, margin, alpha), basis=basis,
                       pool=pool)
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
    return Recommendation(
        ranking, best, kind, fastest, sorted(equivalent, key=lambda c: c.simplicity),
        sorted(open_, key=lambda c: c.simplicity), settlements, noise_of(candidates),
        flagged, margin, sorted(bounded, key=lambda c: c.simplicity), beaten, alpha,
        basis, pool)


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


def answer_workload(variant: Variant, configs: list[ConfigView], basis: Basis,
                    looks: Looks | None = None) -> WorkloadAnswer:
    """Rank ``configs`` of one variant per batch setting and decide at each, each read
    at the alpha of its place's last look (``looks``; the full alpha without)."""
    looks = looks or Looks()
    rankings = rankings_for(configs)
    return WorkloadAnswer(variant, configs, rankings, [
        decide(rk, basis, configs,
               alpha=looks.alpha(place_of(basis.machine.machine_id, variant, rk)))
        for rk in rankings])
