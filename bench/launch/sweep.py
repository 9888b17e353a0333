"""Run a list of specs as a sweep: one isolated process each, resumable.

The sweep directory's layout belongs to ``bench.results.store``. Re-running the
same sweep skips configurations that already have a result file; an interrupted
configuration has none, so it runs again.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bench.env import fingerprint, now_iso
from bench.launch.launcher import run_isolated
from bench.results.schema import RunResult
from bench.results.store import RunPaths, SweepStore, save
from bench.spec import RunSpec


@dataclass
class SweepOutcome:
    sweep_dir: Path
    ran: list[RunResult] = field(default_factory=list)
    skipped: list[RunSpec] = field(default_factory=list)
    interrupted: bool = False

    @property
    def problems(self) -> list[RunResult]:
        """Runs that ended failed, oom or timeout (unsupported is not a problem)."""
        return [r for r in self.ran if r.status in ("failed", "oom", "timeout")]


def _fmt_duration(seconds: float) -> str:
    seconds = max(0, round(seconds))
    m, s = divmod(seconds, 60)
    return f"{m}m{s:02d}s" if m else f"{s}s"


class Progress:
    """Terminal progress: which configuration, how many done, time left."""

    def __init__(self, total: int, echo: Callable[[str], None]) -> None:
        self.total, self.echo = total, echo
        self.done = 0
        self.t0 = time.monotonic()
        self._walls: dict[str, list[float]] = {}

    def eta(self, remaining: Sequence[RunSpec]) -> float | None:
        if not self._walls:
            return None
        # Per-workload means (a ResNet50 run costs far more than an MLP run); a workload
        # not seen yet is priced from the seen ones through the workloads' cost hints.
        from workloads import WORKLOADS

        per_unit = [sum(ws) / len(ws) / WORKLOADS.get(w).cost_hint
                    for w, ws in self._walls.items()]
        unit = sum(per_unit) / len(per_unit)
        return sum(sum(ws) / len(ws) if (ws := self._walls.get(s.workload))
                   else unit * WORKLOADS.get(s.workload).cost_hint for s in remaining)

    def start(self, index: int, spec: RunSpec, remaining: Sequence[RunSpec]) -> None:
        eta = self.eta(remaining)
        left = f", ~{_fmt_duration(eta)} left" if eta is not None else ""
        self.echo(f"[{index}/{self.total}] {spec.label()} ... "
                  f"(elapsed {_fmt_duration(time.monotonic() - self.t0)}{left})")

    def finish(self, result: RunResult) -> None:
        self.done += 1
        if result.status != "unsupported":
            self._walls.setdefault(result.spec.workload, []).append(result.wall_s)
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
        self.echo(f"    -> {result.status}: {detail} [{result.wall_s:.1f} s]")
        if result.figures and result.figures.communication:
            from bench.results.text import communication_line

            self.echo(f"       {communication_line(result.figures.communication)}")


def run_sweep(specs: Sequence[RunSpec], sweep_dir: Path,
              echo: Callable[[str], None] = print) -> SweepOutcome:
    """Run every spec without a stored result; Ctrl-C stops cleanly (results kept)."""
    sweep_dir.mkdir(parents=True, exist_ok=True)
    store = SweepStore(sweep_dir)
    outcome = SweepOutcome(sweep_dir)
    todo: list[tuple[RunSpec, RunPaths]] = []
    for spec in specs:
        paths = store.paths(spec)
        if paths.result.exists():
            outcome.skipped.append(spec)
        else:
            todo.append((spec, paths))
    if outcome.skipped:
        echo(f"resuming {sweep_dir}: {len(outcome.skipped)} configuration(s) already have "
             f"results, {len(todo)} to run")
    store.journal({"event": "start", "at": now_iso(), "configurations": len(specs),
                         "to_run": len(todo), "specs": [s.to_dict() for s in specs],
                         "environment": fingerprint()})
    progress = Progress(len(todo), echo)
    try:
        for i, (spec, paths) in enumerate(todo):
            progress.start(i + 1, spec, [s for s, _ in todo[i:]])
            result = run_isolated(spec, paths.log, profile_dir=paths.profile)
            if result.status == "oom":  # say which batch of this configuration did fit
                from bench.launch.memory_fit import note_largest_fit

                result = note_largest_fit(result, [*outcome.ran, *store.load().results])
            save(result, paths.result)
            outcome.ran.append(result)
            progress.finish(result)
    except KeyboardInterrupt:
        outcome.interrupted = True
        echo(f"\ninterrupted: {len(outcome.ran)} result(s) kept; the current configuration "
             f"was killed and will run again when the sweep is resumed")
    store.journal({"event": "interrupted" if outcome.interrupted else "finished",
                         "at": now_iso(), "ran": len(outcome.ran),
                         "statuses": [r.status for r in outcome.ran]})
    return outcome
