"""The report of a real (tiny) sweep, produced the way a user gets it: `bench run`.

One sweep in a subprocess (TensorFlow runs only in its children), then checks on what
it wrote: the report at the end of `bench run`, its numbers against the stored
results, `bench report` on the same directory, and a report failure that must not
change the sweep's exit code.
"""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path

import pytest

from bench.results.schema import RunResult
from bench.results.store import load_sweep
from reports.columns import duration, fmt_rate
from tests.helpers import TINY, bench


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


@pytest.mark.slow  # six TensorFlow child processes, ~25 s on an idle 2-core machine
def test_report_of_a_tiny_sweep(tmp_path: Path) -> None:
    out = tmp_path / "sweep"
    proc = bench("run", "--workload", "mlp", "--strategy", "one_device,mirrored",
                 "--devices", "1,2", "--batch", "16,32", *TINY, "--out", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report_dir = out / "report"
    assert f"report: {report_dir / 'report.html'}" in proc.stdout
    assert "recommendations:" in proc.stdout and "mlp[tiny]:" in proc.stdout
    loaded = load_sweep(out)
    results: list[RunResult] = loaded.results
    assert len(results) == 8 and not loaded.warnings
    md = (report_dir / "summary.md").read_text(encoding="utf-8")
    html = (report_dir / "report.html").read_text(encoding="utf-8")

    # every ok run's figures are printed as stored; the unsupported ones with their reason
    for r in results:
        if r.status == "ok":
            assert r.figures is not None
            row = _row(md, r.global_batch, r.spec.strategy, r.replicas)
            assert row["throughput (examples/s)"] == fmt_rate(r.figures.global_throughput)
            assert row["step median"] == duration(r.figures.step_time.median_s)
            assert f"data-key='{r.key}'" in html
        else:
            assert r.status == "unsupported" and r.spec.strategy == "one_device"
            assert (r.reason or "").splitlines()[0] in md
    # strong-scaling efficiency of mirrored on 2 devices, from the stored throughputs
    by = {(r.spec.strategy, r.replicas, r.global_batch): r for r in results
          if r.status == "ok" and r.figures}
    for batch in (16, 32):
        two, one = by[("mirrored", 2, batch)], by[("mirrored", 1, batch)]
        assert two.figures is not None and one.figures is not None
        eff = two.figures.global_throughput / one.figures.global_throughput / 2
        assert _row(md, batch, "mirrored", 2)["strong eff."] == f"{eff:.0%}"
    assert "logical devices that share the same" in md  # this machine has no GPU
    assert html.count("<img ") >= 4
    rows = list(csv.DictReader(io.StringIO((report_dir / "results.csv").read_text())))
    assert sorted(r["key"] for r in rows) == sorted(r.key for r in results)

    # `bench report` on the same sweep, elsewhere, gives the same summary numbers
    again = bench("report", str(out), "--out", str(tmp_path / "again"), timeout=120)
    assert again.returncode == 0, again.stderr
    md2 = (tmp_path / "again" / "summary.md").read_text(encoding="utf-8")
    strip = re.compile(r"generated \S+")
    assert strip.sub("", md2) == strip.sub("", md)

    # a report that cannot be written does not change the sweep's exit code
    for f in report_dir.iterdir():
        f.unlink()
    report_dir.rmdir()
    report_dir.write_text("not a directory")
    resumed = bench("run", "--workload", "mlp", "--strategy", "one_device,mirrored",
                    "--devices", "1,2", "--batch", "16,32", *TINY, "--out", str(out))
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "could not be written" in resumed.stderr
    assert len(load_sweep(out).results) == 8
