"""A figure that a run could not measure says why, in every rendering.

``Memory.device_peak_bytes`` names ``device_peak_reason`` as the field that explains it
(``unit(..., why_missing=...)``): the HTML and Markdown tables show ``n/a [k]`` and the
reason in a note under the table, the CSV has a reason column beside the figure, and
``bench show`` prints the reason under its table. No TensorFlow: the results are built
with tests.helpers and the assertions read the rendered text.
"""

from __future__ import annotations

import contextlib
import io
import re
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest

from bench.cli.main import main
from bench.errors import SchemaError
from bench.regress.compare import compare
from bench.regress.pytest_plugin import extra_info
from bench.regress.render import as_table
from bench.results.figures import NOT_RECORDED, catalogue, why_missing
from bench.results.schema import RunResult, TaskFigures, unit
from bench.results.store import SweepStore, save
from reports.files import write
from reports.report import build_from_results
from tests.helpers import replicated

REASON = "the allocator of CPU:0 keeps no statistics (TF_CPU_ALLOCATOR_USE_BFC unset)"
FIGURE = "memory_device_peak_bytes"
HEADER = "peak device memory (MiB)"


def _sweep(reason: str | None, *, with_figure: int = 0) -> list[RunResult]:
    """mirrored on 2 devices (3 runs; the first ``with_figure`` keep their 1 MiB device
    peak, the others have none and ``reason``) beside one_device, which has the figure."""
    mirrored = replicated("mirrored", 2, 32, 1000.0)
    for r in mirrored[with_figure:]:
        assert r.figures is not None
        r.figures.memory.device_peak_bytes = {}
        r.figures.memory.device_peak_reason = reason
        for w in r.figures.windows:  # as the child leaves them: no window measured it
            w.device_peak_bytes = {}
    return [*mirrored, *replicated("one_device", 1, 32, 600.0)]


@dataclass
class Rendered:
    html: str
    markdown: str
    csv: pd.DataFrame
    show: str
    show_csv: pd.DataFrame


def _cli(*argv: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(list(argv)) == 0
    return out.getvalue()


def _render(results: list[RunResult], tmp: Path) -> Rendered:
    sweep = tmp / "sweep"
    for r in results:
        save(r, SweepStore(sweep).paths(r.spec, r.replicate).result)
    written = write(build_from_results(results, sweep), tmp / "report")
    return Rendered(
        html=written.html.read_text("utf-8"), markdown=written.markdown.read_text("utf-8"),
        csv=_read_csv(written.csv.read_text("utf-8")), show=_cli("show", str(sweep)),
        show_csv=_read_csv(_cli("show", "--csv", str(sweep))))


def _read_csv(text: str) -> pd.DataFrame:
    """The CSV with every empty reason read as "" (and empty figures as NaN)."""
    df = pd.read_csv(io.StringIO(text))
    reasons = [c for c in df.columns if c.endswith("_reason")]
    return df.assign(**{c: df[c].astype(object).fillna("") for c in reasons})


def _html_cell(html: str, key: str, header: str) -> str:
    """The text of ``header``'s cell in the comparison-table row of configuration ``key``."""
    table = html[:html.index(f"data-key='{key}'")]
    table = table[table.rindex("<table>"):]
    headers = re.findall(r"<th(?: class='l')?>([^<]*)</th>", table.split("</thead>")[0])
    row = re.search(rf"data-key='{re.escape(key)}'>(.*?)</tr>", html)
    assert row is not None
    cells = re.findall(r"<td(?: class='l')?>([^<]*)</td>", row.group(1))
    return cells[headers.index(header)]


def _markdown_cell(markdown: str, strategy: str, header: str) -> str:
    """``header``'s cell in the Markdown comparison row of ``strategy``."""
    lines = markdown.splitlines()
    head = next(line for line in lines if line.startswith("| replicas |"))
    headers = [c.strip() for c in head.strip("|").split("|")]
    row = next(line for line in lines if line.startswith("| ")
               and f"| {strategy} |" in line)
    return [c.strip() for c in row.strip("|").split("|")][headers.index(header)]


def _show_cell(show: str, strategy: str, header: str) -> str:
    """``header``'s cell in the first ``bench show`` row of ``strategy`` (columns
    located by where the header ends: the table right-aligns its cells)."""
    lines = show.splitlines()
    head = next(line for line in lines if header in line)
    end = head.index(header) + len(header)
    row = next(line for line in lines if f" {strategy} " in line)
    return row[:end].split("  ")[-1].strip()


def _key(results: list[RunResult], strategy: str) -> str:
    return next(r.key for r in results if r.spec.strategy == strategy)


def test_a_missing_device_peak_shows_its_reason_in_every_rendering(tmp_path: Path) -> None:
    results = _sweep(REASON)
    out = _render(results, tmp_path)
    note = f"[1] {HEADER} n/a for mirrored on 2 devices: {REASON}"

    assert _html_cell(out.html, _key(results, "mirrored"), HEADER) == "n/a [1]"
    assert f"<ul class='notes muted'><li>{note}</li></ul>" in out.html
    assert _html_cell(out.html, _key(results, "one_device"), HEADER) == "1"

    assert _markdown_cell(out.markdown, "mirrored", HEADER) == "n/a [1]"
    assert f"- {note}" in out.markdown.splitlines()
    assert _markdown_cell(out.markdown, "one_device", HEADER) == "1"

    for csv in (out.csv, out.show_csv):
        rows = csv.set_index("strategy")
        assert rows.loc["mirrored", FIGURE].isna().all()
        assert set(rows.loc["mirrored", f"{FIGURE}_reason"]) == {REASON}
        assert set(rows.loc["one_device", FIGURE]) == {float(2**20)}
        assert set(rows.loc["one_device", f"{FIGURE}_reason"]) == {""}
        # The reason column stands beside its figure.
        columns = list(csv.columns)
        assert columns.index(f"{FIGURE}_reason") == columns.index(FIGURE) + 1

    assert _show_cell(out.show, "mirrored", HEADER) == "n/a [1]"
    assert _show_cell(out.show, "one_device", HEADER) == "1"
    assert f"[1] {HEADER} n/a for mlp[tiny] mirrored n=2 b=32: {REASON}" in out.show
    assert f"{FIGURE}_reason" not in out.show  # the reason is a note, not a column


def test_a_measured_device_peak_shows_the_number_and_no_reason(tmp_path: Path) -> None:
    results = _sweep(REASON, with_figure=3)  # every run keeps its figure
    out = _render(results, tmp_path)
    assert _html_cell(out.html, _key(results, "mirrored"), HEADER) == "1"
    assert _markdown_cell(out.markdown, "mirrored", HEADER) == "1"
    assert _show_cell(out.show, "mirrored", HEADER) == "1"
    assert set(out.csv[f"{FIGURE}_reason"]) == {""}
    for text in (out.html, out.markdown, out.show):
        assert "n/a [" not in text and REASON not in text
        assert "class='notes" not in text


def test_a_configuration_shows_the_reason_only_when_no_run_has_the_figure(
        tmp_path: Path) -> None:
    results = _sweep(REASON, with_figure=1)  # one of the three runs measured it
    out = _render(results, tmp_path)
    # The configuration's figure is the one run's; the runs without it say why in the CSV.
    assert _html_cell(out.html, _key(results, "mirrored"), HEADER) == "1"
    assert _markdown_cell(out.markdown, "mirrored", HEADER) == "1"
    assert "n/a [" not in out.markdown
    mirrored = out.csv[out.csv["strategy"] == "mirrored"].sort_values("replicate")
    assert list(mirrored[f"{FIGURE}_reason"]) == ["", REASON, REASON]


def test_a_result_from_before_the_reason_says_it_was_not_recorded(tmp_path: Path) -> None:
    results = _sweep(None)  # no figure and no reason: a result written before either
    out = _render(results, tmp_path)
    note = f"[1] {HEADER} n/a for mirrored on 2 devices: {NOT_RECORDED}"
    assert "not recorded" in NOT_RECORDED
    assert _html_cell(out.html, _key(results, "mirrored"), HEADER) == "- [1]"
    assert f"<li>{note}</li>" in out.html
    assert _markdown_cell(out.markdown, "mirrored", HEADER) == "- [1]"
    assert f"- {note}" in out.markdown.splitlines()
    assert set(out.csv.loc[out.csv["strategy"] == "mirrored", f"{FIGURE}_reason"]) \
        == {NOT_RECORDED}
    assert _show_cell(out.show, "mirrored", HEADER) == "- [1]"
    assert NOT_RECORDED in out.show


def test_a_task_without_a_device_peak_says_why_in_the_html(tmp_path: Path) -> None:
    results = _sweep(REASON, with_figure=3)
    figures = results[0].figures
    assert figures is not None
    figures.tasks = [
        TaskFigures(task="worker0", role="worker", device_peak_bytes={"CPU:0": 3 * 2**20}),
        TaskFigures(task="worker1", role="worker", device_peak_reason=REASON)]
    html = _render(results, tmp_path).html
    tasks = html[html.index("<h4>Tasks of"):]
    tasks = tasks[:tasks.index("</ul>")]
    rows = re.findall(r"<tr><td class='l'>(worker\d)</td>(?:<td[^>]*>[^<]*</td>){3}"
                      r"<td>([^<]*)</td>", tasks)
    assert rows == [("worker0", "3"), ("worker1", "n/a [1]")]
    assert f"<li>[1] device peak (MiB) n/a for worker1: {REASON}</li>" in tasks


def test_why_missing_reads_the_declared_field_and_refuses_an_unknown_one() -> None:
    task = TaskFigures(task="w", role="worker")
    assert why_missing(task, "device_peak_bytes") == NOT_RECORDED
    task.device_peak_reason = REASON
    assert why_missing(task, "device_peak_bytes") == REASON
    task.device_peak_bytes = {"CPU:0": 0}  # measured, even if zero: nothing to explain
    assert why_missing(task, "device_peak_bytes") is None
    assert why_missing(task, "host_peak_rss_bytes") is None  # nothing declared

    @dataclass
    class Odd:
        x: float | None = unit("s", None, label="x", better="lower", why_missing="x_why")

    with pytest.raises(SchemaError, match=r"Odd.x: unit\(why_missing=...\) must name a "
                                          r"field of Odd. Received: why_missing='x_why'"):
        catalogue(Odd)


def test_compare_and_pytest_benchmark_say_why_the_device_peak_is_missing() -> None:
    baseline, current = _sweep(REASON, with_figure=3), _sweep(REASON)
    report = compare(baseline, current)
    by_strategy = {c.label.split()[1]: c for c in report.configs}
    mirrored, one_device = by_strategy["mirrored"], by_strategy["one_device"]
    assert mirrored.measure(FIGURE) is None  # nothing to judge on the current side...
    assert mirrored.unmeasured == {FIGURE: f"current: {REASON}"}  # ...and it says why
    assert one_device.measure(FIGURE) is not None and one_device.unmeasured == {}
    assert f"not compared (current: {REASON})" in as_table(report)

    info = extra_info(current[0], None)
    assert info[FIGURE] is None and info[f"{FIGURE}_reason"] == REASON
    info = extra_info(baseline[0], None)
    assert info[FIGURE] == 2**20 and info[f"{FIGURE}_reason"] is None
