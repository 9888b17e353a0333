"""The comparison table, as rows of formatted cells shared by the HTML and Markdown.

One place decides which columns exist and how each figure is formatted, so the two
renderings cannot disagree about a number. The figure columns come from
``reports.columns``: the schema's labelled figures, then the scaling figures. A figure
that no run of a configuration has, where the schema says why, shows ``n/a [k]`` and
the reason in the table's notes, which both renderings print under the table.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from bench.answers.configs import ConfigView
from bench.answers.recommend import Ranking
from bench.answers.scaling import Scaling
from reports.columns import (
    SCALING_FIGURES,
    TABLE_FIGURES,
    Notes,
    ScalingFigure,
    SchemaFigure,
)
from reports.report import MachineReport


@dataclass(frozen=True)
class Column:
    header: str  # with its unit
    cell: Callable[[ConfigView, Scaling, MachineReport], str]
    optional: bool = False  # shown only when some row has a value
    brief: bool = True  # also in the Markdown tables
    # Why a configuration's cell is empty, where the schema says (see Notes).
    why: Callable[[ConfigView], str | None] | None = None

    def text(self, c: ConfigView, sc: Scaling, mr: MachineReport, notes: Notes) -> str:
        """The cell, or its footnote mark where the figure is missing for a stated reason."""
        shown = self.cell(c, sc, mr)
        reason = self.why(c) if self.why is not None and shown == "-" else None
        return notes.mark(self.header, reason, c.choice) if reason else shown


def compact(value: float) -> str:
    """3 significant digits with k/M: 40.5k, 1.23M, 812."""
    for scale, suffix in ((1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{value / scale:.3g}{suffix}"
    return f"{value:.3g}"


NOISE_HEADER = "noise: run-to-run cv (runs, range); window cv"


def _noise(c: ConfigView, sc: Scaling, mr: MachineReport) -> str:
    if not c.ok:
        return "-"
    windows = f"windows {c.within_cv:.1%}" if c.within_cv is not None else ""
    rng = c.run_range
    if c.between_cv is None or rng is None:
        return f"1 run; {windows}" if windows else "1 run"
    return (f"{c.between_cv:.1%} ({c.n_runs} runs, {compact(rng[0])}-{compact(rng[1])}); "
            f"{windows}")


def _verdicts(run: ConfigView, sc: Scaling, mr: MachineReport) -> str:
    found = [v for v in mr.verdicts.get(run.key, []) if v.kind != "not measured"]
    return "; ".join(f"{v.kind} ({v.severity})" for v in found) or "-"


def _schema_column(f: SchemaFigure) -> Column:
    return Column(f.header, lambda c, s, m: f.text(c.median_of(f.value)), optional=f.optional,
                  why=(lambda c: c.absence(f.absence)) if f.explained else None)


def _scaling_column(f: ScalingFigure) -> Column:
    return Column(f.header, lambda r, s, m: f.text(f.value(s)), optional=f.optional,
                  brief=f.brief)


COLUMNS: tuple[Column, ...] = (
    Column("strategy", lambda r, s, m: r.strategy),
    Column("status", lambda r, s, m: r.status),
    *(_schema_column(f) for f in TABLE_FIGURES),
    Column(NOISE_HEADER, _noise),
    *(_scaling_column(f) for f in SCALING_FIGURES),
    Column("verdicts", _verdicts),
)


@dataclass
class Table:
    headers: list[str]
    groups: list[tuple[int, list[list[str]]]]  # (replicas, rows ranked best first)
    keys: list[list[str]]  # configuration (result key) per row, same shape as groups' rows
    brief: list[bool]  # per header: also in the Markdown tables
    notes: list[str]  # why cells marked n/a [k] are empty, printed under the table


def comparison(rk: Ranking, mr: MachineReport) -> Table:
    """Strategies ranked at each replica count; optional columns only when used."""
    rows_by_n = {n: [(run, mr.scaling.get(run.key, Scaling())) for run in runs]
                 for n, runs in rk.by_replicas.items()}
    every = [rs for rows in rows_by_n.values() for rs in rows]
    notes = Notes()
    # An optional column needs a value somewhere: a figure no row has (energy on a
    # machine without a counter) is not a column of footnotes; the CSV keeps its reason.
    cols = [c for c in COLUMNS
            if not c.optional or any(c.cell(r, s, mr) != "-" for r, s in every)]
    headers = ["rank", *[c.header for c in cols]]
    groups, keys = [], []
    for n, rows in rows_by_n.items():
        cells = []
        for i, (run, sc) in enumerate(rows, 1):
            cells.append([str(i) if run.ok else "-",
                          *[c.text(run, sc, mr, notes) for c in cols]])
        groups.append((n, cells))
        keys.append([run.key for run, _ in rows])
    return Table(headers, groups, keys, [True, *[c.brief for c in cols]], notes.lines())
