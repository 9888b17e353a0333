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
processes of their own. Those sides are measured as duets (``duet_pairs``): both
processes live at once, taking turns window by window, so that what the machine
does over seconds falls on both sides as in one process; only each process's own
luck is left in the pair. ``process_pairs`` (one whole run after the other) is the
fallback where neither can be had. Parent side: no TensorFlow.
"""

from __future__ import annotations

from collections.abc import Mapping

from bench.launch.arms import run_interleaved, shareable_reason
from bench.launch.duet import duet_reason, run_duet
from bench.regress.interleave import PairOutcome, PairRunner, Side
from bench.regress.options import BASELINE, CANDIDATE, PAIR_MODES, PAIR_ROUNDS
from bench.results.pairs import process_log_ratio
from bench.results.schema import RunResult
from bench.results.store import SweepStore, save
from bench.spec import RunSpec

# Defined in bench.regress.options, which bench ab's parser reads without scipy.
DEFAULT_ROUNDS = PAIR_ROUNDS
MODES = PAIR_MODES
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


def duet_sides_reason(spec: RunSpec, baseline: Side, candidate: Side) -> str | None:
    """Why the two sides of ``spec`` cannot be a duet's (None: they can)."""
    for side in (baseline, candidate):
        why = duet_reason(side.spec(spec))
        if why:
            return why
    return None


def pair_mode(mode: str, spec: RunSpec, baseline: Side, candidate: Side) -> tuple[str, str]:
    """The way ``spec``'s pairs are measured under ``--pairs mode``, and why: ``auto``
    takes one process where the sides can share it, else a duet, else processes.
    A mode the sides cannot have raises ValueError with the reason."""
    shared = sharing_reason(spec, baseline, candidate)
    duet = duet_sides_reason(spec, baseline, candidate)
    if mode == "windows" and shared is not None:
        raise ValueError(shared)
    if mode == "duet" and duet is not None:
        raise ValueError(duet)
    if mode != "auto":
        return mode, "as asked"
    if shared is None:
        return "windows", "both sides in one process, windows interleaved"
    if duet is None:
        return "duet", f"two live processes taking turns window by window ({shared})"
    return "processes", f"each run its own process ({shared}; {duet})"


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
        return _save_pair(stores, specs, dict(zip((first, second), results, strict=True)),
                          pair)
    return run


def _save_pair(stores: Mapping[str, SweepStore], specs: Mapping[str, RunSpec],
               by_side: Mapping[str, RunResult], pair: int) -> PairOutcome:
    """Save each side's result as run ``pair`` of its store; the pair's statistic."""
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


def duet_pairs(stores: Mapping[str, SweepStore], sides: Mapping[str, Side], *,
               rounds: int = DEFAULT_ROUNDS, seed: int = 0) -> PairRunner:
    """Pairs of one duet each (``bench.launch.duet``): each side its own live process,
    environment and interpreter, the two taking turns window by window."""
    def run(specs: Mapping[str, RunSpec], order: str, pair: int) -> PairOutcome:
        names = (BASELINE, CANDIDATE) if order == "AB" else (CANDIDATE, BASELINE)
        logs = [stores[n].paths(specs[n], pair).log for n in names]
        results = run_duet([pair_spec(specs[n]) for n in names], logs, rounds=rounds,
                           seed=seed * 100_003 + pair,
                           envs=[sides[n].env for n in names],
                           pythons=[sides[n].python_path for n in names])
        return _save_pair(stores, specs, dict(zip(names, results, strict=True)), pair)
    return run
