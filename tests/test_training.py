"""Integration: train the tiny workloads under every strategy on 2 logical CPUs.

The TensorFlow checks run in two child processes started together by one module
fixture (tests/tf_cases.py: ``run_cases``, ``Lanes``), each case reported on its own;
one more process is the harness's own run of an unsupported configuration.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from bench.child.backends.tf.trainer import shard_rows
from bench.env import CPU_ALLOCATOR_VAR
from tests.tf_cases import Lanes, run_cases

STRATEGY_CASES = [("default", 1), ("one_device", 1), ("mirrored", 2), ("central_storage", 2)]
SGD = {"optimizer": "sgd", "learning_rate": 0.05}
PARITY_STRATEGIES = [("one_device", 1), ("mirrored", 2), ("central_storage", 2)]
KNOBS = [
    {"precision": "mixed_bfloat16"},
    {"xla": True},
    {"grad_accum": 2},
    {"steps_per_call": 4},
    {"data": "tfdata"},
    {"cross_device_ops": "hierarchical_copy"},
    {"cross_device_ops": "reduction_to_one_device"},
    {"optimizer": "sgd", "learning_rate": 0.1},
]


def knob_id(over: dict[str, Any]) -> str:
    return ",".join(f"{k}={v}" for k, v in over.items())


def decreased(losses: list[float], window: int = 5, ratio: float = 0.95) -> bool:
    """Mean of the last ``window`` losses below ``ratio`` x mean of the first ones."""
    return bool(np.mean(losses[-window:]) < ratio * np.mean(losses[:window]))


# Every case of this module, with the arguments each test had when it ran its own
# process. Two children, started together: the first with the BFC CPU allocator (what
# the launcher asks for), the second with the default one, so that each allocator's
# memory probe runs where its variable was set before TensorFlow was imported. The
# second holds ResNet50 (~35 s, most of it one single-threaded trace); the first the
# many small cases, so the two take about as long.
BFC_CASES: dict[str, tuple[str, dict[str, Any]]] = {
    "memory/1": ("memory_probe", {}),
    **{f"learn/{s}-{n}-{w}": ("train", {"steps": 30, "workload": w, "strategy": s,
                                        "devices": n})
       for s, n in STRATEGY_CASES for w in ("mlp", "cnn")},
    # The MLP's curves end with the doubled gradient's (mirrored at twice the rate),
    # beside the reference it must differ from.
    **{f"parity/{w}": ("curves", {"steps": 20, "runs": [
        {"workload": w, "strategy": s, "devices": n, **SGD} for s, n in PARITY_STRATEGIES]
        + ([{"workload": w, "strategy": "mirrored", "devices": 2, **SGD,
             "learning_rate": 0.1}] if w == "mlp" else [])})
       for w in ("mlp", "cnn")},
    **{f"knob/{knob_id(o)}": ("train", {"steps": 16, "strategy": "mirrored", "devices": 2,
                                         **o}) for o in KNOBS},
    # Default-size MLP: the tiny one's tensors are too small to show in the allocator.
    "measure": ("measure", {"strategy": "mirrored", "devices": 2, "steps_per_call": 2,
                            "repeats": 3, "max_steps": 10, "min_steps": 4,
                            "max_seconds": 0.2, "size": "default", "batch": 64}),
    **{f"batch_devices/{k}": ("batch_devices", {"strategy": "mirrored", "devices": 2,
                                                "steps_per_call": k}) for k in (1, 2)},
}
DEFAULT_ALLOCATOR_CASES: dict[str, tuple[str, dict[str, Any]]] = {
    "memory/0": ("memory_probe", {}),
    # Mirrored on 2 devices only: it trains ResNet50 through the same model and loop as
    # one device, plus the all-reduce and the replicas' agreement; the one-device case
    # (a minute of the suite's 15) added nothing the MLP and CNN cases under every
    # strategy do not show. 40 steps: the loss first rises (to ~3x at step 11 here)
    # and is well below its start only after ~25.
    "resnet50": ("train", {"steps": 40, "workload": "resnet50", "strategy": "mirrored",
                           "devices": 2, "batch": 16, "learning_rate": 1e-3}),
    "stats/mlp": ("stats", {"strategy": "one_device", "devices": 1,
                            "params": {"widths": [16, 8]}}),
    "stats/cnn": ("stats", {"workload": "cnn", "strategy": "one_device", "devices": 1}),
    "executed_flops": ("executed_flops", {"batch": 8, "models": [
        {"workload": "mlp", "params": {"widths": [16, 8]}}, {"workload": "cnn"},
        {"workload": "mlp", "params": {"input_dim": 784, "widths": [512, 512],
                                       "classes": 10}}]}),
}


def _central_storage_resnet50(tmp_path: Any) -> Any:
    from bench.launch.launcher import run_isolated
    from tests.helpers import tiny_spec

    spec = tiny_spec(workload="resnet50", strategy="central_storage", devices=2, batch=8)
    return run_isolated(spec, tmp_path / "run.log", timeout_s=180)


@pytest.fixture(scope="module")
def tf_runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lanes]:
    """The two children, and the harness's central-storage ResNet50 run after the
    second (a single process: no ports to share)."""
    tmp = tmp_path_factory.mktemp("central-storage")
    lanes = Lanes(
        [("bfc", lambda: run_cases(BFC_CASES, env={**os.environ, CPU_ALLOCATOR_VAR: "1"}))],
        [("default", lambda: run_cases(DEFAULT_ALLOCATOR_CASES,
                                       env={**os.environ, CPU_ALLOCATOR_VAR: "0"})),
         ("central_storage", lambda: _central_storage_resnet50(tmp))])
    yield lanes
    lanes.join()


def case(runs: Lanes, name: str) -> Any:
    """The named case's result, from the child that ran it."""
    return runs["bfc" if name in BFC_CASES else "default"][name]


@pytest.mark.parametrize("workload", ["mlp", "cnn"])
@pytest.mark.parametrize(("strategy", "devices"), STRATEGY_CASES)
def test_tiny_workloads_learn_and_replicas_agree(tf_runs: Lanes, workload: str,
                                                 strategy: str, devices: int) -> None:
    """30 steps of each tiny workload under each in-process strategy: the loss falls,
    the replicas hold the same weights."""
    r = case(tf_runs, f"learn/{strategy}-{devices}-{workload}")
    assert r["replicas"] == devices
    assert decreased(r["losses"]), r["losses"]
    assert r["divergence"] <= 1e-6


def test_tiny_resnet50_learns(tf_runs: Lanes) -> None:
    """ResNet50 (32x32 inputs) learns under Mirrored on 2 devices, replicas in step."""
    r = case(tf_runs, "resnet50")
    assert decreased(r["losses"], window=8), r["losses"]
    assert r["divergence"] <= 1e-6


@pytest.mark.logical_cpu
def test_resnet50_under_central_storage_is_reported_unsupported(tf_runs: Lanes) -> None:
    """Keras 3 BatchNormalization cannot train under CentralStorage with 2 replicas;
    the harness must say so as `unsupported`, not crash or report `failed`."""
    result = tf_runs["central_storage"]
    assert result.status == "unsupported", result.reason
    assert "BatchNormalization" in (result.reason or "")


@pytest.mark.parametrize("workload", ["mlp", "cnn"])
def test_loss_parity_across_strategies(tf_runs: Lanes, workload: str) -> None:
    """Same seed, same data: one_device, mirrored/2 and central_storage/2 must agree.

    SGD on purpose: Adam normalises gradient scale away and would hide a doubled or
    halved gradient. The tolerance allows float32 reduction-order differences (the
    all-reduce sums two half-batch gradients instead of one full-batch gradient):
    1e-4 relative over 20 steps. A dropped or double-counted replica gradient or a
    wrong loss scale lands orders of magnitude further apart (next test).
    """
    ref, mirrored, central = (np.array(c) for c in case(tf_runs, f"parity/{workload}")[:3])
    assert ref[-1] < ref[0]
    np.testing.assert_allclose(mirrored, ref, rtol=1e-4, atol=1e-5, err_msg="mirrored")
    np.testing.assert_allclose(central, ref, rtol=1e-4, atol=1e-5, err_msg="central_storage")


def test_parity_tolerance_catches_a_doubled_gradient(tf_runs: Lanes) -> None:
    """A doubled gradient (same as a doubled SGD learning rate) is far outside it:
    one_device at the rate against mirrored/2 at twice the rate."""
    curves = case(tf_runs, "parity/mlp")
    a, b = np.array(curves[0]), np.array(curves[3])
    assert not np.allclose(a, b, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("over", KNOBS, ids=knob_id)
def test_knobs_train_under_mirrored(tf_runs: Lanes, over: dict[str, Any]) -> None:
    """Each knob trains the tiny MLP under Mirrored/2 for 16 steps: the loss falls,
    the replicas agree."""
    r = case(tf_runs, f"knob/{knob_id(over)}")
    assert decreased(r["losses"], window=4), r["losses"]
    assert r["divergence"] <= 1e-6


def test_measure_figures_are_consistent(tf_runs: Lanes) -> None:
    """The windows, throughputs, step times and memory of a measured Mirrored run agree
    with each other and with the spec."""
    r = case(tf_runs, "measure")
    f, spec = r["figures"], r["spec"]
    assert len(f["windows"]) == 3
    for w in f["windows"]:
        assert w["steps"] % 2 == 0 and 4 <= w["steps"] <= 10
        assert w["examples"] == w["steps"] * spec["batch"]
        assert w["global_throughput"] == pytest.approx(w["examples"] / w["wall_s"])
        assert w["per_replica_throughput"] == pytest.approx(w["global_throughput"] / 2)
        # The timed calls happen inside the synchronised window.
        st = w["step_time"]
        assert st["samples"] * st["mean_s"] * 2 <= w["wall_s"] * 1.0001
        # Wall-clock edges, to match windows of separate processes in time.
        assert w["end_ts"] - w["start_ts"] == pytest.approx(w["wall_s"], abs=1e-3)
    for a, b in zip(f["windows"], f["windows"][1:], strict=False):
        assert a["end_ts"] <= b["start_ts"]
    assert f["global_throughput"] == pytest.approx(
        np.median([w["global_throughput"] for w in f["windows"]]))
    assert f["per_replica_throughput"] == pytest.approx(f["global_throughput"] / 2)
    assert f["warmup"]["steps"] >= spec["warmup_steps"]
    assert f["loss_end"] < f["loss_start"] and f["learned"]
    assert f["model"]["params"] > 0 and f["model"]["train_flops_per_example"] > 0
    assert f["memory"]["device_scope"] == "process"
    assert_device_peak_or_reason(f["memory"]["device_peak_bytes"],
                                 f["memory"]["device_peak_reason"])


def assert_device_peak_or_reason(peaks: dict[str, int], reason: str | None) -> None:
    """A device peak where the allocator keeps statistics, else the reason it does not."""
    if peaks:
        assert peaks["CPU:0"] > 0 and reason is None
    else:
        assert reason and "CPU:0" in reason and "no statistics" in reason


@pytest.mark.parametrize("steps_per_call", [1, 2])
def test_each_replica_gets_its_batch_on_its_own_device(tf_runs: Lanes,
                                                       steps_per_call: int) -> None:
    """The pool is placed without a distributed dataset; the values must still sit on
    the replicas' devices (on GPUs a batch on the wrong one is copied every step)."""
    r = case(tf_runs, f"batch_devices/{steps_per_call}")
    assert r["batches"] == r["replicas"] and len(set(r["batches"])) == 2


@pytest.mark.parametrize("bfc", ["1", "0"])
def test_device_memory_is_a_figure_or_says_why(tf_runs: Lanes, bfc: str) -> None:
    """With the BFC CPU allocator (what the launcher asks for) TensorFlow keeps
    statistics on every machine; with the default one only on some (oneDNN's
    allocator): whichever this machine does, the probe gives a figure or the reason.
    (Each child runs its probe first, with the variable set before TensorFlow.)"""
    r = case(tf_runs, f"memory/{bfc}")
    assert_device_peak_or_reason(r["peaks"], r["reason"])
    if bfc == "1":
        assert r["peaks"]["CPU:0"] > 0
    elif not r["peaks"]:
        assert f"{CPU_ALLOCATOR_VAR}=0" in r["reason"]


def test_flops_of_mlp_count_the_backward_pass_as_executed(tf_runs: Lanes) -> None:
    """The analytic FLOP count of a small MLP, layer by layer, and its parameters."""
    s = case(tf_runs, "stats/mlp")
    # tiny MLP: 32 -> 16 -> 8 -> 4 classes. Per layer: forward, weight gradient, and
    # input gradient except for the first layer (its input is data).
    layers = [(32, 16), (16, 8), (8, 4)]
    forward = sum(2 * a * b for a, b in layers)
    weight_grads = forward
    input_grads = sum(2 * a * b for a, b in layers[1:])
    assert s["forward_flops_per_example"] == forward
    assert s["train_flops_per_example"] == forward + weight_grads + input_grads
    assert s["params"] == sum(a * b + b for a, b in layers)
    assert s["grad_bytes_per_step"] == 4 * s["params"]


def test_flops_of_cnn_count_convolutions(tf_runs: Lanes) -> None:
    """The analytic FLOP count of the tiny CNN, convolutions included."""
    s = case(tf_runs, "stats/cnn")
    # tiny CNN: 8x8x3 -> conv 3x3x3x8 -> conv 3x3x8x8 (8x8 out) -> pool -> 4x4x8 -> 16 -> 4
    first_conv = 8 * 8 * 3 * 3 * 3 * 8
    others = 8 * 8 * 3 * 3 * 8 * 8 + 4 * 4 * 8 * 16 + 16 * 4
    assert s["forward_flops_per_example"] == 2 * (first_conv + others)
    assert s["train_flops_per_example"] == 2 * (2 * first_conv + 3 * others)


def test_flop_count_matches_the_ops_tensorflow_builds_for_a_step(tf_runs: Lanes) -> None:
    """The count equals the MatMul/Conv2D FLOPs of the traced training step's graph
    (computed from each op's shapes), e.g. no input gradient for the first layer.
    Models: the [16, 8] MLP, the tiny CNN, the default MLP (784-512-512-10)."""
    mlp, cnn, big = case(tf_runs, "executed_flops")
    for r in (mlp, cnn, big):
        assert r["executed_per_example"] == pytest.approx(r["train_flops_per_example"])
        assert r["executed_per_example"] < 3 * r["forward_flops_per_example"]
    assert set(cnn["by_type"]) == {"MatMul", "Conv2D", "Conv2DBackpropInput",
                                   "Conv2DBackpropFilter"}
    # Two convolutions, one input gradient (the second's): the first sees only data.
    assert cnn["by_type"]["Conv2DBackpropInput"] == pytest.approx(
        cnn["by_type"]["Conv2D"] - 2 * 8 * 8 * 3 * 3 * 3 * 8)
    # The default MLP (784-512-512-10) executes 3,209,216 FLOPs per example, not
    # 3 x forward = 4,012,032.
    assert big["train_flops_per_example"] == 3_209_216
    assert 3 * big["forward_flops_per_example"] == 4_012_032


def test_windows_end_on_steps_or_on_time_after_the_minimum() -> None:
    from bench.child.windows import Rules

    rules = Rules(repeats=3, warmup_steps=2, min_steps=4, max_steps=10, max_seconds=1.0)
    assert not rules.window_done(2, 5.0, None)  # past the time, short of min_steps
    assert rules.window_done(4, 1.0, None)
    assert not rules.window_done(8, 0.5, None)
    assert rules.window_done(10, 0.1, None)  # max_steps whatever the time
    assert not rules.window_done(10, 9.0, 12)  # a step count the workers agreed on
    assert rules.window_done(12, 0.0, 12)


def test_windows_on_a_common_schedule_end_on_the_clock_not_on_steps() -> None:
    """Processes measured side by side (independent copies) close window i at the same
    wall-clock time, start + (i + 1) x max_seconds, however many steps each took."""
    from bench.child.windows import Rules

    rules = Rules(repeats=2, warmup_steps=2, min_steps=4, max_steps=10, max_seconds=1.0)
    assert rules.on_schedule(None) is rules
    timed = rules.on_schedule(100.0)
    assert not timed.window_done(30, 0.5, None, index=0, now_ts=100.5)  # past max_steps
    assert timed.window_done(30, 1.0, None, index=0, now_ts=101.0)
    assert not timed.window_done(3, 1.0, None, index=0, now_ts=101.2)  # short of min_steps
    assert not timed.window_done(50, 0.99, None, index=1, now_ts=101.99)
    assert timed.window_done(50, 1.0, None, index=1, now_ts=102.0)


def test_shards_rebuild_every_global_batch() -> None:
    pool, g = 3, 8
    rows = np.arange(pool * g)
    for n in (1, 2, 4):
        shards = [shard_rows(rows, pool, n, i) for i in range(n)]
        b = g // n
        for j in range(pool):
            batch = np.concatenate([s[j * b:(j + 1) * b] for s in shards])
            assert batch.tolist() == list(range(j * g, (j + 1) * g))
    # Two levels (2 worker pipelines x 2 local replicas) equal 4 replicas directly.
    worker1 = shard_rows(rows, pool, 2, 1)
    np.testing.assert_array_equal(shard_rows(worker1, pool, 2, 0), shard_rows(rows, pool, 4, 2))


def test_synthetic_task_is_deterministic_with_varied_labels() -> None:
    from workloads import WORKLOADS

    w = WORKLOADS.get("cnn")
    p = w.resolve("tiny", {})
    x1, y1 = w.make_pool(p, 64, seed=3)
    x2, y2 = w.make_pool(p, 64, seed=3)
    np.testing.assert_array_equal(x1, x2)
    np.testing.assert_array_equal(y1, y2)
    assert len(set(y1.tolist())) > 1
    assert x1.shape == (64, 8, 8, 3) and y1.dtype == np.int32
