"""Profile capture and the communication split: the rules on hand-made events, the
parser on a trace the test captures itself, and profiled runs on 1 and 2 devices.

TensorFlow parts run in child processes (tests/probe_cases.py).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from bench.child.probes.trace import (
    Classifier,
    OpEvent,
    StepSpan,
    breakdown,
    parse_op_name,
    union_length,
)
from tests.probe_cases import run_probe_case

MS = 10**9  # picoseconds per millisecond


def test_op_event_names_are_parsed_and_other_events_ignored() -> None:
    assert parse_op_name("adam/CollectiveReduceV2_1:CollectiveReduceV2") == (
        "adam/CollectiveReduceV2_1", "CollectiveReduceV2")
    assert parse_op_name("GroupCrossDeviceControlEdges_0/Identity_5/_22:_Send") == (
        "GroupCrossDeviceControlEdges_0/Identity_5/_22", "_Send")
    assert parse_op_name("ThreadpoolListener::Record") is None  # C++ scope, not an op
    assert parse_op_name("EagerLocalExecute: ReadVariableOp") is None
    assert parse_op_name("train") is None


def test_union_length_merges_overlaps_across_threads() -> None:
    assert union_length([]) == 0
    assert union_length([(0, 10), (5, 15), (20, 25)]) == 20
    assert union_length([(0, 10), (2, 3)]) == 10  # nested
    assert union_length([(0, 5), (5, 8)]) == 8  # touching
    assert union_length([(4, 4), (9, 3)]) == 0  # empty or reversed


def test_classifier_counts_packing_ops_only_in_the_optimizers_all_reduce() -> None:
    rule = Classifier(reduction_scopes=("adam",))
    assert rule.is_communication("adam/CollectiveReduceV2", "CollectiveReduceV2")
    assert rule.is_communication("x/NcclAllReduce", "NcclAllReduce")
    assert rule.is_communication("update_0/AssignVariableOp/_14", "_Send")
    assert rule.is_communication("adam/concat", "ConcatV2")  # gradient packing
    assert rule.is_communication("adam/AddN", "AddN")  # hierarchical-copy reduction
    assert rule.is_communication("replica_1/adam_1/split", "SplitV")
    # Top-level AddN: the tape summing a tensor's gradients (ResNet50 has ~120 a step
    # on one device, where nothing is communicated), so not counted.
    assert not rule.is_communication("AddN_4", "AddN")
    assert not rule.is_communication("gradient_tape/resnet50/AddN", "AddN")
    assert not rule.is_communication("replica_1/resnet50_1/concat", "ConcatV2")
    assert not rule.is_communication("adam/MatMul", "_MklMatMul")
    assert any(t.startswith("ConcatV2 (inside scopes adam") for t in rule.counted_types())


def test_breakdown_partitions_each_step_by_hand() -> None:
    """Step 0..10 ms; communication on two threads [2,5] and [4,6] -> 4 ms; other ops
    [0,3] and [5,9] -> busy [0,9], of which 9 - 4 = 5 ms compute; 1 ms other. An op
    straddling the step's end is clipped; ops of the next step do not leak in."""
    ev = [OpEvent("adam/CollectiveReduceV2", "CollectiveReduceV2", 2 * MS, 5 * MS),
          OpEvent("adam/concat", "ConcatV2", 4 * MS, 6 * MS),
          OpEvent("mlp/dense/MatMul", "_MklMatMul", 0, 3 * MS),
          OpEvent("adam/update/Mul", "Mul", 5 * MS, 9 * MS),
          OpEvent("late/Mul", "Mul", 12 * MS, 14 * MS),
          OpEvent("adam/CollectiveReduceV2_1", "CollectiveReduceV2", 11 * MS, 12 * MS)]
    steps = [StepSpan(1, 11 * MS, 15 * MS), StepSpan(0, 0, 10 * MS)]
    b = breakdown(ev, steps)
    first, second = b.steps  # ordered by time, whatever the input order
    assert first.step == 0
    assert first.step_s == pytest.approx(0.010)
    assert first.collective_s == pytest.approx(0.004)
    assert first.compute_s == pytest.approx(0.005)
    assert first.other_s == pytest.approx(0.001)
    assert first.comm_fraction == pytest.approx(0.4)
    assert second.collective_s == pytest.approx(0.001)
    assert second.compute_s == pytest.approx(0.002)
    assert b.op_types == {"ConcatV2": 1, "CollectiveReduceV2": 2}


def test_parser_reads_a_trace_captured_by_this_test(tmp_path: Path) -> None:
    """A tiny profile of known ops: step annotations, op names, and the scope rule."""
    r = run_probe_case("trace", 1, tmp=str(tmp_path / "trace"), steps=3)
    assert r["steps"] == [0, 1, 2]
    assert all(s > 0 for s in r["span_seconds"])
    types = {op.rsplit(":", 1)[1] for op in r["ops"]}
    assert any("MatMul" in t for t in types), r["ops"]
    assert "adam/concat:ConcatV2" in r["ops"]
    assert any(op.startswith("gradient_tape/") and op.endswith(":ConcatV2")
               for op in r["ops"]), r["ops"]
    c = r["communication"]
    # Only the concat outside gradient_tape is counted: one per profiled step.
    assert c["op_types"] == {"ConcatV2": 3}
    assert c["profiled_steps"] == 3
    assert 0 < c["comm_fraction"] < 1
    assert c["step_s"] == pytest.approx(c["collective_s"] + c["compute_s"] + c["other_s"])
    assert list((tmp_path / "trace" / "plugins" / "profile").glob("*/*.xplane.pb"))


@pytest.fixture(scope="module")
def profiled(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[dict[str, Any]], Path]:
    """A 1-device run and a Mirrored run on 2 logical devices, profiled for 4 steps
    each after their windows (one process; only one of them is a Mirrored)."""
    tmp = tmp_path_factory.mktemp("profiled")
    runs = [{"strategy": "one_device", "devices": 1, "profile_steps": 4},
            {"strategy": "mirrored", "devices": 2, "profile_steps": 4,
             "size": "default", "batch": 256, "max_seconds": 0.5}]
    os.environ["STRATBENCH_CACHE_DIR"] = str(tmp / "cache")  # inherited by the child
    try:
        return run_probe_case("profile", 2, runs=runs, tmp=str(tmp)), tmp
    finally:
        del os.environ["STRATBENCH_CACHE_DIR"]


def test_profiled_mirrored_run_spends_part_of_its_step_communicating(
        profiled: tuple[list[dict[str, Any]], Path]) -> None:
    c = profiled[0][1]["communication"]
    assert c["collective_s"] > 0
    assert 0 < c["comm_fraction"] < 1
    assert c["op_types"].get("CollectiveReduceV2", 0) >= 2 * 4  # 2 replicas x 4 steps
    assert c["step_s"] == pytest.approx(c["collective_s"] + c["compute_s"] + c["other_s"])
    assert c["compute_s"] > 0
    assert c["profiled_steps"] == 4
    assert c["profiler_overhead"] is not None and c["profiler_overhead"] > 0
    assert list(Path(c["profile_dir"]).glob("plugins/profile/*/*.xplane.pb"))


def test_profiled_one_device_run_has_no_communication(
        profiled: tuple[list[dict[str, Any]], Path]) -> None:
    c = profiled[0][0]["communication"]
    assert c["collective_s"] == 0.0 and c["comm_fraction"] == 0.0
    assert c["op_types"] == {}
    assert c["compute_s"] > 0


def test_runs_carry_mfu_against_a_cached_measured_peak(
        profiled: tuple[list[dict[str, Any]], Path]) -> None:
    figures, tmp = profiled
    cache = json.loads((tmp / "cache" / "peak_flops_v2.json").read_text())
    (entry,) = cache.values()  # measured once, then read from the cache by the 2nd run
    fp32 = entry["achievable"]["float32"]
    assert len(fp32["by_size"]) > 1 and fp32["flops_per_s"] == max(fp32["by_size"].values())
    for f in figures:
        assert f["peak_flops_per_s"] == pytest.approx(fp32["flops_per_s"])  # CPU: once
        assert 0 < f["mfu"] <= 1
        assert f["mfu"] == pytest.approx(
            f["model"]["train_flops_per_example"] * f["global_throughput"]
            / fp32["flops_per_s"])


def test_bench_run_keeps_the_profile_beside_the_result_and_prints_how_to_open_it(
        tmp_path: Path) -> None:
    import subprocess
    import sys

    from bench.results.store import load
    from tests.probe_cases import ROOT

    out = tmp_path / "sweep"
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "run", "--workload", "mlp", "--size", "tiny",
         "--strategy", "mirrored", "--devices", "2", "--batch", "32", "--repeats", "1",
         "--max-seconds", "0.3", "--profile-steps", "2", "--runs", "1", "--max-runs", "1",
         "--out", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=240,
        env={**os.environ, "STRATBENCH_CACHE_DIR": str(tmp_path / "cache")})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (path,) = (out / "results").glob("*.json")
    result = load(path)
    assert result.figures is not None and result.figures.communication is not None
    c = result.figures.communication
    assert Path(c.profile_dir).parent == (out / "profiles").resolve()
    assert list(Path(c.profile_dir).glob("plugins/profile/*/*.xplane.pb"))
    assert f"tensorboard --logdir {c.profile_dir}" in proc.stdout
    assert result.to_dict()["units"]["figures.communication.collective_s"] == "s"
