"""The comparison table, as rows of formatted cells shared by the HTML and Markdown.

One place decides which columns exist and how each figure is formatted, so the two
renderings cannot disagree about a number.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from reports.recommend import Ranking, fmt_rate
from reports.report import MachineReport
from reports.runs import RunView
from reports.scaling import Scaling

MIB = 2**20


def pct(value: float | None) -> str:
    return f"{value:.0%}" if value is not None else "-"


def ratio(value: float | None) -> str:
    return f"{value:.2f}x" if value is not None else "-"


@dataclass(frozen=True)
class Column:
    header: str  # with its unit
    cell: Callable[[RunView, Scaling, MachineReport], str]
    optional: bool = False  # shown only when some row has a value
    cpu_header: str | None = None  # header on CPU-only machines, where it differs


def compact(value: float) -> str:
    """3 significant digits with k/M: 40.5k, 1.23M, 812."""
    for scale, suffix in ((1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{value / scale:.3g}{suffix}"
    return f"{value:.3g}"


def _spread(run: RunView, sc: Scaling, mr: MachineReport) -> str:
    rng = run.window_range
    if rng is None or run.cv is None:
        return "-"
    return f"{run.cv:.1%} ({compact(rng[0])}-{compact(rng[1])})"


def _memory(run: RunView, sc: Scaling, mr: MachineReport) -> str:
    peak = run.device_peak_bytes
    return f"{peak / MIB:,.0f}" if peak is not None else "-"


def _verdicts(run: RunView, sc: Scaling, mr: MachineReport) -> str:
    found = [v for v in mr.verdicts.get(run.key, []) if v.kind != "not measured"]
    return "; ".join(f"{v.kind} ({v.severity})" for v in found) or "-"


COLUMNS: tuple[Column, ...] = (
    Column("strategy", lambda r, s, m: r.strategy),
    Column("status", lambda r, s, m: r.status),
    Column("throughput (examples/s)", lambda r, s, m: fmt_rate(r.throughput)
           if r.throughput is not None else "-"),
    Column("per replica (examples/s)", lambda r, s, m: fmt_rate(r.throughput / r.replicas)
           if r.throughput is not None else "-"),
    Column("spread: cv (window min-max)", _spread),
    Column("step median (ms)", lambda r, s, m: f"{r.step_s * 1e3:.3g}"
           if r.step_s is not None else "-"),
    Column("speed-up vs itself on 1 device", lambda r, s, m: ratio(s.speedup)),
    Column("strong eff.", lambda r, s, m: pct(s.strong_eff)),
    Column("weak eff.", lambda r, s, m: pct(s.weak_eff)),
    Column("vs one_device on 1 device", lambda r, s, m: ratio(s.speedup_vs_one)),
    Column("weak eff. vs one_device", lambda r, s, m: pct(s.weak_eff_vs_one)),
    Column("vs independent", lambda r, s, m: pct(s.vs_independent), optional=True),
    Column("peak memory per device (MiB, largest)", _memory,
           cpu_header="peak memory (MiB, whole process)"),
    Column("collectives (% of step)", lambda r, s, m: pct(r.comm_fraction), optional=True),
    Column("MFU", lambda r, s, m: f"{r.mfu:.1%}" if r.mfu is not None else "-",
           optional=True),
    Column("verdicts", _verdicts),
)


@dataclass
class Table:
    headers: list[str]
    groups: list[tuple[int, list[list[str]]]]  # (replicas, rows ranked best first)
    keys: list[list[str]]  # result key per row, same shape as groups' rows


def comparison(rk: Ranking, mr: MachineReport) -> Table:
    """Strategies ranked at each replica count; optional columns only when used."""
    rows_by_n = {n: [(run, mr.scaling.get(run.key, Scaling())) for run in runs]
                 for n, runs in rk.by_replicas.items()}
    every = [rs for rows in rows_by_n.values() for rs in rows]
    cols = [c for c in COLUMNS
            if not c.optional or any(c.cell(r, s, mr) != "-" for r, s in every)]
    cpu = mr.machine.cpu_only
    headers = ["rank", *[c.cpu_header if cpu and c.cpu_header else c.header for c in cols]]
    groups, keys = [], []
    for n, rows in rows_by_n.items():
        cells = []
        for i, (run, sc) in enumerate(rows, 1):
            cells.append([str(i) if run.ok else "-", *[c.cell(run, sc, mr) for c in cols]])
        groups.append((n, cells))
        keys.append([run.key for run, _ in rows])
    return Table(headers, groups, keys)
