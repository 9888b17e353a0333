"""Do two sweeps give the same answer? Their recommendations, compared per workload and batch.

A recommendation is stable when a second sweep of the same matrix (on the same
machine, at another time) recommends the same configuration, or when both call a
tie that contains the other's choice (the noise allows either, and both say so).
Anything else is a disagreement: the answer would have changed on a re-run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from reports.report import SweepReport

AGREE, TIE_CONSISTENT, DISAGREE = "agree", "tie-consistent", "disagree"
ONLY_A, ONLY_B, NO_ANSWER = "only in A", "only in B", "no answer"
VERDICTS = (AGREE, TIE_CONSISTENT, DISAGREE, ONLY_A, ONLY_B, NO_ANSWER)


@dataclass(frozen=True)
class Answer:
    """One sweep's recommendation at one workload variant and batch setting."""

    where: str  # "mlp, global batch 64" (machine first when a sweep spans several)
    choice: str | None  # "one_device on 1 device"; None: nothing to recommend
    tied: frozenset[str]  # choices tied with it (itself excluded)
    summary: str  # the answer line as the report prints it


def answers_of(report: SweepReport) -> dict[str, Answer]:
    """Every recommendation of ``report``, keyed by where it applies."""
    many = len(report.machines) > 1
    out: dict[str, Answer] = {}
    for mr in report.machines:
        for w in mr.workloads:
            for rec, line in zip(w.recommendations, w.lines(), strict=True):
                where = f"{w.variant.label()}, {rec.ranking.label}"
                if many:
                    where = f"[{mr.machine.machine_id}] {where}"
                out[where] = Answer(where, rec.best.choice if rec.best else None,
                                    frozenset(c.choice for c in rec.tied_with), line)
    return out


@dataclass(frozen=True)
class Agreement:
    """How the two sweeps' answers at one place relate (one of ``VERDICTS``)."""

    where: str
    verdict: str
    a: Answer | None
    b: Answer | None

    def line(self) -> str:
        def side(x: Answer | None) -> str:
            if x is None:
                return "-"
            if x.choice is None:
                return "no recommendation"
            return x.choice + (f" (tie with {', '.join(sorted(x.tied))})" if x.tied else "")
        return f"{self.verdict:15s} {self.where}: A {side(self.a)} | B {side(self.b)}"


def agreement(a: Answer | None, b: Answer | None) -> str:
    """The verdict for one place (see the module docstring)."""
    if a is None:
        return ONLY_B
    if b is None:
        return ONLY_A
    if a.choice is None or b.choice is None:
        return NO_ANSWER
    if a.choice == b.choice:
        return AGREE
    if b.choice in a.tied and a.choice in b.tied:
        return TIE_CONSISTENT
    return DISAGREE


def compare_answers(a: SweepReport, b: SweepReport) -> list[Agreement]:
    """One Agreement per place either sweep answers, in a stable order."""
    left, right = answers_of(a), answers_of(b)
    return [Agreement(where, agreement(left.get(where), right.get(where)), left.get(where),
                      right.get(where)) for where in sorted(left.keys() | right.keys())]


def disagreements(rows: Sequence[Agreement]) -> list[Agreement]:
    return [r for r in rows if r.verdict == DISAGREE]


def stability_text(rows: Sequence[Agreement]) -> str:
    """The table the stability script prints, and a one-line count."""
    counts = {v: sum(1 for r in rows if r.verdict == v) for v in VERDICTS}
    tail = ", ".join(f"{n} {v}" for v, n in counts.items() if n)
    return "\n".join([*(r.line() for r in rows),
                      f"{len(rows)} place(s) compared: {tail or 'nothing to compare'}"])
