"""``python -m bench nightly``: the nightly regression job (what `make nightly` runs).

Exit codes: 0 no regression at the stated detection power, 4 regression, 3 some
benchmarks failed to run (nothing comparable regressed), 5 cannot tell at this
noise (or no baseline yet), 2 usage error, 1 internal error.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path
from typing import Any

from bench.cli.common import writable_dir
from bench.cli.compare import EXIT_CODES, add_compare_args
from bench.errors import UsageError
from bench.regress.compare import CompareError, Thresholds
from bench.regress.history import HistoryError
from bench.regress.nightly import (
    DEFAULT_BASELINE_NIGHTLIES,
    DEFAULT_RUNS,
    DEFAULT_TIMEOUT_S,
    report_nightly,
    run_matrix,
)
from bench.regress.render import as_table
from bench.results.store import new_sweep_dir


def _positive(flag: str, value: int) -> int:
    if value < 1:
        raise UsageError(f"{flag} must be a positive integer. Received: {flag} {value}")
    return value


def cmd_nightly(args: argparse.Namespace) -> int:
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


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "nightly", help="run the nightly matrix, store it, compare with the last nightlies",
        description="Runs `pytest benchmarks/ --benchmark-only` with every configuration "
                    "in --runs separate processes, ingests the results into the history "
                    "(tag nightly), compares them with the last --baseline-nightlies "
                    "nightlies of the same hardware (machine_id: a TensorFlow or driver "
                    "upgrade keeps the baseline; every software difference is listed "
                    "first), and writes nightly.md and trend.png into the sweep directory.",
        epilog=EXIT_CODES)
    p.add_argument("--out", type=Path, help="sweep directory (default results/nightly-<time>)")
    p.add_argument("--report-only", action="store_true",
                   help="do not run the matrix; ingest and report an existing --out")
    p.add_argument("--runs", type=int, default=DEFAULT_RUNS,
                   help="separate processes per configuration (default %(default)s; the "
                        "run-to-run noise is measured on them)")
    p.add_argument("--pytest-args", default="",
                   help="extra pytest arguments, e.g. \"--stratbench-matrix tiny\"")
    p.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S,
                   help="hard limit for the whole matrix, seconds (default %(default)g)")
    p.add_argument("--baseline-nightlies", "--baseline-runs", type=int,
                   default=DEFAULT_BASELINE_NIGHTLIES, dest="baseline_nightlies",
                   help="pool the last K nightlies of this hardware as the baseline "
                        "(default %(default)s)")
    add_compare_args(p)
    p.set_defaults(func=cmd_nightly)
