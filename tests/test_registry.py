"""Strategy and workload registries, and hardware-dependent support decisions."""

from __future__ import annotations

import pytest

from bench.errors import UnknownNameError
from bench.hardware import GpuInfo, Hardware
from bench.registry import Registry
from bench.strategies import STRATEGIES
from tests.helpers import tiny_spec
from workloads import WORKLOADS

CPU = Hardware("test cpu", 2, 2**34)
TWO_GPUS = Hardware("test cpu", 8, 2**36,
                    (GpuInfo(0, "G", 16000, "1"), GpuInfo(1, "G", 16000, "1")))


def test_registries_hold_the_product_axes() -> None:
    assert STRATEGIES.names() == ["default", "one_device", "mirrored", "central_storage",
                                  "multi_worker_mirrored", "parameter_server", "independent",
                                  "tpu", "data_parallel", "model_parallel"]
    assert WORKLOADS.names() == ["mlp", "cnn", "resnet50", "transformer"]


def test_registry_rejects_duplicates_and_lists_names() -> None:
    r: Registry[int] = Registry("thing")
    r.register("a", 1)
    with pytest.raises(ValueError, match="registered twice"):
        r.register("a", 2)
    with pytest.raises(UnknownNameError, match=r"unknown thing 'b'; valid: a"):
        r.get("b")


@pytest.mark.parametrize(("over", "hw", "needle"), [
    ({"strategy": "one_device", "devices": 2}, CPU, "devices must be 1"),
    ({"strategy": "default", "devices": 4}, CPU, "devices must be 1"),
    ({"strategy": "mirrored", "cross_device_ops": "nccl"}, CPU, "needs GPUs"),
    ({"strategy": "mirrored", "devices": 4}, TWO_GPUS, "only 2 GPU"),
    ({"strategy": "multi_worker_mirrored", "communication": "nccl"}, CPU, "need GPUs"),
    ({"strategy": "multi_worker_mirrored", "devices": 2, "workers": 1}, CPU,
     "one CPU device per worker"),
    ({"strategy": "tpu", "devices": 1}, CPU, "no TPU"),
])
def test_unsupported_combinations_have_reasons(over: dict, hw: Hardware, needle: str) -> None:
    spec = tiny_spec(**over)
    reason = STRATEGIES.get(spec.strategy).unsupported_reason(spec, hw)
    assert reason is not None and needle in reason


@pytest.mark.parametrize("name", ["mirrored", "central_storage"])
def test_multi_device_strategies_supported_on_logical_cpus(name: str) -> None:
    spec = tiny_spec(strategy=name, devices=4, batch=64)
    assert STRATEGIES.get(name).unsupported_reason(spec, CPU) is None
    assert spec.replicas == 4


def test_nccl_supported_with_gpus() -> None:
    spec = tiny_spec(cross_device_ops="nccl")
    assert STRATEGIES.get("mirrored").unsupported_reason(spec, TWO_GPUS) is None


def test_workload_variants() -> None:
    for name in WORKLOADS:
        w = WORKLOADS.get(name)
        assert w.resolve("tiny", {}) != w.resolve("default", {})
        assert w.num_classes(w.resolve("default", {})) >= 2
    assert WORKLOADS.get("resnet50").resolve("default", {})["image_size"] == 224


@pytest.mark.parametrize(("over", "needle"), [
    ({"strategy": "mirrored", "workers": 2}, "workers does not apply to strategy mirrored"),
    ({"strategy": "mirrored", "partitioner": "fixed"}, "used by parameter_server"),
    ({"strategy": "independent", "communication": "ring"}, "used by multi_worker_mirrored"),
    ({"strategy": "multi_worker_mirrored", "devices": 2, "workers": 2,
      "workers_per_device": 2}, "workers must be 0 when workers_per_device"),
    ({"strategy": "multi_worker_mirrored", "devices": 4, "workers": 3, "batch": 64},
     "workers must divide devices"),
    ({"strategy": "parameter_server", "devices": 2, "workers": 3}, "equal devices"),
])
def test_multi_process_knobs_are_validated(over: dict, needle: str) -> None:
    from bench.errors import SpecError

    with pytest.raises(SpecError, match=needle):
        tiny_spec(**over)


def test_multi_process_plans() -> None:
    mwms = tiny_spec(strategy="multi_worker_mirrored", devices=2)
    plan = STRATEGIES.get("multi_worker_mirrored").plan(mwms, CPU)
    assert [(t.name, t.cluster_job, t.main) for t in plan] == [
        ("worker0", "worker", True), ("worker1", "worker", False)]
    ps = tiny_spec(strategy="parameter_server", devices=2, ps_tasks=2)
    names = [t.name for t in STRATEGIES.get("parameter_server").plan(ps, CPU)]
    assert names == ["chief0", "ps0", "ps1", "worker0", "worker1"]
    assert (ps.global_batch, ps.per_replica_batch, ps.replicas) == (32, 32, 2)
    ind = tiny_spec(strategy="independent", devices=2, workers_per_device=2, batch=64)
    plan = STRATEGIES.get("independent").plan(ind, CPU)
    assert len(plan) == 4 and all(t.barrier for t in plan)
    assert ind.replicas == 4 and ind.per_replica_batch == 16
    # On GPUs, processes sharing a device get a memory slice of it.
    from bench.hardware import GpuInfo, Hardware

    gpus = Hardware("cpu", 8, 2**36, (GpuInfo(0, "G", 16000, "1"),))
    shared = STRATEGIES.get("independent").plan(
        tiny_spec(strategy="independent", devices=1, workers_per_device=2), gpus)
    assert [t.gpus for t in shared] == [("0",), ("0",)]  # CUDA_VISIBLE_DEVICES entries
    assert all(t.gpu_memory_limit_mb == 16000 * 9 // 10 // 2 for t in shared)

