"""The environment fingerprint: the machine (hardware identity, not a process's share of
it) apart from the software stack, so an upgrade keeps the machine's baseline."""

from __future__ import annotations

import pytest

from bench.env import fingerprint, machine_id, software_id, stored_machine_id
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


def test_a_software_upgrade_keeps_the_machine_and_changes_the_software() -> None:
    before = env(tensorflow="2.21.0", python="3.11.7", env_vars={})
    new_driver = [dict(g, driver="560") for g in GPUS]
    upgraded = env(tensorflow="2.22.0", gpus=new_driver, machine_gpus=new_driver,
                   memory_bytes=2**36 - 37 * 2**20,  # a new kernel reserves a little more
                   env_vars={"TF_NUM_INTEROP_THREADS": "1"})
    assert machine_id(upgraded) == machine_id(before)
    assert software_id(upgraded) != software_id(before)
    for change in ({"tensorflow": "2.22.0"}, {"machine_gpus": new_driver},
                   {"env_vars": {"NCCL_ALGO": "Ring"}},
                   {"env_vars": {"STRATBENCH_INJECT_SLOWDOWN": "0.2"}}):
        assert software_id(env(**change)) != software_id(before), change
    # A job id or a cache path is not software: every run has its own.
    for same in ({"SLURM_JOB_ID": "123"}, {"STRATBENCH_CACHE_DIR": "/tmp/x"}):
        assert software_id(env(tensorflow="2.21.0", python="3.11.7", env_vars=same)) \
            == software_id(before), same
    # Hardware that does change the figures: other GPU models, fewer of them, less memory.
    h100 = [dict(g, name="H100") for g in GPUS]
    assert machine_id(env(machine_gpus=h100)) != machine_id(before)
    assert machine_id(env(memory_bytes=2**35)) != machine_id(before)


def test_stored_results_get_todays_machine_id() -> None:
    # A stored id from before the split (it hashed the driver) is recomputed.
    old = env(machine_id="hashed-with-the-driver")
    assert stored_machine_id(old) == machine_id(env())
    # A fingerprint without hardware fields keeps what it stored.
    assert stored_machine_id({"machine_id": "box-a"}) == "box-a"
    assert stored_machine_id({}) is None


def test_fingerprint_carries_both_ids() -> None:
    fp = fingerprint()
    assert fp["machine_id"] == machine_id(fp) and fp["software_id"] == software_id(fp)


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
