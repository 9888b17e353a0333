"""How much of a session's noise is its windows': between-session spread of each pair's
log ratio against what its rounds predict.

A session measures two arms in interleaved rounds; its statistic for the pair is the
median over rounds of log(candidate / reference) (``bench.results.pairs``). If the
sessions differed only by their windows' noise, the variance of that statistic from
one session to the next would be what each session's rounds predict: their variance
over the rounds / rounds, times pi/2 for a median. This prints, per workload, the
between-session variance of the statistic (pairs measured in 2+ sessions, pooled with
their degrees of freedom) and the rounds' prediction, and their ratio. A ratio near 1:
the session is not a noise source of its own, and longer sessions (more rounds) lower
its noise as 1/rounds; well above 1: only more sessions do.

Where sessions were measured together (``Interleaving.together``: their processes
started side by side and took turns window by window), it also prints the SD of a
session's statistic from the differences between two sessions measured together and
from those between two measured apart: sessions that shared their minutes would agree
more than independent ones if a disturbance of those minutes moved both alike.

Usage: ``python -m scripts.session_noise SWEEP_DIR [SWEEP_DIR ...]``. Reads stored
results only (no TensorFlow).
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from collections import defaultdict
from pathlib import Path

from bench.results.pairs import process_log_ratio, process_prediction
from bench.results.schema import RunResult
from bench.results.store import load_sweep

Pair = tuple[str, int, str, str]  # workload, global batch, reference, candidate


Row = tuple[float, float, tuple[str, float]]  # statistic, predicted variance, group


def pair_sessions(sweeps: list[Path]) -> dict[tuple[str, Pair], list[Row]]:
    """Each pair's (statistic, predicted variance, group) per session, by sweep and pair;
    sessions measured together share a group (their start and wall time)."""
    out: dict[tuple[str, Pair], list[Row]] = defaultdict(list)
    for sweep in sweeps:
        sessions: dict[tuple[str, int, str], dict[str, RunResult]] = defaultdict(dict)
        for r in load_sweep(sweep).results:
            if r.interleaved is not None and r.figures is not None:
                sessions[(r.spec.workload, r.global_batch, r.interleaved.session)][r.key] = r
        for (workload, batch, session), arms in sessions.items():
            keys = sorted(arms)
            for i, ka in enumerate(keys):
                for kc in keys[i + 1:]:
                    a, c = arms[ka], arms[kc]
                    predicted = process_prediction(a, c)
                    if predicted is None:
                        continue
                    pair = (workload, batch, a.spec.label(), c.spec.label())
                    together = a.interleaved is not None and a.interleaved.together > 1
                    group = (a.started_at, a.wall_s) if together else (session, 0.0)
                    out[(sweep.name, pair)].append((process_log_ratio(a, c), predicted.var,
                                                    group))
    return out


def together_and_apart(rows: dict[tuple[str, Pair], list[Row]]
                       ) -> tuple[list[float], list[float]]:
    """Half the squared difference of each two sessions of one pair (each estimates a
    session's variance): those measured together, and those measured apart."""
    together: list[float] = []
    apart: list[float] = []
    for sessions in rows.values():
        for i, (x, _, group) in enumerate(sessions):
            for y, _, other in sessions[i + 1:]:
                (together if group == other else apart).append((x - y) ** 2 / 2)
    return together, apart


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sweeps", nargs="+", type=Path, help="sweep directories")
    args = parser.parse_args(argv)
    missing = [str(p) for p in args.sweeps if not p.is_dir()]
    if missing:
        print(f"error: not a sweep directory: {', '.join(missing)}", file=sys.stderr)
        return 2
    by_workload: dict[str, list[tuple[int, float, float]]] = defaultdict(list)
    sessions = pair_sessions(args.sweeps)
    for (_, pair), rows in sessions.items():
        if len(rows) < 2:
            continue
        between = statistics.variance([s for s, _, _ in rows])
        predicted = statistics.fmean(p for _, p, _ in rows)
        by_workload[pair[0]].append((len(rows) - 1, between, predicted))
    if not by_workload:
        print("no pair was measured in 2 or more sessions")
        return 0
    print(f"{'workload':10s} {'df':>4s} {'between SD':>10s} {'rounds SD':>9s} {'ratio':>6s}")
    everything = [pair for pairs in by_workload.values() for pair in pairs]
    for name, pairs in [*sorted(by_workload.items()), ("all", everything)]:
        df = sum(d for d, _, _ in pairs)
        between = sum(d * b for d, b, _ in pairs) / df
        predicted = sum(d * p for d, _, p in pairs) / df
        print(f"{name:10s} {df:4d} {math.sqrt(between):10.3f} {math.sqrt(predicted):9.3f} "
              f"{between / predicted:6.2f}")
    print("between SD: the SD of a session's log ratio from one session to the next; "
          "rounds SD: what its rounds predict; ratio: of the variances")
    together, apart = together_and_apart(sessions)
    if together:
        print("sessions measured together: SD of a session's log ratio from the differences "
              "between two sessions")
        for name, halves in (("together", together), ("apart", apart)):
            if halves:
                print(f"  {name:9s} {math.sqrt(statistics.fmean(halves)):.4f} "
                      f"({len(halves)} differences)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
