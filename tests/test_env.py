"""The environment fingerprint identifies the machine, not a process's share of it."""

from __future__ import annotations

import pytest

from bench.env import machine_id
from bench.hardware import GpuInfo, visible

GPUS = ({"name": "A100", "memory_mib": 40000, "driver": "550"},
        {"name": "A100", "memory_mib": 40000, "driver": "550"})


def env(**over: object) -> dict[str, object]:
    base: dict[str, object] = {"cpu_model": "Xeon", "cpu_cores": 8, "memory_bytes": 2**36,
                               "gpus": list(GPUS), "machine_cores": 8,
                               "machine_gpus": list(GPUS)}
    base.update(over)
    return base


def test_a_pinned_task_seeing_one_gpu_is_on_the_same_machine() -> None:
    launcher = env()
    task = env(cpu_cores=1, gpus=[GPUS[1]])  # affinity 1 core, CUDA_VISIBLE_DEVICES=1
    assert machine_id(task) == machine_id(launcher)
    assert machine_id(env(machine_gpus=[GPUS[0]])) != machine_id(launcher)
    assert machine_id(env(machine_cores=16)) != machine_id(launcher)


def test_results_without_machine_fields_keep_their_id() -> None:
    # Older results hash the process's own view; unrestricted, it is the same machine.
    old = {k: v for k, v in env().items() if not k.startswith("machine_")}
    assert machine_id(old) == machine_id(env())


@pytest.mark.parametrize(("listed", "indices"), [(None, [0, 1]), ("1", [1]), ("", []),
                                                  ("0,1", [0, 1])])
def test_visible_gpus_follow_cuda_visible_devices(monkeypatch: pytest.MonkeyPatch,
                                                  listed: str | None,
                                                  indices: list[int]) -> None:
    gpus = (GpuInfo(0, "A100", 40000, "550"), GpuInfo(1, "A100", 40000, "550"))
    if listed is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", listed)
    assert [g.index for g in visible(gpus)] == indices
