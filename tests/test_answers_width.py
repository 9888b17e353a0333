"""The answers' table within a width: every cell kept, no line wider than asked.

The terminal's table (``reports.answers``) is one line a row, as wide as its cells
(about 170 columns for the default sweep's labels). Given a width (``--width``, else
COLUMNS, else the terminal's), a row too wide folds onto as few lines as fit, and
narrower still each cell takes a line of its own, named by its header; printed to a
file or a pipe with neither, the table stays one line a row.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bench.cli.common import answers_width
from bench.cli.main import main
from bench.results.schema import RunResult
from bench.results.store import SweepStore, save
from reports.answers import HEADERS, answer_rows, recommendations_text, text_table
from reports.report import build_from_results
from tests.helpers import fake_environment, replicated

ONE, TWO, MWM = "one_device", "mirrored", "multi_worker_mirrored"
# Rows as wide as a default sweep's: a workload with parameters, the longest strategy
# name, an open comparison with another like it.
LONG: dict[str, Any] = {"workload": "resnet50", "params": {"classes": 10, "image_size": 32}}


def _results() -> list[RunResult]:
    env = fake_environment("width-box", gpus=2)
    out = []
    for batch, configs in ((16, ((ONE, 1, 1000.0, 0.2), (MWM, 2, 1020.0, 0.2),
                                 (TWO, 2, 1010.0, 0.2))),
                           (64, ((ONE, 1, 1000.0, 0.01), (TWO, 2, 1500.0, 0.01)))):
        for strategy, devices, level, noise in configs:
            out += replicated(strategy, devices, batch, level, env=env, run_cv=noise,
                              cv=noise, **LONG)
    return out


def _cells_in_order(lines: list[str], cells: tuple[str, ...]) -> bool:
    """Each cell appears whole, in order, in the text of ``lines``."""
    text, at = "\n".join(lines), 0
    for cell in cells:
        found = text.find(cell, at)
        if found < 0:
            return False
        at = found + len(cell)
    return True


def test_without_a_width_a_row_is_one_line() -> None:
    rows = [r.cells for r in answer_rows(build_from_results(_results(), Path("/x")))]
    lines = text_table(HEADERS, rows)
    assert len(lines) == 1 + len(rows)
    assert max(map(len, lines)) > 100  # the case the width is for
    assert text_table(HEADERS, rows, width=max(map(len, lines))) == lines  # it fits


@pytest.mark.parametrize("width", [100, 80, 70])
def test_a_narrow_width_folds_each_row_and_keeps_every_cell(width: int) -> None:
    rows = [r.cells for r in answer_rows(build_from_results(_results(), Path("/x")))]
    lines = text_table(HEADERS, rows, width=width)
    assert max(map(len, lines)) <= width, lines
    per_row, rest = divmod(len(lines), len(rows) + 1)
    assert rest == 0 and per_row >= 2, lines  # header and rows folded alike
    for i, cells in enumerate([HEADERS, *rows]):
        block = lines[i * per_row:(i + 1) * per_row]
        assert block[0].startswith("  " + cells[0]) and all(
            line.startswith("    ") for line in block[1:]), block
        assert _cells_in_order(block, cells), (block, cells)


def test_narrower_than_any_fold_each_cell_is_a_line_named_by_its_header() -> None:
    rows = [r.cells for r in answer_rows(build_from_results(_results(), Path("/x")))]
    lines = text_table(HEADERS, rows, width=40)
    assert len(lines) == len(rows) * len(HEADERS)
    for i, cells in enumerate(rows):
        block = lines[i * len(HEADERS):(i + 1) * len(HEADERS)]
        assert block[0] == "  " + cells[0]
        assert block[1:] == [f"    {h}: {c}" for h, c in zip(HEADERS[1:], cells[1:],
                                                             strict=True)]


def test_the_legend_and_the_sentences_wrap_within_the_width() -> None:
    report = build_from_results(_results(), Path("/x"))
    wide = recommendations_text(report, explain=True)
    narrow = recommendations_text(report, explain=True, width=100)
    assert max(map(len, narrow.splitlines())) <= 100
    assert max(map(len, wide.splitlines())) > 100
    # The same words, only the lines differ.
    assert narrow.split() == wide.split()
    for row in answer_rows(report):
        assert " ".join(row.sentence.split()) in " ".join(narrow.split())


def _sweep(tmp_path: Path) -> Path:
    sweep = tmp_path / "sweep"
    store = SweepStore(sweep)
    for r in _results():
        save(r, store.paths(r.spec, r.replicate).result)
    return sweep


def test_report_takes_the_width_from_the_flag_then_columns(tmp_path: Path, capsys: Any,
                                                           monkeypatch: Any) -> None:
    sweep = _sweep(tmp_path)
    monkeypatch.delenv("COLUMNS", raising=False)

    def table(*flags: str) -> list[str]:
        assert main(["report", str(sweep), "--out", str(tmp_path / "out"), *flags]) == 0
        out = capsys.readouterr().out.splitlines()
        return out[:out.index(next(line for line in out if line.startswith("report: ")))]

    full = table()  # a pipe, no COLUMNS: one line a row, after one line a place's worth
    assert len(full) == 1 + 2 + 1 + 1 + 2 + 1 and max(map(len, full)) > 100
    assert full == recommendations_text(build_from_results(_results(), sweep)).splitlines()
    assert max(map(len, table("--width", "100"))) <= 100
    monkeypatch.setenv("COLUMNS", "90")
    assert max(map(len, table())) <= 90
    assert max(map(len, table("--width", "200"))) > 100  # the flag first


def test_the_width_is_a_whole_number_above_zero(tmp_path: Path, capsys: Any) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["report", str(_sweep(tmp_path)), "--width", "0"])
    assert exc.value.code == 2
    assert "expected a whole number above 0. Received: '0'" in capsys.readouterr().err


def test_the_width_defaults_to_columns_then_the_terminal(monkeypatch: Any) -> None:
    monkeypatch.setenv("COLUMNS", "77")
    assert answers_width(120) == 120 and answers_width(None) == 77
    monkeypatch.setenv("COLUMNS", "wide")
    monkeypatch.setattr("sys.stdout.isatty", lambda: False)
    assert answers_width(None) is None  # a file or a pipe: as wide as the cells
