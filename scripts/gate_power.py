"""The A/B gate on this machine: does ``bench ab`` say SAME when nothing changed, and
REGRESSED when the candidate does 10% more work per example?

    make gate-power [ARGS='--aa 10 --ab 10 --budget 10m']
    python -m scripts.gate_power [--aa 10] [--ab 10] [--budget 10m] [--threshold 5%]
        [--workload mlp --strategy one_device --batch 256]
        [--candidate-param widths=550,550] [--pairs auto] [--lock FILE] [--out DIR]
        [--baseline-env K=V] [--candidate-env K=V] [--baseline-python P]
        [--candidate-python P]

Environment sides (the nightly's case: another environment or interpreter): give
each side its own variable or interpreter, in both kinds of comparison, e.g.
``--baseline-env STRATBENCH_SIDE=a --candidate-env STRATBENCH_SIDE=b``: the A/A
sides then run in processes of their own (as duets under ``--pairs auto``) with
nothing else changed, and the A/B candidate adds ``--candidate-param`` to its own.

Runs ``--aa`` A/A comparisons (both sides this environment) and ``--ab`` A/B
comparisons whose candidate sets ``--candidate-param``, a real change of the work: by
default ``widths=600,600`` against the MLP's 512,512 (+27% FLOPs per example). The
throughput a change of work costs depends on the machine: on the 2-core EPYC this
was written on, ``widths=550,550`` (+11% FLOPs) cost only 2-8% of the throughput
(interleaved in one process: x0.981 [0.961, 1.002] over 10 pairs, 0.918 and 0.977 in
two 4-arm processes), while 600,600 cost 10-13% (0.874, 0.901): the default is the
candidate whose true slowdown is about 10%, and the script measures it again. Each
exactly as ``python -m bench ab`` runs it (``bench.cli.ab.run_ab``: the same pairs,
sequential looks, budget and threshold). The kinds alternate (A/A, A/B, A/A, ...) so
that the machine's drift over the session falls on both.

Printed: every comparison's verdict, pairs, ratio with its interval and wall time;
the counts against the targets (A/A: SAME in at least 8 of 10, REGRESSED or IMPROVED
in at most 1; A/B: REGRESSED in at least 9 of 10; every comparison within its
budget); and the true throughput change of the candidate, measured once from every
pair of the A/B comparisons pooled (a t interval over all those pairs). Figures are
printed and written to ``OUT/gate_power.json``, never asserted: the exit code is 0
unless runs failed (3) or an option is wrong (2).

``--lock FILE`` holds an exclusive lock on FILE during each comparison (and only
then), so that other jobs that take the same lock (tests, sweeps on a shared
runner) run between comparisons, never inside one.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import math
import os
import sys
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
from scipy import stats as sps

from bench.cli.ab import duration, fraction, run_ab
from bench.cli.common import env_var, param, writable_dir
from bench.errors import UsageError
from bench.exits import Exit
from bench.launch.interpreter import probe
from bench.regress.ab import DEFAULT_ALPHA, DEFAULT_BUDGET_S, DEFAULT_THRESHOLD, Verdict
from bench.regress.interleave import BASELINE, CANDIDATE, Session, Side
from bench.regress.window_pairs import DEFAULT_ROUNDS
from bench.regress.window_pairs import MODES as PAIR_MODES
from bench.results.store import new_sweep_dir
from bench.spec import RunSpec, SpecError

AA, AB = "A/A", "A/B"
DEFAULT_CANDIDATE = {"widths": [600, 600]}
TARGETS = ("A/A: SAME in >= 80% and REGRESSED or IMPROVED in <= 10% of comparisons; "
           "A/B: REGRESSED in >= 90%; every comparison within its budget")


@dataclass
class Row:
    """One comparison as printed and stored."""

    index: int
    kind: str
    verdict: str
    pairs: int
    ratio: float | None
    low: float | None
    high: float | None
    wall_s: float
    budget_s: float
    failed: str | None

    @property
    def within_budget(self) -> bool:
        return self.wall_s <= self.budget_s


@contextlib.contextmanager
def held(lock: Path | None) -> Iterator[None]:
    """An exclusive flock on ``lock`` for the block (nothing when None)."""
    if lock is None:
        yield
        return
    with open(lock, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def schedule(aa: int, ab: int) -> list[str]:
    """The comparisons' kinds, alternating while both remain."""
    kinds: list[str] = []
    while aa or ab:
        if aa:
            kinds.append(AA)
            aa -= 1
        if ab:
            kinds.append(AB)
            ab -= 1
    return kinds


def row_of(index: int, kind: str, session: Session, budget_s: float) -> Row:
    d = session.decision
    verdict = "runs failed" if session.failed else d.verdict.value if d else "none"
    return Row(index, kind, verdict, len(session.log_ratios), d.ratio if d else None,
               d.low if d else None, d.high if d else None, session.wall_s, budget_s,
               session.failed)


def pooled_change(log_ratios: list[float]) -> tuple[float, float, float] | None:
    """exp(mean) with its 95% t interval over every pair (None with fewer than 2)."""
    n = len(log_ratios)
    if n < 2:
        return None
    mean = float(np.mean(log_ratios))
    half = float(sps.t.ppf(0.975, n - 1) * np.std(log_ratios, ddof=1) / math.sqrt(n))
    return math.exp(mean), math.exp(mean - half), math.exp(mean + half)


def summary(rows: list[Row]) -> list[str]:
    """The counts against the targets, one line each."""
    lines = []
    for kind in (AA, AB):
        mine = [r for r in rows if r.kind == kind]
        if not mine:
            continue
        counts = {v: sum(r.verdict == v for r in mine) for v in
                  (Verdict.SAME.value, Verdict.REGRESSED.value, Verdict.IMPROVED.value,
                   Verdict.UNKNOWN.value, "runs failed")}
        n = len(mine)
        if kind == AA:
            alarms = counts["regressed"] + counts["improved"]
            met = counts["same"] >= 0.8 * n and alarms <= 0.1 * n
            target = f"target SAME >= {math.ceil(0.8 * n)}, alarms <= {math.floor(0.1 * n)}"
        else:
            met = counts["regressed"] >= 0.9 * n
            target = f"target REGRESSED >= {math.ceil(0.9 * n)}"
        lines.append(f"{kind}: {n} comparisons: " + ", ".join(
            f"{v.upper()} {c}" for v, c in counts.items() if c) +
            f" ({target}: {'MET' if met else 'MISSED'})")
    late = [r.index for r in rows if not r.within_budget]
    lines.append("every comparison within its budget" if not late else
                 f"over budget: comparison(s) {', '.join(map(str, late))}")
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m scripts.gate_power", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--aa", type=int, default=10, help="A/A comparisons (default 10)")
    p.add_argument("--ab", type=int, default=10, help="A/B comparisons (default 10)")
    p.add_argument("--budget", type=duration, default=DEFAULT_BUDGET_S,
                   help="each comparison's budget (default 10m, as bench ab)")
    p.add_argument("--threshold", type=fraction, default=DEFAULT_THRESHOLD)
    p.add_argument("--workload", default="mlp")
    p.add_argument("--strategy", default="one_device")
    p.add_argument("--devices", type=int, default=1)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--candidate-param", type=param, action="append", default=[],
                   metavar="KEY=VALUE",
                   help="the A/B candidate's workload parameter (default widths=600,600)")
    for name in (BASELINE, CANDIDATE):
        p.add_argument(f"--{name}-env", type=env_var, action="append", default=[],
                       metavar="KEY=VALUE",
                       help=f"environment variable of the {name}'s runs in both kinds of "
                            f"comparison: sides with their own environment need processes "
                            f"of their own (an A/A of environment sides: "
                            f"STRATBENCH_SIDE=a and =b)")
        p.add_argument(f"--{name}-python", metavar="PATH", default=None,
                       help=f"interpreter of the {name}'s runs in both kinds of comparison")
    p.add_argument("--pairs", choices=PAIR_MODES, default="auto")
    p.add_argument("--rounds", type=int, default=DEFAULT_ROUNDS)
    p.add_argument("--seed", type=int, default=0, help="order seed of the first comparison")
    p.add_argument("--lock", type=Path, default=None,
                   help="hold an exclusive flock on this file during each comparison")
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args(argv)
    try:
        if args.aa < 0 or args.ab < 0 or args.aa + args.ab == 0:
            raise UsageError(f"--aa and --ab count comparisons (>= 0, not both 0). "
                             f"Received: --aa {args.aa} --ab {args.ab}")
        spec = RunSpec(workload=args.workload, strategy=args.strategy,
                       devices=args.devices, batch=args.batch)
        params = dict(args.candidate_param) or dict(DEFAULT_CANDIDATE)
        pythons = {n: probe(p, f"--{n}-python") if (p := getattr(args, f"{n}_python"))
                   else None for n in (BASELINE, CANDIDATE)}
        envs = {n: dict(getattr(args, f"{n}_env")) for n in (BASELINE, CANDIDATE)}
        base = Side(BASELINE, envs[BASELINE], python=pythons[BASELINE])
        sides = {AA: (base, Side(CANDIDATE, envs[CANDIDATE], python=pythons[CANDIDATE])),
                 AB: (base, Side(CANDIDATE, envs[CANDIDATE], params,
                                 python=pythons[CANDIDATE]))}
        for side in sides[AB]:
            side.spec(spec)  # a bad parameter is a usage error before anything runs
        out = writable_dir(args.out or new_sweep_dir("gate-power"))
    except (UsageError, SpecError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return int(Exit.USAGE)
    print(f"gate_power: {spec.label()}; baseline {sides[AB][0].describe()}; A/A candidate "
          f"{sides[AA][1].describe()}; A/B candidate {sides[AB][1].describe()}; {args.aa} A/A and "
          f"{args.ab} A/B comparisons, budget {args.budget:.0f} s each, threshold "
          f"{args.threshold:.0%}, alpha {DEFAULT_ALPHA:g}; load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}; results in {out}", flush=True)
    rows: list[Row] = []
    ab_ratios: list[float] = []
    t0 = time.monotonic()
    for i, kind in enumerate(schedule(args.aa, args.ab), start=1):
        with held(args.lock):
            (session,) = run_ab([spec], sides[kind], out / f"{i:02d}-{kind.replace('/', '')}",
                                budget_s=args.budget, threshold=args.threshold,
                                alpha=DEFAULT_ALPHA, seed=args.seed + i,
                                command=f"gate_power {i} {kind}", pairs=args.pairs,
                                rounds=args.rounds)
        row = row_of(i, kind, session, args.budget)
        rows.append(row)
        if kind == AB:
            ab_ratios.extend(session.log_ratios)
        interval = (f"{row.ratio:.3f} [{row.low:.3f}, {row.high:.3f}]"
                    if row.ratio is not None and row.low is not None and row.high is not None
                    else "-")
        print(f"gate_power: {i:2d} {kind}: {row.verdict.upper()} after {row.pairs} pairs, "
              f"candidate/baseline {interval}, {row.wall_s:.0f} s; load average "
              f"{os.getloadavg()[0]:.2f}", flush=True)
    print(f"\ngate_power: {len(rows)} comparisons in {time.monotonic() - t0:.0f} s")
    print(f"{'#':>3} {'kind':4} {'verdict':11} {'pairs':>5} {'ratio [interval]':>26} "
          f"{'wall s':>7}")
    for r in rows:
        interval = (f"{r.ratio:.3f} [{r.low:.3f}, {r.high:.3f}]"
                    if r.ratio is not None and r.low is not None and r.high is not None
                    else "-")
        print(f"{r.index:3d} {r.kind:4} {r.verdict.upper():11} {r.pairs:5d} {interval:>26} "
              f"{r.wall_s:7.0f}")
    for line in summary(rows):
        print(line)
    truth = pooled_change(ab_ratios)
    if truth is not None:
        print(f"true change of the candidate, every A/B pair pooled ({len(ab_ratios)} pairs): "
              f"throughput x{truth[0]:.3f} [{truth[1]:.3f}, {truth[2]:.3f}] (95%)")
    (out / "gate_power.json").write_text(json.dumps({
        "spec": spec.to_dict(), "candidate_params": params, "budget_s": args.budget,
        "threshold": args.threshold, "targets": TARGETS,
        "rows": [asdict(r) for r in rows], "ab_log_ratios": ab_ratios,
        "true_change": truth}, indent=1), encoding="utf-8")
    return int(Exit.RUNS_FAILED) if any(r.failed for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
