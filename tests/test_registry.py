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
    assert STRATEGIES.names() == ["default", "one_device", "mirrored", "central_storage"]
    assert WORKLOADS.names() == ["mlp", "cnn", "resnet50"]


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
