"""A sweep's time budget: provisional answers first, then runs where answers are open.

After the first pass (every configuration once, each in its own process) the sweep
prints the answers it has, marked provisional. After the planned passes it reads its
answers again (``reports``: each answer is FASTER, EQUIVALENT within the margin or
NOT SETTLED) and, while some are not settled and the budget allows another session,
measures the configurations of each open answer once more, the in-process ones as
arms of one process (their ratios then come from pairs). It stops when every answer
is settled or the next session would overrun the budget, and says which.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from bench.launch.sweep import Replication, SweepOutcome, run_sweep
from bench.results.schema import RunResult
from bench.results.store import SweepStore, load_sweep
from bench.spec import RunSpec
from reports.recommend import Recommendation, answer_line
from reports.report import build_from_results

DEFAULT_BUDGET_S = 600.0  # the default sweep on a 2-core machine


@dataclass(frozen=True)
class OpenAnswer:
    """An answer that is not settled yet, and the configurations that would settle it."""

    where: str
    line: str
    keys: tuple[str, ...]


def answers(results: Sequence[RunResult], source: Path) -> list[tuple[str, Recommendation]]:
    """Every answer of ``results``: (where, recommendation)."""
    report = build_from_results(results, source)
    return [(f"[{m.machine.machine_id}] {w.variant.label()}, {rec.ranking.label}", rec)
            for m in report.machines for w in m.workloads for rec in w.recommendations]


def open_answers(results: Sequence[RunResult], source: Path) -> tuple[list[OpenAnswer], int]:
    """The answers not settled yet (with their configurations' keys), and how many
    answers there are."""
    found = answers(results, source)
    out = [OpenAnswer(where, answer_line(rec),
                      tuple(c.key for c in rec.ranking.ok_configs()))
           for where, rec in found if rec.best is not None and not rec.settled]
    return out, len(found)


def print_answers(results: Sequence[RunResult], source: Path, heading: str,
                  echo: Callable[[str], None] = print) -> None:
    """Each answer on one line under ``heading``, settled or not."""
    echo(heading)
    for where, rec in answers(results, source):
        mark = "settled" if rec.settled else "open"
        echo(f"  [{mark}] {where}: {answer_line(rec)}")


def spend(specs: Sequence[RunSpec], out: Path, *, budget_s: float, started: float,
          interleave: bool, echo: Callable[[str], None] = print,
          clock: Callable[[], float] = time.monotonic) -> list[SweepOutcome]:
    """Measure open answers' configurations again until every answer is settled or the
    next session would end after ``started + budget_s``; returns each session's outcome."""
    by_key = {s.key(): s for s in specs}
    store = SweepStore(out)
    outcomes: list[SweepOutcome] = []
    last_cost: dict[str, float] = {}
    while True:
        results = [r for r in load_sweep(out).results if r.key in by_key]
        still, total = open_answers(results, out)
        elapsed = clock() - started
        echo(f"budget: {total - len(still)} of {total} answers settled after {elapsed:.0f} s "
             f"of {budget_s:.0f} s" + ("; open: " + "; ".join(a.where for a in still)
                                       if still else ""))
        if not still:
            return outcomes
        keys = sorted({k for a in still for k in a.keys if k in by_key})
        # A session costs about what these configurations' last runs took.
        cost = sum(last_cost.get(k) or _last_wall(results, k) for k in keys)
        if elapsed + cost > budget_s:
            echo(f"budget: the next session (~{cost:.0f} s) would overrun the budget; "
                 f"{len(still)} answer(s) stay not settled")
            return outcomes
        todo = [by_key[k] for k in keys]
        runs = 1 + max(max(store.replicates_done(s, 1000), default=0) for s in todo)
        outcome = run_sweep(todo, out, echo=echo, replication=Replication(runs=runs),
                            interleave=interleave)
        outcomes.append(outcome)
        if outcome.interrupted or not outcome.ran:
            return outcomes
        for r in outcome.ran:
            last_cost[r.key] = r.wall_s / max(1, len(r.interleaved.arms)
                                              if r.interleaved else 1)


def _last_wall(results: Sequence[RunResult], key: str) -> float:
    mine = [r for r in results if r.key == key]
    if not mine:
        return 0.0
    last = max(mine, key=lambda r: r.replicate)
    return last.wall_s / (len(last.interleaved.arms) if last.interleaved else 1)
