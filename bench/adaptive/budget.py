"""A sweep's time budget: provisional answers first, then runs where answers are open.

The first pass measures each answer's in-process configurations as arms of one
process (``bench.launch.groups``), and the sweep prints the answers it has, marked
provisional, before the configurations that run alone (multi-process strategies,
baselines) get their first run. Then it reads its answers again (``reports``: each
answer is FASTER, EQUIVALENT within the margin or NOT SETTLED) and, while some are
not settled and the budget allows another session, measures again what each open
answer's open comparisons need: the configurations in them, those that share
sessions in one (``to_measure``; the report pools the noise of an answer's sessions
whatever arms each held: ``reports.noise``), the answers with fewest sessions first.
It stops when every answer is settled or the next session would overrun the budget,
and says which.

Each read is a look, with its own share of alpha (``reports.sequential.LookPlan``):
the looks before the last read at a small interim alpha, and the last one, when the
budget is spent, reads what is still open at what they left. Every look is journaled,
so that the report reads each answer at its last look's alpha, and a resumed sweep
goes on from the looks its journal holds: no interim look beyond the plan's, and no
second last look at a place.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.launch.groups import in_session
from bench.launch.sweep import Replication, SweepOutcome, run_sweep
from bench.results.schema import RunResult
from bench.results.store import SweepStore, load_sweep
from bench.spec import RunSpec
from reports.places import Place, places, places_text
from reports.sequential import LookPlan, Looks, look_event, looks_taken

DEFAULT_BUDGET_S = 600.0  # the default sweep on a 2-core machine
SETTLED_EVENT = "settled"  # a place's first settlement, in the sweep's journal
BUDGET_LOOKS = LookPlan()
# A session is priced at its configurations' last one, with this margin: the same
# session's wall time varied by up to 10% (a ResNet50 session 48-52 s, one with a
# multi-process member more), and sessions priced at exactly their last wall time
# overran a 570 s budget by 12 s.
COST_MARGIN = 1.1


@dataclass(frozen=True)
class OpenAnswer:
    """An answer that is not settled yet, the configurations that would settle it, and
    how many configurations its place measured (``members``: what it must settle
    against, known before any figure)."""

    where: str
    keys: tuple[str, ...]
    members: int = 0


def open_answers(results: Sequence[RunResult], source: Path, looks: Looks | None = None
                 ) -> tuple[list[OpenAnswer], list[str]]:
    """The answers not settled yet (with the keys of the configurations to measure
    again: ``to_measure``), and where every answer is."""
    found = places(results, source, looks)
    return ([OpenAnswer(p.where, to_measure(p), len(p.measured)) for p in found if p.is_open],
            [p.where for p in found])


def to_measure(place: Place) -> tuple[str, ...]:
    """What an open answer needs measured again: the configurations of its open
    comparisons (the answer, the fastest, those not settled against it). Those measured
    in sessions (``bench.launch.groups.in_session``) are measured in one; where only
    one of them is open, every configuration of the answer measured in sessions joins
    it, so that it is still measured as an arm of a session. A session holds only what
    is open (at MLP batch 256, after two sessions, often two arms of five), so an
    answer gets more sessions in the same time. The noise pool reads an answer's
    sessions whatever arms each held (``reports.noise.pair_spread``)."""
    core = set(place.needs)
    shared = {k for k, spec in place.measured.items() if in_session(spec)}
    if len(core & shared) == 1:
        core |= shared
    return tuple(sorted(core))


def print_answers(results: Sequence[RunResult], source: Path, heading: str,
                  echo: Callable[[str], None] = print, looks: Looks | None = None,
                  explain: bool = False) -> None:
    """The answers' table under ``heading``, settled or not (read at ``looks``); with
    ``explain``, each answer in full after it."""
    echo(heading)
    for line in places_text(places(results, source, looks), explain):
        echo(line)


def spend(specs: Sequence[RunSpec], out: Path, *, budget_s: float, started: float,
          interleave: bool, echo: Callable[[str], None] = print,
          clock: Callable[[], float] = time.monotonic,
          plan: LookPlan = BUDGET_LOOKS) -> list[SweepOutcome]:
    """Measure open answers' configurations again until every answer is settled or the
    next session would end after ``started + budget_s``; returns each session's outcome.

    Reads the answers after each session at ``plan.interim`` (at most
    ``plan.max_interim`` times; later sessions go to the answers then open), and what
    is open when the budget is spent at ``plan.final``: every look is journaled.
    """
    spec_of = {s.key(): s for s in specs}
    store = SweepStore(out)
    outcomes: list[SweepOutcome] = []
    last_cost: dict[str, float] = {}
    # A resumed sweep goes on from the looks its journal holds: the plan's alpha is the
    # sweep's, and restarting it would spend up to twice the error rate on the same
    # comparisons. A place that had its last look is closed: it keeps that answer.
    taken = looks_taken(store.journal_events())
    looks = max((t.interim for t in taken.values()), default=0)
    closed = {where for where, t in taken.items() if t.final}
    still: list[OpenAnswer] = []
    if looks >= plan.max_interim:  # resumed after its interim looks: open as last read
        results = [r for r in load_sweep(out).results if r.key in spec_of]
        found, _ = open_answers(results, out, Looks.of_journal(store.journal_events()))
        still = [a for a in found if a.where not in closed]
        if not still:
            return outcomes
    while True:
        results = [r for r in load_sweep(out).results if r.key in spec_of]
        elapsed = clock() - started
        if looks < plan.max_interim:
            found, places = open_answers(results, out, Looks(default=plan.interim))
            still = [a for a in found if a.where not in closed]
            places = [p for p in places if p not in closed]
            looks += 1
            for where in places:
                store.journal(look_event(where, plan.interim, final=False))
            echo(f"budget: look {looks} (alpha {plan.interim:g}): {len(places) - len(still)} "
                 f"of {len(places)} answers settled after {elapsed:.0f} s of {budget_s:.0f} s"
                 + ("; open: " + "; ".join(a.where for a in still) if still else ""))
            open_now = {a.where for a in still}
            _note_settled(store, [w for w in places if w not in open_now], elapsed,
                          plan.interim, echo)
            if not still:
                return outcomes
        last_run = {a.where: _last_run(a, spec_of, store) for a in still}
        keys, cheapest = _affordable(still, spec_of, results, last_cost, budget_s - elapsed,
                                     last_run)
        if not keys:
            _last_look(still, store, plan, results, out, echo,
                       f"the next session (~{cheapest:.0f} s) would overrun the budget",
                       elapsed)
            return outcomes
        ran: list[RunResult] = []
        for runs, todo in sorted(_next_runs(still, keys, spec_of, last_run).items()):
            outcome = run_sweep(todo, out, echo=echo,
                                replication=Replication(runs=runs, first=runs),
                                interleave=interleave, shared_from=1)
            outcomes.append(outcome)
            ran += outcome.ran
            if outcome.interrupted:
                return outcomes
        if not ran:
            return outcomes
        for r in ran:
            last_cost[r.key] = r.wall_s / max(1, len(r.interleaved.arms)
                                              if r.interleaved else 1)


def _last_run(answer: OpenAnswer, spec_of: Mapping[str, RunSpec], store: SweepStore) -> int:
    """The number of the answer's last session: its configurations' last stored run."""
    return max((max(store.replicates_done(spec_of[k], 1000), default=0)
                for k in answer.keys if k in spec_of), default=0)


def _next_runs(still: Sequence[OpenAnswer], keys: set[str], spec_of: Mapping[str, RunSpec],
               last_run: Mapping[str, int]) -> dict[int, list[RunSpec]]:
    """One more run of each of ``keys``, by run number: an answer's configurations run
    together in one session, so they share a number, the one after the answer's last
    (``last_run``, by ``OpenAnswer.where``; a configuration that sat sessions out skips
    their numbers)."""
    nexts: dict[int, dict[str, RunSpec]] = {}
    for a in still:
        mine = [k for k in a.keys if k in keys]
        if mine:
            nexts.setdefault(last_run[a.where] + 1, {}).update((k, spec_of[k]) for k in mine)
    return {n: list(specs.values()) for n, specs in nexts.items()}


def _last_look(still: Sequence[OpenAnswer], store: SweepStore, plan: LookPlan,
               results: Sequence[RunResult], out: Path, echo: Callable[[str], None],
               why: str, elapsed: float) -> None:
    """The budget is spent: what is still open is read once more, at ``plan.final``."""
    for a in still:
        store.journal(look_event(a.where, plan.final, final=True))
    left, _ = open_answers(results, out, Looks.of_journal(store.journal_events()))
    echo(f"budget: {why}; the last look (alpha {plan.final:g}) settles "
         f"{len(still) - len(left)} of the {len(still)} open answer(s)")
    open_now = {a.where for a in left}
    _note_settled(store, [a.where for a in still if a.where not in open_now], elapsed,
                  plan.final, echo)


def _note_settled(store: SweepStore, settled: Sequence[str], elapsed: float, alpha: float,
                  echo: Callable[[str], None]) -> None:
    """Journal and print each place of ``settled`` whose first settlement this is: when
    (seconds from the sweep's start) and at which alpha (``settled_events`` reads them)."""
    known = set(settled_events(store.journal_events()))
    for where in settled:
        if where not in known:
            store.journal(settled_event(where, elapsed, alpha))
            echo(f"budget: settled after {elapsed:.0f} s (alpha {alpha:g}): {where}")


def settled_event(place: str, after_s: float, alpha: float) -> dict[str, Any]:
    """The journal line of a place's first settlement, ``after_s`` from the sweep's start."""
    return {"event": SETTLED_EVENT, "where": place, "after_s": round(after_s, 1),
            "alpha": alpha}


def settled_events(events: Iterable[Mapping[str, Any]]) -> dict[str, float]:
    """Each place's first settlement (seconds from the sweep's start), from a journal."""
    out: dict[str, float] = {}
    for e in events:
        if e.get("event") == SETTLED_EVENT and "where" in e:
            out.setdefault(str(e["where"]), float(e.get("after_s", 0.0)))
    return out


def settlement_line(events: Iterable[Mapping[str, Any]], places: int) -> str:
    """The sweep's first settlements in one line: ``first settled: <place> after 152 s;
    4 of 5 answers not settled`` (``places``: how many answers the sweep has)."""
    first = sorted(settled_events(events).items(), key=lambda kv: kv[1])
    done = "; ".join(f"{where} after {s:.0f} s" for where, s in first)
    return (f"first settled: {done or 'none'}; "
            f"{max(0, places - len(first))} of {places} answers not settled")


def _affordable(still: Sequence[OpenAnswer], by_key: Mapping[str, RunSpec],
                results: Sequence[RunResult], last_cost: dict[str, float],
                left_s: float, last_run: Mapping[str, int]) -> tuple[set[str], float]:
    """The configurations of as many open answers as ``left_s`` leaves time for, and
    what the cheapest answer's session would cost.

    A session costs about what its configurations' last runs took, with
    ``COST_MARGIN``. The answers with the fewest sessions so far (``last_run``, by
    ``OpenAnswer.where``) go first, so that
    every open answer gets its next session before any gets one more (an answer's
    noise is its own until its sessions give the pool's guard enough degrees of
    freedom: three sessions of three arms); among those, the places that measured the
    fewest configurations (``OpenAnswer.members``: fewest comparisons to settle), then
    the cheapest. Cheapest first alone starved the dearest place: in s41a ResNet50 (one
    comparison, +72% after one session, a 90 s session) kept one session while four
    cheaper places (three to eight configurations each) took the budget. The order
    reads no answer's figures: ordered by the plan to settle (its price times the
    sessions its estimated gap still needs), an answer's number of sessions at the last
    look depended on its own data, which the looks' alpha does not cover, and in s30-s34
    it left the CNN at 64, then the CNN at 256, at two sessions.
    """
    def cost(keys: set[str]) -> float:
        return COST_MARGIN * sum(last_cost.get(k) or _last_wall(results, k) for k in keys)

    def order(a: tuple[OpenAnswer, set[str]]) -> tuple[int, int, float]:
        return last_run.get(a[0].where, 0), a[0].members, cost(a[1])

    wanted = sorted(((a, {k for k in a.keys if k in by_key}) for a in still), key=order)
    keys: set[str] = set()
    for _, more in wanted:
        if cost(keys | more) <= left_s:
            keys |= more
    return keys, min((cost(more) for _, more in wanted), default=0.0)


def _last_wall(results: Sequence[RunResult], key: str) -> float:
    mine = [r for r in results if r.key == key]
    if not mine:
        return 0.0
    last = max(mine, key=lambda r: r.replicate)
    return last.wall_s / (len(last.interleaved.arms) if last.interleaved else 1)
