"""``python -m bench report SWEEP_DIR``: write the HTML, Markdown and CSV report."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.cli.common import add_explain, add_width, answers_width, writable_dir
from bench.errors import UsageError
from bench.exits import Exit
from bench.results.store import SweepStore

# The reports bring pandas, matplotlib and scipy.stats: imported when a report is made,
# so that building the parser (every `python -m bench` process) does without them.
if TYPE_CHECKING:
    from reports.files import Written
    from reports.report import SweepReport


def generate(sweep_dir: Path, out_dir: Path | None = None) -> tuple[SweepReport, Written]:
    """Build and write the report of ``sweep_dir``; warnings go to stderr."""
    from reports.files import write
    from reports.report import build

    report = build(sweep_dir)
    for warning in report.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    return report, write(report, out_dir or SweepStore(sweep_dir).report_dir)


def report_after_sweep(sweep_dir: Path, explain: bool = False,
                       width: int | None = None) -> Written | None:
    """The report at the end of ``bench run``; any failure is printed, never raised.

    ``explain``: each answer's full sentence after the table; ``width``: the columns
    the answers may take (``reports.answers.text_table``). A sweep's results are
    already stored when this runs, and its exit code says how the runs went; a bug in
    the report must not turn either into a crash.
    """
    t0 = time.monotonic()
    try:  # the imports too: reports that fail to import are printed like any failure
        from reports.answers import recommendations_text

        report, paths = generate(sweep_dir)
    except Exception as exc:  # reported; the sweep's outcome stands
        print(f"warning: the report of {sweep_dir} could not be written: "
              f"{type(exc).__name__}: {exc}. Results are intact; retry with "
              f"`python -m bench report {sweep_dir}`", file=sys.stderr)
        return None
    print(f"\n{recommendations_text(report, explain, width)}\nreport: {paths.html} (summary: "
          f"{paths.markdown}, csv: {paths.csv}; {time.monotonic() - t0:.1f} s)")
    return paths


def cmd_report(args: argparse.Namespace) -> int:
    if not args.sweep_dir.is_dir():
        raise UsageError(f"no sweep directory at {args.sweep_dir}. "
                         f"Received: sweep_dir={str(args.sweep_dir)!r}")
    out = writable_dir(args.out or SweepStore(args.sweep_dir).report_dir)  # before any work
    from reports.answers import recommendations_text  # once the arguments stand

    t0 = time.monotonic()
    report, paths = generate(args.sweep_dir, out)
    print(recommendations_text(report, args.explain, answers_width(args.width)))
    print(f"report: {paths.html}\nsummary: {paths.markdown}\ncsv: {paths.csv}\n"
          f"({time.monotonic() - t0:.1f} s)")
    if args.print_markdown:
        print()
        print(paths.markdown.read_text(encoding="utf-8"))
    return Exit.OK


def add_parser(sub: Any) -> None:
    """Register ``report`` on the ``bench`` command line."""
    p = sub.add_parser("report", help="HTML/Markdown/CSV report of a sweep (scaling "
                                      "efficiency, recommendations, verdicts)")
    p.add_argument("sweep_dir", type=Path, help="a directory written by `bench run --out`")
    p.add_argument("--out", type=Path,
                   help="directory for report.html, summary.md, results.csv "
                        "(default: SWEEP_DIR/report)")
    p.add_argument("--print-markdown", action="store_true", dest="print_markdown",
                   help="also print the Markdown summary after the file locations")
    add_explain(p)
    add_width(p)
    p.set_defaults(func=cmd_report)
