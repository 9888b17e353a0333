"""The step breakdown in every report format, a configuration's profiled step, and the
differential explanation of two configurations (reports.explain).

Built from constructed results (tests.helpers.report_results carries one profiled
run with a five-part breakdown); no TensorFlow.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from bench.answers.configs import group_configs
from bench.answers.runs import views
from bench.launch.evidence import DEFAULT_STEPS, OFF, Evidence
from bench.launch.sweep import cost_line
from bench.regress.pytest_plugin import extra_info
from bench.results.schema import BREAKDOWN_PARTS, Communication, RunResult
from reports.breakdown import breakdown_table, common_dir, profiled
from reports.explain import because, compared, difference, why_not
from reports.files import write
from reports.report import build_from_results
from reports.results_table import format_table
from reports.tensorboard import METRICS
from tests.helpers import fake_breakdown, measured, report_results, tiny_spec

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
        assert "the profiles added 0.5 s to these runs" in text
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


# -- the differential explanation (reports.explain) ---------------------------------------
def _profiled_config(strategy: str, devices: int, step_s: float, shares: dict[str, float],
                     ops: dict[str, dict[str, float]], batch: int = 256,
                     throughput: float | None = None) -> list[RunResult]:
    """Two runs of one configuration, the first profiled with ``shares`` of ``step_s``."""
    runs = []
    for i in (1, 2):
        r = measured(strategy, devices, batch, throughput or batch / step_s)
        r.replicate = i
        runs.append(r)
    assert runs[0].figures is not None
    runs[0].figures.breakdown = fake_breakdown(
        step_s, shares, ops, profile_dir=f"/s/profiles/{runs[0].key}")
    return runs


def _configs(*groups: list[RunResult]) -> list[Any]:
    return group_configs(views([r for g in groups for r in g]))


def test_a_difference_is_attributed_to_the_parts_and_ops_that_grew() -> None:
    """Slower: 24 ms = compute 12 + communication 6 (CollectiveReduceV2 5, _Recv 1) +
    host 5 + idle 1; faster: 14 ms = compute 12.5 + host 1.5. The 10 ms are 60%
    communication and 35% host; compute shrank by 0.5 ms."""
    slow = _profiled_config("mirrored", 2, 0.024, {"compute": 0.5, "communication": 0.25,
                                                   "host": 5 / 24},
                            {"communication": {"CollectiveReduceV2": 5 / 24, "_Recv": 1 / 24},
                             "host": {"Python and dispatch": 5 / 24}, "compute": {"MatMul": 0.5}})
    fast = _profiled_config("one_device", 1, 0.014, {"compute": 12.5 / 14, "host": 1.5 / 14},
                            {"compute": {"MatMul": 12.5 / 14},
                             "host": {"Python and dispatch": 1.5 / 14}})
    a, b = _configs(slow, fast)
    d = difference(a, b)
    assert d is not None and d.reproduced and d.unit == "step"
    assert d.delta_s == pytest.approx(0.010)
    by_part = {c.part: c for c in d.changes}
    assert by_part["communication"].delta_s == pytest.approx(0.006)
    assert dict(by_part["communication"].ops) == pytest.approx(
        {"CollectiveReduceV2": 0.005, "_Recv": 0.001})
    assert [name for name, _ in by_part["communication"].ops] == ["CollectiveReduceV2", "_Recv"]
    assert by_part["compute"].delta_s == pytest.approx(-0.0005)
    text = because(a, b)
    assert text is not None
    assert text.startswith("+10 ms/step profiled (24 vs 14 ms): 60% communication (+6 ms, of "
                           "which CollectiveReduceV2 +5 ms, _Recv +1 ms), 35% host (+3.5 ms, "
                           "of which Python and dispatch +3.5 ms), 10% idle (+1 ms)")
    assert "; offset by compute -0.5 ms" in text
    assert f"profiles: /s/profiles/{slow[0].key}, /s/profiles/{fast[0].key}" in text
    assert text.endswith("--logdir /s/profiles)") or "--logdir=/s/profiles" in text
    assert compared(b, a) == compared(a, b)  # the profiles decide which side is slower
    assert (compared(a, b) or "").startswith("mirrored on 2 devices +10 ms/step profiled")


def test_no_cause_where_a_profile_is_missing_or_the_profiles_disagree() -> None:
    slow = _profiled_config("mirrored", 2, 0.010, {"compute": 0.9}, {}, throughput=10_000.0)
    fast = _profiled_config("one_device", 1, 0.012, {"compute": 0.9}, {}, throughput=20_000.0)
    plain = [measured("default", 1, 256, 20_000.0)]
    a, b, c = _configs(slow, fast, plain)
    assert because(a, b) is None  # the runs call a slower, its profile is faster
    assert why_not(a, b).startswith("cause not measured: the profiled steps do not show the "
                                    "difference (10 vs 12 ms per step; profiles: ")
    assert because(a, c) is None and difference(a, c) is None
    assert why_not(a, c).startswith("cause not measured: no profile of default on 1 device")


def test_steps_of_different_batches_are_compared_per_thousand_examples() -> None:
    slow = _profiled_config("mirrored", 2, 0.020, {"compute": 0.5, "host": 0.5}, {}, batch=512)
    fast = _profiled_config("one_device", 1, 0.008, {"compute": 1.0}, {}, batch=256)
    a, b = _configs(slow, fast)
    d = difference(a, b)
    assert d is not None and d.unit == "1,000 examples"
    assert d.slower_s == pytest.approx(0.020 / 512 * 1000)
    assert d.faster_s == pytest.approx(0.008 / 256 * 1000)
    assert {c.part: c.delta_s for c in d.changes}["host"] == pytest.approx(0.010 / 512 * 1000)
    assert d.attribution().startswith("+7.81 ms/1,000 examples profiled")


def test_the_report_gives_the_profiles_difference_as_the_cause_never_a_description() -> None:
    """default twice as fast as one_device on the same device (the gap of issue 23):
    with both profiled, the slower one's line says where its extra time went."""
    fast = _profiled_config("default", 1, 0.012, {"compute": 0.85, "host": 0.1},
                            {"compute": {"MatMul": 0.85}, "host": {"Python and dispatch": 0.1}})
    slow = _profiled_config("one_device", 1, 0.024, {"compute": 0.45, "host": 0.45,
                                                     "input": 0.05},
                            {"compute": {"MatMul": 0.45}, "host": {"Python and dispatch": 0.45},
                             "input": {"IteratorGetNext": 0.05}})
    report = build_from_results([*fast, *slow], Path("/s"))
    (rec,) = report.machines[0].workloads[0].recommendations
    assert rec.best is not None and rec.best.base_strategy == "default"
    (line,) = [o for o in rec.others if o.startswith("one_device")]
    assert "50% slower [" in line and ", because +12 ms/step profiled (24 vs 12 ms): " in line
    assert "host (+9.6 ms, of which Python and dispatch +9.6 ms)" in line
    assert "it runs on one device with nothing replicated" not in line  # the registry's words


def test_the_best_multi_device_configuration_is_compared_by_its_profile_even_in_a_tie() -> None:
    one = _profiled_config("one_device", 1, 0.010, {"compute": 0.9}, {"compute": {"MatMul": 0.9}})
    multi = _profiled_config("mirrored", 2, 0.0101, {"compute": 0.8, "communication": 0.15},
                             {"communication": {"CollectiveReduceV2": 0.15}})
    report = build_from_results([*one, *multi], Path("/s"))
    (rec,) = report.machines[0].workloads[0].recommendations
    assert rec.best is not None and rec.best.base_strategy == "one_device"
    # A small difference of large changes that cancel out: each part in ms, no shares.
    assert "Against the best multi-device configuration (mirrored on 2 devices), by their " \
           "profiles: mirrored on 2 devices +0.1 ms/step profiled (10.1 vs 10 ms): " \
           "communication +1.51 ms (of which CollectiveReduceV2 +1.51 ms); offset by idle " \
           "-0.495 ms, compute -0.92 ms over one_device on 1 device (profiles: " in rec.text
    assert "because" not in rec.text


# -- evidence by default (bench.launch.evidence) -----------------------------------------
def test_a_sweep_profiles_each_training_configurations_first_run_only() -> None:
    on = Evidence()
    train = tiny_spec(strategy="mirrored", devices=2)
    assert on.steps_for(train, 1) == DEFAULT_STEPS
    assert on.steps_for(train, 2) == 0  # later runs may share a process: no profile there
    assert OFF.steps_for(train, 1) == 0  # --no-profile
    assert on.steps_for(train.replace(profile_steps=3), 1) == 0  # profiles itself anyway
    assert on.steps_for(tiny_spec(mode="allreduce", devices=2), 1) == 0
    ps = tiny_spec(strategy="parameter_server", devices=2, loop="custom")
    assert on.steps_for(ps, 1) == 0  # its steps run where the coordinator cannot see them
    with pytest.raises(ValueError, match="Received: steps=-1"):
        Evidence(steps=-1)


def test_the_sweep_is_told_what_its_profiles_cost() -> None:
    runs = [measured("mirrored", 2, 64, 1000.0) for _ in range(3)]
    for r in runs[:2]:
        assert r.figures is not None
        r.figures.breakdown = fake_breakdown(0.01, {"compute": 1.0})  # capture_s 0.5
    assert cost_line(runs, 100.0) == ("evidence: 2 runs profiled after their windows, 1.0 s "
                                      "of the sweep's 100 s (1.0%) (--no-profile skips it)")
    assert cost_line(runs[2:], 100.0) is None
    assert (cost_line(runs[:1], 10.0) or "").startswith("evidence: 1 run profiled after its ")


# -- input-bound from the profile (reports.verdicts) --------------------------------------
@pytest.mark.parametrize(("input_share", "kind", "severity"), [
    (0.30, "input-bound", "high"), (0.08, "input-bound", "moderate"),
    (0.01, "input keeps up", "info")])
def test_the_input_share_says_whether_the_pipeline_limits_throughput(
        input_share: float, kind: str, severity: str) -> None:
    real = _profiled_config("mirrored", 2, 0.020, {"input": input_share, "compute": 0.5},
                            {"input": {"IteratorGetNext": input_share}}, throughput=8_000.0)
    for r in real:
        r.spec = r.spec.replace(data="tfdata")
        r.key = r.spec.key()
    twin = _profiled_config("mirrored", 2, 0.016, {"compute": 0.5}, {}, throughput=10_000.0)
    mr = build_from_results([*real, *twin], Path("/s")).machines[0]
    (v,) = [v for v in mr.verdicts[real[0].key] if v.kind.startswith("input")]
    assert (v.kind, v.severity) == (kind, severity)
    assert f"{input_share:.0%}" in v.text or f"{input_share:.1%}" in v.text
    assert "the real-data gap: 8,000 examples/s with data=tfdata vs 10,000 with data on the " \
           "devices, because +4 ms/step profiled (20 vs 16 ms): " in v.text
    if kind == "input-bound":
        assert v.text.startswith("the input pipeline, not the strategy, limits throughput: ")
        assert f"(IteratorGetNext {input_share * 20:.3g} ms)" in v.text
    else:
        assert "the step does not wait for its input" in v.text
    assert not [v for v in mr.verdicts[twin[0].key] if v.kind.startswith("input")]
