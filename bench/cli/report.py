"""A sweep's written outputs: ``stratbench report SWEEP_DIR`` (the HTML, Markdown and CSV
report) and ``stratbench tensorboard SWEEP_DIR`` (each stored run an HParams session in
``SWEEP_DIR/tensorboard/``: its spec as hyperparameters, its figures as metrics).
``stratbench run`` writes both at the end of a sweep (``outputs_after_sweep``)."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from bench.cli.common import add_explain, add_width, answers_width, writable_dir
from bench.errors import UsageError
from bench.exits import Exit
from bench.results.store import SweepStore

# The reports bring pandas, matplotlib and scipy.stats: imported when a report is made,
# so that building the parser (every `python -m bench` process) does without them.
if TYPE_CHECKING:
    from reports.files import Written
    from reports.report import SweepReport
    from reports.tensorboard import Exported

T = TypeVar("T")


def generate(sweep_dir: Path, out_dir: Path | None = None) -> tuple[SweepReport, Written]:
    """Build and write the report of ``sweep_dir``; warnings go to stderr."""
    from reports.files import write
    from reports.report import build

    report = build(sweep_dir)
    for warning in report.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    return report, write(report, out_dir or SweepStore(sweep_dir).report_dir)


def _after_sweep(what: str, command: str, sweep_dir: Path, write: Callable[[], T]) -> T | None:
    """One output at the end of ``bench run``: a failure is printed, never raised. A
    sweep's results are already stored when this runs, and its exit code says how the
    runs went; a bug in an output must turn neither into a crash."""
    try:  # the imports too: an output that fails to import is printed like any failure
        return write()
    except Exception as exc:  # reported; the sweep's outcome stands
        print(f"warning: {what} of {sweep_dir} could not be written: "
              f"{type(exc).__name__}: {exc}. Results are intact; retry with "
              f"`python -m bench {command} {sweep_dir}`", file=sys.stderr)
        return None


def outputs_after_sweep(sweep_dir: Path, explain: bool = False,
                        width: int | None = None) -> Written | None:
    """The report (its answers printed) and the TensorBoard export at the end of
    ``bench run``; returns the report's files, None where it failed.

    ``explain``: each answer's full sentence after the table; ``width``: the columns
    the answers may take (``reports.answers.text_table``).
    """
    t0 = time.monotonic()

    def report() -> Written:
        from reports.answers import recommendations_text

        made, paths = generate(sweep_dir)
        print(f"\n{recommendations_text(made, explain, width)}\nreport: {paths.html} "
              f"(summary: {paths.markdown}, csv: {paths.csv}; "
              f"{time.monotonic() - t0:.1f} s)")
        return paths

    def tensorboard() -> Exported:
        from reports.tensorboard import export

        exported = export(sweep_dir)
        print(_exported_line(exported))
        return exported

    paths = _after_sweep("the report", "report", sweep_dir, report)
    _after_sweep("the TensorBoard export", "tensorboard", sweep_dir, tensorboard)
    return paths


def _exported_line(exported: Exported) -> str:
    return (f"tensorboard: {exported.sessions} run(s) as HParams sessions in "
            f"{exported.logdir}; open them beside the profiles with: {exported.command}")


def _sweep_dir(args: argparse.Namespace) -> Path:
    if not args.sweep_dir.is_dir():
        raise UsageError(f"no sweep directory at {args.sweep_dir}. "
                         f"Received: sweep_dir={str(args.sweep_dir)!r}")
    return Path(args.sweep_dir)


def cmd_report(args: argparse.Namespace) -> int:
    _sweep_dir(args)
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


def cmd_tensorboard(args: argparse.Namespace) -> int:
    sweep_dir = _sweep_dir(args)
    from reports.tensorboard import export  # once the arguments stand

    print(_exported_line(export(sweep_dir)))
    return Exit.OK


def add_parser(sub: Any) -> None:
    """Register ``report`` and ``tensorboard`` on the ``bench`` command line."""
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

    t = sub.add_parser("tensorboard", help="write a sweep as TensorBoard HParams sessions "
                                           "and print the command that opens it")
    t.add_argument("sweep_dir", type=Path, help="a directory written by `bench run --out`")
    t.set_defaults(func=cmd_tensorboard)
