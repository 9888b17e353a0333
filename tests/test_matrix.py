"""Matrix expansion and presets."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.errors import SpecError
from bench.hardware import GpuInfo, Hardware
from bench.matrix import (
    BENCHMARK_MATRICES,
    expand,
    expand_axes,
    in_rounds,
    preset_default,
    preset_smoke,
)
from bench.spec import RunSpec

CPU = Hardware("test cpu", 2, 2**34)
GPUS = Hardware("test cpu", 8, 2**36, tuple(GpuInfo(i, "G", 16000, "1") for i in range(4)))


def test_expand_is_a_product_with_cross_device_ops_only_for_mirrored() -> None:
    specs = expand({"workload": ["mlp"], "strategy": ["mirrored", "central_storage"],
                    "cross_device_ops": ["default", "hierarchical_copy"],
                    "devices": [1, 2], "batch": [64]}, {"size": "tiny"})
    labels = [s.label() for s in specs]
    assert len(specs) == 6, labels  # 2 mirrored cdo x 2 devices + central_storage x 2
    assert all(s.size == "tiny" for s in specs)
    assert len({s.key() for s in specs}) == 6


def test_default_cpu_preset_covers_the_issue_matrix() -> None:
    specs = preset_default(CPU)
    assert {s.workload for s in specs} == {"mlp", "cnn", "resnet50"}
    assert {s.strategy for s in specs} == {"default", "one_device", "mirrored",
                                           "central_storage", "multi_worker_mirrored",
                                           "parameter_server", "independent"}
    # No copies sharing a logical CPU device: the same cores as one copy a device.
    assert all(s.workers_per_device == 1 for s in specs)
    # The independent baseline at every replica count the in-process strategies reach.
    for w in ("mlp", "cnn", "resnet50"):
        multi = {s.devices for s in specs if s.workload == w and s.devices > 1
                 and s.strategy in ("mirrored", "central_storage")}
        assert multi <= {s.devices for s in specs if s.workload == w
                         and s.strategy == "independent" and s.workers_per_device == 1}
    assert {s.devices for s in specs} == {1, 2}
    # Two batch sizes where a configuration costs seconds (the fixed-overhead fit).
    for w in ("mlp", "cnn"):
        assert len({s.global_batch for s in specs if s.workload == w}) == 2
    # Every single-device strategy computes the same thing: one reference per workload,
    # not four near-copies.
    for w in ("cnn", "resnet50"):
        assert {s.strategy for s in specs if s.workload == w and s.devices == 1
                and s.workers_per_device == 1} == {"default"}
    # Single-device strategies only appear at one device.
    assert all(s.devices == 1 for s in specs if s.strategy in ("default", "one_device"))
    # Keys are unique: no configuration would overwrite another's result.
    assert len({s.key() for s in specs}) == len(specs)


def test_the_default_preset_narrowed_to_a_workload_keeps_its_points() -> None:
    full = preset_default(CPU)
    mlp = preset_default(CPU, ["mlp"])
    assert {s.key() for s in mlp} == {s.key() for s in full if s.workload == "mlp"}
    # --batch alone narrows every workload of the preset (it was dropped without one).
    assert {s.global_batch for s in preset_default(CPU, (), [32])} == {32}
    batches = preset_default(CPU, ["cnn"], [32])
    assert {s.workload for s in batches} == {"cnn"}
    assert {s.global_batch for s in batches} == {32}
    # Parameters are laid over the preset's own: ResNet50 keeps its 10 classes.
    resnet = preset_default(CPU, ["resnet50"], (), {"image_size": 64})
    assert {tuple(sorted(s.params.items())) for s in resnet} == {(("classes", 10),
                                                                  ("image_size", 64))}
    # ResNet50 trains as its reference benchmarks do, with SGD and momentum; the others,
    # and a ResNet50 run of any other matrix, with Adam.
    assert {s.optimizer for s in resnet} == {"sgd"}
    assert {s.optimizer for s in full if s.workload != "resnet50"} == {"adam"}
    assert RunSpec(workload="resnet50", strategy="default").optimizer == "adam"


def test_the_default_preset_of_any_other_model_has_the_generic_points(tmp_path: Path) -> None:
    """A user's model (``make bench ARGS='--workload mine.py:build'``) and the Transformer
    get the CNN's points: default on 1 device, mirrored and central_storage at 2, the
    multi-process strategies and the baseline at the first batch; their params given."""
    path = tmp_path / "mine.py"
    path.write_text("def build(width=8):\n    return None\n")
    for name, params in ((f"{path}:build", {"width": 16}), ("transformer", None)):
        specs = preset_default(CPU, [name], (), params)
        cnn = preset_default(CPU, ["cnn"])
        shape = sorted((s.strategy, s.devices, s.global_batch, s.workers_per_device)
                       for s in specs)
        assert shape == sorted((s.strategy, s.devices, s.global_batch, s.workers_per_device)
                               for s in cnn)
        assert all(s.params == (params or {}) for s in specs)
        assert len({s.key() for s in specs}) == len(specs)
    assert {s.workload_digest for s in preset_default(CPU, [f"{path}:build"])} != {""}


def test_the_gpu_preset_narrowed_to_a_workload_and_batch() -> None:
    specs = preset_default(GPUS, ["cnn"], [32])
    assert {s.workload for s in specs} == {"cnn"} and {s.batch for s in specs} == {32}
    assert {s.devices for s in specs} == {1, 2, 3, 4}


def test_default_gpu_preset_sweeps_all_gpus_with_resnet224() -> None:
    specs = preset_default(GPUS)
    assert {s.workload for s in specs} == {"resnet50"}
    assert {s.devices for s in specs} == {1, 2, 3, 4}
    assert all(s.workload_params()["image_size"] == 224 for s in specs)
    assert all(s.batch_mode == "per_replica" for s in specs)


def test_smoke_preset_is_tiny() -> None:
    specs = preset_smoke(CPU)
    assert specs and all(s.size == "tiny" for s in specs)


def test_expand_axes_notes_values_some_strategies_do_not_take() -> None:
    e = expand_axes({"workload": ["mlp"], "size": ["tiny"],
                     "strategy": ["mirrored", "multi_worker_mirrored"],
                     "communication": ["auto", "ring"], "devices": [2], "batch": [32]})
    assert [(s.strategy, s.communication) for s in e.specs] == [
        ("mirrored", "auto"), ("multi_worker_mirrored", "auto"),
        ("multi_worker_mirrored", "ring")]
    assert e.notes == ["communication=ring does not apply to mirrored; those configurations "
                       "run with communication=auto"]


def test_expand_axes_refuses_values_no_strategy_takes() -> None:
    with pytest.raises(SpecError, match=r"cross_device_ops must be one of default, "
                                        r"hierarchical_copy.*Received: cross_device_ops='x'"):
        expand_axes({"workload": ["mlp"], "strategy": ["mirrored"], "cross_device_ops": ["x"]})
    with pytest.raises(SpecError, match=r"ps_tasks=2 applies to none of the strategies in the "
                                        r"sweep \(mirrored, independent\); it is taken by "
                                        r"parameter_server"):
        expand_axes({"workload": ["mlp"], "strategy": ["mirrored", "independent"],
                     "ps_tasks": [2]})


def test_benchmark_matrices_fit_the_hardware_and_run_in_rounds() -> None:
    assert BENCHMARK_MATRICES.names() == ["nightly", "small", "tiny"]
    assert [(s.strategy, s.devices) for s in BENCHMARK_MATRICES.get("small")(CPU)] == \
        [("one_device", 1), ("mirrored", 2)]
    one_gpu = Hardware("test cpu", 8, 2**36, (GpuInfo(0, "G", 16000, "1"),))
    assert {s.strategy for s in BENCHMARK_MATRICES.get("nightly")(one_gpu)} == {"one_device"}
    assert len(BENCHMARK_MATRICES.get("nightly")(GPUS)) == 6
    a, b = BENCHMARK_MATRICES.get("small")(CPU)
    assert in_rounds([a, b], 2) == [(a, 1), (b, 1), (a, 2), (b, 2)]
