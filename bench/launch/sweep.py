"""Run a list of specs as a sweep: one isolated process each, resumable.

The sweep directory's layout belongs to ``bench.results.store``. Re-running the
same sweep skips configurations that already have a result file; an interrupted
configuration has none, so it runs again.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bench.env import fingerprint, now_iso
from bench.errors import SchemaError
from bench.launch.arms import run_interleaved
from bench.launch.evidence import OFF, Evidence
from bench.launch.groups import is_session, sweep_units
from bench.launch.launcher import make_result, run_isolated, unsupported_result
from bench.launch.memory_fit import note_largest_fit
from bench.launch.session import Copy, members_of, run_session, run_sessions
from bench.results.schema import RunResult
from bench.results.store import SweepStore, load, save
from bench.spec import RunSpec

# A session of arms measures its rounds in up to this many blocks (of 2 rounds or more),
# every arm built afresh for each, as many as the builds' cost allows
# (``bench.child.arms.planned_builds``). Most of an arm's offset in a process belongs to
# its build, so the session's mean over B builds carries 1/B of it.
SESSION_BUILDS = 5


@dataclass
class SweepOutcome:
    sweep_dir: Path
    ran: list[RunResult] = field(default_factory=list)
    skipped: list[RunSpec] = field(default_factory=list)
    interrupted: bool = False
    wall_s: float = 0.0  # this invocation, start to end

    @property
    def problems(self) -> list[RunResult]:
        """Runs that ended failed, oom or timeout (unsupported is not a problem)."""
        return [r for r in self.ran if r.status in ("failed", "oom", "timeout")]


def cost_line(results: Sequence[RunResult], wall_s: float) -> str | None:
    """What the profiles of ``results`` cost the sweep: ``evidence: 12 runs profiled
    after their windows, 4.1 s of the sweep's 310 s (1.3%)``; None without profiles."""
    costs = [b.capture_s for r in results
             if r.figures is not None and (b := r.figures.breakdown) is not None]
    if not costs:
        return None
    spent = sum(costs)
    share = f" ({spent / wall_s:.1%})" if wall_s > 0 else ""
    many = len(costs) != 1
    return (f"evidence: {len(costs)} run{'s' if many else ''} profiled after "
            f"{'their' if many else 'its'} windows, {spent:.1f} s of the sweep's {wall_s:.0f} s"
            f"{share} (--no-profile skips it)")


def measured_line(results: Sequence[RunResult], wall_s: float) -> str | None:
    """How much of the sweep measured: ``measured: 148 s of the sweep's 555 s in
    windows (27%), the rest start-ups, builds, warm-ups and profiles``; None when no
    run has windows or no wall time is known."""
    measured = sum(w.wall_s for r in results if r.figures is not None
                   for w in r.figures.windows)
    if not measured or wall_s <= 0:
        return None
    return (f"measured: {measured:.0f} s of the sweep's {wall_s:.0f} s in windows "
            f"({measured / wall_s:.1%}), the rest start-ups, builds, warm-ups and profiles")


def _fmt_duration(seconds: float) -> str:
    seconds = max(0, round(seconds))
    m, s = divmod(seconds, 60)
    return f"{m}m{s:02d}s" if m else f"{s}s"


class Progress:
    """Terminal progress: which configuration, how many done, time left."""

    def __init__(self, total: int, echo: Callable[[str], None], extra_note: str = "") -> None:
        self.total, self.echo, self.extra_note = total, echo, extra_note
        self.done = 0
        self.t0 = time.monotonic()
        self._walls: dict[str, list[float]] = {}

    def eta(self, remaining: Sequence[RunSpec]) -> float | None:
        if not self._walls:
            return None
        # Per-workload means (a ResNet50 run costs far more than an MLP run); a workload
        # not seen yet is priced from the seen ones through the workloads' cost hints.
        from workloads import find_workload

        per_unit = [sum(ws) / len(ws) / find_workload(w).cost_hint
                    for w, ws in self._walls.items()]
        unit = sum(per_unit) / len(per_unit)
        return sum(sum(ws) / len(ws) if (ws := self._walls.get(s.workload))
                   else unit * find_workload(s.workload).cost_hint for s in remaining)

    def start(self, spec: RunSpec, remaining: Sequence[RunSpec], replicate: int = 1,
              shared: Sequence[str] = (), together: Sequence[tuple[str, int, int]] = ()
              ) -> None:
        """Announce the next run; ``remaining`` are the runs still planned, this one first;
        ``shared``: the configurations measured in the same process (interleaved);
        ``together``: the sessions measured at once (the first configuration of each,
        how many more it has, its run)."""
        eta = self.eta(remaining)
        left = f", ~{_fmt_duration(eta)} left{self.extra_note}" if eta is not None else ""
        run = f" (run {replicate})" if replicate > 1 else ""
        if shared:
            run += f" in one session with {', '.join(shared)}, windows interleaved"
        if together:
            self.echo(f"[{self.done + 1}/{self.total}] {len(together)} sessions measured "
                      f"together, windows taking turns: "
                      + "; ".join(f"{label} with {more} more (run {r})"
                                  for label, more, r in together)
                      + f" ... (elapsed {_fmt_duration(time.monotonic() - self.t0)}{left})")
            return
        self.echo(f"[{self.done + 1}/{self.total}] {spec.label()}{run} ... "
                  f"(elapsed {_fmt_duration(time.monotonic() - self.t0)}{left})")

    def finish(self, result: RunResult, named: bool = False) -> None:
        """Say how ``result`` ended (``named``: with its configuration, one of several
        results of a shared session)."""
        self.done += 1
        if result.status != "unsupported":
            self._walls.setdefault(result.spec.workload, []).append(result.session_wall_s)
        if result.status == "ok" and result.figures:
            f = result.figures
            detail = (f"{f.global_throughput:,.1f} examples/s, step "
                      f"{f.step_time.median_s * 1e3:.2f} ms median, first step after "
                      f"{f.startup.launch_to_first_step_s:.1f} s")
        elif result.status == "ok" and result.allreduce:
            from bench.results.text import allreduce_line

            detail = allreduce_line(result.allreduce)
        else:
            detail = (result.reason or "").splitlines()[0] if result.reason else ""
        label = f"{result.spec.label()}: " if named else ""
        self.echo(f"    -> {label}{result.status}: {detail} [{result.wall_s:.1f} s]")
        if result.figures and result.figures.breakdown:
            from bench.results.text import breakdown_line

            self.echo(f"       {breakdown_line(result.figures.breakdown)}")


@dataclass(frozen=True)
class Replication:
    """How many processes measure each configuration, at different times.

    Windows of one process share its conditions (placement, frequency, neighbours),
    so the runs, not the windows, carry the machine's real noise. ``runs`` passes go
    over the whole matrix, alternating forward and reverse order so that a slow drift
    of the machine hits every configuration alike; after them, a configuration whose
    run medians still disagree by more than ``spread`` (relative range) gets further
    runs, up to ``max_runs`` (sequential measurement: precise ones stop early).
    Only configurations whose first run was ``ok`` are repeated. ``first``: the first
    pass to run, those before it left as they are (a budget's session is one pass, at
    the number after its answer's last; a configuration that sat sessions out skips
    their numbers).
    """

    runs: int = 1
    max_runs: int | None = None
    spread: float = 0.10
    first: int = 1

    def __post_init__(self) -> None:
        if isinstance(self.runs, bool) or not isinstance(self.runs, int) or self.runs < 1:
            raise ValueError(f"Replication.runs must be an integer >= 1. Received: "
                             f"runs={self.runs!r}")
        if self.max_runs is not None and (not isinstance(self.max_runs, int)
                                          or self.max_runs < self.runs):
            raise ValueError(f"Replication.max_runs must be an integer >= runs ({self.runs})."
                             f" Received: max_runs={self.max_runs!r}")
        if not self.spread > 0:
            raise ValueError(f"Replication.spread must be > 0. Received: spread={self.spread!r}")
        if isinstance(self.first, bool) or not isinstance(self.first, int) \
                or not 1 <= self.first <= self.runs:
            raise ValueError(f"Replication.first must be an integer from 1 to runs ({self.runs})."
                             f" Received: first={self.first!r}")

    @property
    def passes(self) -> int:
        return max(self.runs, self.max_runs or self.runs)


def run_medians(results: Sequence[RunResult]) -> list[float]:
    """Headline throughput of each ok run (one value per process)."""
    return [r.figures.global_throughput for r in results
            if r.status == "ok" and r.figures is not None]


def needs_another_run(results: Sequence[RunResult], spread: float) -> bool:
    """True when the runs so far disagree by more than ``spread`` (relative range)."""
    values = sorted(run_medians(results))
    if len(values) < 2:
        return False
    mid = values[len(values) // 2] if len(values) % 2 else \
        (values[len(values) // 2 - 1] + values[len(values) // 2]) / 2
    return mid > 0 and (values[-1] - values[0]) / mid > spread


def found_unsupported(specs: Sequence[RunSpec], store: SweepStore,
                      echo: Callable[[str], None] = print) -> list[RunResult]:
    """Store, without a process, the first run of each of ``specs`` that has no run yet
    and whose configuration a run of this sweep found unsupported at another batch size
    (the same spec but for ``batch``); returns those results.

    What a run finds unsupported (``bench.child.main.KNOWN_INCOMPATIBLE``, and the
    child's ``Unsupported``: a model's variables under a strategy, a Keras lane, a data
    path, devices not visible) is a property of the model, strategy, devices and lane,
    not of the batch: CentralStorage failed a user's MobileNetV2 at batch 256 and was
    built again, and failed again, in both sessions at batch 64. A configuration the
    strategy refuses before any process (``unsupported_result``: its reason may rest
    on the batch) teaches nothing here."""
    new = [s for s in specs if not store.has_result(s, 1) and unsupported_result(s) is None]
    found = [r for r in store.load().results if r.status == "unsupported"
             and unsupported_result(r.spec) is None] if new else []
    out: list[RunResult] = []
    for spec in new:
        seen = next((r for r in found if r.spec.global_batch != spec.global_batch
                     and r.spec.replace(batch=spec.batch).key() == spec.key()), None)
        if seen is None:
            continue
        result = make_result(spec, "unsupported",
                             f"{seen.reason} (found by its run at batch "
                             f"{seen.spec.global_batch}; not run at this batch)")
        result.replicate = 1
        save(result, store.paths(spec, 1).result)
        echo(f"    -> {spec.label()}: unsupported, not run: found unsupported at batch "
             f"{seen.spec.global_batch} in this sweep")
        out.append(result)
    return out


def run_sweep(specs: Sequence[RunSpec], sweep_dir: Path,
              echo: Callable[[str], None] = print,
              replication: Replication | None = None,
              interleave: bool = False, evidence: Evidence = OFF,
              shared_from: int = 2, together: int = 1,
              windows_until: float | None = None) -> SweepOutcome:
    """Run every (spec, replicate) without a stored result; Ctrl-C stops cleanly.

    Finished results are kept; re-running the same sweep resumes run by run.
    ``replication`` defaults to one run per configuration (the CLI asks for two).
    ``interleave``: from pass ``shared_from`` on, the configurations one answer compares
    that can share a process (``bench.launch.groups``) run as one process, windows
    interleaved, so the answer's ratios come from pairs; with the default 2 the first
    pass keeps every configuration in its own process (its memory and start-up are its
    own), with 1 (a sweep on a budget) every pass shares.
    ``evidence`` says which runs profile a few steps after their windows (the CLI
    profiles each configuration's first run: ``bench.launch.evidence``).
    ``together`` above 1 (with ``interleave``): the sessions of the planned runs go
    first, up to that many at a time measured together (``_together``,
    ``bench.launch.session.run_sessions``: their start-ups overlap, their windows take
    turns), one answer's runs and different answers' alike; the passes then run what
    is left. ``windows_until`` (``time.monotonic``): every session's rounds stop at it
    (``bench.launch.session.run_sessions``; a sweep's budget).
    """
    rep = replication or Replication()
    sweep_dir.mkdir(parents=True, exist_ok=True)
    store = SweepStore(sweep_dir)
    outcome = SweepOutcome(sweep_dir)
    planned = _plan(specs, store, rep, outcome, echo)
    extra = rep.passes - rep.runs
    progress = Progress(planned, echo, extra_note=(
        f" (+ up to {extra} more run(s) each for imprecise configurations)" if extra else ""))
    running = _Running(store, specs, rep, evidence, windows_until, progress, outcome)
    try:
        running.together(interleave, shared_from, together)
        running.passes(interleave, shared_from)
    except KeyboardInterrupt:
        outcome.interrupted = True
        echo(f"\ninterrupted: {len(outcome.ran)} result(s) kept; the current run was killed "
             f"and will run again when the sweep is resumed")
    outcome.wall_s = time.monotonic() - progress.t0
    store.journal({"event": "interrupted" if outcome.interrupted else "finished",
                   "at": now_iso(), "ran": len(outcome.ran),
                   "statuses": [r.status for r in outcome.ran],
                   "wall_s": round(outcome.wall_s, 1)})
    return outcome


def _plan(specs: Sequence[RunSpec], store: SweepStore, rep: Replication,
          outcome: SweepOutcome, echo: Callable[[str], None]) -> int:
    """What the sweep's passes have left to run, journaled as its start (the
    configurations with nothing left go to ``outcome.skipped``); returns how many runs."""
    found_unsupported(specs, store, echo)
    done = {s.key(): store.replicates_done(s, rep.passes) for s in specs}
    missing = {k: [r for r in range(rep.first, rep.runs + 1) if r not in d]
               for k, d in done.items()}
    outcome.skipped = [s for s in specs if not missing[s.key()]]
    planned = sum(len(m) for m in missing.values())
    resumed = sum(len([r for r in d if r >= rep.first]) for d in done.values())
    if resumed:
        # Of these configurations and passes only: a budget's session is the next pass of
        # a few of the sweep's configurations, which is no resuming.
        echo(f"resuming {store.root}: {resumed} run(s) of these {len(specs)} "
             f"configuration(s) already stored, {planned} to run")
    store.journal({"event": "start", "at": now_iso(), "configurations": len(specs),
                   "runs_per_configuration": rep.runs, "max_runs": rep.passes,
                   "to_run": planned, "specs": [s.to_dict() for s in specs],
                   "environment": fingerprint()})
    return planned


@dataclass
class _Running:
    """One invocation of a sweep running its runs: what it ran so far (``by_key``,
    ``outcome.ran``), said as it goes (``progress``)."""

    store: SweepStore
    specs: Sequence[RunSpec]
    rep: Replication
    evidence: Evidence
    windows_until: float | None
    progress: Progress
    outcome: SweepOutcome
    by_key: dict[str, list[RunResult]] = field(default_factory=dict)

    def _record(self, results: list[RunResult], named: bool) -> None:
        for result in results:
            self.by_key.setdefault(result.spec.key(), []).append(result)
            self.outcome.ran.append(result)
            self.progress.finish(result, named=named)

    def together(self, interleave: bool, shared_from: int, together: int) -> None:
        """The planned runs' sessions measured together (``_together``)."""
        store, by_key, specs, rep = self.store, self.by_key, self.specs, self.rep
        for group in _together(store, by_key, specs, rep, interleave, shared_from,
                               together):
            first, replicate = group[0][0][0], group[0][1]
            self.progress.start(first, _still_planned(store, by_key, specs, first,
                                                      replicate, rep),
                                replicate, together=[(s[0].label(), len(s) - 1, r)
                                                     for s, r in group])
            self._record(_run_group(store, group, self.evidence, self.windows_until),
                         named=True)

    def passes(self, interleave: bool, shared_from: int) -> None:
        """Pass after pass, what is still due: each unit a session or a run each, in
        the units' order, reversed every other pass."""
        store, by_key, specs, rep = self.store, self.by_key, self.specs, self.rep
        for replicate in range(rep.first, rep.passes + 1):
            units = sweep_units(specs) if interleave and replicate >= shared_from else \
                [(s,) for s in specs]
            for unit in (units if replicate % 2 else list(reversed(units))):
                due = [s for s in unit if _due(store, by_key, s, replicate, rep)]
                if replicate > rep.runs and due:
                    # An extra session measures the whole answer: its ratios need pairs.
                    due = [s for s in unit if not store.has_result(s, replicate)
                           and (earlier := _earlier(store, by_key, s, replicate))
                           and earlier[0].status == "ok"]
                    self.progress.total += len(due)
                if not due:
                    continue
                self.progress.start(due[0], _still_planned(store, by_key, specs, due[0],
                                                           replicate, rep), replicate,
                                    shared=[s.label() for s in due[1:]])
                results = _run_group(store, [(due, replicate)], self.evidence,
                                     self.windows_until) if is_session(due) \
                    else [_run_one(store, s, replicate, self.outcome, self.evidence)
                          for s in due]
                self._record(results, named=len(results) > 1)


def _together(store: SweepStore, by_key: dict[str, list[RunResult]],
              specs: Sequence[RunSpec], rep: Replication, interleave: bool,
              shared_from: int, together: int
              ) -> Iterator[list[tuple[list[RunSpec], int]]]:
    """The sessions to measure together: each session unit's planned runs (from
    ``shared_from`` on) with their configurations not stored yet, in the units' order
    and each unit's runs in turn, in groups of up to ``together`` sessions of one
    number of rounds; a group of one is left to the sweep's passes. A run after the
    first is due where the one before it is planned here or went well (``_due``)."""
    if together < 2 or not interleave:
        return
    planned = range(max(rep.first, shared_from), rep.runs + 1)
    items: list[tuple[list[RunSpec], int]] = []
    for unit in sweep_units(specs):
        for r in planned:
            due = [s for s in unit if not store.has_result(s, r)
                   and (r - 1 in planned or _due(store, by_key, s, r, rep))]
            if is_session(due):
                items.append((due, r))
    by_rounds: dict[int, list[tuple[list[RunSpec], int]]] = {}
    for item in items:
        by_rounds.setdefault(max(s.repeats for s in item[0]), []).append(item)
    for same in by_rounds.values():
        for i in range(0, len(same), together):
            if len(same[i:i + together]) > 1:
                yield same[i:i + together]


def _still_planned(store: SweepStore, by_key: dict[str, list[RunResult]],
                   specs: Sequence[RunSpec], current: RunSpec, replicate: int,
                   rep: Replication) -> list[RunSpec]:
    """The runs still to come, ``current`` first: the rest of this pass and the later
    planned passes (configurations whose first run failed are not repeated; extra
    sequential runs are unknown in advance and not counted)."""
    order = list(specs) if replicate % 2 else list(reversed(specs))
    out = [s for s in order[order.index(current):] if not store.has_result(s, replicate)]
    for r in range(replicate + 1, rep.runs + 1):
        for s in specs:
            first = by_key.get(s.key(), [None])[0]
            repeatable = first is None or first.status == "ok"
            if repeatable and not store.has_result(s, r):
                out.append(s)
    return out


def _earlier(store: SweepStore, by_key: dict[str, list[RunResult]], spec: RunSpec,
             replicate: int) -> list[RunResult]:
    """Runs 1..replicate-1 of ``spec``: from this invocation, else from the store."""
    mine = {r.replicate: r for r in by_key.get(spec.key(), [])}
    out = []
    for r in range(1, replicate):
        if r in mine:
            out.append(mine[r])
        elif store.has_result(spec, r):
            try:
                out.append(load(store.paths(spec, r).result))
            except SchemaError:
                continue
    return out


def run_replicate(store: SweepStore, spec: RunSpec, replicate: int = 1,
                  finish: Callable[[RunResult], RunResult] | None = None,
                  env: Mapping[str, str] | None = None,
                  python: str | None = None, profile_steps: int = 0) -> RunResult:
    """Run ``spec`` isolated as its run number ``replicate`` and save the result.

    The one way a run is measured and kept (sweeps, the pytest-benchmark fixture,
    scripts): the log, profile and result go where the store names run ``replicate``
    of ``spec``, and the result says which run it is. ``finish`` may amend the result
    before it is saved; ``env`` is set in the run's processes and ``python`` starts
    them (another interpreter; ``run_isolated``), which profiles ``profile_steps``
    steps after the windows. A result already stored there is never overwritten
    (raises FileExistsError after the run).
    """
    paths = store.paths(spec, replicate)
    result = run_isolated(spec, paths.log, profile_dir=paths.profile, env=env, python=python,
                          profile_steps=profile_steps)
    result.replicate = replicate
    if finish is not None:
        result = finish(result)
    save(result, paths.result)
    return result


def _due(store: SweepStore, by_key: dict[str, list[RunResult]], spec: RunSpec,
         replicate: int, rep: Replication) -> bool:
    """Whether ``spec`` gets its run ``replicate`` in this pass."""
    if store.has_result(spec, replicate):
        return False
    earlier = _earlier(store, by_key, spec, replicate)
    if replicate > 1 and (not earlier or earlier[0].status != "ok"):
        return False  # failed, unsupported or not run: nothing to replicate
    return replicate <= rep.runs or needs_another_run(earlier, rep.spread)


def _run_group(store: SweepStore, items: Sequence[tuple[Sequence[RunSpec], int]],
               evidence: Evidence = OFF, windows_until: float | None = None
               ) -> list[RunResult]:
    """Run each ``(specs, replicate)`` of ``items`` as one session (windows interleaved:
    the in-process ones as arms of one process, a multi-process one in its own
    processes taking turns with it, ``bench.launch.session``) as their run
    ``replicate``; two or more are measured together (``run_sessions``). Each run is
    profiled after all windows where ``evidence`` asks, and saved where the store names
    it. With ``windows_until`` every session is paced by the launcher, which stops its
    rounds then (``run_sessions``), one alone too."""
    rounds = max(2, max(s.repeats for specs, _ in items for s in specs))
    copies, profile_steps = [], 0
    for specs, replicate in items:
        steps = [evidence.steps_for(s, replicate) for s in specs]
        profile_steps = max(profile_steps, *steps)
        copies.append(Copy(list(specs), store.paths(specs[0], replicate).log, replicate,
                           [store.paths(s, replicate).profile if n else None
                            for s, n in zip(specs, steps, strict=True)]))
    if len(copies) > 1 or windows_until is not None:
        runs = run_sessions(copies, rounds=rounds, profile_steps=profile_steps,
                            builds=SESSION_BUILDS, windows_until=windows_until)
    else:
        one = copies[0]
        run = run_session if members_of(one.specs) else run_interleaved
        runs = [run(one.specs, one.log_path, rounds=rounds, seed=one.seed,
                    profile_steps=profile_steps, builds=SESSION_BUILDS,
                    profile_dirs=one.profile_dirs)]
    out = []
    for (_, replicate), copy, results in zip(items, copies, runs, strict=True):
        for result in results:
            result.replicate = replicate
            paths = store.paths(result.spec, replicate)
            # One process, one log: every arm's run names it where the store expects its
            # own.
            if (paths.log != copy.log_path and copy.log_path.exists()
                    and not paths.log.exists()):
                paths.log.parent.mkdir(parents=True, exist_ok=True)
                os.link(copy.log_path, paths.log)
            save(result, paths.result)
            out.append(result)
    return out


def _run_one(store: SweepStore, spec: RunSpec, replicate: int,
             outcome: SweepOutcome, evidence: Evidence = OFF) -> RunResult:
    def with_largest_fit(result: RunResult) -> RunResult:
        if result.status != "oom":
            return result
        # Say which batch of this configuration did fit.
        return note_largest_fit(result, [*outcome.ran, *store.load().results])

    return run_replicate(store, spec, replicate, finish=with_largest_fit,
                         profile_steps=evidence.steps_for(spec, replicate))
