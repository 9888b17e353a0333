"""``python -m bench nightly``: the nightly regression job (what `make nightly` runs).

Exit codes: 0 no regression, 1 regression, 2 usage error, 3 some benchmarks
failed to run but nothing comparable regressed.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import shlex
import sys
from pathlib import Path
from typing import Any

from bench.cli.common import (
    UsageError,
)
from bench.cli.compare import add_compare_args
from bench.regress.compare import CompareError, Thresholds
from bench.regress.history import HistoryError
from bench.regress.nightly import DEFAULT_TIMEOUT_S, report_nightly, run_matrix
from bench.regress.render import as_table, warning_banner


def cmd_nightly(args: argparse.Namespace) -> int:

    out: Path = args.out or Path("results") / f"nightly-{_dt.datetime.now():%Y%m%d-%H%M%S}"
    if args.baseline_runs < 1:
        raise UsageError(f"--baseline-runs must be a positive integer. "
                         f"Received: --baseline-runs {args.baseline_runs}")
    try:
        thresholds = Thresholds.parse(args.threshold)
        rc = None
        if not args.report_only:
            rc = run_matrix(out, shlex.split(args.pytest_args), args.timeout)
        elif not out.is_dir():
            raise UsageError(f"--report-only needs an existing nightly directory. "
                             f"Received: --out {out}")
        outcome = report_nightly(out, history_path=args.history, thresholds=thresholds,
                                 method=args.method, alpha=args.alpha, pytest_rc=rc,
                                 baseline_runs=args.baseline_runs)
    except (CompareError, HistoryError) as exc:
        raise UsageError(str(exc)) from exc
    for why in outcome.ingest.skipped:
        print(f"warning: skipped {why}", file=sys.stderr)
    if outcome.report is None:
        print(f"nightly: no earlier nightly of machine {outcome.machine_id} in the history; "
              f"this run is the baseline for the next one")
    else:
        banner = warning_banner(outcome.report)
        if banner:
            print(banner, file=sys.stderr)
        print(as_table(outcome.report))
    print(f"nightly: Markdown {outcome.markdown}"
          + (f", trend plot {outcome.plot}" if outcome.plot else ""))
    return outcome.exit_code


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "nightly", help="run the nightly matrix, store it, compare with the previous nightly",
        description="Runs `pytest benchmarks/ --benchmark-only`, ingests the results into "
                    "the history (tag nightly), compares them with the previous nightly of "
                    "the same machine, writes nightly.md and trend.png into the sweep "
                    "directory. Exit codes: 0 no regression, 1 regression, 2 usage error, "
                    "3 benchmarks failed to run (nothing comparable regressed).")
    p.add_argument("--out", type=Path, help="sweep directory (default results/nightly-<time>)")
    p.add_argument("--report-only", action="store_true",
                   help="do not run the matrix; ingest and report an existing --out")
    p.add_argument("--pytest-args", default="",
                   help="extra pytest arguments, e.g. \"--stratbench-matrix tiny\"")
    p.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S,
                   help="hard limit for the whole matrix, seconds (default %(default)g)")
    p.add_argument("--baseline-runs", type=int, default=1,
                   help="pool this many previous nightlies as the baseline (default 1)")
    add_compare_args(p)
    p.set_defaults(func=cmd_nightly)
