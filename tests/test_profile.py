"""Profile capture and the step breakdown: the rules on hand-made events, the parser
on a trace the test captures itself, and profiled runs on 1 and 2 devices.

TensorFlow parts run in child processes (tests/probe_cases.py).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from bench.child.probes.profile import communication_of, summarize
from bench.child.probes.trace import (
    EXECUTOR_LABEL,
    IDLE_LABEL,
    PYTHON_LABEL,
    Classifier,
    Part,
    StepSpan,
    TraceEvent,
    attribute,
    outside,
    parse_op_name,
    split,
    union_length,
)
from bench.results.schema import BREAKDOWN_PARTS
from bench.results.text import breakdown_line
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
    assert outside((0, 20), [(2, 5), (4, 8), (15, 30)]) == [(0, 2), (8, 15)]
    assert outside((0, 10), []) == [(0, 10)]
    assert outside((0, 10), [(0, 10)]) == []


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


@pytest.mark.parametrize(("text", "line", "expected"), [
    ("mlp/dense/MatMul:MatMul", "tf_Compute/1", Part("compute", "MatMul")),
    # oneDNN's kernels and grappler's fusions are read as the op they compute, so a
    # breakdown names the same ops on any CPU and the scope rules hold for them.
    ("mlp/dense/MatMul:_MklNativeFusedMatMul", "tf_Compute/1", Part("compute", "MatMul")),
    ("mlp/dense/MatMul:_FusedMatMul", "tf_Compute/1", Part("compute", "MatMul")),
    ("gradient_tape/cnn/conv/Conv2DBackpropFilter:_MklNativeConv2DBackpropFilterWithBias",
     "tf_Compute/1", Part("compute", "Conv2DBackpropFilter")),
    ("adam/AddN:_MklAddN", "tf_Compute/1", Part("communication", "AddN")),
    ("cnn/bn/FusedBatchNormV3:_MklNativeFusedBatchNormV3", "tf_Compute/1",
     Part("compute", "FusedBatchNormV3")),
    ("adam/CollectiveReduceV2:CollectiveReduceV2", "collective_ops/7",
     Part("communication", "CollectiveReduceV2")),
    ("mul/_1:_Recv", "tf_Compute/1", Part("communication", "_Recv")),
    # A tf.data map function's ops run on the pipeline's threads, beside the step.
    ("MatMul_3:MatMul", "tf_data_private_threadpool/4", None),
    ("ExecutorState::Process", "tf_data_private_threadpool/4", None),
    ("Iterator::Root::Prefetch::Map", "tf_data_iterator_resource/2", None),
    ("PrefetchProduce", "tf_data_iterator_resource/2", None),
    # The waits of the asynchronous get-next ops (single and multi-device iterators).
    ("IteratorGetNextOp::DoCompute", "tf_data_iterator_get_next/3",
     Part("input", "IteratorGetNext")),
    ("IteratorGetNextAsOptionalOp::DoCompute", "tf_data_iterator_get_next/3",
     Part("input", "IteratorGetNextAsOptional")),
    ("GetNextFromShard1", "tf_data_multi_device_iterator_get_next/5",
     Part("input", "GetNextFromShard")),
    ("MultiDeviceIteratorFromStringHandle:MultiDeviceIteratorFromStringHandle",
     "tf_Compute/1", Part("input", "MultiDeviceIteratorFromStringHandle")),
    ("IteratorGetNextSync:IteratorGetNextSync", "python", Part("input", "IteratorGetNextSync")),
    # Python inside the graph is the host's time; so is the executor between its ops.
    ("EagerPyFunc:EagerPyFunc", "tf_Compute/1", Part("host", "EagerPyFunc")),
    ("ExecutorState::Process", "tf_Compute/1", Part("host", EXECUTOR_LABEL)),
    ("ThreadpoolListener::Record", "tf_numa_-1_Eigen/9", None),
    ("KernelAndDeviceFunc::Run", "python", None),
    ("train_call", "python", None),
])
def test_each_event_claims_its_part(text: str, line: str, expected: Part | None) -> None:
    assert Classifier().part_of(TraceEvent(text, line, 0, MS)) == expected


def _step_of_every_part() -> tuple[list[TraceEvent], StepSpan]:
    """A 20 ms step on the "python" thread, every part by hand:

    - host (Python): outside the function call [2, 18]: [0, 2] and [18, 20] = 4 ms;
    - input: the get-next wait [2, 5], of which [4, 5] another replica computes: 2 ms;
    - the pipeline's map op [1, 5] on a tf_data thread: nothing;
    - compute: MatMul [4, 5] and [5, 9] (comm takes [9, 10]), AddV2 [6, 8] beside it:
      5 ms, MatMul 4 ms and AddV2 1 ms ([6, 8] shared equally);
    - communication: CollectiveReduceV2 [9, 12]: 3 ms;
    - host (executor): ExecutorState::Process [12, 14]: 2 ms;
    - idle: [14, 18], inside the call with nothing running: 4 ms.
    """
    ev = [TraceEvent("KernelAndDeviceFunc::Run", "python", 2 * MS, 18 * MS),
          TraceEvent("train_call", "python", 0, 20 * MS),
          TraceEvent("IteratorGetNextOp::DoCompute", "tf_data_iterator_get_next/1",
                     2 * MS, 5 * MS),
          TraceEvent("map/MatMul:MatMul", "tf_data_private_threadpool/2", 1 * MS, 5 * MS),
          TraceEvent("replica_1/mlp/MatMul:MatMul", "tf_Compute/4", 4 * MS, 5 * MS),
          TraceEvent("mlp/MatMul:MatMul", "tf_Compute/3", 5 * MS, 10 * MS),
          TraceEvent("mlp/add:AddV2", "tf_Compute/4", 6 * MS, 8 * MS),
          TraceEvent("adam/CollectiveReduceV2:CollectiveReduceV2", "collective_ops/5",
                     9 * MS, 12 * MS),
          TraceEvent("ExecutorState::Process", "tf_Compute/3", 12 * MS, 14 * MS)]
    return ev, StepSpan(0, 0, 20 * MS, "python")


def test_a_step_is_split_into_five_parts_that_add_up_to_it() -> None:
    ev, step = _step_of_every_part()
    (s,) = split(ev, [step]).steps
    assert s.step_s == pytest.approx(0.020)
    assert s.parts == pytest.approx({"input": 0.002, "compute": 0.005, "communication": 0.003,
                                     "host": 0.006, "idle": 0.004})
    assert sum(s.parts.values()) == pytest.approx(s.step_s)
    assert s.labels == pytest.approx({
        Part("host", PYTHON_LABEL): 0.004, Part("input", "IteratorGetNext"): 0.002,
        Part("compute", "MatMul"): 0.004, Part("compute", "AddV2"): 0.001,
        Part("communication", "CollectiveReduceV2"): 0.003,
        Part("host", EXECUTOR_LABEL): 0.002, Part("idle", IDLE_LABEL): 0.004})
    assert s.comm_fraction == pytest.approx(0.15)


def test_steps_are_clipped_ordered_and_count_their_communication_ops() -> None:
    """Events straddling a step's end are clipped; ops of the next step do not leak in;
    steps come back in time order whatever the input order."""
    ev = [TraceEvent("adam/CollectiveReduceV2:CollectiveReduceV2", "c", 2 * MS, 5 * MS),
          TraceEvent("adam/concat:ConcatV2", "t", 4 * MS, 6 * MS),
          TraceEvent("mlp/dense/MatMul:MatMul", "t", 0, 3 * MS),
          TraceEvent("adam/update/Mul:Mul", "u", 5 * MS, 9 * MS),
          TraceEvent("late/Mul:Mul", "u", 12 * MS, 16 * MS),
          TraceEvent("adam/CollectiveReduceV2_1:CollectiveReduceV2", "c", 11 * MS, 12 * MS)]
    steps = [StepSpan(1, 11 * MS, 15 * MS, "python"), StepSpan(0, 0, 10 * MS, "python")]
    out = split(ev, steps)
    first, second = out.steps
    assert (first.step, second.step) == (0, 1)
    # No function call recorded on the stepping thread: what no op claims is Python.
    assert first.parts == pytest.approx({"input": 0.0, "compute": 0.005,
                                         "communication": 0.004, "host": 0.001, "idle": 0.0})
    assert second.parts["communication"] == pytest.approx(0.001)
    assert second.parts["compute"] == pytest.approx(0.003)  # [12, 15], clipped
    assert out.op_types == {"ConcatV2": 1, "CollectiveReduceV2": 2}


def test_attribution_shares_an_instant_among_what_runs_and_leaves_the_rest_idle() -> None:
    a, b = Part("compute", "MatMul"), Part("compute", "Conv2D")
    got = attribute([(0, 6 * MS, a), (3 * MS, 9 * MS, b), (2 * MS, 4 * MS, a)], (0, 12 * MS))
    # [0,2] a; [2,3] a x2; [3,4] a x2 + b: 2/3 and 1/3; [4,6] a + b; [6,9] b; [9,12] idle
    assert got[a] == pytest.approx(2 * MS + MS + MS * 2 / 3 + MS, abs=2)
    assert got[b] == pytest.approx(MS / 3 + MS + 3 * MS, abs=2)
    assert got[Part("idle", IDLE_LABEL)] == 3 * MS
    assert sum(got.values()) == 12 * MS  # exactly, integer picoseconds


def test_summary_is_per_step_and_per_call_and_keeps_the_busiest_ops() -> None:
    ev, step = _step_of_every_part()
    later = [TraceEvent(e.text, e.line, e.start_ps + 30 * MS, e.end_ps + 30 * MS) for e in ev]
    parts = split(ev + later, [step, StepSpan(1, 30 * MS, 50 * MS, "python")])
    b = summarize(parts, steps_per_call=2, profile_dir="/p", top=1)
    assert b.profiled_steps == 2
    assert b.step_s == pytest.approx(0.010)  # 20 ms calls of 2 steps
    assert [b.seconds(p) for p in BREAKDOWN_PARTS] == pytest.approx(
        [0.001, 0.0025, 0.0015, 0.003, 0.002])
    assert b.input_share + b.compute_share + b.communication_share + b.host_share \
        + b.idle_share == pytest.approx(1.0)
    assert b.compute_share == pytest.approx(0.25)
    assert b.ops("compute") == pytest.approx({"MatMul": 0.002})  # top=1: AddV2 dropped
    assert b.ops("host") == pytest.approx({PYTHON_LABEL: 0.002})
    c = communication_of(b, parts, Classifier())
    assert c.collective_s == b.communication_s and c.compute_s == b.compute_s
    assert c.step_s == pytest.approx(c.collective_s + c.compute_s + c.other_s)
    assert c.op_types == {"CollectiveReduceV2": 2}
    line = breakdown_line(b)
    assert "10 ms step = input 1 ms (10%), compute 2.5 ms (25%)" in line
    assert "--logdir /p" in line or "--logdir=/p" in line
    with pytest.raises(ValueError, match="Received: part='disk'"):
        b.seconds("disk")


def test_parser_reads_a_trace_captured_by_this_test(tmp_path: Path) -> None:
    """A tiny profile of known ops: step annotations, op names, and the scope rule."""
    r = run_probe_case("trace", 1, tmp=str(tmp_path / "trace"), steps=3)
    assert r["steps"] == [0, 1, 2]
    assert all(s > 0 for s in r["span_seconds"])
    assert r["step_lines"] == ["python"] * 3  # the thread that stepped
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
    b = r["breakdown"]
    assert b["step_s"] == pytest.approx(sum(b[f"{p}_s"] for p in BREAKDOWN_PARTS))
    assert b["communication_s"] == pytest.approx(c["collective_s"])
    assert b["compute_s"] > 0 and b["host_s"] > 0 and b["input_s"] == 0
    assert b["capture_s"] > 0
    assert list((tmp_path / "trace" / "plugins" / "profile").glob("*/*.xplane.pb"))


@pytest.fixture(scope="module")
def profiled(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[dict[str, Any]], Path]:
    """A 1-device run and a Mirrored run on 2 logical devices, profiled for 4 steps
    each after their windows (one process; only one of them is a Mirrored)."""
    tmp = tmp_path_factory.mktemp("profiled")
    runs = [{"strategy": "one_device", "devices": 1, "profile_steps": 4},
            {"strategy": "mirrored", "devices": 2, "profile_steps": 4,
             "size": "default", "batch": 256, "max_seconds": 0.5}]
    # A cache of its own, inherited by the child; the session's (conftest) comes back
    # after, or every later child would measure into the user's ~/.cache.
    before = os.environ.get("STRATBENCH_CACHE_DIR")
    os.environ["STRATBENCH_CACHE_DIR"] = str(tmp / "cache")
    try:
        return run_probe_case("profile", 2, runs=runs, tmp=str(tmp)), tmp
    finally:
        if before is None:
            del os.environ["STRATBENCH_CACHE_DIR"]
        else:
            os.environ["STRATBENCH_CACHE_DIR"] = before


@pytest.mark.alone  # shares the profiled runs of the MFU check below
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


@pytest.mark.alone  # shares the profiled runs of the MFU check below
def test_profiled_one_device_run_has_no_communication(
        profiled: tuple[list[dict[str, Any]], Path]) -> None:
    c = profiled[0][0]["communication"]
    assert c["collective_s"] == 0.0 and c["comm_fraction"] == 0.0
    assert c["op_types"] == {}
    assert c["compute_s"] > 0


# The peak is measured in the profiled process, and the runs must not beat it: another
# test's processes beside it would make it read low.
@pytest.mark.alone
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


def test_the_executor_shares_no_time_with_the_ops_it_runs() -> None:
    """An EagerPyFunc inside ExecutorState::Process: the Python op's time is its own;
    the executor keeps only the instants around it."""
    ev = [TraceEvent("ExecutorState::Process", "tf_Compute/1", 0, 10 * MS),
          TraceEvent("EagerPyFunc:EagerPyFunc", "tf_Compute/1", 2 * MS, 9 * MS),
          TraceEvent("KernelAndDeviceFunc::Run", "python", 0, 10 * MS)]
    (s,) = split(ev, [StepSpan(0, 0, 10 * MS, "python")]).steps
    assert s.labels == pytest.approx({Part("host", "EagerPyFunc"): 0.007,
                                      Part("host", EXECUTOR_LABEL): 0.003})


def test_an_evidence_profile_stays_short_where_steps_are_slow() -> None:
    from bench.child.probes.hooks import evidence_step_count

    assert evidence_step_count(5, 0.010, multi_worker=False) == 5
    assert evidence_step_count(5, 0.300, multi_worker=False) == 3  # about a second of steps
    assert evidence_step_count(5, 1.100, multi_worker=False) == 2  # never fewer than 2
    assert evidence_step_count(5, 1.100, multi_worker=True) == 5  # workers must agree
