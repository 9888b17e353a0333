"""A sweep's time budget: provisional answers first, then runs where answers are open.

The sweep opens with the answer that can settle first (``bench.adaptive.sweep``: the
fewest configurations in sessions, three sessions where they fit the first third of the
budget) and a look at it. The first pass measures each other answer's in-process
configurations as arms of one process (``bench.launch.groups``), and the sweep prints
the answers it has, marked provisional, before the configurations that run alone
(multi-process strategies, baselines) get their first run. Then it reads its answers
again (``bench.answers``: each
answer is FASTER, EQUIVALENT within the margin or NOT SETTLED) and, while some are
not settled and the budget allows another session, measures again what each open
answer's open comparisons need: the configurations in them, those that share
sessions in one (``to_measure``; the report pools the noise of an answer's sessions
whatever arms each held: ``bench.answers.noise``), the answers with fewest sessions first.
It stops when every answer is settled or the next session would overrun the budget,
and says which.

Each read is a look, with its own share of alpha (``bench.answers.sequential.LookPlan``,
planned from the budget and journaled): the looks before the last read at a small
interim alpha, only where they could settle a place (``look``), and the last one, when
the budget is spent, reads what is still open at what they left. Every look is journaled,
so that the report reads each answer at its last look's alpha, and a resumed sweep
goes on from the looks its journal holds: no interim look beyond the plan's, and no
second last look at a place.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Container, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from bench.adaptive.pricing import window_s, windows_s
from bench.answers.places import Place, places
from bench.answers.sequential import (
    SETTLED_EVENT,
    LookPlan,
    Looks,
    Taken,
    look_event,
    looks_taken,
)
from bench.env import now_iso
from bench.hardware import detect
from bench.launch.groups import in_session
from bench.launch.session import MIN_ROUNDS, together_on
from bench.launch.sweep import Replication, SweepOutcome, run_sweep
from bench.results.schema import RunResult
from bench.results.store import SweepStore, load_sweep
from bench.spec import RunSpec
from bench.strategies import STRATEGIES

DEFAULT_BUDGET_S = 600.0  # the default sweep on a 2-core machine
# A session is priced at its configurations' last one, with this margin: the same
# session's wall time varied by up to 10% (a ResNet50 session 48-52 s, one with a
# multi-process member more), and sessions priced at exactly their last wall time
# overran a 570 s budget by 12 s.
COST_MARGIN = 1.1
# What a session spends after its windows (summaries, payloads; no profile after the
# first pass): its rounds stop this long before the budget's end. 3-6 s seen
# (MobileNetV2 alone: 6 s).
ENDS_S = 10.0


@dataclass(frozen=True)
class Cost:
    """What a configuration adds to a session of its answer: its windows (``windows_s``)
    and what its session spent besides windows and profiles (``fixed_s``: start-ups,
    builds, warm-ups, the ends). A session pays its configurations' windows and the
    largest of their fixed parts once: split evenly over the arms instead, a session of
    fewer arms than the last (an answer whose contenders were set aside) was priced
    below its start-up, and the last one of a sweep overran its budget by 3 s.

    ``fixed_s`` is the whole of what the sessions measured together with it (``group``
    in ``of``) spent besides their windows, not a share of it: their builds run side by
    side, mostly one core each, so two ResNet50 sessions built together reached their
    windows about as soon as one alone, and a MobileNetV2 session measured alone (117 s)
    took 49 s besides its windows where its pair's half share was 37 s; priced at that
    share, the sweep's last session overran the budget by 10 s."""

    windows_s: float
    fixed_s: float = 0.0
    rounds: int = 0  # the windows ``windows_s`` came from (0: not known)

    def at(self, rounds: int) -> Cost:
        """This cost with ``rounds`` rounds of its windows (unchanged where the rounds
        it came from are not known): a session whose rounds stopped early is no
        guide to a whole one, nor a whole one to one that stops early."""
        if self.rounds <= 0 or rounds == self.rounds:
            return self
        return Cost(self.windows_s * rounds / self.rounds, self.fixed_s, rounds)

    @classmethod
    def of(cls, result: RunResult, group: Sequence[RunResult] = ()) -> Cost:
        """From ``result`` and ``group``, the results of its session and of those
        measured together with it (``result``'s included; empty: ``result`` alone): the
        group's wall time less every window and every evidence profile in it (a later
        session profiles nothing). An arm that measured nothing (unsupported once
        built) adds nothing."""
        group = list(group) or [result]
        # A cold CUDA cache's JIT is paid once per machine, not by the next session.
        spent = sum(windows_s(r) + profile_s(r) + jit_s(r) for r in group)
        rounds = len(result.figures.windows) if result.figures else 0
        return cls(windows_s(result), max(0.0, result.wall_s - spent), rounds)


def process_devices(spec: RunSpec) -> int:
    """The most devices one process of ``spec``'s run sets up."""
    return max((t.local_devices for t in STRATEGIES.get(spec.strategy).plan(spec, detect())),
               default=1)


def jit_s(result: RunResult) -> float:
    """Seconds ``result``'s first call spent in the driver's JIT of TensorFlow's kernels
    (``Warmup.jit_s``; 0 where none or not known)."""
    return result.figures.warmup.jit_s if result.figures else 0.0


def profile_s(result: RunResult) -> float:
    """Seconds of ``result``'s evidence profile after its windows: its profiled steps
    and the capture (0 where it was not profiled)."""
    b = result.figures.breakdown if result.figures else None
    return b.profiled_steps * b.step_s + b.capture_s if b is not None else 0.0


def measured_with(result: RunResult) -> Hashable:
    """What identifies the results measured in one go with ``result``: the sessions
    measured together (one start and wall time), else its session, else its own run."""
    i = result.interleaved
    if i is not None and i.together > 1:
        return ("together", result.started_at, result.wall_s)
    if i is not None:
        return ("session", i.session)
    return ("run", result.key, result.replicate)


def last_costs(results: Iterable[RunResult]) -> dict[str, Cost]:
    """Each configuration's ``Cost`` in its last run (highest run number) of
    ``results``, read with the runs measured in one go with it."""
    results = list(results)
    groups: dict[Hashable, list[RunResult]] = {}
    last: dict[str, RunResult] = {}
    for r in results:
        groups.setdefault(measured_with(r), []).append(r)
        if r.key not in last or r.replicate > last[r.key].replicate:
            last[r.key] = r
    return {k: Cost.of(r, groups[measured_with(r)]) for k, r in last.items()}


def first_price(unit: Sequence[RunSpec], results: Sequence[RunResult], sessions: int = 1,
                rounds: int | None = None) -> float | None:
    """The least that ``sessions`` first sessions of ``unit`` (measured together), or
    its first run where it is one configuration (a run of its own), will cost,
    from its workload's measured runs in ``results``, with ``COST_MARGIN``; None where
    that workload has no measured run (nothing to price it from).

    A window lasts its ``max_seconds``, or ``min_steps`` steps where those take longer
    (``max_steps`` at most), a step taking the slowest time per example measured at the
    unit's batch. A session pays the largest fixed part the workload's sessions had
    (``last_costs``) and ``rounds`` rounds (None: the configurations' ``repeats``; a
    sweep's budget stops a session's rounds at its end, so it prices
    ``bench.launch.session.MIN_ROUNDS``); a run of its own its windows and the longest
    launch to first step measured. The CPU preset's points are sized for its own
    workloads; a user's model gets the CNN's, and one whose steps take a second
    measured MobileNetV2's first pass in 480 s of a 569 s budget."""
    workload = unit[0].workload
    mine = [r for r in results if r.spec.workload == workload and r.status == "ok"
            and r.figures is not None]
    if not mine:
        return None
    per_example = max(r.figures.step_time.median_s / r.spec.global_batch for r in mine
                      if r.figures is not None)

    def window(spec: RunSpec) -> float:
        return window_s(spec, per_example * spec.global_batch)

    if len(unit) == 1:  # a run of its own (a session has two configurations or more)
        # The longest launch of a process like its own (as many devices a process: one
        # GPU a worker is no eight-GPU process), else of any.
        own = process_devices(unit[0])
        alike = [r for r in mine if process_devices(r.spec) == own] or mine
        launch = max(r.figures.startup.launch_to_first_step_s - jit_s(r) for r in alike
                     if r.figures is not None)
        return COST_MARGIN * (launch + unit[0].repeats * window(unit[0]))
    costs = last_costs(r for r in results
                       if r.spec.workload == workload and r.interleaved is not None)
    fixed = max((c.fixed_s for c in costs.values()), default=0.0)
    each = sum((rounds if rounds is not None else s.repeats) * window(s) for s in unit)
    return COST_MARGIN * (fixed + sessions * each)


@dataclass(frozen=True)
class OpenAnswer:
    """An answer that is not settled yet, the configurations that would settle it, how
    many configurations its place measured (``members``: what it must settle against,
    known before any figure) and the fewest sessions of the configurations its open
    comparisons need (``sessions``: below 2 no look can settle it)."""

    where: str
    keys: tuple[str, ...]
    members: int = 0
    sessions: int = 0
    waiting: int = 0  # configurations planned here with no result yet (not looked at)


def open_answers(results: Sequence[RunResult], looks: Looks | None = None
                 ) -> tuple[list[OpenAnswer], list[str]]:
    """The answers not settled yet (with the keys of the configurations to measure
    again: ``to_measure``), and where every answer is."""
    found = places(results, looks)
    runs = runs_by_key(results)
    return ([_open(p, runs) for p in found if p.is_open], [p.where for p in found])


def stored(out: Path, keys: Container[str]) -> list[RunResult]:
    """The sweep's stored runs of the configurations ``keys`` (this sweep's matrix: a
    directory may hold runs of others)."""
    return [r for r in load_sweep(out).results if r.key in keys]


def runs_by_key(results: Iterable[RunResult]) -> Counter[str]:
    """How many successful runs (sessions, for arms) each configuration has."""
    return Counter(r.key for r in results if r.status == "ok")


def _open(place: Place, runs: Mapping[str, int]) -> OpenAnswer:
    return OpenAnswer(place.where, to_measure(place), len(place.measured),
                      min((runs.get(k, 0) for k in place.needs), default=0))


def to_measure(place: Place) -> tuple[str, ...]:
    """What an open answer needs measured again: the configurations of its open
    comparisons (the answer, the fastest, those not settled against it). Those measured
    in sessions (``bench.launch.groups.in_session``) are measured in one; where only
    one of them is open, every configuration of the answer measured in sessions joins
    it, so that it is still measured as an arm of a session. A session holds only what
    is open (at MLP batch 256, after two sessions, often two arms of five), so an
    answer gets more sessions in the same time. The noise pool reads an answer's
    sessions whatever arms each held (``bench.answers.noise.pair_spread``). A place that reads
    settled but had no look that could settle it (``look``) has no open comparison: it
    is measured again whole, in sessions where it has them."""
    core = set(place.needs)
    shared = {k for k, spec in place.measured.items() if in_session(spec)}
    if not core:
        core = shared or set(place.measured)
    elif len(core & shared) == 1:
        core |= shared
    return tuple(sorted(core))


def look_plan(store: SweepStore, budget_s: float) -> LookPlan:
    """The sweep's plan of looks: the one its journal holds (a resumed sweep keeps it),
    else one planned for ``budget_s`` (``LookPlan.for_budget``), journaled now."""
    plan = LookPlan.of_journal(store.journal_events())
    if plan is None:
        plan = LookPlan.for_budget(budget_s)
        store.journal(plan.event())
    return plan


def look(results: Sequence[RunResult], out: Path, plan: LookPlan, elapsed: float,
         budget_s: float, echo: Callable[[str], None] = print,
         planned: Sequence[RunSpec] = ()) -> list[OpenAnswer]:
    """One interim look at the sweep's places; returns the answers still open.

    A place is looked at (read at ``plan.interim``, the look journaled and counted
    against its ``plan.max_interim``) where the look could settle it: its open
    comparisons have two sessions or more, and more than at its last look (one session
    has no interval; the same sessions read again are a read no look counts, so they
    neither settle the place nor spend alpha, even where they now read settled). A
    place that reads settled at a look is journaled settled and measured no more; one
    that had its last look is closed. Every other place is open as last read, whatever
    the interim read says now: it is measured again until a look settles it or the last
    one reads it.

    A place is not looked at while a configuration ``planned`` there (a choice, not a
    baseline) has no result yet: one that runs alone, after the sessions. A settled
    place is never read again, so a look before it ran would answer without it. It
    stays open, ``waiting``.
    """
    store = SweepStore(out)
    events = store.journal_events()
    taken, settled = looks_taken(events), set(settled_events(events))
    runs = runs_by_key(results)
    due: list[tuple[Place, int]] = []
    still: list[OpenAnswer] = []
    found = [p for p in places(results, Looks(default=plan.interim))
             if not taken.get(p.where, Taken()).final and p.where not in settled]
    tried = {r.key for r in results}
    # Only the configurations a user can pick: a baseline is a ceiling, not compared.
    pending = [s for s in planned if s.key() not in tried and STRATEGIES.get(s.strategy).is_choice]
    for p in found:
        answer, was = _open(p, runs), taken.get(p.where, Taken())
        answer = replace(answer, waiting=sum(1 for s in pending if p.holds(s)))
        can_settle = answer.sessions > max(1, was.sessions)
        lookable = (was.interim < plan.max_interim and can_settle
                    and not answer.waiting)
        if lookable:
            due.append((p, answer.sessions))
        if p.is_open or not lookable:
            still.append(answer)
    if due:
        for p, sessions in due:
            store.journal(look_event(p.where, plan.interim, final=False, sessions=sessions))
        now = [p.where for p, _ in due if not p.is_open]
        echo(f"budget: a look (alpha {plan.interim:.2g}) after {elapsed:.0f} s of "
             f"{budget_s:.0f} s at {len(due)} of the {len(found)} answer(s) not settled: "
             f"{len(now)} settled"
             + ("; open: " + "; ".join(a.where for a in still) if still else ""))
        _note_settled(store, now, elapsed, plan.interim, echo)
    return still


# How a sweep shows its answers: the lines of ``results``' answers, each read at its
# alpha in the looks given. The command line hands the reports' table
# (``reports.answers.answers_lines``); the budget decides when.
ShowAnswers = Callable[[Sequence[RunResult], Looks], list[str]]


def print_answers(results: Sequence[RunResult], heading: str, show: ShowAnswers,
                  echo: Callable[[str], None] = print, looks: Looks | None = None) -> None:
    """``results``' answers as ``show`` says them, under ``heading``, settled or not (read
    at ``looks``)."""
    echo(heading)
    for line in show(results, looks or Looks()):
        echo(line)


def spend(specs: Sequence[RunSpec], out: Path, *, budget_s: float, started: float,
          interleave: bool, echo: Callable[[str], None] = print,
          clock: Callable[[], float] = time.monotonic,
          plan: LookPlan | None = None) -> list[SweepOutcome]:
    """Measure open answers' configurations again until every answer is settled or the
    next session would end after ``started + budget_s``; returns each session's outcome.

    A session slower than priced stops its rounds at the budget's end (``run_sweep``'s
    ``windows_until``). Before each round of sessions the places a look could settle
    are read at
    ``plan.interim`` (``look``; at most ``plan.max_interim`` looks a place), and what is
    open when the budget is spent is read at ``plan.final``: every look is journaled.
    ``plan``: the sweep's (``look_plan``) unless given.
    """
    spec_of = {s.key(): s for s in specs}
    store = SweepStore(out)
    plan = plan or look_plan(store, budget_s)
    outcomes: list[SweepOutcome] = []
    together = together_on(detect())
    while True:
        results = stored(out, spec_of)
        elapsed = clock() - started
        still = look(results, out, plan, elapsed, budget_s, echo, planned=specs)
        if not still:
            return outcomes
        last_run = {a.where: _last_run(a, spec_of, store) for a in still}
        costs = last_costs(results)
        keys, cheapest = _affordable(still, spec_of, costs, budget_s - elapsed, last_run,
                                     together)
        if not keys:
            keys = _shorter(still, spec_of, costs, budget_s - elapsed, last_run)
            if keys:
                echo(f"budget: the next session (~{cheapest:.0f} s) would overrun the "
                     f"budget; a shorter one, its rounds stopping at the budget's end")
        if not keys:
            _last_look(still, store, plan, results, out, echo,
                       f"the next session (~{cheapest:.0f} s) would overrun the budget",
                       elapsed)
            return outcomes
        ran: list[RunResult] = []
        for runs, todo in sorted(_next_runs(still, keys, spec_of, last_run).items()):
            outcome = run_sweep(todo, out, echo=echo,
                                replication=Replication(runs=runs, first=runs),
                                interleave=interleave, shared_from=1, together=together,
                                windows_until=started + budget_s - ENDS_S)
            outcomes.append(outcome)
            ran += outcome.ran
            if outcome.interrupted:
                return outcomes
        if not ran:
            return outcomes


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
    left, _ = open_answers(results, Looks.of_journal(store.journal_events()))
    echo(f"budget: {why}; the last look (alpha {plan.final:.2g}) settles "
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
            echo(f"budget: settled after {elapsed:.0f} s (alpha {alpha:.2g}): {where}")


def settled_event(place: str, after_s: float, alpha: float) -> dict[str, Any]:
    """The journal line of a place's first settlement, ``after_s`` from the sweep's start."""
    return {"event": SETTLED_EVENT, "where": place, "after_s": round(after_s, 1),
            "alpha": alpha, "at": now_iso()}


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


def open_line(events: Iterable[Mapping[str, Any]]) -> str | None:
    """What a sweep can say of the answers its last look left open; None when there are
    none. That look spent the rest of their alpha and closed them (``look`` reads them
    no more): the same sweep resumed with a longer budget would not measure them again,
    a new one would."""
    events = list(events)
    settled = settled_events(events)
    closed = [w for w, t in looks_taken(events).items() if t.final and w not in settled]
    if not closed:
        return None
    return (f"{len(closed)} answer(s) not settled, and their last look closed them: to "
            f"settle them, run a new sweep with a longer budget into a new directory "
            f"(make bench BENCH_BUDGET_S=<seconds>, which makes a new one; bench run "
            f"--out <new dir> --budget <time>), not this one again")


def _affordable(still: Sequence[OpenAnswer], by_key: Mapping[str, RunSpec],
                costs: Mapping[str, Cost], left_s: float, last_run: Mapping[str, int],
                together: int = 1) -> tuple[set[str], float]:
    """The configurations of as many open answers as ``left_s`` leaves time for, and
    what the cheapest answer's session would cost.

    An answer's next runs cost what its configurations' last runs took (``costs``,
    ``NextRuns``, ``priced``): a session pays their windows and the largest of their
    fixed parts once, with ``COST_MARGIN``; a configuration that runs in processes of
    its own (not ``in_session``) is a run of its own. The sessions of one run number are
    measured up to ``together`` at a time (``run_sweep``), and are priced as such
    groups. The answers with the fewest sessions so far
    (``last_run``, by ``OpenAnswer.where``) go first, so that every open answer gets its
    next session before any gets one more (an answer's noise is its own until its
    sessions give the pool's guard enough degrees of freedom: three sessions of three
    arms); among those, the places that measured the fewest configurations
    (``OpenAnswer.members``: fewest comparisons to settle), then the cheapest. Cheapest
    first alone starved the dearest place: in a sweep, ResNet50 (one comparison, +72%
    after one session, a 90 s session) kept one session while four cheaper places (three to
    eight configurations each) took the budget. The order reads no answer's figures:
    ordered by the plan to settle (its price times the sessions its estimated gap still
    needs), an answer's number of sessions at the last look depended on its own data,
    which the looks' alpha does not cover, and in default sweeps it left the CNN at 64,
    then the CNN at 256, at two sessions.
    """
    wanted = []
    for a in still:
        more = {k for k in a.keys if k in by_key}
        runs = NextRuns.of(last_run.get(a.where, 0) + 1, more, by_key, costs)
        wanted.append((a, more, runs, priced([runs], together)))
    wanted.sort(key=lambda w: (*_turn(w[0], last_run), w[3]))
    keys: set[str] = set()
    chosen: list[NextRuns] = []
    for _, more, runs, _ in wanted:
        if priced([*chosen, runs], together) <= left_s:
            keys |= more
            chosen.append(runs)
    return keys, min((w[3] for w in wanted), default=0.0)


def _turn(answer: OpenAnswer, last_run: Mapping[str, int]) -> tuple[int, int]:
    """An open answer's place in the budget's queue, before its price: fewest sessions
    so far, then fewest configurations (``_affordable`` says why)."""
    return last_run.get(answer.where, 0), answer.members


def _shorter(still: Sequence[OpenAnswer], by_key: Mapping[str, RunSpec],
             costs: Mapping[str, Cost], left_s: float, last_run: Mapping[str, int]
             ) -> set[str]:
    """Where no open answer's next session fits ``left_s`` whole: the configurations of
    the first answer, in ``_affordable``'s order, whose session fits with
    ``MIN_ROUNDS`` rounds (``Cost.at``; its rounds then stop at the budget's end,
    ``spend``). A MobileNetV2 sweep stopped 114 s before its end, its next session
    priced at 116 s. Empty where none fits."""
    for a in sorted(still, key=lambda a: _turn(a, last_run)):
        more = {k for k in a.keys if k in by_key}
        if more and priced([NextRuns.of(0, more, by_key, costs, MIN_ROUNDS)], 1) <= left_s:
            return more
    return set()


@dataclass(frozen=True)
class NextRuns:
    """What one answer's next runs cost: its session (the costs of its in-session
    configurations, empty where it has none) at run number ``number``, and its runs in
    processes of their own (``alone``)."""

    number: int
    session: tuple[Cost, ...]
    alone: tuple[Cost, ...]

    @classmethod
    def of(cls, number: int, keys: Iterable[str], by_key: Mapping[str, RunSpec],
           costs: Mapping[str, Cost], rounds: int | None = None) -> NextRuns:
        """Run ``number`` of the configurations ``keys`` (of ``by_key``), at their
        ``costs`` (a configuration never run costs nothing), each at ``rounds`` rounds
        of its windows (None: its ``repeats``, two at least, as a session runs them)."""
        session: list[Cost] = []
        alone: list[Cost] = []
        for k in sorted(keys):
            spec = by_key[k]
            cost = costs.get(k, Cost(0.0)).at(rounds or max(MIN_ROUNDS, spec.repeats))
            (session if in_session(spec) else alone).append(cost)
        return cls(number, tuple(session), tuple(alone))


def priced(answers: Sequence[NextRuns], together: int) -> float:
    """Seconds the next runs of ``answers`` cost, with ``COST_MARGIN``: every window
    and each run of its own's fixed part, and for the sessions of each run number, up
    to ``together`` measured at a time, as many of their largest fixed parts as they
    make groups (whichever sessions the sweep puts together, no grouping pays more)."""
    total = 0.0
    fixed_by_number: dict[int, list[float]] = {}
    for a in answers:
        total += sum(c.windows_s + c.fixed_s for c in a.alone)
        if a.session:
            total += sum(c.windows_s for c in a.session)
            fixed_by_number.setdefault(a.number, []).append(max(c.fixed_s for c in a.session))
    for fixed in fixed_by_number.values():
        groups = -(-len(fixed) // max(1, together))
        total += sum(sorted(fixed, reverse=True)[:groups])
    return COST_MARGIN * total
