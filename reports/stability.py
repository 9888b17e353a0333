"""Do two sweeps give the same answer? Their recommendations, compared per machine,
workload and batch.

A place is (machine, workload variant, batch setting): the machine is part of it, so
sweeps from two machines share no place and can never agree. At each place:

- ``agree``: both answers are settled (faster, equivalent within the margin, or the only
  configuration) and recommend the same configuration;
- ``equivalent-consistent``: both settled on different choices that each sweep showed
  within the margin of each other: equivalent, or its own choice faster beyond the noise
  by a gap the margin does not call (one truth, a gap under the margin, fits both);
- ``not settled``: either answer is not settled at its precision: nothing can agree yet;
- ``disagree``: both settled, on choices neither showed equivalent: the answer would
  have changed on a re-run;
- ``only in A`` / ``only in B`` / ``no answer``: nothing to compare there.

A check that can only pass when it compared something: sweeps that share fewer places
than either has (another matrix, another machine) or none at all fail it
(``shared_places``).

Each answer holds per place, at its own level, not jointly over the places: a sweep of
five places can be wrong somewhere far more often than one place is, and two such
sweeps disagree somewhere by chance alone more often still. So a disagreement is
weighed before it fails the check: its p-value (``disagreement_p``) says how far the
two sweeps' estimates of the two choices' ratio lie apart for their noise, and the
exit code counts it only where that survives Holm's correction over the places
compared (``corrected``): two sweeps whose answers are right at their levels then
fail it at most ``ALPHA`` of the time, however many places they share.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from bench.answers.recommend import place_of
from bench.exits import Exit
from bench.results.levels import DEFAULT_ALPHA
from bench.results.stats.distributions import holm_adjusted, t_sf, welch_satterthwaite
from bench.results.stats.settlement import EQUIVALENT, SLOWER
from reports.recommend import workload_lines
from reports.report import SweepReport

AGREE, CONSISTENT, NOT_SETTLED, DISAGREE = (
    "agree", "equivalent-consistent", "not settled", "disagree")
ONLY_A, ONLY_B, NO_ANSWER = "only in A", "only in B", "no answer"
VERDICTS = (AGREE, CONSISTENT, NOT_SETTLED, DISAGREE, ONLY_A, ONLY_B, NO_ANSWER)
# The familywise level of the exit code's disagreements over the places compared.
ALPHA = DEFAULT_ALPHA


@dataclass(frozen=True)
class Answer:
    """One sweep's recommendation at one machine, workload variant and batch setting."""

    where: str  # "[cpu-box] mlp, global batch 64": the machine first, always
    choice: str | None  # "one_device on 1 device"; None: nothing to recommend
    # The choices shown within the margin of the answer (itself excluded), by an
    # equivalence test against it.
    within: frozenset[str]
    summary: str  # the answer line as the report prints it
    settled: bool = True
    half_width: float | None = None  # of the interval the answer rests on (0.05: +-5%)
    # Candidates the sweep shows faster than its answer beyond the noise (a broken rule).
    beaten_by: tuple[str, ...] = ()
    # Choices the answer is shown faster than beyond the noise, by a gap not shown beyond
    # the margin: what it says of them fits a sweep that shows them within the margin.
    faster_near: frozenset[str] = frozenset()
    # Every other choice the sweep compared with its answer: (choice, log of its ratio
    # to the answer, standard error, degrees of freedom).
    versus: tuple[tuple[str, float, float, float], ...] = ()

    def estimate(self, choice: str) -> tuple[float, float, float] | None:
        """log(choice / the answer), its standard error and df (None: not compared)."""
        return next(((d, se, df) for c, d, se, df in self.versus if c == choice), None)


def answers_of(report: SweepReport) -> dict[str, Answer]:
    """Every recommendation of ``report``, keyed by where it applies (machine first)."""
    out: dict[str, Answer] = {}
    for mr in report.machines:
        for w in mr.workloads:
            for rec, line in zip(w.recommendations, workload_lines(w), strict=True):
                where = place_of(mr.machine.machine_id, w.variant, rec.ranking)
                # Every choice the sweep showed within the margin of its answer, also one
                # set aside because a third was shown faster than it (the answer the
                # simplest of the others): the sweep showed it equivalent all the same.
                within = [c.choice for c in rec.ranking.ok_configs() if c.key in rec.settlements
                          and rec.settlements[c.key].verdict == EQUIVALENT]
                near = [c.choice for c in rec.ranking.ok_configs() if c.key in rec.settlements
                        and rec.settlements[c.key].beyond_noise_only
                        and rec.settlements[c.key].direction == SLOWER]
                versus = tuple((c.choice, math.log(s.ratio), s.se, s.df)
                               for c in rec.ranking.ok_configs() if c.key in rec.settlements
                               for s in (rec.settlements[c.key],) if s.se is not None)
                out[where] = Answer(where, rec.best.choice if rec.best else None,
                                    frozenset(within), line, rec.settled, rec.half_width,
                                    tuple(c.choice for c in rec.shown_faster_than_it),
                                    frozenset(near), versus)
    return out


@dataclass(frozen=True)
class Agreement:
    """How the two sweeps' answers at one place relate (one of ``VERDICTS``)."""

    where: str
    verdict: str
    a: Answer | None
    b: Answer | None
    # A disagreement's Holm-adjusted p-value over the places compared (``corrected``);
    # None where there is none.
    adjusted: float | None = None

    @property
    def p_value(self) -> float | None:
        """A disagreement's own p-value (``disagreement_p``); None elsewhere."""
        if self.verdict != DISAGREE or self.a is None or self.b is None:
            return None
        return disagreement_p(self.a, self.b)

    def line(self) -> str:
        def side(x: Answer | None) -> str:
            if x is None:
                return "-"
            if x.choice is None:
                return "no recommendation"
            return ((x.choice if x.settled else f"not settled, {x.choice} for now")
                    + (f" (equivalent to {', '.join(sorted(x.within))})" if x.within else "")
                    + (f" (faster than {', '.join(sorted(x.faster_near))}, the margin open)"
                       if x.faster_near else ""))
        weighed = ""
        if self.verdict == DISAGREE:
            p = self.p_value
            weighed = (" (the sweeps did not both compare the two choices)" if p is None
                       else f" (p={p:.2g}" + (f"; {self.adjusted:.2g} over the places "
                                              f"compared, Holm" if self.adjusted is not None
                                              else "") + ")")
        return f"{self.verdict:21s} {self.where}: A {side(self.a)} | B {side(self.b)}{weighed}"


def disagreement_p(a: Answer, b: Answer) -> float | None:
    """How far two sweeps' readings of one place lie apart for their noise: A answered
    X and B answered Y; each sweep estimated log(Y / X) (A from Y against its answer, B
    from X against its own, turned round), and their difference over its standard
    error is read as Welch's t (Welch-Satterthwaite df), two-sided. If both sweeps
    measure one truth the p-value is uniform, so it can be corrected over places; None
    where either sweep did not compare the two choices (the configurations they measured
    differ: not a matter of noise)."""
    if a.choice is None or b.choice is None:
        return None
    in_a, in_b = a.estimate(b.choice), b.estimate(a.choice)
    if in_a is None or in_b is None:
        return None
    (da, sa, dfa), (db, sb, dfb) = in_a, in_b
    se = math.hypot(sa, sb)
    gap = abs(da + db)  # A's log(Y/X) minus B's: B's estimate is log(X/Y)
    if se <= 0:
        return 1.0 if gap < 1e-12 else 0.0
    df = welch_satterthwaite([(sa * sa, max(dfa, 1.0)), (sb * sb, max(dfb, 1.0))])
    return min(1.0, 2.0 * t_sf(gap / se, df))


def agreement(a: Answer | None, b: Answer | None) -> str:
    """The verdict for one place (see the module docstring)."""
    if a is None:
        return ONLY_B
    if b is None:
        return ONLY_A
    if a.choice is None or b.choice is None:
        return NO_ANSWER
    if not a.settled or not b.settled:
        return NOT_SETTLED
    if a.choice == b.choice:
        return AGREE
    # Each within the margin of the other as its own sweep showed it, one of them at
    # least by an equivalence test (two sweeps each showing its choice faster than the
    # other's contradict each other).
    if (b.choice in a.within and a.choice in b.within | b.faster_near) or \
            (a.choice in b.within and b.choice in a.within | a.faster_near):
        return CONSISTENT
    return DISAGREE


def compare_answers(a: SweepReport, b: SweepReport) -> list[Agreement]:
    """One Agreement per place either sweep answers, in a stable order, each
    disagreement with its p-value corrected over the places compared."""
    left, right = answers_of(a), answers_of(b)
    return corrected([Agreement(where, agreement(left.get(where), right.get(where)),
                                left.get(where), right.get(where))
                      for where in sorted(left.keys() | right.keys())])


def corrected(rows: Sequence[Agreement]) -> list[Agreement]:
    """``rows`` with each disagreement's Holm-adjusted p-value over the places both
    sweeps answer (every one of them a hypothesis, agreeing ones at p 1: which places
    disagree is itself read from the data). A disagreement the sweeps cannot weigh (no
    p-value) counts as p 0: nothing in the noise explains it."""
    compared = [i for i, r in enumerate(rows) if r.a is not None and r.b is not None]
    p_values = [0.0 if (p := rows[i].p_value) is None and rows[i].verdict == DISAGREE
                else 1.0 if p is None else p for i in compared]
    adjusted = dict(zip(compared, holm_adjusted(p_values), strict=True))
    return [Agreement(r.where, r.verdict, r.a, r.b,
                      adjusted[i] if r.verdict == DISAGREE else None)
            for i, r in enumerate(rows)]


def disagreements(rows: Sequence[Agreement]) -> list[Agreement]:
    """Every place whose two settled answers differ, counted or not."""
    return [r for r in rows if r.verdict == DISAGREE]


def counted(rows: Sequence[Agreement], alpha: float = ALPHA) -> list[Agreement]:
    """The disagreements that survive Holm's correction over the places compared at
    ``alpha``: what the exit code fails on."""
    return [r for r in disagreements(rows) if r.adjusted is not None and r.adjusted <= alpha]


def shared_places(rows: Sequence[Agreement]) -> str | None:
    """Why the two sweeps cannot be compared, or None: they must share every place
    either has (the same matrix on the same machine), and at least one."""
    shared = sum(1 for r in rows if r.a is not None and r.b is not None)
    in_a = sum(1 for r in rows if r.a is not None)
    in_b = sum(1 for r in rows if r.b is not None)
    if shared and shared == in_a == in_b:
        return None
    return (f"the sweeps share {shared} place(s) (machine, workload, batch); A has {in_a} "
            f"and B {in_b}: not two sweeps of the same matrix on the same machine, so "
            f"their agreement would say nothing")


def median_half_width(rows: Sequence[Agreement], side: str | None = None) -> float | None:
    """The median relative half-width of the intervals the answers rest on, over both
    sweeps (``side`` "a" or "b": one of them); None where no answer has one."""
    answers = [x for r in rows for x in ((r.a, r.b) if side is None else
                                         (r.a if side == "a" else r.b,)) if x is not None]
    widths = [x.half_width for x in answers if x.half_width is not None]
    return statistics.median(widths) if widths else None


def exit_code(rows: Sequence[Agreement]) -> Exit:
    """USAGE when the sweeps cannot be compared, REGRESSION on a disagreement that
    survives the correction over the places compared (``counted``), CANNOT_TELL when
    some place is not settled (or has no answer) or disagrees within what that many
    places give by chance, else OK."""
    if shared_places(rows) is not None:
        return Exit.USAGE
    if counted(rows):
        return Exit.REGRESSION
    if any(r.verdict in (NOT_SETTLED, NO_ANSWER, DISAGREE) for r in rows):
        return Exit.CANNOT_TELL
    return Exit.OK


def verdict_counts(rows: Sequence[Agreement]) -> dict[str, int]:
    """How many places have each verdict (every verdict, zero included)."""
    return {v: sum(1 for r in rows if r.verdict == v) for v in VERDICTS}


def verdict_line(rows: Sequence[Agreement]) -> str:
    """The exit code in words, with what it rests on: the script's answer in one line."""
    code = exit_code(rows)
    counts = verdict_counts(rows)
    if code == Exit.USAGE:
        return f"verdict: the two sweeps cannot be compared (exit {code:d})"
    if code == Exit.REGRESSION:
        return (f"verdict: the answer changed at {len(counted(rows))} place(s), beyond what "
                f"the places compared give by chance (exit {code:d})")
    if code == Exit.CANNOT_TELL:
        why = {NOT_SETTLED: "not settled", NO_ANSWER: "with no answer",
               DISAGREE: "disagreeing within what that many places give by chance"}
        found = ", ".join(f"{counts[verdict]} place(s) {words}"
                          for verdict, words in why.items() if counts[verdict])
        return (f"verdict: cannot tell yet (exit {code:d}): {found}; sweeps with a longer "
                f"budget settle more places")
    held = ", ".join(f"{counts[v]} {v}" for v in (AGREE, CONSISTENT) if counts[v])
    return f"verdict: the answers hold at every place compared: {held} (exit {code:d})"


def _pct(value: float | None) -> str:
    return f"{value:.1%}" if value is not None else "n/a"


def stability_text(rows: Sequence[Agreement]) -> str:
    """The table the stability script prints, a count, the verdict (``verdict_line``) and
    the precision of the answers (the last line: ``median half-width: X%``)."""
    counts = verdict_counts(rows)
    tail = ", ".join(f"{n} {v}" for v, n in counts.items() if n)
    lines = [*(r.line() for r in rows),
             f"{len(rows)} place(s) compared: {tail or 'nothing to compare'}"]
    if (why := shared_places(rows)) is not None:
        lines.append(f"cannot compare: {why}")
    shared = sum(1 for r in rows if r.a is not None and r.b is not None)
    found = disagreements(rows)
    lines.append(
        f"each answer holds per place, not jointly across places: disagreements are "
        f"weighed over the {shared} place(s) compared (Holm at {ALPHA:.0%}): "
        + (f"{len(counted(rows))} of {len(found)} beyond what that many places give by "
           f"chance" if found else "none"))
    beaten = [f"{label} {x.where}: {x.choice} (slower than {', '.join(x.beaten_by)})"
              for r in rows for label, x in (("A", r.a), ("B", r.b))
              if x is not None and x.beaten_by]
    lines.append("answers shown slower beyond the noise than another configuration: "
                 + ("; ".join(beaten) if beaten else "none"))
    lines.append(verdict_line(rows))
    lines += [f"half-widths of the answers' intervals: A {_pct(median_half_width(rows, 'a'))}, "
              f"B {_pct(median_half_width(rows, 'b'))} (medians)",
              f"median half-width: {_pct(median_half_width(rows))}"]
    return "\n".join(lines)
