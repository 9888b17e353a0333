"""Write a built report as its three files: HTML, Markdown and CSV.

Kept apart from ``reports.report`` (the model every rendering reads) so that the
renderings import the model and this module imports the renderings, never both
ways round.
"""

from __future__ import annotations

import os
import tempfile
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
class Written:
    html: Path
    markdown: Path
    csv: Path


def write(report: SweepReport, out_dir: Path) -> Written:
    """Render ``report`` into ``out_dir`` (report.html, summary.md, results.csv)."""
    paths = Written(out_dir / HTML_NAME, out_dir / MARKDOWN_NAME, out_dir / CSV_NAME)
    _write_atomic(paths.csv, frame(report).to_csv(index=False))
    _write_atomic(paths.markdown, render_markdown(report))
    _write_atomic(paths.html, render_html(report))
    return paths
