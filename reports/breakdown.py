"""A configuration's profiled step: the breakdown of its profiled runs, and its table.

Each profiled run stores where its step went (``Figures.breakdown``: input, compute,
communication, host, idle, and the busiest op types of each). A configuration's
profiled step is the mean over its profiled runs, part by part and op by op, so it
still adds up to its step. Results profiled before the five parts existed stored
only the communication split (``Figures.communication``); they are shown with their
remainder unsplit.
"""

from __future__ import annotations

import os
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field

from bench.answers.configs import ConfigView
from bench.results.schema import BREAKDOWN_PARTS, Breakdown, Figures
from bench.results.text import tensorboard_command

BREAKDOWN_HEADERS = ["configuration", "profiled runs", "step (ms)",
                     *[f"{p} (ms, share)" for p in BREAKDOWN_PARTS],
                     "largest op per part (ms)", "profiler overhead", "profile"]


@dataclass(frozen=True)
class Profiled:
    """The mean profiled step of a configuration's profiled runs (seconds per step)."""

    config: ConfigView
    step_s: float
    parts: dict[str, float]  # every part of BREAKDOWN_PARTS (legacy results: two)
    ops: dict[str, dict[str, float]]  # part -> op type (or host activity) -> seconds
    dirs: tuple[str, ...]  # each profiled run's profile directory
    runs: int
    steps: int  # profiled steps, all runs
    loop: str = "custom"
    overhead: float | None = None
    unsplit_s: float | None = None  # legacy results: input + host + idle together
    capture_s: float = 0.0  # what profiling added to the runs' wall time, all runs

    @property
    def examples_per_step(self) -> int:
        return self.config.result.spec.examples_per_step

    def share(self, part: str) -> float | None:
        value = self.parts.get(part)
        return value / self.step_s if value is not None and self.step_s > 0 else None

    @property
    def command(self) -> str:
        """What opens this configuration's profiles."""
        return tensorboard_command(common_dir(self.dirs))


def common_dir(dirs: Sequence[str]) -> str:
    """The deepest directory holding every one of ``dirs`` (TensorBoard lists the
    profiles below its ``--logdir`` as runs, so one command opens them all)."""
    return os.path.commonpath(list(dirs)) if dirs else ""


def _mean(values: Sequence[float]) -> float:
    return statistics.fmean(values) if values else 0.0


def profiled(config: ConfigView) -> Profiled | None:
    """``config``'s profiled step, or None where no run of it was profiled."""
    figures = [f for r in config.ok_runs if (f := r.result.figures) is not None]
    found = [f.breakdown for f in figures if f.breakdown is not None]
    if found:
        return _from_breakdowns(config, found)
    return _legacy(config, figures)


def _from_breakdowns(config: ConfigView, found: list[Breakdown]) -> Profiled:
    ops: dict[str, dict[str, float]] = {}
    for b in found:
        for t in b.top:
            ops.setdefault(t.part, {}).setdefault(t.name, 0.0)
            ops[t.part][t.name] += t.s / len(found)
    overheads = [b.profiler_overhead for b in found if b.profiler_overhead is not None]
    return Profiled(
        config=config, step_s=_mean([b.step_s for b in found]),
        parts={p: _mean([b.seconds(p) for b in found]) for p in BREAKDOWN_PARTS},
        ops={p: dict(sorted(v.items(), key=lambda kv: -kv[1])) for p, v in ops.items()},
        dirs=tuple(b.profile_dir for b in found if b.profile_dir), runs=len(found),
        steps=sum(b.profiled_steps for b in found), loop=found[0].loop,
        overhead=statistics.median(overheads) if overheads else None,
        capture_s=sum(b.capture_s for b in found))


def _legacy(config: ConfigView, figures: list[Figures]) -> Profiled | None:
    comms = [f.communication for f in figures if f.communication is not None]
    if not comms:
        return None
    overheads = [c.profiler_overhead for c in comms if c.profiler_overhead is not None]
    return Profiled(
        config=config, step_s=_mean([c.step_s for c in comms]),
        parts={"compute": _mean([c.compute_s for c in comms]),
               "communication": _mean([c.collective_s for c in comms])},
        ops={}, dirs=tuple(c.profile_dir for c in comms if c.profile_dir), runs=len(comms),
        steps=sum(c.profiled_steps for c in comms),
        overhead=statistics.median(overheads) if overheads else None,
        unsplit_s=_mean([c.other_s for c in comms]))


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3g}"


@dataclass
class BreakdownTable:
    """The profiled configurations of a report section, as rows of text cells."""

    headers: list[str] = field(default_factory=lambda: list(BREAKDOWN_HEADERS))
    rows: list[list[str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def breakdown_table(configs: Sequence[ConfigView]) -> BreakdownTable:
    """One row per profiled configuration: each part in ms per step and as a share of
    the profiled step, the op type with the most time in each part, the profiles."""
    table = BreakdownTable()
    legacy = []
    spent = 0.0
    for c in configs:
        p = profiled(c)
        if p is None:
            continue
        spent += p.capture_s
        cells = []
        for part in BREAKDOWN_PARTS:
            value, share = p.parts.get(part), p.share(part)
            cells.append("-" if value is None or share is None
                         else f"{_ms(value)} ({share:.0%})")
        # Idle has nothing to name; a part without time has no largest op.
        largest = [f"{part}: {name} {_ms(s)}" for part in BREAKDOWN_PARTS if part != "idle"
                   for name, s in list(p.ops.get(part, {}).items())[:1] if s > 0]
        if p.unsplit_s is not None:
            legacy.append(f"{c.result.spec.label()}: {_ms(p.unsplit_s)} ms of input, host "
                          f"and idle together")
        table.rows.append([
            c.result.spec.label(), str(p.runs), _ms(p.step_s), *cells,
            "; ".join(largest) or "-",
            f"{p.overhead:.2f}x" if p.overhead is not None else "-",
            p.command if p.dirs else "-"])
    if spent > 0:
        table.notes.append(f"the profiles added {spent:.1f} s to these runs' wall time "
                           f"(capture_s: the profiler, the profiled steps and reading the "
                           f"trace, after the windows)")
    if legacy:
        table.notes.append("profiled before the five-part breakdown existed (compute and "
                           "communication only; '-' parts are not split): "
                           + "; ".join(legacy))
    return table
