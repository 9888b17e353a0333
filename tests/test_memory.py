"""The device memory probe's two paths, with a fake TensorFlow (no TensorFlow here)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from bench.child.backends.tf.memory import DeviceMemory
from bench.child.memory import ArmMemory
from bench.env import CPU_ALLOCATOR_VAR
from bench.hardware import Hardware
from bench.launch.launcher import child_env
from bench.tasks import Task


def fake_tf(peak: int | None) -> Any:
    """``tf.config.experimental`` whose allocator keeps statistics, or raises as TF does."""
    def get_memory_info(name: str) -> dict[str, int]:
        if peak is None:
            raise ValueError(f"Allocator stats not available for device '{name}'")
        return {"current": peak // 2, "peak": peak}

    def reset_memory_stats(name: str) -> None:
        if peak is None:
            raise ValueError(f"Cannot reset memory stats for device '{name}'")

    return SimpleNamespace(config=SimpleNamespace(experimental=SimpleNamespace(
        get_memory_info=get_memory_info, reset_memory_stats=reset_memory_stats)))


def test_an_allocator_with_statistics_gives_the_peak_and_no_reason() -> None:
    probe = DeviceMemory(fake_tf(3 * 2**20), "CPU", 2, environ={})
    probe.reset()
    assert probe.peaks() == {"CPU:0": 3 * 2**20}  # one process-wide allocator on CPU
    assert probe.reason is None and probe.scope == "process"


@pytest.mark.parametrize(("environ", "expect"), [
    ({}, "keeps no statistics"),
    ({CPU_ALLOCATOR_VAR: "0"}, f"{CPU_ALLOCATOR_VAR}=0 in the environment"),
])
def test_an_allocator_without_statistics_says_why(environ: dict[str, str],
                                                   expect: str) -> None:
    probe = DeviceMemory(fake_tf(None), "CPU", 1, environ=environ)
    probe.reset()  # must not raise either
    assert probe.peaks() == {}
    assert probe.reason is not None and expect in probe.reason
    assert "Allocator stats not available for device 'CPU:0'" in probe.reason


class Allocator:
    """A shared allocator whose use and peak the test sets (what get_memory_info says)."""

    def __init__(self) -> None:
        self.current, self.peak = 0, 0

    def tf(self) -> Any:
        def get_memory_info(name: str) -> dict[str, int]:
            return {"current": self.current, "peak": self.peak}

        def reset_memory_stats(name: str) -> None:
            self.peak = self.current

        return SimpleNamespace(config=SimpleNamespace(experimental=SimpleNamespace(
            get_memory_info=get_memory_info, reset_memory_stats=reset_memory_stats)))


def test_an_arm_counts_what_it_holds_and_its_windows_peak_not_the_other_arms() -> None:
    alloc = Allocator()
    probe = DeviceMemory(alloc.tf(), "CPU", 2, environ={})
    first, second = ArmMemory(probe), ArmMemory(probe)
    alloc.current = 100  # what TensorFlow itself holds
    first.building()
    alloc.current = 400  # the first arm's variables and optimizer state
    first.built()
    second.building()
    alloc.current = 1400  # the second arm is five times the size
    second.built()
    assert (first.held, second.held) == ({"CPU:0": 300}, {"CPU:0": 1000})
    for arm, transient in ((first, 50), (second, 700)):
        arm.reset()
        alloc.peak = alloc.current + transient  # its window's activations, then freed
        assert arm.peaks() == {"CPU:0": arm.held["CPU:0"] + transient}
    assert first.scope == "arm" and first.reason is None


def test_gpus_are_probed_one_by_one() -> None:
    probe = DeviceMemory(fake_tf(2**30), "GPU", 2, environ={})
    assert probe.peaks() == {"GPU:0": 2**30, "GPU:1": 2**30}
    assert probe.scope == "per_device"


def test_run_processes_get_the_allocator_that_keeps_statistics(
        monkeypatch: pytest.MonkeyPatch) -> None:
    hw = Hardware("cpu", 2, 2**34)
    monkeypatch.delenv(CPU_ALLOCATOR_VAR, raising=False)
    assert child_env(Task("single", 0, "train"), None, hw)[CPU_ALLOCATOR_VAR] == "1"
    monkeypatch.setenv(CPU_ALLOCATOR_VAR, "0")  # the user's choice is kept
    assert child_env(Task("single", 0, "train"), None, hw)[CPU_ALLOCATOR_VAR] == "0"
