"""Write a built report as its three files: HTML, Markdown and CSV.

Each file is one entry of ``FILES``: its name and the rendering that turns the built
report into its text, so a new format is one entry, and writing knows no format.

Kept apart from ``reports.report`` (the model every rendering reads) so that the
renderings import the model and this module imports the renderings, never both
ways round.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from reports.html import render_html
from reports.markdown import render_markdown
from reports.report import SweepReport, frame

HTML_NAME, MARKDOWN_NAME, CSV_NAME = "report.html", "summary.md", "results.csv"


def _write_atomic(path: Path, data: str) -> None:
    """Replace ``path`` in one step: a reader sees the old report or the new one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(data)
        os.chmod(tmp, 0o644)  # mkstemp makes it 0600; a report is meant to be shared
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


@dataclass(frozen=True)
class ReportFile:
    """One file of a report: its name and how a built report renders into it."""

    name: str
    render: Callable[[SweepReport], str]


def _csv(report: SweepReport) -> str:
    return str(frame(report).to_csv(index=False))


# Every file a report is written as, in the order they are written (the HTML last: a
# reader who finds it finds the others).
FILES = (ReportFile(CSV_NAME, _csv), ReportFile(MARKDOWN_NAME, render_markdown),
         ReportFile(HTML_NAME, render_html))


@dataclass(frozen=True)
class Written:
    html: Path
    markdown: Path
    csv: Path


def write(report: SweepReport, out_dir: Path) -> Written:
    """Render ``report`` into ``out_dir``, one file for each of ``FILES``."""
    for f in FILES:
        _write_atomic(out_dir / f.name, f.render(report))
    return Written(out_dir / HTML_NAME, out_dir / MARKDOWN_NAME, out_dir / CSV_NAME)
