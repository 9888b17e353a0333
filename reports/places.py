"""What is open: the one view of a sweep's answers that the adaptive sweep reads.

The budget (``bench.adaptive``) decides what to measure next from this alone: where
each answer applies, whether it is still open, the configurations its open comparisons
need, and every configuration measured at its place, so that it can keep one
process's arms together. It never reads a ``Recommendation`` (an import contract in
pyproject.toml keeps it so).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from bench.results.schema import RunResult
from bench.results.stats import NOT_SETTLED
from bench.spec import RunSpec
from reports.answers import AnswerRow, answer_row, answers_text
from reports.recommend import Recommendation, place_of
from reports.report import build_from_results
from reports.runs import place_identity
from reports.sequential import Looks


@dataclass(frozen=True)
class Place:
    """One place's answer as the budget sees it.

    ``where``: machine first (``place_of``), the key of the budget's journaled looks;
    ``is_open``: a recommendation for now, not settled; ``needs``: the keys of its open
    comparisons' configurations (the answer, the fastest, those not settled against
    it); ``measured``: every successful configuration at the place, key -> spec.
    """

    where: str
    row: AnswerRow
    is_open: bool
    needs: tuple[str, ...]
    measured: Mapping[str, RunSpec]

    def holds(self, spec: RunSpec) -> bool:
        """Whether ``spec`` is a configuration of this place (on this place's machine:
        the sweep measures one)."""
        return any(place_identity(m) == place_identity(spec) for m in self.measured.values())


def _place(where: str, row: AnswerRow, rec: Recommendation) -> Place:
    needs = [c for c in (rec.best, rec.fastest, *rec.unsettled) if c is not None]
    return Place(where, row, rec.kind == NOT_SETTLED,
                 tuple(sorted({c.key for c in needs})),
                 {c.key: c.first.result.spec for c in rec.ranking.ok_configs()})


def places(results: Sequence[RunResult], source: Path, looks: Looks | None = None
           ) -> list[Place]:
    """Every place ``results`` answer, each read at its alpha in ``looks``."""
    report = build_from_results(results, source, looks=looks)
    return [_place(place_of(mr.machine.machine_id, w.variant, rec.ranking),
                   answer_row(mr.machine, w.variant, rec), rec)
            for mr in report.machines for w in mr.workloads for rec in w.recommendations]


def places_text(found: Sequence[Place], explain: bool = False,
                width: int | None = None) -> list[str]:
    """The places' answers as the terminal shows them (``reports.answers``), within
    ``width`` columns where one is given."""
    return answers_text([p.row for p in found], explain, width)
