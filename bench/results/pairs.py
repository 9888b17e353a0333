"""Within-process pairs: configurations measured as arms of one process, windows
interleaved (``bench.child.arms``; ``RunResult.interleaved`` says which process).

Window r of two arms of one process ran seconds apart, so their ratio is free of
the machine's drift and of each process's own luck. A process gives one statistic
per pair of arms: the median over its rounds of log(candidate / reference window),
leaving out rounds where either window lost CPU to another process. Where the
process built its arms afresh for each block of rounds (``units``: one per build),
it is the mean of its builds' medians: an arm's level depends on its build, so each
build is one draw of that offset and the process averages them. The builds are not
pairs of their own: the arms' levels also move with their process (builds of one
process agree more than builds of different processes: ``scripts.build_share``), so
the process stays the unit. Several processes are the pairs of a paired test
(``stats.settlement.settle_pairs``, ``bench ab``). Parent side, numpy-free.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Mapping, Sequence

from bench.results.schema import RunResult

# A window whose process got less than this share of its arm's median CPU use lost
# cores to a neighbour: its round is left out of the process's median.
DISTURBED_CPU = 0.85


# A predicted variance below this (a log-ratio SD of 1e-6) is no prediction.
NO_PREDICTION = 1e-12


def round_log_ratios(reference: RunResult, candidate: RunResult) -> list[float]:
    """log(candidate / reference) of each round's two windows."""
    if reference.figures is None or candidate.figures is None:
        raise ValueError("both arms need figures. Received: "
                         f"reference={reference.status}, candidate={candidate.status}")
    return [math.log(c.global_throughput / b.global_throughput)
            for b, c in zip(reference.figures.windows, candidate.figures.windows, strict=True)]


def undisturbed_rounds(reference: RunResult, candidate: RunResult) -> list[int]:
    """Rounds in which neither arm's window lost CPU to another process.

    A window's CPU use is the process's CPU seconds over its wall seconds; a round is
    disturbed when either window's use falls below ``DISTURBED_CPU`` of its own arm's
    median. When over half the rounds look disturbed there is no undisturbed level
    to compare against: every round is kept (the median still resists bursts).
    """
    wins = [r.figures.windows for r in (reference, candidate) if r.figures is not None]
    rounds = list(range(min(len(w) for w in wins)))
    if len(wins) < 2 or any(w.cpu_s is None for ws in wins for w in ws):
        return rounds
    return undisturbed([dict(enumerate((w.cpu_s or 0.0) / w.wall_s for w in ws[:len(rounds)]))
                        for ws in wins], len(rounds))


def undisturbed(use: Sequence[Mapping[int, float]], count: int) -> list[int]:
    """Indices i < ``count`` where every arm's CPU use ``use[arm][i]`` (where the arm
    has one) is at least ``DISTURBED_CPU`` of that arm's median; all of them when over
    half would go (no undisturbed level to compare against)."""
    every = list(range(count))
    floors = [DISTURBED_CPU * statistics.median(u.values()) for u in use]
    keep = [i for i in every
            if all(u[i] >= f for u, f in zip(use, floors, strict=True) if i in u)]
    return keep if 2 * len(keep) >= len(every) else every


def builds_of(result: RunResult) -> list[int]:
    """The builds ``result``'s windows measured (``Window.build``), in order; none
    without figures."""
    return sorted({w.build for w in result.figures.windows}) if result.figures else []


def units(result: RunResult) -> list[RunResult]:
    """``result`` as its units: itself where its arms were built once, else one result
    per build holding that build's windows, its session named ``<session>/<build>``."""
    builds = builds_of(result)
    if result.figures is None or result.interleaved is None or len(builds) < 2:
        return [result]
    return [dataclasses.replace(
        result,
        figures=dataclasses.replace(result.figures, windows=[
            w for w in result.figures.windows if w.build == b]),
        interleaved=dataclasses.replace(result.interleaved,
                                        session=f"{result.interleaved.session}/{b}"))
            for b in builds]


def process_log_ratio(reference: RunResult, candidate: RunResult) -> float:
    """One process's statistic for candidate / reference (two arms of it): the median
    of its undisturbed rounds, or with several builds the mean of each build's."""
    ref, cand = units(reference), units(candidate)
    if len(ref) < 2 or len(ref) != len(cand):
        return build_log_ratio(reference, candidate)
    return statistics.fmean(build_log_ratio(a, b) for a, b in zip(ref, cand, strict=True))


def build_log_ratio(reference: RunResult, candidate: RunResult) -> float:
    """The median over undisturbed rounds of log(candidate / reference): one build's."""
    ratios = round_log_ratios(reference, candidate)
    return statistics.median([ratios[r] for r in undisturbed_rounds(reference, candidate)])


@dataclasses.dataclass(frozen=True)
class Prediction:
    """What a process's own rounds say of the noise of its statistic for a pair of arms
    (``process_prediction``): its variance, and the degrees of freedom behind it."""

    var: float
    df: int


def process_prediction(reference: RunResult, candidate: RunResult) -> Prediction | None:
    """The variance of ``process_log_ratio`` that the process's own rounds predict: in
    each build, the variance of its undisturbed round log ratios over their count,
    times pi/2 for a median; averaged as the builds' medians are (their sum over the
    builds squared). None where a build has under 2 comparable rounds, or the two
    do not pair round by round (a member's windows). The session adds what the rounds
    cannot see (a build's and a process's own offset): how much, the sessions of a
    workload's answers say (``stats.settlement.SessionRatio``)."""
    ref, cand = units(reference), units(candidate)
    if len(ref) != len(cand):
        return None
    per_build, df = [], 0
    for a, c in zip(ref, cand, strict=True):
        try:
            ratios = round_log_ratios(a, c)
        except ValueError:
            return None
        kept = [ratios[i] for i in undisturbed_rounds(a, c)]
        if len(kept) < 2:
            return None
        per_build.append(statistics.variance(kept) / len(kept))
        df += len(kept) - 1
    var = math.pi / 2 * sum(per_build) / len(per_build) ** 2
    # Rounds identical to float precision (constructed data; no timing repeats that
    # well) predict nothing: a ratio over nought is no evidence.
    return Prediction(var, df) if var > NO_PREDICTION else None


@dataclasses.dataclass(frozen=True)
class SessionPair:
    """One process's statistic for candidate / reference (``process_log_ratio``) and
    what its rounds predict of its noise (``process_prediction``; None: nothing)."""

    log_ratio: float
    predicted: Prediction | None


def session_pairs(reference: Sequence[RunResult],
                  candidate: Sequence[RunResult]) -> list[SessionPair]:
    """One pair per process in which both were arms (with figures), in the order of
    ``reference``, leaving out the disturbed processes (``undisturbed_sessions``)."""
    by_session = {r.interleaved.session: r for r in candidate
                  if r.interleaved is not None and r.figures is not None}
    matched = [(r, by_session[r.interleaved.session]) for r in reference
               if r.interleaved is not None and r.figures is not None
               and r.interleaved.session in by_session]
    keep = undisturbed_sessions([{"r": r, "c": c} for r, c in matched])
    return [SessionPair(process_log_ratio(*matched[i]), process_prediction(*matched[i]))
            for i in keep]


def session_log_ratios(reference: Sequence[RunResult],
                       candidate: Sequence[RunResult]) -> list[float]:
    """One log(candidate / reference) per process in which both were arms
    (``session_pairs``' statistics)."""
    return [p.log_ratio for p in session_pairs(reference, candidate)]


def undisturbed_sessions(sessions: Sequence[Mapping[str, RunResult]]) -> list[int]:
    """Indices of the processes (each: arm -> its result) in which no arm lost CPU to
    another job for the whole process: an arm's median CPU use over its windows below
    ``DISTURBED_CPU`` of its median over the processes that measured it (later sessions
    of an answer may hold fewer arms). The round filter compares a process's rounds
    with each other and cannot see a neighbour that stayed for all of them (a first
    session at half speed, both arms alike, kept an answer open for 10 sessions).
    Every process is kept with fewer than 3, without CPU figures, or when over half
    would go."""
    every = list(range(len(sessions)))
    if len(sessions) < 3:
        return every
    use: dict[str, dict[int, float]] = {}
    for i, s in enumerate(sessions):
        for arm, r in s.items():
            windows = r.figures.windows if r.figures is not None else []
            shares = [w.cpu_s / w.wall_s for w in windows if w.cpu_s is not None and w.wall_s]
            if not shares:
                return every
            use.setdefault(arm, {})[i] = statistics.median(shares)
    return undisturbed(list(use.values()), len(sessions))
