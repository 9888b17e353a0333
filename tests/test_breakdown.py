"""The step breakdown in every report format, and a configuration's profiled step.

Built from constructed results (tests.helpers.report_results carries one profiled
run with a five-part breakdown); no TensorFlow.
"""

from __future__ import annotations

import io
from pathlib import Path

import pandas as pd
import pytest

from bench.regress.pytest_plugin import extra_info
from bench.results.schema import BREAKDOWN_PARTS, Communication, RunResult
from reports.breakdown import breakdown_table, common_dir, profiled
from reports.configs import group_configs
from reports.files import write
from reports.report import build_from_results
from reports.results_table import format_table
from reports.runs import views
from reports.tensorboard import METRICS
from tests.helpers import fake_breakdown, measured, report_results

PART_NAMES = [f"breakdown_{p}_{what}" for p in BREAKDOWN_PARTS for what in ("s", "share")]


def _profiled_run(results: list[RunResult]) -> RunResult:
    (run,) = [r for r in results if r.figures is not None and r.figures.breakdown is not None]
    return run


def test_every_report_format_shows_each_part_in_ms_and_as_a_share(tmp_path: Path) -> None:
    results = report_results()
    run = _profiled_run(results)
    assert run.figures is not None and run.figures.breakdown is not None
    b = run.figures.breakdown
    paths = write(build_from_results(results, tmp_path / "sweep"), tmp_path / "out")
    html = paths.html.read_text(encoding="utf-8")
    md = paths.markdown.read_text(encoding="utf-8")
    step_ms = f"{b.step_s * 1e3:.3g}"
    compute_cell = f"{b.compute_s * 1e3:.3g} (70%)"
    for text in (html, md):
        assert "Where the step time goes (profiled)" in text
        assert all(f"{p} (ms, share)" in text for p in BREAKDOWN_PARTS)
        assert step_ms in text and compute_cell in text
        assert "communication: CollectiveReduceV2" in text
        assert "tensorboard --logdir /tmp/profile" in text or "--logdir=/tmp/profile" in text
    csv = pd.read_csv(io.StringIO(paths.csv.read_text(encoding="utf-8")))
    row = csv[csv["key"] == run.key].iloc[0]
    assert row["breakdown_compute_s"] == pytest.approx(b.compute_s)
    assert row["breakdown_communication_share"] == pytest.approx(0.2)
    assert all(name in csv.columns for name in PART_NAMES)
    shown = format_table(results)
    assert "input share" in shown and "communication share" in shown
    assert "compute time" not in shown  # the seconds stay in the CSV
    info = extra_info(run, None)
    assert info["breakdown_host_share"] == pytest.approx(0.08)
    assert info["breakdown_idle_s"] == pytest.approx(b.idle_s)
    assert set(PART_NAMES) <= {m.tag for m in METRICS}  # TensorBoard's metrics


def test_a_configurations_profiled_step_is_the_mean_of_its_profiled_runs() -> None:
    runs = [measured("mirrored", 2, 64, 1000.0), measured("mirrored", 2, 64, 1000.0),
            measured("mirrored", 2, 64, 1000.0)]
    for i, r in enumerate(runs[:2]):
        r.replicate = i + 1
        assert r.figures is not None
        r.figures.breakdown = fake_breakdown(
            0.010 * (1 + i), {"compute": 0.5, "communication": 0.3, "host": 0.1},
            {"communication": {"CollectiveReduceV2": 0.3}}, profile_dir=f"/s/profiles/k.run{i}")
    runs[2].replicate = 3  # not profiled: left out of the mean
    (config,) = group_configs(views(runs))
    p = profiled(config)
    assert p is not None and p.runs == 2 and p.steps == 10
    assert p.step_s == pytest.approx(0.015)
    assert p.parts["communication"] == pytest.approx(0.0045)
    assert sum(p.parts.values()) == pytest.approx(p.step_s)
    assert p.ops["communication"] == pytest.approx({"CollectiveReduceV2": 0.0045})
    assert p.share("compute") == pytest.approx(0.5)
    assert p.command.endswith("/s/profiles")  # one command opens both runs' profiles
    assert p.capture_s == pytest.approx(1.0)
    assert common_dir(["/a/b/c", "/a/b/d/e"]) == "/a/b" and common_dir(["/x/y"]) == "/x/y"


def test_a_result_profiled_before_the_five_parts_shows_its_remainder_unsplit() -> None:
    run = measured("mirrored", 2, 64, 1000.0)
    assert run.figures is not None
    run.figures.communication = Communication(
        step_s=0.01, collective_s=0.002, compute_s=0.007, other_s=0.001, comm_fraction=0.2,
        op_types={}, profile_dir="/p", profiled_steps=4, profiler_overhead=None)
    table = breakdown_table(group_configs(views([run])))
    (row,) = table.rows
    cells = dict(zip(table.headers, row, strict=True))
    assert cells["communication (ms, share)"] == "2 (20%)"
    assert cells["input (ms, share)"] == cells["host (ms, share)"] == "-"
    assert "1 ms of input, host and idle together" in table.notes[0]
    assert breakdown_table(group_configs(views([measured("mirrored", 2, 64, 9.0)]))).rows == []
