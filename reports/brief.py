"""A workload's answers as a short table: what a reader needs in a minute.

One row per configuration a place could have answered with (the answer first), its
throughput, how it compares with the answer (the interval the answer read), where it
stands, and a one-line "because" where both profiles give a cause. Everything longer
(the answer's full text, the ranked tables, the verdicts) is what the renderings fold
away below it. Built from ``Recommendation`` fields, never from its sentences.
"""

from __future__ import annotations

from dataclasses import dataclass

from bench.answers.configs import ConfigView
from bench.answers.recommend import Recommendation, WorkloadAnswer
from bench.results.stats.settlement import EQUIVALENT, FASTER, SLOWER, Settlement
from reports.answers import KIND_WORDS
from reports.columns import fmt_rate
from reports.explain import because_line
from reports.recommend import change_of, shown_change

HEADERS = ("configuration", "examples/s", "vs the answer", "standing", "because (profiles)")
NONE = "-"
# Rows of one place beyond this (the answer and the four fastest others) are left to
# the ranked tables in the details: the short table stays a screen high for a matrix.
MAX_ROWS = 5


@dataclass(frozen=True)
class BriefRow:
    """One configuration of a place against that place's answer."""

    configuration: str  # "mirrored on 2 devices"
    throughput: str  # "1,104"
    versus: str  # "-3% [-11%, +5%]": it against the answer ("answer" on the answer's row)
    standing: str  # "slower", "equivalent", "open", ...
    because: str  # "+7.1 ms/step: communication +5.9 ms (CollectiveReduceV2)" or NONE

    @property
    def cells(self) -> tuple[str, ...]:
        return (self.configuration, self.throughput, self.versus, self.standing, self.because)


@dataclass(frozen=True)
class BriefPlace:
    """One place (batch setting) of a workload: its heading and rows."""

    heading: str  # "global batch 64: not settled, default on 1 device for now"
    rows: list[BriefRow]
    more: int  # rows left out beyond MAX_ROWS


def _standing(c: ConfigView, s: Settlement, r: Recommendation) -> str:
    """Where ``c`` stands against the answer, in a word or three."""
    if c in r.bounded:
        return "cannot beat it"
    if s.verdict == EQUIVALENT:
        return "equivalent"
    if s.verdict in (FASTER, SLOWER):
        return s.verdict
    if s.direction is not None:  # shown apart, not yet beyond the margin
        return f"{s.direction}, not past margin"
    return "open" if s.decided else "open, 1 run"


def _row(c: ConfigView, r: Recommendation) -> BriefRow:
    best = r.best
    assert best is not None
    s = r.settlements[c.key]
    versus = shown_change(s) if c in r.equivalent or c in r.bounded else change_of(s)
    # A cause is given only where the runs show it slower beyond the noise and the
    # margin, as the answer's own text does (reports.recommend, reports.explain).
    cause = because_line(c, best) if s.verdict == SLOWER else None
    return BriefRow(c.choice, fmt_rate(c.throughput or 0), versus, _standing(c, s, r),
                    cause or NONE)


def heading(r: Recommendation) -> str:
    """``global batch 64: not settled, default on 1 device for now``."""
    kind = KIND_WORDS[r.kind]
    if r.best is None:
        return f"{r.ranking.label}: {r.text}"  # why there is none
    return (f"{r.ranking.label}: {kind}, {r.best.choice}"
            + ("" if r.settled else " for now"))


def brief_place(r: Recommendation) -> BriefPlace:
    """The place's answer, then the others it was compared with, fastest first."""
    if r.best is None:
        return BriefPlace(heading(r), [], 0)
    others = sorted((c for c in r.ranking.ok_configs() if c.key in r.settlements),
                    key=lambda c: -c.speed)
    answer = BriefRow(r.best.choice, fmt_rate(r.best.throughput or 0), "answer",
                      KIND_WORDS[r.kind], NONE)
    rows = [answer, *(_row(c, r) for c in others)]
    return BriefPlace(heading(r), rows[:MAX_ROWS], max(0, len(rows) - MAX_ROWS))


def brief(w: WorkloadAnswer) -> list[BriefPlace]:
    """Every place of a workload, batch by batch."""
    return [brief_place(r) for r in w.recommendations]
