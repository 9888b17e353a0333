"""Every place's answer from stored results, without building a report.

``answered`` reads a sweep's results machine by machine (``basis_of``) and decides at
every place, each read at the alpha of its last look (``bench.answers.sequential``);
a place a look settled keeps the answer its settling look read. ``places`` is the one
view of those answers the adaptive sweep reads: where each answer applies, whether it
is still open, the configurations its open comparisons need, and every configuration
measured at its place, so that it can keep one process's arms together.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from bench.answers.basis import Basis, basis_of
from bench.answers.configs import ConfigView
from bench.answers.recommend import Recommendation, WorkloadAnswer, answer_workload, place_of
from bench.answers.runs import Variant, by_machine, place_identity, views
from bench.answers.sequential import Looks
from bench.results.schema import RunResult
from bench.results.stats.settlement import NOT_SETTLED
from bench.spec import RunSpec


@dataclass
class MachineAnswers:
    """One machine's configurations (``basis``) and its answers, workload by workload."""

    basis: Basis
    workloads: list[WorkloadAnswer]

    def placed(self) -> list[tuple[str, WorkloadAnswer, Recommendation]]:
        """Every answer with its place (``place_of``) and its workload variant."""
        return [(place_of(self.basis.machine.machine_id, w.variant, rec.ranking), w, rec)
                for w in self.workloads for rec in w.recommendations]


def answer_machine(basis: Basis, looks: Looks | None = None) -> MachineAnswers:
    """Answer every workload of ``basis``'s machine (each answer read at its place's
    last look)."""
    groups: dict[Variant, list[ConfigView]] = {}
    for config in basis.runs:
        # Probe-only runs (mode "allreduce") have no training figures: they appear in
        # the all-reduce section, not as a workload to rank.
        if config.variant.mode == "train":
            groups.setdefault(config.variant, []).append(config)
    return MachineAnswers(basis, [answer_workload(v, cs, basis, looks)
                                  for v, cs in sorted(groups.items(),
                                                      key=lambda kv: kv[0].label())])


def answered(results: Sequence[RunResult], looks: Looks | None = None
             ) -> list[MachineAnswers]:
    """The answers of ``results``, machine by machine (runs are never mixed across
    machines). ``looks``: the alpha each answer is read at (a budgeted sweep's journal;
    full alpha without)."""
    machines = [answer_machine(basis_of(m), looks) for m in by_machine(views(results))]
    if looks is not None and looks.settled_at:
        machines = _as_settled(machines, results, looks)
    return machines


def _when(iso: str) -> _dt.datetime | None:
    try:
        when = _dt.datetime.fromisoformat(iso)
    except ValueError:
        return None
    return when if when.tzinfo else when.replace(tzinfo=_dt.timezone.utc)


def _as_settled(machines: list[MachineAnswers], results: Sequence[RunResult],
                looks: Looks) -> list[MachineAnswers]:
    """``machines`` with each settled place's answer as its settling look read it: from
    the results finished by its settlement (``Looks.settled_at``), every configuration
    and the noise pool as they were then; the configurations' own figures stay
    those of every run."""
    then: dict[str, Recommendation] = {}
    for at in sorted(set(looks.settled_at.values())):
        until = _when(at)
        if until is None:
            continue
        stored = [r for r in results
                  if (finished := _when(r.finished_at)) is not None and finished <= until]
        for ma in (answer_machine(basis_of(m), looks.unsettled())
                   for m in by_machine(views(stored))):
            for where, _, rec in ma.placed():
                if looks.settled_at.get(where) == at:
                    then[where] = rec
    return [replace(ma, workloads=[replace(w, recommendations=[
        _read_then(then.get(place_of(ma.basis.machine.machine_id, w.variant, rec.ranking)),
                   rec) for rec in w.recommendations]) for w in ma.workloads])
            for ma in machines]


def _read_then(then: Recommendation | None, now: Recommendation) -> Recommendation:
    """The answer its settling look read (``then``), counting the runs of its place
    stored since (``now`` read them all); ``now`` where the place is not settled."""
    if then is None:
        return now
    runs = [sum(len(c.runs) for c in r.ranking.configs()) for r in (now, then)]
    return replace(then, unread=max(runs[0] - runs[1], 0))


@dataclass(frozen=True)
class Place:
    """One place's answer as the budget sees it.

    ``where``: machine first (``place_of``), the key of the budget's journaled looks;
    ``is_open``: a recommendation for now, not settled; ``needs``: the keys of its open
    comparisons' configurations (the answer, the fastest, those not settled against
    it); ``measured``: every successful configuration at the place, key -> spec.
    """

    where: str
    is_open: bool
    needs: tuple[str, ...]
    measured: Mapping[str, RunSpec]

    def holds(self, spec: RunSpec) -> bool:
        """Whether ``spec`` is a configuration of this place (on this place's machine:
        the sweep measures one)."""
        return any(place_identity(m) == place_identity(spec) for m in self.measured.values())


def _place(where: str, rec: Recommendation) -> Place:
    needs = [c for c in (rec.best, rec.fastest, *rec.unsettled) if c is not None]
    return Place(where, rec.kind == NOT_SETTLED, tuple(sorted({c.key for c in needs})),
                 {c.key: c.first.result.spec for c in rec.ranking.ok_configs()})


def places(results: Sequence[RunResult], looks: Looks | None = None) -> list[Place]:
    """Every place ``results`` answer, each read at its alpha in ``looks``."""
    return [_place(where, rec) for ma in answered(results, looks)
            for where, _, rec in ma.placed()]
