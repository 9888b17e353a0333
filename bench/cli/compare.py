"""``python -m bench compare BASELINE CURRENT``: noise-aware regression check.

Exit codes: 0 nothing regressed, 1 something regressed (or broke), 2 usage error.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from bench.cli.common import (
    UsageError,
)
from bench.exits import Exit
from bench.regress.compare import (
    DEFAULT_ALPHA,
    DEFAULT_METHOD,
    METRICS,
    CompareError,
    Report,
    Thresholds,
    compare,
)
from bench.regress.history import HistoryError, Selection, open_history
from bench.regress.render import FORMATS, warning_banner
from bench.regress.significance import TESTS
from bench.results.schema import RunResult


def load_side(arg: str, history_path: Path | None) -> tuple[str, list[RunResult], list[str]]:
    """Results named by ``arg``: a sweep directory, or a history selection (KEY=VALUE,...)."""
    from bench.results.store import load_sweep

    path = Path(arg)
    if path.is_dir():
        loaded = load_sweep(path)
        return str(path), loaded.results, loaded.warnings
    if "=" not in arg:
        raise UsageError(f"{arg!r} is neither a sweep directory nor a history selection "
                         f"(KEY=VALUE[,KEY=VALUE...], e.g. tag=nightly,sweep=latest). "
                         f"Received: {arg!r}")
    selection = Selection.parse(arg)
    with open_history(history_path, create=False) as h:
        results, warnings = h.results(selection)
    return f"history:{selection.describe()}", results, warnings


def run_compare(baseline: str, current: str, *, history_path: Path | None = None,
                thresholds: Thresholds | None = None, method: str = DEFAULT_METHOD,
                alpha: float = DEFAULT_ALPHA) -> tuple[Report, list[str]]:
    """Load both sides and compare them; returns the report and load warnings."""
    b_label, b, b_warn = load_side(baseline, history_path)
    c_label, c, c_warn = load_side(current, history_path)
    report = compare(b, c, baseline_label=b_label, current_label=c_label,
                     thresholds=thresholds, method=method, alpha=alpha)
    return report, b_warn + c_warn


def cmd_compare(args: argparse.Namespace) -> int:

    try:
        report, warnings = run_compare(
            args.baseline, args.current, history_path=args.history,
            thresholds=Thresholds.parse(args.threshold), method=args.method, alpha=args.alpha)
    except (CompareError, HistoryError) as exc:
        raise UsageError(str(exc)) from exc
    for w in warnings:
        print(f"warning: {w}", file=sys.stderr)
    banner = warning_banner(report)
    if banner and args.format != "table":  # the table prints it itself
        print(banner, file=sys.stderr)
    if not report.configs:
        print("warning: no configuration is present on both sides; nothing was compared",
              file=sys.stderr)
    print(FORMATS.get(args.format)(report), end="" if args.format == "json" else "\n")
    for target, fmt in ((args.markdown, "markdown"), (args.json, "json")):
        if target:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(FORMATS.get(fmt)(report), encoding="utf-8")
    return Exit.REGRESSION if report.regressed else 0


def add_compare_args(p: argparse.ArgumentParser) -> None:
    """Options shared by `compare` and `nightly`."""
    p.add_argument("--threshold", action="append", default=[], metavar="[METRIC=]FRACTION",
                   help="smallest relative change that counts as a regression (default 5%%); "
                        f"per metric with METRIC=5%% ({', '.join(METRICS.names())}, or memory "
                        "for both memories); repeatable")
    p.add_argument("--method", default=DEFAULT_METHOD, choices=TESTS.names(),
                   help="significance test on per-window values (default %(default)s)")
    p.add_argument("--alpha", type=float, default=DEFAULT_ALPHA,
                   help="significance level (default %(default)s)")
    p.add_argument("--history", type=Path, default=None,
                   help="history store (default results/history.sqlite)")


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "compare", help="compare two sweeps or history selections; exit 1 on a regression",
        description="For every configuration in both BASELINE and CURRENT, compare "
                    "throughput, step time and peak memory window by window. A regression is "
                    "a significant change (statistical test on the per-window values) larger "
                    "than the threshold. Exit codes: 0 no regression, 1 regression, 2 usage "
                    "error.")
    p.add_argument("baseline", help="sweep directory or history selection, e.g. "
                                    "tag=nightly,sweep=previous")
    p.add_argument("current", help="sweep directory or history selection")
    add_compare_args(p)
    p.add_argument("--format", default="table", choices=FORMATS.names(),
                   help="what to print (default %(default)s)")
    p.add_argument("--markdown", type=Path, help="also write Markdown to this file")
    p.add_argument("--json", type=Path, help="also write JSON to this file")
    p.set_defaults(func=cmd_compare)
