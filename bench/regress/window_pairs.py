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

from collections.abc import Mapping

from bench.launch.arms import run_interleaved, shareable_reason
from bench.regress.interleave import BASELINE, CANDIDATE, PairOutcome, PairRunner, Side
from bench.results.pairs import process_log_ratio
from bench.results.store import SweepStore, save
from bench.spec import RunSpec

DEFAULT_ROUNDS = 10
MODES = ("auto", "windows", "processes")
# Windows of a one-process pair last at most this long (the spec's --max-seconds when
# lower): many short rounds give the median more ratios to stand on than a few long
# ones, and a burst of load spoils less of each.
PAIR_WINDOW_S = 0.5


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
        return PairOutcome(process_log_ratio(by_side[BASELINE], by_side[CANDIDATE]), envs)
    return run
