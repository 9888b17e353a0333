"""Every figure a report shows, in one list: header, cell text, CSV name, definition.

A run's own figures come from the result schema's catalogue
(``bench.results.figures.FIGURES``): each field of ``Figures`` (or of a dataclass inside
it) labelled in its metadata (``bench.results.schema.unit(..., label=...)``) is a column
of the ranking tables (unless it is a ``detail``), of the CSV and of ``bench show``, a
TensorBoard metric, and its definition is printed with the others, all under the one
name the catalogue gives it. How a value is shown follows its unit (``DISPLAYS``).
Figures the report derives from several runs (scaling against baselines) are declared
here beside them (``SCALING_FIGURES``). So a labelled field added to the schema shows up
in every rendering without touching ``reports/``. A figure whose schema field names the
sibling that says why it is empty (``unit(..., why_missing=...)``) is never a bare dash:
its cell is ``n/a [k]`` and the table's ``Notes`` give the reason (the CSV has it in a
column of its own, ``reason_name``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field

from bench.answers.configs import ANSWER_DEFINITION, RUNS_DEFINITION, Ratio
from bench.answers.runs import IDEAL_BASELINE, ONE_DEVICE_BASELINES
from bench.answers.scaling import Scaling
from bench.results.figures import FIGURES, NOT_RECORDED, Figure
from bench.results.schema import DEFINITIONS
from reports.verdicts import THRESHOLDS_TEXT

MIB = 2**20
ONE_DEVICE = ONE_DEVICE_BASELINES[0]  # the preferred single-device reference, by name


def fmt_rate(value: float) -> str:
    """examples/s with sensible precision: 65,434 / 812.5 / 9.21."""
    if value >= 1000:
        return f"{value:,.0f}"
    if value >= 100:
        return f"{value:.1f}"
    return f"{value:.3g}"


def pct(value: float | None, digits: int = 0) -> str:
    return f"{value:.{digits}%}" if value is not None else "-"


def duration(seconds: float) -> str:
    """A time with its unit, as read: 1.62 ms, 3.1 s."""
    return f"{seconds * 1e3:.3g} ms" if seconds < 1 else f"{seconds:.3g} s"


def times(value: float | None) -> str:
    return f"{value:.2f}x" if value is not None else "-"


def times_ci(r: Ratio | None) -> str:
    """``1.80x [1.62-1.99]``; without an interval (one run a side) the value alone."""
    if r is None:
        return "-"
    if r.low is None or r.high is None:
        return f"{r.value:.2f}x"
    return f"{r.value:.2f}x [{r.low:.2f}-{r.high:.2f}]"


def pct_ci(r: Ratio | None) -> str:
    """``90% [81-99%]``; without an interval the value alone."""
    if r is None:
        return "-"
    if r.low is None or r.high is None:
        return f"{r.value:.0%}"
    return f"{r.value:.0%} [{r.low * 100:.0f}-{r.high:.0%}]"


def change_ci(r: Ratio | None) -> str:
    """current vs baseline as a signed change: ``-3% [-9%, +4%]``."""
    if r is None:
        return "-"
    text = _signed(r.value - 1)
    if r.low is not None and r.high is not None:
        text += f" [{_signed(r.low - 1)}, {_signed(r.high - 1)}]"
    return text


# Above this a change is shown as ``>+999%``: an interval at 1 degree of freedom and a
# small alpha (a budget's interim look) reaches +1e10%, a figure no one can read.
MAX_SHOWN_CHANGE = 9.99


def _signed(change: float) -> str:
    """``+5%``, ``-3%``; a change that rounds to nothing is ``0%``, never ``-0%``; one
    above ``MAX_SHOWN_CHANGE`` is ``>+999%``."""
    if change > MAX_SHOWN_CHANGE:
        return f">+{MAX_SHOWN_CHANGE:.0%}"
    text = f"{change:+.0%}"
    return "0%" if text in ("+0%", "-0%") else text


@dataclass(frozen=True)
class Display:
    """How a stored unit is shown: the unit in headers, a scale, a formatter."""

    unit: str
    scale: float
    text: Callable[[float], str]


# Keyed by the schema's unit string; ``ratio ...`` units share one entry.
DISPLAYS: dict[str, Display] = {
    "examples/s": Display("examples/s", 1.0, fmt_rate),
    "examples/s per replica": Display("examples/s", 1.0, fmt_rate),
    "s": Display("", 1.0, duration),  # step times in ms, start-up in s: the unit is in the cell
    "bytes": Display("MiB", 1 / MIB, lambda v: f"{v:,.0f}"),
    "FLOP/s": Display("GFLOP/s", 1e-9, lambda v: f"{v:,.1f}"),
    "ratio": Display("", 1.0, lambda v: f"{v:.1%}"),
}
_GENERIC = Display("", 1.0, lambda v: f"{v:.4g}")


def display(unit: str) -> Display:
    """The display of a schema unit (ratios as percentages; others as stored)."""
    if unit in DISPLAYS:
        return DISPLAYS[unit]
    if unit.startswith("ratio"):
        return DISPLAYS["ratio"]
    return _GENERIC


@dataclass(frozen=True)
class SchemaFigure(Figure):
    """A figure of the schema's catalogue with its report display (header, cell text)."""

    @property
    def header(self) -> str:
        shown = display(self.unit).unit
        return f"{self.label} ({shown})" if shown else self.label

    def text(self, value: float | None) -> str:
        if value is None:
            return "-"
        d = display(self.unit)
        return d.text(value * d.scale)


@dataclass
class Notes:
    """The footnotes of one table: why figures are missing from its cells, each reason
    numbered once with the rows it explains, so an empty cell never stands unexplained
    and a reason shared by every row is printed once."""

    found: dict[tuple[str, str], list[str]] = field(default_factory=dict)

    def mark(self, header: str, reason: str, row: str) -> str:
        """The cell of the figure under ``header``, missing in ``row`` for ``reason``:
        ``n/a [1]``, or ``- [1]`` where the result did not record why."""
        rows = self.found.setdefault((header, reason), [])
        if row not in rows:
            rows.append(row)
        number = list(self.found).index((header, reason)) + 1
        return f"{'-' if reason == NOT_RECORDED else 'n/a'} [{number}]"

    def lines(self) -> list[str]:
        """``[1] peak device memory (MiB) n/a for mirrored on 2 devices: <reason>``."""
        return [f"[{i}] {header} n/a for {', '.join(rows)}: {reason}"
                for i, ((header, reason), rows) in enumerate(self.found.items(), 1)]


SCHEMA_FIGURES: tuple[SchemaFigure, ...] = tuple(
    SchemaFigure(**{f.name: getattr(fig, f.name) for f in dataclasses.fields(Figure)})
    for fig in FIGURES)
TABLE_FIGURES = tuple(f for f in SCHEMA_FIGURES if not f.detail)


@dataclass(frozen=True)
class ScalingFigure:
    """A figure derived from a run and its baselines (see ``bench.answers.scaling``)."""

    name: str  # CSV column
    header: str
    define: str
    value: Callable[[Scaling], Ratio | None]
    as_percent: bool  # efficiencies as %, speed-ups as x
    optional: bool = False  # a column only when some row has a value
    brief: bool = True  # also in the Markdown tables (the HTML and the CSV have all)

    def text(self, value: Ratio | None) -> str:
        return pct_ci(value) if self.as_percent else times_ci(value)


SCALING_FIGURES: tuple[ScalingFigure, ...] = (
    ScalingFigure("speedup", "speed-up vs itself on 1 device",
                  "strong scaling (global batch fixed): speed-up = T(N) / T(1), T(1) being "
                  "the same strategy on 1 replica with the same global batch",
                  lambda s: s.speedup, as_percent=False, brief=False),
    ScalingFigure("strong_eff", "strong eff.", "strong-scaling efficiency = speed-up / N",
                  lambda s: s.strong_eff, as_percent=True),
    ScalingFigure("weak_eff", "weak eff.",
                  "weak scaling (per-replica batch fixed): efficiency = T(N) / (N x T(1)), "
                  "T(1) being the same strategy on 1 replica with batch = the per-replica "
                  "batch of the N-replica run", lambda s: s.weak_eff, as_percent=True),
    ScalingFigure("speedup_vs_single_device", f"vs {ONE_DEVICE} on 1 device",
                  f"speed-up against {' (or '.join(ONE_DEVICE_BASELINES)}"
                  f"{')' * (len(ONE_DEVICE_BASELINES) - 1)} on 1 device with the same "
                  f"global batch", lambda s: s.speedup_vs_one, as_percent=False),
    ScalingFigure("weak_eff_vs_single_device", f"weak eff. vs {ONE_DEVICE}",
                  f"weak-scaling efficiency against {ONE_DEVICE} on 1 device: "
                  f"T(N) / (N x T_{ONE_DEVICE}(per-replica batch))",
                  lambda s: s.weak_eff_vs_one, as_percent=True, brief=False),
    ScalingFigure("eff_vs_ideal_baseline", f"vs {IDEAL_BASELINE}",
                  f"T(N) / T_{IDEAL_BASELINE}(N): the same N replicas as {IDEAL_BASELINE} "
                  f"copies (no communication) with the same per-replica batch; 100% means "
                  f"the strategy costs nothing beyond the hardware's own limits",
                  lambda s: s.vs_independent, as_percent=True, optional=True),
)


def definitions() -> dict[str, str]:
    """Every definition a report prints, by the header it explains (one list)."""
    out = {"runs and intervals": RUNS_DEFINITION, "recommendation": ANSWER_DEFINITION}
    out |= {topic.replace("_", " "): text for topic, text in DEFINITIONS.items()}
    out |= {f.header: f"{f.define} (named {f.name} in every output, in {f.unit}; "
                      f"{f.better} is better"
                      + (f"; judged by bench compare, family {f.family}" if f.family else "")
                      + (f"; where empty, n/a and a note say why, as the CSV's "
                         f"{f.reason_name} does" if f.reason_name else "") + ")"
            for f in SCHEMA_FIGURES}
    out |= {f.header: f"{f.define}. [low-high]: its 95% interval from the runs of both "
                      f"configurations (named {f.name} in the CSV and TensorBoard; the "
                      f"CSV's {f.name}_low, {f.name}_high)"
            for f in SCALING_FIGURES}
    out["verdicts"] = THRESHOLDS_TEXT
    return out
