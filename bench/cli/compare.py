"""``python -m bench compare BASELINE CURRENT``: noise-aware regression check.

Exit codes (``bench.exits``): 0 no regression at the stated detection power,
2 usage error, 4 regression, 5 cannot tell at this noise, 1 internal error.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Hashable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.errors import UsageError
from bench.regress.history import HistoryError, Selection, default_path, open_history
from bench.regress.options import (
    COMPARE_ALPHA,
    COMPARE_THRESHOLD,
    FAMILIES,
    HISTORY_SWEEPS,
    OUTPUT_FORMATS,
    POOLINGS,
    Pooling,
)
from bench.results.levels import DEFAULT_POWER
from bench.results.schema import RunResult

# The comparison and its renderers bring scipy.stats: imported when a comparison runs, so
# that building the parser (every `python -m bench` process) does without them.
if TYPE_CHECKING:
    from bench.regress.compare import Report, Thresholds

EXIT_CODES = (
    "exit codes: 0 no regression (every configuration could have shown a change of the "
    "threshold's size and did not), 4 regression (or a configuration that ran before "
    "fails now), 5 cannot tell at this noise (the detectable change exceeds the "
    "threshold: run the printed bench ab command, add runs, or raise --threshold), "
    "3 runs failed (nightly), 2 usage error, 1 internal error. 4 wins over 3, 3 over 5.")


def load_side(arg: str, history_path: Path | None
              ) -> tuple[str, list[RunResult], list[Hashable] | None, list[str]]:
    """Results named by ``arg``, a sweep directory or a history selection (KEY=VALUE,...):
    label, results, the group (sweep) of each result (None: one group), warnings."""
    from bench.results.store import load_sweep

    path = Path(arg)
    if path.is_dir():
        loaded = load_sweep(path)
        return str(path), loaded.results, None, loaded.warnings
    if "=" not in arg:
        raise UsageError(f"{arg!r} is neither a sweep directory nor a history selection "
                         f"(KEY=VALUE[,KEY=VALUE...], e.g. tag=nightly,sweep=latest). "
                         f"Received: {arg!r}")
    selection = Selection.parse(arg)
    with open_history(history_path, create=False) as h:
        results, sweeps, warnings = h.results_by_sweep(selection)
    return f"history:{selection.describe()}", results, list(sweeps), warnings


def run_compare(baseline: str, current: str, *, history_path: Path | None = None,
                thresholds: Thresholds | None = None, alpha: float = COMPARE_ALPHA,
                power: float = DEFAULT_POWER, pooling: Pooling | None = None
                ) -> tuple[Report, list[str]]:
    """Load both sides and compare them; returns the report and load warnings.

    With ``pooling.history`` and a history store at ``history_path`` (default
    results/history.sqlite; none there: no stored runs pooled), each configuration's
    stored runs on the baseline's machine join its noise evidence."""
    from bench.regress.compare import compare, group, identity
    from bench.regress.stored import load_history

    pooling = pooling or Pooling()
    b_label, b, b_groups, b_warn = load_side(baseline, history_path)
    c_label, c, c_groups, c_warn = load_side(current, history_path)
    history = None
    store = history_path or default_path()
    if pooling.history and store.exists():
        keys = {identity(r) for r in c}
        with open_history(store, create=False) as h:
            history = load_history(h, {k: v for k, v in group(b, b_groups).items()
                                        if k in keys})
    report = compare(b, c, baseline_label=b_label, current_label=c_label,
                     thresholds=thresholds, alpha=alpha, power=power,
                     baseline_groups=b_groups, current_groups=c_groups, pooling=pooling,
                     history=history)
    return report, b_warn + c_warn


def cmd_compare(args: argparse.Namespace) -> int:
    from bench.regress.compare import CompareError, Thresholds
    from bench.regress.render import FORMATS, warning_banner

    try:
        report, warnings = run_compare(
            args.baseline, args.current, history_path=args.history,
            thresholds=Thresholds.parse(args.threshold), alpha=args.alpha, power=args.power,
            pooling=POOLINGS.get(args.pool))
    except (CompareError, HistoryError) as exc:
        raise UsageError(str(exc)) from exc
    for w in warnings:
        print(f"warning: {w}", file=sys.stderr)
    banner = warning_banner(report)
    if banner and args.format != "table":  # the table prints it itself, at the top
        print(banner, file=sys.stderr)
    if not report.configs:
        print("warning: no configuration is present on both sides; nothing was compared",
              file=sys.stderr)
    print(FORMATS.get(args.format)(report), end="" if args.format == "json" else "\n")
    for target, fmt in ((args.markdown, "markdown"), (args.json, "json")):
        if target:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(FORMATS.get(fmt)(report), encoding="utf-8")
    return int(report.exit_code)


def add_compare_args(p: argparse.ArgumentParser) -> None:
    """Options shared by `compare` and `nightly`."""
    p.add_argument("--threshold", action="append", default=[], metavar="[FAMILY=]FRACTION",
                   help=f"smallest relative change that counts (default "
                        f"{COMPARE_THRESHOLD * 100:.0f}%%); per family with FAMILY=5%% "
                        f"({', '.join(FAMILIES)}; a judged figure's name, e.g. "
                        f"global_throughput, means its family, as do throughput and "
                        f"step_time: time); repeatable")
    p.add_argument("--alpha", type=float, default=COMPARE_ALPHA,
                   help="significance level, two-sided (default %(default)s): the false-"
                        "alarm rate per configuration and family on unchanged code")
    p.add_argument("--power", type=float, default=DEFAULT_POWER,
                   help="detection power the stated detectable change is computed for "
                        "(default %(default)s)")
    p.add_argument("--history", type=Path, default=None,
                   help="history store (default results/history.sqlite)")


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "compare", help="compare two sweeps or history selections (exit 4 on a regression)",
        description="For every configuration in both BASELINE and CURRENT, judge time "
                    "(throughput and step time: one decision) and peak memory. The run "
                    "(process) is the unit: each run's figure is the median of its windows, "
                    "and the change is tested against the run-to-run noise, pooled over "
                    "the configuration's own runs, the configurations of its family "
                    "(workload, variant, strategy) whose noise agrees and its stored "
                    "sweeps on the same machine (--pool); Welch's t where the sides' run "
                    "counts or noise differ. A regression is a significant change beyond "
                    "the threshold; every configuration also states the change it could "
                    "have detected (90%% power), and says 'cannot tell' when that exceeds "
                    "the threshold, with the bench ab command that would decide it (both "
                    "sides interleaved in one session).",
        epilog=EXIT_CODES)
    p.add_argument("baseline", help="sweep directory or history selection, e.g. "
                                    "tag=nightly,sweep=previous")
    p.add_argument("current", help="sweep directory or history selection")
    add_compare_args(p)
    p.add_argument("--pool", default="all", choices=POOLINGS.names(),
                   help=f"where each configuration's run-to-run noise is pooled from "
                        f"besides its own runs: all (its family in these results and its "
                        f"last {HISTORY_SWEEPS} stored sweeps on the same machine, from "
                        f"--history when the store exists), family, own (default "
                        f"%(default)s)")
    p.add_argument("--format", default="table", choices=OUTPUT_FORMATS,
                   help="what to print (default %(default)s)")
    p.add_argument("--markdown", type=Path, help="also write Markdown to this file")
    p.add_argument("--json", type=Path, help="also write JSON to this file")
    p.set_defaults(func=cmd_compare)
