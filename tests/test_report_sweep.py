"""The report of a real (tiny) sweep, produced the way a user gets it: `bench run`.

One sweep in a subprocess (TensorFlow runs only in its children; two runs per
configuration), then checks on what it wrote: the report at the end of `bench run`,
its numbers against the stored results (a configuration's figure is the median of its
runs'), `bench report` on the same directory, and a report failure that must not
change the sweep's exit code.
"""

from __future__ import annotations

import csv
import io
import re
import shutil
import statistics
from pathlib import Path
from typing import Any

import pytest

from bench.results.schema import RunResult
from bench.results.store import load_sweep
from reports.columns import duration, fmt_rate
from tests.helpers import TINY, TINY_SWEEP_MATRIX, bench


def _row(md: str, batch: int, strategy: str, replicas: int) -> dict[str, str]:
    """The Markdown ranking row of (batch, strategy, replicas)."""
    section, header = None, []
    for line in md.splitlines():
        m = re.match(r"\*\*global batch (\d+)\*\*", line)
        if m:
            section = int(m.group(1))
        elif line.startswith("| ") and section == batch:
            cells = [c.strip() for c in line.strip("|").split("|")]
            if cells[0] == "replicas":
                header = cells
            elif header and cells[0].isdigit():
                row = dict(zip(header, cells, strict=True))
                if row["strategy"] == strategy and int(row["replicas"]) == replicas:
                    return row
    raise AssertionError(f"no row for batch {batch} {strategy} n={replicas} in:\n{md}")


def _median(results: list[RunResult], what: str) -> float:
    values = []
    for r in results:
        assert r.figures is not None
        values.append(r.figures.global_throughput if what == "throughput"
                      else r.figures.step_time.median_s)
    return float(statistics.median(values))


@pytest.mark.slow  # twelve TensorFlow child processes, ~50 s on an idle 2-core machine
def test_report_of_a_tiny_sweep(tmp_path: Path, tiny_sweep: tuple[Path, Any]) -> None:
    out, proc = tiny_sweep
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report_dir = out / "report"
    assert f"report: {report_dir / 'report.html'}" in proc.stdout
    assert "recommendations:" in proc.stdout and "mlp[tiny], batch 16" in proc.stdout
    loaded = load_sweep(out)
    results: list[RunResult] = loaded.results
    by_key: dict[str, list[RunResult]] = {}
    for r in results:
        by_key.setdefault(r.key, []).append(r)
    assert len(by_key) == 8 and not loaded.warnings
    md = (report_dir / "summary.md").read_text(encoding="utf-8")
    html = (report_dir / "report.html").read_text(encoding="utf-8")

    # every ok configuration's figures are printed as the median of its two runs; the
    # unsupported ones (one run: nothing to replicate) with their reason
    by = {}
    for key, runs in by_key.items():
        r = runs[0]
        if r.status == "ok":
            assert sorted(x.replicate for x in runs) == [1, 2]
            row = _row(md, r.global_batch, r.spec.strategy, r.replicas)
            assert row["throughput (examples/s)"] == fmt_rate(_median(runs, "throughput"))
            assert row["step median"] == duration(_median(runs, "step"))
            assert "(2 runs," in row["noise: run-to-run cv (runs, range); window cv"]
            assert f"data-key='{key}'" in html
            by[(r.spec.strategy, r.replicas, r.global_batch)] = runs
        else:
            assert len(runs) == 1
            assert r.status == "unsupported" and r.spec.strategy == "one_device"
            assert (r.reason or "").splitlines()[0] in md
    # strong-scaling efficiency of mirrored on 2 devices, from the runs' medians
    for batch in (16, 32):
        two, one = by[("mirrored", 2, batch)], by[("mirrored", 1, batch)]
        eff = _median(two, "throughput") / _median(one, "throughput") / 2
        assert _row(md, batch, "mirrored", 2)["strong eff."].startswith(f"{eff:.0%} [")
    assert "logical devices that share the same" in md  # this machine has no GPU
    assert "**Answers**" in md and "run-to-run cv" in md  # the noise beside the answer
    assert html.count("<img ") >= 4
    # Every configuration was profiled (evidence by default): the breakdown table, and a
    # "because" only ever followed by the profiles' difference, never a description.
    assert "Where the step time goes (profiled)" in html and "Where the step time goes" in md
    # (The short tables' column is headed "because (profiles)": a heading, not a cause.)
    for cause in re.findall(r"because (?!\(profiles\))([^;\n]*)", md):
        assert re.match(r"[+-][0-9.]+ ms/(step|1,000 examples) profiled \(", cause), cause
    rows = list(csv.DictReader(io.StringIO((report_dir / "results.csv").read_text())))
    assert sorted(r["key"] for r in rows) == sorted(r.key for r in results)

    # `bench report` on the same sweep, elsewhere, gives the same summary numbers
    again = bench("report", str(out), "--out", str(tmp_path / "again"), timeout=120)
    assert again.returncode == 0, again.stderr
    md2 = (tmp_path / "again" / "summary.md").read_text(encoding="utf-8")
    strip = re.compile(r"generated \S+")
    assert strip.sub("", md2) == strip.sub("", md)

    # a report that cannot be written does not change the sweep's exit code (on a
    # copy: the shared sweep stays as bench run left it)
    out = tmp_path / "damaged"
    shutil.copytree(tiny_sweep[0], out)
    report_dir = out / "report"
    shutil.rmtree(report_dir)
    report_dir.write_text("not a directory")
    resumed = bench("run", *TINY_SWEEP_MATRIX, *TINY, "--out", str(out), timeout=600)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "could not be written" in resumed.stderr
    assert len(load_sweep(out).results) == len(results)
