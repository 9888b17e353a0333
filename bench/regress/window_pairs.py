"""A/B pairs measured in one process: both sides built once, their windows interleaved.

Each pair is one process (``bench.launch.arms``) holding the baseline and the
candidate as two arms, measured in ``rounds`` rounds of one window each in a
random order reversed every other round. Window r of the two sides ran seconds
apart in the same process, so the process's own luck (start-up, memory layout)
and the machine's drift fall on both. The pair's statistic is the median over
the rounds of log(candidate window / baseline window): a burst of load that hits
one window of a round moves that round's ratio, not the median. The sequential
decision then treats the processes as its pairs, so what varies from one process
to the next (which arm was built first, where its memory landed) is in the
interval rather than assumed away.

Sides can share a process only when they differ in workload parameters alone:
environment variables (TensorFlow reads them at start-up) and interpreters need
processes of their own (``process_pairs``). Parent side: no TensorFlow.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping

from bench.launch.arms import run_interleaved, shareable_reason
from bench.regress.interleave import BASELINE, CANDIDATE, PairOutcome, PairRunner, Side
from bench.results.schema import RunResult
from bench.results.store import SweepStore, save
from bench.spec import RunSpec

DEFAULT_ROUNDS = 10
MODES = ("auto", "windows", "processes")
# Windows of a one-process pair last at most this long (the spec's --max-seconds when
# lower): many short rounds give the median more ratios to stand on than a few long
# ones, and a burst of load spoils less of each.
PAIR_WINDOW_S = 0.5
# A window whose process got less than this share of its arm's median CPU use lost
# cores to a neighbour: its round is left out of the pair's median.
DISTURBED_CPU = 0.85


def sharing_reason(spec: RunSpec, baseline: Side, candidate: Side) -> str | None:
    """Why the two sides of ``spec`` cannot share one process (None: they can)."""
    if dict(baseline.env) != dict(candidate.env):
        return "the sides set different environment variables (read at start-up)"
    if baseline.python_path != candidate.python_path:
        return "the sides start under different interpreters"
    for side in (baseline, candidate):
        why = shareable_reason(side.spec(spec))
        if why:
            return why
    return None


def round_log_ratios(baseline: RunResult, candidate: RunResult) -> list[float]:
    """log(candidate / baseline) of each round's two windows."""
    if baseline.figures is None or candidate.figures is None:
        raise ValueError("both arms need figures. Received: "
                         f"baseline={baseline.status}, candidate={candidate.status}")
    return [math.log(c.global_throughput / b.global_throughput)
            for b, c in zip(baseline.figures.windows, candidate.figures.windows, strict=True)]


def undisturbed_rounds(baseline: RunResult, candidate: RunResult) -> list[int]:
    """Rounds in which neither side's window lost CPU to another process.

    A window's CPU use is the process's CPU seconds over its wall seconds; a round is
    disturbed when either window's use falls below ``DISTURBED_CPU`` of its own arm's
    median. When over half the rounds look disturbed there is no undisturbed level
    to compare against: every round is kept (the median still resists bursts).
    """
    wins = [r.figures.windows for r in (baseline, candidate) if r.figures is not None]
    rounds = list(range(min(len(w) for w in wins)))
    if len(wins) < 2 or any(w.cpu_s is None for ws in wins for w in ws):
        return rounds
    use = [[(w.cpu_s or 0.0) / w.wall_s for w in ws] for ws in wins]
    floors = [DISTURBED_CPU * statistics.median(u) for u in use]
    keep = [r for r in rounds if all(u[r] >= f for u, f in zip(use, floors, strict=True))]
    return keep if 2 * len(keep) >= len(rounds) else rounds


def pair_spec(spec: RunSpec) -> RunSpec:
    """``spec`` with windows no longer than ``PAIR_WINDOW_S``."""
    return spec.replace(max_seconds=min(spec.max_seconds, PAIR_WINDOW_S))


def window_pairs(stores: Mapping[str, SweepStore], baseline: Side, *,
                 rounds: int = DEFAULT_ROUNDS, seed: int = 0) -> PairRunner:
    """Pairs of one process each, both sides as arms (``baseline``: the shared env and
    interpreter); every arm's result is saved in its side's store as run ``pair``."""
    def run(specs: Mapping[str, RunSpec], order: str, pair: int) -> PairOutcome:
        first, second = (BASELINE, CANDIDATE) if order == "AB" else (CANDIDATE, BASELINE)
        log = stores[BASELINE].paths(specs[BASELINE], pair).log
        results = run_interleaved([pair_spec(specs[first]), pair_spec(specs[second])], log,
                                  rounds=rounds,
                                  seed=seed * 100_003 + pair, env=baseline.env,
                                  python=baseline.python_path)
        by_side = dict(zip((first, second), results, strict=True))
        envs = {}
        for name, result in by_side.items():
            result.replicate = pair
            save(result, stores[name].paths(specs[name], pair).result)
            envs[name] = dict(result.environment or {})
        failed = [f"{name} arm of pair {pair}: {r.status} {r.reason or ''}".strip()
                  for name, r in by_side.items() if r.figures is None]
        if failed:
            return PairOutcome(None, envs, "; ".join(failed))
        ratios = round_log_ratios(by_side[BASELINE], by_side[CANDIDATE])
        keep = undisturbed_rounds(by_side[BASELINE], by_side[CANDIDATE])
        return PairOutcome(statistics.median([ratios[r] for r in keep]), envs)
    return run
