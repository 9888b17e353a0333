"""``python -m bench nightly``: the nightly regression job (what `make nightly` runs).

Exit codes: 0 no regression at the stated detection power, 4 regression, 3 some
benchmarks failed to run (nothing comparable regressed), 5 cannot tell at this
noise (or no baseline yet), 2 usage error, 1 internal error.

With sides (``--baseline-python`` and the other options of ``bench ab``, or ``--ab``)
it is the A/B nightly: ``bench ab``'s sessions (``bench.cli.ab.run_ab``) over a
benchmark matrix, each configuration's ratio stored in the history and its series
searched for steps; the exit codes are then ``bench ab``'s (0 SAME or IMPROVED,
4 REGRESSED, 5 UNKNOWN after the budget, 3 runs failed, 2 usage error).
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path
from typing import Any

from bench.cli.ab import add_side_args, check_alpha, run_ab, side_options_given, sides_from_args
from bench.cli.common import writable_dir
from bench.cli.compare import EXIT_CODES, add_compare_args
from bench.env import now_iso
from bench.errors import UsageError
from bench.hardware import detect
from bench.matrix import BENCHMARK_MATRICES
from bench.regress.changes import describe_step
from bench.regress.history import HistoryError
from bench.regress.options import NIGHTLY_BASELINE_NIGHTLIES, NIGHTLY_RUNS, NIGHTLY_TIMEOUT_S
from bench.results.store import new_sweep_dir


def _positive(flag: str, value: int) -> int:
    if value < 1:
        raise UsageError(f"{flag} must be a positive integer. Received: {flag} {value}")
    return value


def cmd_ab_nightly(args: argparse.Namespace) -> int:
    """Tonight's environment against a pinned one: ``bench ab``'s sessions over a matrix."""
    # The comparison brings scipy.stats: imported when a nightly runs, not when the
    # parser is built (every `python -m bench` process).
    from bench.regress.compare import CompareError, Thresholds
    from bench.regress.nightly import report_ab_nightly

    if args.report_only or args.pytest_args:
        raise UsageError(f"an A/B nightly (sides given, or --ab) runs its own sessions; "
                         f"--report-only and --pytest-args belong to the stored-against-"
                         f"stored nightly. Received: --report-only={args.report_only} "
                         f"--pytest-args={args.pytest_args!r}")
    try:
        threshold = Thresholds.parse(args.threshold).of("time")
    except CompareError as exc:
        raise UsageError(str(exc)) from exc
    if not 0 < threshold < 1:
        raise UsageError(f"--threshold must lie between 0% and 100%. Received: "
                         f"--threshold {threshold:g}")
    alpha = check_alpha(args.alpha)
    specs = BENCHMARK_MATRICES.get(args.matrix)(detect())
    sides = sides_from_args(args)
    out = writable_dir(args.out or new_sweep_dir("nightly"))
    started = now_iso()
    sessions = run_ab(specs, sides, out, budget_s=args.budget, threshold=threshold,
                      alpha=alpha, seed=args.order_seed, command="nightly",
                      pairs=args.pairs, rounds=args.rounds)
    try:
        outcome = report_ab_nightly(out, sessions, started_at=started, threshold=threshold,
                                    alpha=alpha, history_path=args.history)
    except HistoryError as exc:
        raise UsageError(str(exc)) from exc
    steps = [describe_step(s, step) for s in outcome.series for step in s.steps]
    nights = min((len(s.records) for s in outcome.series), default=0)
    print(f"nightly: {outcome.added} session(s) stored in the history; steps in the stored "
          f"ratio series ({nights}+ nights): {len(steps) or 'none'}")
    for line in steps:
        print(f"  step: {line}")
    print(f"nightly: Markdown {outcome.markdown}")
    code = outcome.exit_code
    print(f"nightly: exit code {int(code)} ({code.name.lower()})")
    return int(code)


def cmd_nightly(args: argparse.Namespace) -> int:
    if args.ab or side_options_given(args):
        return cmd_ab_nightly(args)
    from bench.regress.compare import CompareError, Thresholds
    from bench.regress.nightly import report_nightly, run_matrix
    from bench.regress.render import as_table

    out: Path = args.out or new_sweep_dir("nightly")
    nightlies = _positive("--baseline-nightlies", args.baseline_nightlies)
    runs = _positive("--runs", args.runs)
    try:
        thresholds = Thresholds.parse(args.threshold)
        if not 0 < args.alpha < 1 or not 0 < args.power < 1:
            raise UsageError(f"--alpha and --power must be between 0 and 1. Received: "
                             f"--alpha {args.alpha} --power {args.power}")
        if args.report_only and not out.is_dir():
            raise UsageError(f"--report-only needs an existing nightly directory. "
                             f"Received: --out {out}")
        out = writable_dir(out)  # the results, nightly.md and trend.png go there
        rc = None
        if not args.report_only:
            rc = run_matrix(out, shlex.split(args.pytest_args), args.timeout, runs=runs)
        outcome = report_nightly(out, history_path=args.history, thresholds=thresholds,
                                 alpha=args.alpha, power=args.power, pytest_rc=rc,
                                 baseline_nightlies=nightlies)
    except (CompareError, HistoryError) as exc:
        raise UsageError(str(exc)) from exc
    for why in outcome.ingest.skipped:
        print(f"warning: skipped {why}", file=sys.stderr)
    if outcome.report is None:
        print(f"nightly: no earlier nightly of machine {outcome.machine_id} in the history; "
              f"nothing compared (cannot tell); this run is the baseline for the next one")
    else:
        print(as_table(outcome.report))  # software differences first, loudly
    print(f"nightly: Markdown {outcome.markdown}"
          + (f", trend plot {outcome.plot}" if outcome.plot else ""))
    print(f"nightly: exit code {int(outcome.exit_code)} ({outcome.exit_code.name.lower()})")
    return int(outcome.exit_code)


def _runs_anything(args: argparse.Namespace) -> bool:
    """Whether the command starts TensorFlow children (``--report-only`` reads stored
    results alone, so it runs where TensorFlow is not installed)."""
    return not args.report_only


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "nightly", help="run the nightly matrix, store it, compare with the last nightlies",
        description="Runs `pytest benchmarks/ --benchmark-only` with every configuration "
                    "in --runs separate processes, ingests the results into the history "
                    "(tag nightly), compares them with the last --baseline-nightlies "
                    "nightlies of the same hardware (machine_id: a TensorFlow or driver "
                    "upgrade keeps the baseline; every software difference is listed "
                    "first), and writes nightly.md and trend.png into the sweep directory. "
                    "With sides (--baseline-python PATH and the other side options, or "
                    "--ab) it is the A/B nightly instead: bench ab's interleaved sessions "
                    "over --matrix within --budget each, tonight's environment (the "
                    "candidate) against the baseline side (e.g. a pinned virtual "
                    "environment); each configuration's candidate/baseline ratio is "
                    "stored in the history with both sides' identities, and its series is "
                    "searched for steps (bench history changes).",
        epilog=EXIT_CODES + " A/B nightly: 0 same or improved, 4 regressed, 5 unknown "
                            "after the budget, 3 runs failed, 2 usage error.")
    p.add_argument("--out", type=Path, help="sweep directory (default results/nightly-<time>)")
    p.add_argument("--report-only", action="store_true",
                   help="do not run the matrix; ingest and report an existing --out")
    p.add_argument("--runs", type=int, default=NIGHTLY_RUNS,
                   help="separate processes per configuration (default %(default)s; the "
                        "run-to-run noise is measured on them)")
    p.add_argument("--pytest-args", default="",
                   help="extra pytest arguments, e.g. \"--stratbench-matrix tiny\"")
    p.add_argument("--timeout", type=float, default=NIGHTLY_TIMEOUT_S,
                   help="hard limit for the whole matrix, seconds (default %(default)g)")
    p.add_argument("--baseline-nightlies", "--baseline-runs", type=int,
                   default=NIGHTLY_BASELINE_NIGHTLIES, dest="baseline_nightlies",
                   help="pool the last K nightlies of this hardware as the baseline "
                        "(default %(default)s)")
    add_compare_args(p)
    ab = p.add_argument_group("A/B nightly (any side option, or --ab)")
    ab.add_argument("--ab", action="store_true",
                    help="run the A/B nightly even without side options (an A/A check)")
    ab.add_argument("--matrix", default="nightly", choices=BENCHMARK_MATRICES.names(),
                    help="benchmark matrix of the sessions (default %(default)s); each "
                         "configuration takes up to --budget")
    add_side_args(p)
    p.set_defaults(func=cmd_nightly, needs_tensorflow=_runs_anything)
