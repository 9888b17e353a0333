"""The answers at a glance: one row per place, made from a ``Recommendation``'s fields.

A row says where (workload, batch), what to use, what kind of answer it is, against
what and by how much (the answer against that configuration, with its interval), the
noise, and what it would take to settle. The full sentence (``answer_line``) rides
along for ``--explain`` and the collapsed details of the HTML and Markdown reports.
Every cell comes from typed fields (the settlements, the noise as figures), never
from the sentence's text.
"""

from __future__ import annotations

import itertools
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from bench.answers.configs import ConfigView
from bench.answers.places import answered
from bench.answers.recommend import ALONE, STANDS, Recommendation, hardest_open
from bench.answers.runs import Machine, Variant
from bench.answers.sequential import Looks
from bench.answers.worth import worth
from bench.results.schema import RunResult
from bench.results.stats.settlement import (
    EQUIVALENT,
    FASTER,
    MAX_PLANNED,
    NOT_SETTLED,
    PAIRS,
    RUNS,
    Settlement,
)
from reports.recommend import answer_line, change_of, phrased, shown_change
from reports.report import MachineReport, SweepReport
from reports.worth import worth_sentence

HEADERS = ("place", "answer", "kind", "against", "answer vs it", "noise", "to settle")
# A row a person reads at a glance: about the median sentence of the docs this project
# measured itself against (16-17 words), with room for long workload labels.
MAX_ROW_WORDS = 25
NONE = "-"  # an empty cell
LEGEND = ("answer vs it: the answer's throughput against that configuration, 95% interval "
          "unless another level is named; (+n): n more like it")

# The kind of answer in a word or two (``ANSWER_KINDS``; "" is a place without one).
KIND_WORDS = {FASTER: "faster", EQUIVALENT: "equivalent", STANDS: "stands",
              NOT_SETTLED: "not settled", ALONE: "alone", "": "no answer"}
# A batch is global unless the row says otherwise (bench.spec.BATCH_MODES): a word saved.
BATCH_WORDS = {"global": "batch", "per_replica": "per-replica batch"}
# What a plan to settle counts, short (``Settlement.unit`` in words).
PLAN_UNITS = {RUNS: "runs each", PAIRS: "pairs"}


@dataclass(frozen=True)
class AnswerRow:
    """One place's answer as table cells (``HEADERS``), and its full sentence."""

    machine: str  # the machine's hardware line: rows of several machines are grouped by it
    place: str  # "cnn, global batch 64"
    answer: str  # "default on 1 device" (or why there is none)
    kind: str  # a word of KIND_WORDS
    against: str  # "central_storage on 2 devices", "... (+1)": one more comparison like it
    change: str  # the answer against it: "+7% [+4%, +11%]"
    noise: str  # "cv 3%"
    to_settle: str  # "~28 pairs"
    sentence: str  # "cnn, global batch 64: NOT SETTLED at this precision, ...": --explain
    # What the answer is worth, jointly over the place's comparisons and looks
    # (``reports.worth``): "use default on 1 device: no configuration is shown faster;
    # none is more than 4% faster (95%, ...)". Every rendering leads with it.
    worth: str = ""

    @property
    def cells(self) -> tuple[str, ...]:
        return (self.place, self.answer, self.kind, self.against, self.change, self.noise,
                self.to_settle)

    @property
    def words(self) -> int:
        """The row's default text in words (whitespace-separated, figures included)."""
        return len(" ".join(self.cells).split())


@dataclass(frozen=True)
class Versus:
    """The comparison a row shows: ``other`` against the answer as the recommendation
    keeps it (``other / answer``); ``shown``: the equivalence test's interval is the
    evidence; ``more``: how many further comparisons of the same standing there are."""

    other: ConfigView
    settlement: Settlement
    shown: bool = False
    more: int = 0

    @property
    def change(self) -> str:
        """The answer against ``other`` (positive: the answer is faster)."""
        s = self.settlement.flipped()
        return shown_change(s) if self.shown else change_of(s)

    @property
    def against(self) -> str:
        return self.other.choice + (f" (+{self.more})" if self.more else "")


def _top(configs: Sequence[ConfigView]) -> ConfigView:
    return max(configs, key=lambda c: c.throughput or 0.0)


def _faster(r: Recommendation) -> Versus | None:
    """The next best, shown slower beyond the noise."""
    d, runner = r.deciding, r.runner
    return Versus(runner, d) if d is not None and runner is not None else None


def _equivalent(r: Recommendation) -> Versus | None:
    """The fastest of those shown within the margin of the answer."""
    if not r.equivalent:
        return None
    c = _top(r.equivalent)
    return Versus(c, r.settlements[c.key], shown=True, more=len(r.equivalent) - 1)


def _stands(r: Recommendation) -> Versus | None:
    """The fastest of the open comparisons shown unable to change the answer."""
    if not r.bounded:
        return None
    c = _top(r.bounded)
    return Versus(c, r.settlements[c.key], shown=True, more=len(r.bounded) - 1)


def _not_settled(r: Recommendation) -> Versus | None:
    """The open comparison that takes the most to settle (what ``to settle`` counts)."""
    hardest = hardest_open(r)
    if hardest is None:
        return None
    return Versus(*hardest, more=len(r.unsettled) - 1)


# Per kind of answer, the comparison its row shows (None: nothing to compare with).
VERSUS: dict[str, Callable[[Recommendation], Versus | None]] = {
    FASTER: _faster, EQUIVALENT: _equivalent, STANDS: _stands, NOT_SETTLED: _not_settled,
    ALONE: lambda _: None}


def plan_cell(s: Settlement) -> str:
    """``~28 pairs``: what would settle an open comparison at the noise measured."""
    unit = PLAN_UNITS[s.evidence]
    if s.sd_log is None:
        return f"2+ {unit}"  # the noise is not measured yet
    if s.needed is None:
        return f">{MAX_PLANNED:,} {unit}"
    return f"~{s.needed:,} {unit}"


def answer_row(machine: Machine, variant: Variant, r: Recommendation) -> AnswerRow:
    """The row of one place's answer (``r``, of ``variant`` on ``machine``)."""
    place = f"{variant.label()}, {BATCH_WORDS[r.ranking.batch_mode]} {r.ranking.batch}"
    sentence = f"{variant.label()}, {answer_line(r)}"
    found = worth(r)
    what = f"{place}: {worth_sentence(found)}" if found is not None else f"{place}: {r.text}"
    if r.best is None:
        # No configuration to name: none ran, or the evidence runs in a circle (kind
        # NOT SETTLED, its text naming the circle).
        return AnswerRow(machine.hardware, place, r.text, KIND_WORDS[r.kind], NONE, NONE,
                         NONE, NONE, sentence, what)
    if r.kind not in VERSUS:
        raise ValueError(f"an answer's kind must be one of {sorted(VERSUS)}. "
                         f"Received: kind={r.kind!r}")
    vs = VERSUS[r.kind](r)
    hardest = hardest_open(r) if not r.settled else None
    answer = r.best.choice + (" (super-ideal)" if r.best in r.super_ideal else "")
    return AnswerRow(machine.hardware, place, answer, KIND_WORDS[r.kind],
                     vs.against if vs else NONE, vs.change if vs else NONE,
                     r.spread.short if r.spread is not None else NONE,
                     plan_cell(hardest[1]) if hardest is not None else NONE, sentence,
                     what)


def machine_rows(mr: MachineReport) -> list[AnswerRow]:
    """One machine's rows, workload by workload, batch by batch."""
    return [answer_row(mr.machine, w.variant, r) for w in mr.workloads
            for r in w.recommendations]


def answer_rows(report: SweepReport) -> list[AnswerRow]:
    """Every place's row, machine by machine."""
    return [row for mr in report.machines for row in machine_rows(mr)]


def text_table(headers: Sequence[str], rows: Sequence[Sequence[str]],
               indent: str = "  ", width: int | None = None) -> list[str]:
    """Left-aligned columns two spaces apart, for the terminal.

    Within ``width`` columns where one is given and a line a row would be wider: each
    row folds onto as few lines as fit (its columns in order, the lines after the
    first indented, each line's columns aligned across the rows, the header folded
    alike); narrower still, a row's first cell on a line and each other cell on one of
    its own under it, named by its header. Every cell is shown whole whatever the
    width: one wider than it overruns its line.
    """
    lines = _aligned(headers, rows, indent)
    if width is None or _widest(lines) <= width:
        return lines
    sub = indent + "  "
    n = len(headers)
    best: tuple[int, int, list[str]] | None = None
    for cuts in range(1, 2 ** (n - 1)):  # each bit a cut between two columns
        edges = [0, *(i + 1 for i in range(n - 1) if cuts >> i & 1), n]
        parts = [_aligned(headers[lo:hi], [r[lo:hi] for r in rows], sub if lo else indent)
                 for lo, hi in itertools.pairwise(edges)]
        widest = max(_widest(p) for p in parts)
        folded = [line for row in zip(*parts, strict=True) for line in row]
        if widest <= width and (best is None or (len(parts), widest) < best[:2]):
            best = (len(parts), widest, folded)
    if best is not None:
        return best[2]
    out = []
    for row in rows:
        out.append(indent + row[0])
        out += [f"{sub}{h}: {c}" for h, c in zip(headers[1:], row[1:], strict=True)]
    return out


def _aligned(headers: Sequence[str], rows: Sequence[Sequence[str]],
             indent: str) -> list[str]:
    widths = [max(len(str(x)) for x in col) for col in zip(headers, *rows, strict=True)]
    return [indent + "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
            for row in (headers, *rows)]


def _widest(lines: Sequence[str]) -> int:
    return max((len(line) for line in lines), default=0)


def _wrapped(text: str, indent: str, width: int | None, more: str = " ") -> list[str]:
    """``text`` after ``indent``, on lines of at most ``width`` columns where one is
    given (a word is never broken; the lines after the first indented by ``more``)."""
    if width is None:
        return [indent + text]
    return textwrap.wrap(text, width, initial_indent=indent, subsequent_indent=indent + more,
                         break_long_words=False, break_on_hyphens=False)


def answers_text(rows: Sequence[AnswerRow], explain: bool = False,
                 width: int | None = None) -> list[str]:
    """The terminal's answers: a table per machine (headed by it where there are
    several), then, with ``explain``, each answer's full sentence. ``width``: the
    columns the lines may take (``text_table``; None: as wide as the cells)."""
    machines = list(dict.fromkeys(r.machine for r in rows))
    out: list[str] = []
    for m in machines:
        if len(machines) > 1:
            out.append(f"  on {m}:")
        mine = [r for r in rows if r.machine == m]
        # What each answer is worth first: the sentence a user acts on.
        for r in mine:
            out += _wrapped(r.worth, "  ", width, more="    ")
        out.append("")
        out += text_table(HEADERS, [r.cells for r in mine], width=width)
    if not rows:
        return out
    out += _wrapped(f"({LEGEND}" + ("" if explain else "; --explain: each answer in full") + ")",
                    "  ", width)
    if explain:
        many = len(machines) > 1
        out += ["", "the answers in full:"]
        for r in rows:
            out += _wrapped(f"{f'[{r.machine}] ' if many else ''}{r.worth}. {r.sentence}",
                            "  ", width, more="  ")
    return out


def answers_lines(results: Sequence[RunResult], looks: Looks | None = None,
                  explain: bool = False, width: int | None = None) -> list[str]:
    """The terminal's answers of ``results`` (``answers_text``), each read at its alpha
    in ``looks``, from their decisions alone (``bench.answers.places``: no report
    built): what a budgeted sweep shows of its provisional answers."""
    return answers_text([answer_row(ma.basis.machine, w.variant, phrased(rec))
                         for ma in answered(results, looks) for _, w, rec in ma.placed()],
                        explain, width)


def recommendations_text(report: SweepReport, explain: bool = False,
                         width: int | None = None) -> str:
    """What to use at every place, for the terminal (``bench report``, the end of
    ``bench run``): the answers' table, and with ``explain`` their sentences; within
    ``width`` columns where one is given (``answers_text``)."""
    rows = answer_rows(report)
    if not rows:
        return "recommendations: none"
    return "\n".join(["recommendations: one row per place",
                      *answers_text(rows, explain, width)])
