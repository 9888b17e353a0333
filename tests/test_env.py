"""The environment fingerprint: the machine (hardware identity, not a process's share of
it) apart from the software stack, so an upgrade keeps the machine's baseline."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bench import env as env_module
from bench import hardware
from bench.env import fingerprint, machine_id, software_id, software_stack, stored_machine_id
from bench.hardware import GpuInfo, visible
from tests.gpu_fakes import cards

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
    # Another tool's TF_ variables (Terraform's) are not TensorFlow's: no software.
    for other in ({"TF_CLI_CONFIG_FILE": "/root/.terraformrc"}, {"TF_LOG": "DEBUG"},
                  {"TF_VAR_region": "eu"}, {"TF_DATA_DIR": "/tmp/tf"}):
        assert software_id(env(tensorflow="2.21.0", python="3.11.7", env_vars=other)) \
            == software_id(before), other
    for tensorflow in ({"TF_ENABLE_ONEDNN_OPTS": "0"}, {"TF_XLA_FLAGS": "--x"},
                       {"TF_GPU_ALLOCATOR": "cuda_malloc_async"}, {"TF_CONFIG": "{}"},
                       {"TF_CPU_ALLOCATOR_USE_BFC": "1"}, {"OMP_NUM_THREADS": "2"},
                       {"KMP_AFFINITY": "compact"}, {"DNNL_VERBOSE": "1"}):
        assert software_id(env(tensorflow="2.21.0", python="3.11.7", env_vars=tensorflow)) \
            != software_id(before), tensorflow
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


# -- NCCL: part of the software stack on GPU machines ------------------------------------
_LDCONFIG = """#!{python}
import sys
if sys.argv[1:] != ["-p"]:
    sys.exit(1)
print("3 libs found in cache `/etc/ld.so.cache'")
print("\\tlibz.so.1 (libc6,x86-64) => /lib/x86_64-linux-gnu/libz.so.1")
print("\\tlibnccl.so.2 (libc6,x86-64) => {lib}/libnccl.so.2")
print("\\tlibnccl.so (libc6,x86-64) => {lib}/libnccl.so")
"""


def fake_ldconfig(bin_dir: Path, lib: Path, version: str) -> None:
    """An ``ldconfig -p`` whose cache has NCCL ``version`` in ``lib`` (sonames as links)."""
    lib.mkdir(parents=True, exist_ok=True)
    (lib / f"libnccl.so.{version}").write_bytes(b"")
    for link in ("libnccl.so.2", "libnccl.so"):
        (lib / link).symlink_to(f"libnccl.so.{version}")
    bin_dir.mkdir(parents=True, exist_ok=True)
    exe = bin_dir / "ldconfig"
    exe.write_text(_LDCONFIG.format(python=sys.executable, lib=lib))
    exe.chmod(0o755)


@pytest.fixture
def gpu_machine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A fake nvidia-smi (one A100) first on PATH; yields the directory to put fakes in."""
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    bin_dir = cards(1).write(tmp_path / "bin")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    hardware.detect.cache_clear()
    yield bin_dir
    hardware.detect.cache_clear()


def nccl_from_the_ld_cache() -> dict[str, str] | None:
    # Only the loader's cache: a real NCCL on the test machine (a pip wheel, a system
    # library) must not decide what the fake one says.
    return hardware.nccl_version(dists=(), dirs=hardware.ld_cache_dirs())


def test_nccl_is_found_through_the_loaders_cache(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    lib = tmp_path / "opt" / "nccl" / "lib"
    fake_ldconfig(tmp_path / "bin", lib, "2.21.5")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    assert hardware.ld_cache_dirs() == [str(lib)]
    assert nccl_from_the_ld_cache() == {"version": "2.21.5",
                                        "source": str(lib / "libnccl.so.2.21.5")}


@pytest.mark.parametrize("script", ["exit 1", "exec sleep 30", "echo 'no cache here'"])
def test_a_failing_or_stuck_ldconfig_means_no_directories(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, script: str) -> None:
    exe = tmp_path / "ldconfig"
    exe.write_text(f"#!/bin/sh\n{script}\n")
    exe.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    assert hardware.ld_cache_dirs(timeout_s=0.5) == []


def test_nccl_version_is_in_the_software_stack_and_id(
        gpu_machine: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(env_module, "nccl_version", nccl_from_the_ld_cache)
    fake_ldconfig(gpu_machine, tmp_path / "nccl-2.21", "2.21.5")
    fp = fingerprint()
    assert fp["nccl"] == "2.21.5" and software_stack(fp)["nccl"] == "2.21.5"
    assert fp["software_id"] == software_id(fp)

    (gpu_machine / "ldconfig").unlink()
    fake_ldconfig(gpu_machine, tmp_path / "nccl-2.19", "2.19.3")
    upgraded = fingerprint()
    assert upgraded["nccl"] == "2.19.3"
    assert upgraded["software_id"] != fp["software_id"]
    assert upgraded["machine_id"] == fp["machine_id"]


def test_absent_nccl_is_recorded_as_none(gpu_machine: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(env_module, "nccl_version", lambda: None)
    fp = fingerprint()
    assert fp["nccl"] is None and "nccl" not in software_stack(fp)
    # A result without the field (recorded before NCCL was) keeps its software id.
    assert software_id({k: v for k, v in fp.items() if k != "nccl"}) == fp["software_id"]


def test_a_cpu_machine_does_not_look_for_nccl(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    def looked() -> Any:
        raise AssertionError("NCCL looked for on a machine without GPUs")

    monkeypatch.setattr(env_module, "nccl_version", looked)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))  # no nvidia-smi (nor git)
    hardware.detect.cache_clear()
    try:
        assert fingerprint()["nccl"] is None
    finally:
        hardware.detect.cache_clear()


@pytest.mark.parametrize(("text", "expected"), [
    ("6", 6), (" 7 ", 7), ("0x1f", 31), ("81920.0", 81920), ("010", 10), ("inf", None),
    ("nan", None), ("[N/A]", None), ("", None), (None, None)])
def test_parse_int_reads_what_tools_print(text: str | None, expected: int | None) -> None:
    assert hardware.parse_int(text) == expected


@pytest.mark.parametrize(("text", "expected"), [
    ("2596.000", 2596.0), ("250.5 W", None), ("[N/A]", None), (None, None)])
def test_parse_float_reads_what_tools_print(text: str | None, expected: float | None) -> None:
    assert hardware.parse_float(text) == expected


def test_the_recorded_variables_are_those_the_stack_reads(monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    from bench.env import relevant_env

    monkeypatch.setenv("TF_CLI_CONFIG_FILE", "/root/.terraformrc")
    monkeypatch.setenv("TF_ENABLE_ONEDNN_OPTS", "1")
    monkeypatch.setenv("NCCL_ALGO", "Ring")
    recorded = relevant_env()
    assert "TF_CLI_CONFIG_FILE" not in recorded
    assert recorded["TF_ENABLE_ONEDNN_OPTS"] == "1" and recorded["NCCL_ALGO"] == "Ring"


def test_the_checkout_s_git_state_is_read_without_writing_its_index(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A plain `git status` refreshes a stale index under .git/index.lock; a run killed
    # meanwhile would leave the lock to block the user's next commit.
    import subprocess

    def git(*args: str) -> None:
        subprocess.run(["git", "-C", str(tmp_path), *args], check=True, capture_output=True,
                       timeout=30)

    git("init", "-q")
    (tmp_path / "f").write_text("x")
    git("add", "f")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "f")
    index = tmp_path / ".git" / "index"
    os.utime(tmp_path / "f", (1e9, 1e9))  # same content, new stat: the index is stale
    os.utime(index, (1e9, 1e9))
    monkeypatch.setattr(env_module, "REPO_ROOT", tmp_path)
    info = env_module.git_info()
    assert info["commit"] and info["dirty"] is False
    assert index.stat().st_mtime == 1e9  # not rewritten
    git("status", "--porcelain")  # what the option avoids: the same call rewrites it
    assert index.stat().st_mtime != 1e9
