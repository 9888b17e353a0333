"""A sweep on a budget, phase by phase: the opening (the answer that can settle first,
three sessions and a look, then a session and a look more while it is open and the first
third of the budget allows), each other answer's in-process configurations, the
provisional answers, everything else once, the planned passes, then the budget's
sessions where answers are open (``bench.adaptive.budget.spend``). On CPUs sessions are
measured two at a time (``bench.launch.session.together_on``)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from bench.adaptive.budget import (
    ENDS_S,
    NextRuns,
    OpenAnswer,
    ShowAnswers,
    first_price,
    last_costs,
    look,
    look_plan,
    open_line,
    priced,
    print_answers,
    settlement_line,
    spend,
    stored,
)
from bench.adaptive.footprint import together_fitting, too_large
from bench.adaptive.plan import plan_first_pass
from bench.adaptive.pricing import Pricer, session_guess
from bench.answers.sequential import LookPlan, Looks, looks_taken
from bench.hardware import Hardware, detect, topology, topology_links
from bench.launch.evidence import Evidence
from bench.launch.groups import sweep_units
from bench.launch.session import MIN_ROUNDS, together_on
from bench.launch.sweep import Replication, SweepOutcome, found_unsupported, run_sweep
from bench.results.store import SweepStore, load_sweep
from bench.spec import RunSpec
from bench.strategies import STRATEGIES

# The opening's sessions before its first look: the fewest at which an interim look can
# settle an answer on its own noise (two give one degree of freedom: t = 191 at alpha
# 0.0033, 17.3 with three). An answer still open then gets another session and another
# look while one ends within the first third of the budget (t = 8.6 at four sessions:
# one disturbed session of three can keep a clear answer open at its look), up to half of
# the plan's interim looks, so that the budget's sessions keep the rest.
OPENING_SESSIONS = 3


@dataclass(frozen=True)
class _Budget:
    """What every phase of one budgeted sweep reads: where it stores, its budget from
    ``started`` (``time.monotonic``), how it runs, where it speaks."""

    out: Path
    budget_s: float
    started: float
    interleave: bool
    evidence: Evidence
    echo: Callable[[str], None]

    @property
    def until(self) -> float:
        """When the budget ends (``time.monotonic``)."""
        return self.started + self.budget_s

    def units(self, specs: Sequence[RunSpec]) -> list[tuple[RunSpec, ...]]:
        """``specs`` as the sweep runs them: sessions of shared arms, or one run each."""
        return sweep_units(specs) if self.interleave else [(s,) for s in specs]


def budgeted_sweep(specs: Sequence[RunSpec], out: Path, *, budget_s: float, started: float,
                   interleave: bool, evidence: Evidence, passes: Replication | None = None,
                   show: ShowAnswers | None = None, preset: bool = False,
                   echo: Callable[[str], None] = print) -> SweepOutcome:
    """Run ``specs`` into ``out`` within ``budget_s`` seconds from ``started``
    (``time.monotonic``): the opening (``opening_unit``: ``OPENING_SESSIONS``
    sessions and a look, more while it is open; none with ``passes``), each other
    answer's in-process configurations, as one process each, then the provisional
    answers (as ``show`` says them; none without),
    then everything else once, then ``passes`` (an explicit ``--runs``) of every
    configuration, then sessions where answers are open. Returns the whole sweep's
    outcome.

    On GPUs the first pass is priced (``bench.adaptive.plan``): what the budget cannot
    pay for, and with ``preset`` (the default preset's matrix) what is not worth
    measuring, is left out, printed with why, and never run by this sweep. Everywhere,
    every session's rounds stop at the budget's end, and a first-pass unit whose
    workload was measured already is left out where its least price no longer fits
    (``_within``): a user's model slower than the preset's points were sized for ends
    on time with what it measured."""
    sweep = _Budget(out, budget_s, started, interleave, evidence, echo)
    hw = detect()
    pairs = together_on(hw)
    echo(f"budget {budget_s:.0f} s: the answer that can settle first, then provisional "
         f"answers after each answer's first session"
         + (f"s ({pairs} measured together)" if pairs > 1 else "")
         + ", then more runs where answers are not settled while the budget allows")
    specs = _first_pass(sweep, specs, hw, preset=preset, passes=passes)
    units = sweep.units(specs)
    keys = {s.key() for s in specs}
    plan = look_plan(SweepStore(out), budget_s)
    outcome = SweepOutcome(out)
    opening = opening_unit(units) if passes is None else ()
    if opening:
        outcome = _open_with(opening, out, budget_s=budget_s, started=started,
                             evidence=evidence, plan=plan, planned=specs, echo=echo)
        if outcome.interrupted:
            return outcome
    opened = {s.key() for s in opening}
    opened_runs = len({r.replicate for r in outcome.ran})
    shared = {s.key() for u in units if len(u) > 1 for s in u}
    phases = [[s for s in specs if s.key() in shared and s.key() not in opened],
              [s for s in specs if s.key() not in shared]]
    # Each other answer's first sessions, on CPUs two measured together: their
    # start-ups overlap, and the provisional answers rest on two sessions, not one.
    together = 1 if passes is not None else pairs
    for i, phase in enumerate(p for p in phases if p):
        runs = together if i == 0 and phase is phases[0] else 1
        outcome = _first_sessions(sweep, phase, hw, runs, passes, outcome)
        if outcome.interrupted:
            return outcome
        if i == 0:
            each = "one session each" if together == 1 else \
                f"{together} sessions each, measured together"
            _provisional(sweep, keys, each + (f", {opened_runs} of the opening's"
                                              if opened_runs > 1 else "")
                         + (", the multi-process configurations still to come"
                            if phases[0] and phases[1] else ""),
                         plan, show=show)
    if passes is not None:
        outcome = merge(outcome, run_sweep(specs, out, replication=passes,
                                           interleave=interleave, evidence=evidence,
                                           shared_from=1))
    if not outcome.interrupted:
        outcome = _spend(sweep, specs, plan, outcome)
    outcome.wall_s = time.monotonic() - started
    return outcome


def _first_pass(sweep: _Budget, specs: Sequence[RunSpec], hw: Hardware, *, preset: bool,
                passes: Replication | None) -> list[RunSpec]:
    """The first pass planned (priced on GPUs: ``bench.adaptive.plan``) and said; what it
    runs, which is all the later sessions measure."""
    out = sweep.out
    first = plan_first_pass(
        specs, hw, budget_s=sweep.budget_s - (time.monotonic() - sweep.started),
        preset=preset, results=load_sweep(out).results if out.is_dir() else [],
        links=topology_links(topology()) if hw.gpus else [], interleave=sweep.interleave,
        runs=passes.runs if passes is not None else 1, evidence_steps=sweep.evidence.steps)
    for line in first.summary():
        sweep.echo(line)
    return first.runs


def _first_sessions(sweep: _Budget, phase: list[RunSpec], hw: Hardware, runs: int,
                    passes: Replication | None, outcome: SweepOutcome) -> SweepOutcome:
    """A phase's first sessions (``runs`` measured together where memory holds them),
    merged into ``outcome``; with ``passes``, one call for the whole phase."""
    out = sweep.out
    # Sessions measured together hold their arms side by side: no more of them at
    # once than the machine's memory holds (bench.adaptive.footprint).
    runs = together_fitting(sweep.units(phase), hw, runs)
    if passes is not None:
        return merge(outcome, run_sweep(
            phase, out, replication=Replication(runs=runs), interleave=sweep.interleave,
            evidence=sweep.evidence, shared_from=1, together=runs))
    # Unit by unit, each unit's rounds stopping early enough to leave the units
    # after it their least price: a first unit measured whole must not leave the
    # next to start after the budget's end. Where nothing was priced (the
    # preset's own workloads), one call, as one progress count for the phase.
    # What a run found unsupported at another batch is not built again, nor
    # priced.
    known = {r.spec.key() for r in found_unsupported(phase, SweepStore(out), sweep.echo)}
    kept = _within([s for s in phase if s.key() not in known], out,
                   sweep.until - time.monotonic(), runs, sweep.interleave, sweep.echo)
    if not any(price for _, price in kept):
        kept = [([s for unit, _ in kept for s in unit], 0.0)] if kept else []
    for j, (unit, _) in enumerate(kept):
        reserve = sum(price for _, price in kept[j + 1:])
        outcome = merge(outcome, run_sweep(
            unit, out, replication=Replication(runs=runs), interleave=sweep.interleave,
            evidence=sweep.evidence, shared_from=1, together=runs,
            windows_until=sweep.until - ENDS_S - reserve))
        if outcome.interrupted:
            return outcome
    return outcome


def _provisional(sweep: _Budget, keys: set[str], sessions: str, plan: LookPlan, *,
                 show: ShowAnswers | None) -> None:
    """The provisional answers after the first phase (``sessions``: what they rest on),
    read as the budget's looks are: at the interim alpha (bench.answers.sequential)."""
    if show is None:
        return
    mine = stored(sweep.out, keys)
    # Not a claim: read before every configuration has run, and counted by no look.
    print_answers(mine, f"\nprovisional answers (not a claim; "
                        f"{time.monotonic() - sweep.started:.0f} s; {sessions}):", show,
                  echo=sweep.echo, looks=Looks(default=plan.interim))


def _spend(sweep: _Budget, specs: list[RunSpec], plan: LookPlan,
           outcome: SweepOutcome) -> SweepOutcome:
    """The budget's sessions where answers are open, then how the looks settled."""
    for session in spend(specs, sweep.out, budget_s=sweep.budget_s, started=sweep.started,
                         interleave=sweep.interleave, echo=sweep.echo, plan=plan):
        outcome = merge(outcome, session)
    events = SweepStore(sweep.out).journal_events()
    looked_at = len(looks_taken(events))  # every place of the sweep had a look
    if looked_at:
        sweep.echo(f"budget: {settlement_line(events, looked_at)}")
        left = open_line(events)
        if left:
            sweep.echo(f"budget: {left}")
    return outcome


def _within(phase: Sequence[RunSpec], out: Path, left_s: float, sessions: int,
            interleave: bool, echo: Callable[[str], None]
            ) -> list[tuple[list[RunSpec], float]]:
    """The units of a first-pass ``phase`` that ``left_s`` seconds pay for, in its
    order, each with its least price (0 where it has none); the others are left out,
    said with the price and how to measure them. Each unit (``sweep_units``:
    ``sessions`` sessions of it measured together, or one run of its own) is priced
    from its workload's measured runs (``first_price``); one whose workload has none
    runs (nothing to price it from). Its sessions' rounds stop early enough
    (``run_sweep``'s ``windows_until``), so a session is priced at its fixed part and
    ``MIN_ROUNDS`` rounds: what it costs however short. A unit whose runs are all
    stored (a resumed sweep) costs nothing: ``run_sweep`` runs only what is missing."""
    results = load_sweep(out).results if out.is_dir() else []
    store = SweepStore(out)
    kept: list[tuple[list[RunSpec], float]] = []
    left_out: list[str] = []
    spent = 0.0
    for unit in sweep_units(phase) if interleave else [(s,) for s in phase]:
        if all(len(store.replicates_done(s, sessions)) == sessions for s in unit):
            kept.append((list(unit), 0.0))
            continue
        price = first_price(unit, results, sessions, MIN_ROUNDS if len(unit) > 1 else None)
        if price is None and not detect().gpus:  # nothing of its workload measured yet
            guess = first_guess_s(unit, sessions)
            if spent + guess > left_s:
                left_out.append(f"{', '.join(s.label() for s in unit)} (~{guess:.0f} s, a "
                                f"first guess: nothing of {unit[0].workload} was measured)")
                continue
        if price is None or spent + price <= left_s:
            kept.append((list(unit), price or 0.0))
            spent += price or 0.0
        else:
            left_out.append(f"{', '.join(s.label() for s in unit)} (~{price:.0f} s)")
    if left_out:
        echo(f"left out of the first pass, {max(0.0, left_s - spent):.0f} s of the budget "
             f"left: {'; '.join(left_out)}; a longer budget measures them "
             f"(make bench BENCH_BUDGET_S=<seconds>, bench run --budget <time>)")
    return kept


def first_guess_s(unit: Sequence[RunSpec], sessions: int) -> float:
    """A first guess of ``unit``'s first ``sessions`` sessions (``MIN_ROUNDS`` rounds:
    a budget stops them there at worst), or of its one run of its own."""
    hw = detect()
    if len(unit) == 1:
        return Pricer(hw).price(unit[0]).total_s
    return session_guess(unit, hw, MIN_ROUNDS, sessions)


def affordable_part(unit: Sequence[RunSpec], hw: Hardware, sessions: int, left_s: float,
                    echo: Callable[[str], None]) -> list[RunSpec]:
    """Of ``unit``, what ``left_s`` seconds pay for by a first guess of its first
    ``sessions`` sessions (builds, warm-ups, ``MIN_ROUNDS`` rounds): all of it where the
    guess fits; else its configurations from the plainest
    and cheapest while they fit (two at least, or none: one arm compares nothing). Each
    one left out is said with its guessed price."""
    runnable = [s for s in unit
                if STRATEGIES.get(s.strategy).unsupported_reason(s, hw) is None]
    if not runnable or session_guess(runnable, hw, MIN_ROUNDS, sessions) <= left_s:
        return list(unit)
    pricer = Pricer(hw)
    prices = {s.key(): pricer.price(s.replace(repeats=MIN_ROUNDS)) for s in runnable}

    def rank(spec: RunSpec) -> tuple[int, float]:
        # The plainest single-device reference first, what it is compared with after it
        # from the cheapest, any second reference last (the same computation).
        ref = STRATEGIES.get(spec.strategy).single_device_rank
        first_ref = ref is not None and spec.devices == 1 and ref == min(
            (r for x in runnable if (r := STRATEGIES.get(x.strategy).single_device_rank)
             is not None), default=ref)
        return (0 if first_ref else 2 if ref is not None and spec.devices == 1 else 1,
                prices[spec.key()].total_s)

    kept: list[RunSpec] = []
    for spec in sorted(runnable, key=rank):
        if session_guess([*kept, spec], hw, MIN_ROUNDS, sessions) <= left_s:
            kept.append(spec)
    if len(kept) < 2:
        kept = []
    echo(f"the first session(s) of {len(runnable)} configuration(s) would take "
         f"~{session_guess(runnable, hw, MIN_ROUNDS, sessions):.0f} s (a first guess: "
         f"builds, warm-ups and {MIN_ROUNDS} rounds) of the {max(0.0, left_s):.0f} s the "
         f"budget's first half has left: " + (
             f"measuring {len(kept)} of them; left out, each priced alone:" if kept
             else "not opened; each, priced alone:"))
    for spec in runnable:
        if spec not in kept:
            echo(f"  {spec.label()}: {prices[spec.key()].text()}")
    echo("  a longer budget (bench run --budget <time>), fewer configurations or a smaller "
         "model measures them")
    kept += [s for s in unit if s not in runnable]  # recorded unsupported, at no cost
    return [s for s in unit if s in kept]


def warn_if_too_large(unit: Sequence[RunSpec], hw: Hardware,
                      echo: Callable[[str], None]) -> None:
    why = too_large(unit, hw)
    if why:
        echo(f"memory: a session of {len(unit)} configuration(s) may not fit: {why}")


def opening_unit(units: Sequence[tuple[RunSpec, ...]]) -> tuple[RunSpec, ...]:
    """The answer a budget measures first: of the units whose configurations share
    sessions, the one with the fewest (one comparison, of two arms, settles in the
    fewest sessions, and its sessions are the cheapest of its workload's), the first in
    the matrix's order among equals; () where none shares. Chosen before any figure, so
    that the looks' alpha covers it."""
    shared = [u for u in units if len(u) > 1]
    return min(shared, key=len) if shared else ()


def _open_with(unit: Sequence[RunSpec], out: Path, *, budget_s: float, started: float,
               evidence: Evidence, plan: LookPlan, planned: Sequence[RunSpec],
               echo: Callable[[str], None],
               clock: Callable[[], float] = time.monotonic) -> SweepOutcome:
    """Sessions of ``unit`` (each only where it would end within the first third of the
    budget, priced as the budget prices a session alone: ``priced``; their rounds stop
    at the end of that third, a heavier model's first pair's too), a look at the sweep's
    ``planned`` configurations after the ``OPENING_SESSIONS``-th and after each further
    one until the unit's answer settles, has had half of ``plan``'s interim looks, or
    waits for configurations of its place that run alone (read once they have run): a
    clear answer settles early, and the others' first sessions come soon after.
    ``clock``: ``started``'s."""
    outcome = SweepOutcome(out)
    hw = detect()
    # As many of the first sessions together as the machine's memory holds
    # (bench.adaptive.footprint), and of the unit what a first guess says the budget's
    # first half pays for: its builds, warm-ups and two rounds (bench.adaptive.pricing).
    together = together_fitting([unit], hw, together_on(hw))
    if not hw.gpus:  # on GPUs the first pass was priced whole (bench.adaptive.plan)
        unit = affordable_part(unit, hw, together, budget_s / 2 - (clock() - started), echo)
        if len(unit) < 2:
            return outcome
    warn_if_too_large(unit, hw, echo)
    mine = {s.key() for s in unit}
    looks_left = max(1, (plan.max_interim + 1) // 2)
    n, looked = 0, False
    while looks_left:
        n += 1
        # Another session alone: priced as the budget prices one (its whole fixed part,
        # not a share of the pair's, and no profile).
        last = priced([NextRuns.of(n, mine, {s.key(): s for s in unit},
                                   last_costs(outcome.ran))], 1)
        if n > 1 and clock() - started + last > budget_s / 3:
            echo(f"the opening stops at {n - 1} session(s): another (~{last:.0f} s) would "
                 f"end after the first third of the budget ({budget_s / 3:.0f} s)")
            break
        first = n
        if n == 1:
            # The first sessions measured together where the hardware allows (and its
            # memory holds them): their start-ups (mostly one core's work each) overlap,
            # their windows take turns. The rest are priced as they come.
            n = together
        session = run_sweep(list(unit), out, replication=Replication(runs=n, first=first),
                            interleave=True, evidence=evidence, shared_from=1,
                            together=n - first + 1, windows_until=started + budget_s / 3)
        outcome = merge(outcome, session)
        if outcome.interrupted or not (session.ran or session.skipped):
            return outcome  # nothing ran, and nothing was stored before (a resume skips those)
        if n >= OPENING_SESSIONS:
            still = _look(out, plan, planned, clock() - started, budget_s, echo)
            looked, looks_left = True, looks_left - 1
            if not any(mine & set(a.keys) for a in still):
                return outcome  # settled
            if any(a.waiting for a in still if mine & set(a.keys)):
                echo("the opening's answer waits for its configurations that run alone: "
                     "it is read once they have run")
                return outcome
    if not looked:
        _look(out, plan, planned, clock() - started, budget_s, echo)
    return outcome


def _look(out: Path, plan: LookPlan, planned: Sequence[RunSpec], elapsed: float,
          budget_s: float, echo: Callable[[str], None]) -> list[OpenAnswer]:
    """An interim look (``bench.adaptive.budget.look``) at the sweep's stored runs of
    its ``planned`` configurations, ``elapsed`` seconds into it (a place where one of
    them has not run yet waits); returns the answers still open."""
    return look(stored(out, {s.key() for s in planned}), out, plan, elapsed, budget_s, echo,
                planned=planned)


def merge(a: SweepOutcome, b: SweepOutcome) -> SweepOutcome:
    """Two invocations of one sweep as one outcome."""
    return SweepOutcome(a.sweep_dir, [*a.ran, *b.ran], b.skipped,
                        a.interrupted or b.interrupted, a.wall_s + b.wall_s)
