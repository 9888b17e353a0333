"""GPU paths, checked here with a fake nvidia-smi and faked device lists.

This machine has no GPU: everything below the ``gpu``/``multi_gpu`` marked tests runs
the harness's parent side against ``tests.gpu_fakes`` (1, 2 and 8 A100s, and a GPU in
MIG mode) and the child's device setup against a fake ``tf``. The marked tests at
the end run real TensorFlow on real cards and are skipped where there are none.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from bench import hardware
from bench.errors import Unsupported
from bench.hardware import Hardware
from bench.launch.launcher import child_env, unsupported_result
from bench.spec import RunSpec
from bench.strategies import STRATEGIES
from tests.gpu_fakes import FakeSmi, cards, gpu_row, h100, mig_machine, mig_uuid, uuid_of
from tests.helpers import TINY, bench, tiny_spec


@pytest.fixture
def smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """Install a fake nvidia-smi: ``smi(FakeSmi)`` -> the Hardware detect() then sees."""
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    hardware.detect.cache_clear()

    def install(fake: FakeSmi, visible: str | None = None) -> Hardware:
        directory = fake.write(tmp_path / f"smi{len(list(tmp_path.iterdir()))}")
        monkeypatch.setenv("PATH", f"{directory}{os.pathsep}{os.environ['PATH']}")
        if visible is not None:
            monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
        hardware.detect.cache_clear()
        return hardware.detect()

    yield install
    hardware.detect.cache_clear()


# -- hardware detection -------------------------------------------------------------
@pytest.mark.parametrize("n", [1, 2, 8])
def test_detects_every_gpu_with_its_uuid(smi: Any, n: int) -> None:
    hw = smi(cards(n))
    assert [g.index for g in hw.gpus] == list(range(n))
    assert [g.cuda_id for g in hw.gpus] == [uuid_of(i) for i in range(n)]
    assert all(g.memory_mib == 81920 and g.driver == "550.54.15" for g in hw.gpus)
    assert hw.machine_gpus == hw.gpus and not hw.mig


@pytest.mark.parametrize(("listed", "expected"), [
    ("3,1", [3, 1]),  # indices, in the order given
    (uuid_of(5), [5]),  # a UUID
    (uuid_of(6)[:12], [6]),  # a UUID cut short, naming one GPU
    ("GPU-0000", []),  # a prefix naming several GPUs names none
    ("2,99,3", [2]),  # CUDA stops at the first entry that names no device
    ("", []), ("-1", []),
    (f"{uuid_of(7)},0", [7, 0]),
])
def test_cuda_visible_devices_maps_indices_and_uuids(smi: Any, listed: str,
                                                     expected: list[int]) -> None:
    hw = smi(cards(8), visible=listed)
    assert [g.index for g in hw.gpus] == expected
    assert len(hw.machine_gpus) == 8  # the machine is still the machine


def test_mig_slices_are_the_devices_of_a_gpu_in_mig_mode(smi: Any) -> None:
    hw = smi(mig_machine())
    assert [g.cuda_id for g in hw.gpus] == [mig_uuid(0, 0), mig_uuid(0, 1), uuid_of(1)]
    slice0 = hw.gpus[0]
    assert slice0.mig == "3g.40gb" and slice0.index == 0 and slice0.memory_mib == 40 * 1024
    assert "MIG 3g.40gb" in slice0.name and hw.mig
    assert len(hw.machine_gpus) == 2  # physical GPUs identify the machine


@pytest.mark.parametrize(("listed", "expected"), [
    (mig_uuid(0, 1), [mig_uuid(0, 1)]),
    ("0", [mig_uuid(0, 0), mig_uuid(0, 1)]),  # an index names the GPU: its slices
    (f"{mig_uuid(0, 0)},1", [mig_uuid(0, 0), uuid_of(1)]),
])
def test_cuda_visible_devices_maps_mig_ids(smi: Any, listed: str, expected: list[str]) -> None:
    hw = smi(mig_machine(), visible=listed)
    assert [g.cuda_id for g in hw.gpus] == expected


def test_mig_slices_in_the_pre_r470_format(smi: Any) -> None:
    legacy = f"MIG-{uuid_of(0)}/1/0"
    fake = FakeSmi([gpu_row(0, **{"mig.mode.current": "Enabled"})],
                   mig={0: [("1g.10gb", legacy)]})
    hw = smi(fake, visible=legacy)
    assert [g.cuda_id for g in hw.gpus] == [legacy]
    assert hw.gpus[0].memory_mib == 10 * 1024


def test_no_driver_means_no_gpu(smi: Any, monkeypatch: pytest.MonkeyPatch,
                                tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    hardware.detect.cache_clear()
    assert hardware.detect().gpus == () and hardware.gpu_fingerprint() == {}


# -- GPU state in the fingerprint -----------------------------------------------------
def test_gpu_state_records_clocks_power_temperature_and_throttling(smi: Any) -> None:
    fake = cards(2)
    fake.gpus[1].update({"clocks.sm": 1005, "power.draw": 399.1,
                         "clocks_event_reasons.active": "0x0000000000000004"})
    smi(fake)
    state = hardware.gpu_state()
    assert [s["uuid"] for s in state] == [uuid_of(0), uuid_of(1)]
    busy = state[1]
    assert busy["sm_clock_mhz"] == 1005 and busy["sm_clock_max_mhz"] == 1410
    assert busy["mem_clock_mhz"] == 1593 and busy["temperature_c"] == 61
    assert busy["power_draw_w"] == pytest.approx(399.1) and busy["power_limit_w"] == 400.0
    assert busy["persistence_mode"] == "Enabled"
    assert busy["throttle_reasons"] == ["sw_power_cap"] and state[0]["throttle_reasons"] == []
    assert hardware.throttle_findings(state, state) == []  # the power cap is no fault
    fake.gpus[1]["clocks_event_reasons.active"] = "0x0000000000000024"  # + thermal
    smi(fake)
    hot = hardware.gpu_state()
    findings = hardware.throttle_findings(hot, hot)
    assert len(findings) == 2 and "GPU 1" in findings[0]
    assert "sw_thermal_slowdown" in findings[0] and "1005 of 1410 MHz" in findings[0]


def test_gpu_state_on_a_driver_before_r535_and_with_missing_fields(smi: Any) -> None:
    fake = FakeSmi([gpu_row(0, **{"power.draw": "[N/A]",
                                  "clocks_throttle_reasons.active": "0x0000000000000041"})],
                   reject=("clocks_event_reasons.active",))
    smi(fake)
    (state,) = hardware.gpu_state()
    assert state["power_draw_w"] is None
    assert state["throttle_reasons"] == ["gpu_idle", "hw_thermal_slowdown"]


def test_idle_and_application_clocks_are_not_throttling() -> None:
    idle = [{"index": 0, "throttle_reasons": ["gpu_idle", "applications_clocks_setting"]}]
    assert hardware.throttle_findings(idle, idle) == []


# -- a real H100's answers, replayed (tests/fixtures/nvidia-h100) ------------------------
def test_the_recorded_h100_is_detected_with_its_uuid_and_memory(smi: Any) -> None:
    hw = smi(h100())
    (gpu,) = hw.gpus
    assert gpu.name == "NVIDIA H100 80GB HBM3" and (gpu.uuid or "").startswith("GPU-b182029c")
    assert gpu.memory_mib == 81559


def test_the_h100_at_its_power_cap_is_no_fault_but_heat_and_a_falling_clock_are(
        smi: Any) -> None:
    smi(h100("busy", 1))
    start = hardware.gpu_state()
    smi(h100("busy", 2))
    end = hardware.gpu_state()
    assert end[0]["throttle_reasons"] == ["sw_power_cap"]
    assert (start[0]["sm_clock_mhz"], end[0]["sm_clock_mhz"]) == (1350, 1335)
    assert hardware.throttle_findings(start, end) == []
    hot = h100("busy", 2)
    hot.gpus[0]["clocks_event_reasons.active"] = "0x0000000000000024"
    smi(hot)
    (finding,) = hardware.throttle_findings(start, hardware.gpu_state())
    assert finding.startswith("GPU 0 at the end of the windows: sw_thermal_slowdown")
    slow = h100("busy", 2)
    slow.gpus[0]["clocks.sm"] = "1100"
    smi(slow)
    (finding,) = hardware.throttle_findings(start, hardware.gpu_state())
    assert finding == ("GPU 0: SM clock moved from 1350 to 1100 MHz during the windows "
                       "(sw_power_cap)")


def test_the_h100_topology_is_stored_without_its_terminal_escapes(smi: Any) -> None:
    fake = h100()
    assert "\x1b[4m" in fake.topo  # as nvidia-smi prints it into a pipe
    smi(fake)
    topo = hardware.gpu_fingerprint()["topology"]
    assert "\x1b" not in topo and topo.lstrip().startswith("GPU0\tCPU Affinity")


def test_nccl_version_from_the_library_on_the_path(tmp_path: Path) -> None:
    for name in ("libnccl.so.2", "libnccl.so.2.19.3", "libnccl.so.2.21.5", "libnccl.so"):
        (tmp_path / name).write_bytes(b"")
    found = hardware.nccl_version(dists=(), dirs=[str(tmp_path), str(tmp_path / "missing")])
    assert found == {"version": "2.21.5", "source": str(tmp_path / "libnccl.so.2.21.5")}
    assert hardware.nccl_version(dists=(), dirs=[str(tmp_path / "missing")]) is None


def test_gpu_fingerprint_has_topology_nccl_and_state(smi: Any) -> None:
    smi(cards(2))
    fp = hardware.gpu_fingerprint()
    assert "NV12" in fp["topology"] and len(fp["gpu_state"]) == 2
    assert "nccl" in fp  # None here: no NCCL on this machine


# -- what each process sees -----------------------------------------------------------
def envs(spec: RunSpec, hw: Hardware) -> dict[str, dict[str, str]]:
    tasks = STRATEGIES.get(spec.strategy).plan(spec, hw)
    return {t.name: child_env(t, None, hw) for t in tasks}


@pytest.mark.parametrize("n", [2, 8])
def test_parameter_server_ps_and_chief_see_no_gpu_each_worker_its_own(smi: Any,
                                                                     n: int) -> None:
    hw = smi(cards(n))
    spec = tiny_spec(strategy="parameter_server", devices=n, ps_tasks=2)
    env = envs(spec, hw)
    for name in ("chief0", "ps0", "ps1"):
        assert env[name]["CUDA_VISIBLE_DEVICES"] == "", name
    workers = [env[f"worker{i}"]["CUDA_VISIBLE_DEVICES"] for i in range(n)]
    assert workers == [uuid_of(i) for i in range(n)]
    # Worker servers never run the child's device setup: memory growth comes from here.
    assert env["worker0"]["TF_FORCE_GPU_ALLOW_GROWTH"] == "true"
    assert all(e["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID" for e in env.values())


def test_children_count_gpus_in_pci_bus_order_and_keep_the_allocator(
        smi: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from bench.env import relevant_env, software_stack

    monkeypatch.setenv("TF_GPU_ALLOCATOR", "cuda_malloc_async")
    monkeypatch.setenv("CUDA_DEVICE_ORDER", "FASTEST_FIRST")
    hw = smi(cards(2))
    env = envs(tiny_spec(strategy="mirrored", devices=2), hw)["single0"]
    assert env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
    assert env["TF_GPU_ALLOCATOR"] == "cuda_malloc_async"
    # The child's fingerprint records it, and a different allocator is another stack.
    assert relevant_env()["TF_GPU_ALLOCATOR"] == "cuda_malloc_async"
    stack = software_stack({"env_vars": relevant_env()})
    assert stack["env_vars"]["TF_GPU_ALLOCATOR"] == "cuda_malloc_async"


def test_cpu_children_are_unchanged(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CUDA_DEVICE_ORDER", raising=False)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    cpu = Hardware("cpu", 2, 2**34)
    for name, env in envs(tiny_spec(strategy="parameter_server", devices=2), cpu).items():
        assert "CUDA_DEVICE_ORDER" not in env and "CUDA_VISIBLE_DEVICES" not in env, name
        assert "STRATBENCH_COMMUNICATION" not in env


def test_children_import_this_checkout() -> None:
    from bench.tasks import Task
    from tests.helpers import ROOT

    env = child_env(Task("single", 0, "train"), None, Hardware("cpu", 2, 2**34))
    assert env["PYTHONPATH"].split(os.pathsep)[0] == str(ROOT)


# -- MultiWorkerMirrored collectives ----------------------------------------------------
MWMS = STRATEGIES.get("multi_worker_mirrored")


@pytest.mark.parametrize("n", [2, 8])
def test_multi_worker_on_gpus_uses_nccl_explicitly_and_records_it(smi: Any, n: int) -> None:
    hw = smi(cards(n))
    spec = tiny_spec(strategy="multi_worker_mirrored", devices=n, batch=8 * n)
    assert spec.communication == "auto" and MWMS.unsupported_reason(spec, hw) is None
    tasks = MWMS.plan(spec, hw)
    assert [t.gpus for t in tasks] == [(uuid_of(i),) for i in range(n)]
    assert {MWMS.local_spec(spec, t).communication for t in tasks} == {"nccl"}
    assert {child_env(t, None, hw)["STRATBENCH_COMMUNICATION"] for t in tasks} == {"nccl"}


def test_multi_worker_with_several_gpus_per_worker(smi: Any) -> None:
    hw = smi(cards(8))
    spec = tiny_spec(strategy="multi_worker_mirrored", devices=8, workers=4, batch=64)
    tasks = MWMS.plan(spec, hw)
    assert [t.gpus for t in tasks] == [(uuid_of(2 * w), uuid_of(2 * w + 1)) for w in range(4)]
    assert [t.local_devices for t in tasks] == [2] * 4
    assert child_env(tasks[1], None, hw)["CUDA_VISIBLE_DEVICES"] == \
        f"{uuid_of(2)},{uuid_of(3)}"


def test_processes_sharing_a_gpu_use_ring_and_say_they_shared_it(smi: Any) -> None:
    hw = smi(cards(1))
    spec = tiny_spec(strategy="multi_worker_mirrored", devices=1, workers_per_device=2)
    assert MWMS.unsupported_reason(spec, hw) is None
    tasks = MWMS.plan(spec, hw)
    assert [t.gpus for t in tasks] == [(uuid_of(0),), (uuid_of(0),)]
    assert {MWMS.local_spec(spec, t).communication for t in tasks} == {"ring"}
    env = child_env(tasks[0], None, hw)
    assert env["STRATBENCH_COMMUNICATION"] == "ring"
    assert env["STRATBENCH_PROCESSES_ON_DEVICE"] == "2"
    # Each process gets half the card's memory (90% of it, split).
    assert {t.gpu_memory_limit_mb for t in tasks} == {int(81920 * 0.9) // 2}


def test_nccl_between_processes_on_one_gpu_is_unsupported_with_the_reason(smi: Any) -> None:
    hw = smi(cards(1))
    spec = tiny_spec(strategy="multi_worker_mirrored", devices=1, workers_per_device=2,
                     communication="nccl")
    result = unsupported_result(spec, hw)
    assert result is not None and result.status == "unsupported"
    assert "Duplicate GPU detected" in (result.reason or "") and "ring" in (result.reason or "")


def test_mig_slices_of_one_gpu_use_ring_and_refuse_nccl(smi: Any) -> None:
    hw = smi(mig_machine(), visible="0")  # the two slices of GPU 0
    spec = tiny_spec(strategy="multi_worker_mirrored", devices=2)
    assert {MWMS.local_spec(spec, t).communication for t in MWMS.plan(spec, hw)} == {"ring"}
    assert [t.gpus for t in MWMS.plan(spec, hw)] == [(mig_uuid(0, 0),), (mig_uuid(0, 1),)]
    reason = MWMS.unsupported_reason(spec.replace(communication="nccl"), hw) or ""
    assert "MIG slices are on one GPU" in reason
    # One process cannot use two slices.
    two_per_worker = spec.replace(workers=1)
    assert "only one MIG slice" in (MWMS.unsupported_reason(two_per_worker, hw) or "")


def test_a_mig_slice_and_a_whole_gpu_can_use_nccl(smi: Any) -> None:
    hw = smi(mig_machine(), visible=f"{mig_uuid(0, 0)},1")
    spec = tiny_spec(strategy="multi_worker_mirrored", devices=2)
    assert {MWMS.local_spec(spec, t).communication for t in MWMS.plan(spec, hw)} == {"nccl"}


def test_independent_copies_sharing_a_gpu_are_recorded(smi: Any) -> None:
    hw = smi(cards(1))
    spec = tiny_spec(strategy="independent", devices=1, workers_per_device=3, batch=48)
    tasks = STRATEGIES.get("independent").plan(spec, hw)
    assert {child_env(t, None, hw)["STRATBENCH_PROCESSES_ON_DEVICE"] for t in tasks} == {"3"}


# -- the child's device setup against a fake tf -------------------------------------------
class FakeConfig:
    """The slice of tf.config that setup_devices uses, recording what it was asked."""

    def __init__(self, gpus: int) -> None:
        self.gpus = [f"PhysicalDevice(GPU:{i})" for i in range(gpus)]
        self.visible: list[str] | None = None
        self.growth: list[str] = []
        self.logical: dict[str, Any] = {}
        self.experimental = self
        self.LogicalDeviceConfiguration = lambda memory_limit=None: ("logical", memory_limit)

    def list_physical_devices(self, kind: str) -> list[str]:
        return list(self.gpus) if kind == "GPU" else ["PhysicalDevice(CPU:0)"]

    def set_visible_devices(self, devices: list[str], kind: str) -> None:
        self.visible = list(devices)
        if kind == "GPU" and not devices:
            self.gpus = []

    def set_memory_growth(self, device: str, on: bool) -> None:
        assert on
        self.growth.append(device)

    def set_logical_device_configuration(self, device: str, configs: list[Any]) -> None:
        self.logical[device] = configs


class FakeTF:
    def __init__(self, gpus: int) -> None:
        self.config = FakeConfig(gpus)


@pytest.mark.parametrize(("gpus", "count"), [(1, 1), (2, 2), (8, 2), (8, 8)])
def test_device_setup_on_gpus_grows_memory_on_the_chosen_ones(gpus: int, count: int) -> None:
    from bench.child.backends.tf.devices import setup_devices

    tf = FakeTF(gpus)
    setup = setup_devices(tf, count)
    assert setup.kind == "GPU" and not setup.logical
    assert setup.names == [f"/gpu:{i}" for i in range(count)]
    assert tf.config.visible == tf.config.growth == tf.config.gpus[:count]
    assert not tf.config.logical


def test_device_setup_with_a_memory_limit_per_gpu() -> None:
    from bench.child.backends.tf.devices import setup_devices

    tf = FakeTF(2)
    setup_devices(tf, 2, gpu_memory_limit_mb=18432)
    assert list(tf.config.logical.values()) == [[("logical", 18432)]] * 2
    assert not tf.config.growth


def test_device_setup_refuses_more_devices_than_gpus() -> None:
    from bench.child.backends.tf.devices import setup_devices

    with pytest.raises(Unsupported, match="4 devices requested but only 2 GPU"):
        setup_devices(FakeTF(2), 4)


def test_device_setup_force_cpu_hides_the_gpus_and_splits_the_cpu() -> None:
    from bench.child.backends.tf.devices import setup_devices

    tf = FakeTF(8)
    setup = setup_devices(tf, 2, force_cpu=True)
    assert setup.kind == "CPU" and setup.logical and tf.config.visible == []
    assert len(tf.config.logical["PhysicalDevice(CPU:0)"]) == 2


def test_a_cpu_build_of_tensorflow_on_a_gpu_machine_fails_loudly(smi: Any) -> None:
    from bench.child.backends.tf.devices import GpuSetupError, setup_devices

    smi(cards(2))
    with pytest.raises(GpuSetupError, match=r"nvidia-smi shows 2 .*tensorflow\[and-cuda\]"):
        setup_devices(FakeTF(0), 2)  # TensorFlow lists no GPU


def test_a_process_meant_to_see_no_gpu_sets_up_the_cpu(smi: Any) -> None:
    from bench.child.backends.tf.devices import setup_devices

    smi(cards(2), visible="")  # a parameter server or the coordinator (child_env)
    assert setup_devices(FakeTF(0), 1).kind == "CPU"


def test_logical_cpu_tests_skip_with_the_reason_where_gpus_are_visible() -> None:
    from conftest import hardware_skip_reason

    assert hardware_skip_reason({"logical_cpu"}, 0) is None
    assert "needs logical CPU devices" in (hardware_skip_reason({"logical_cpu"}, 2) or "")
    assert hardware_skip_reason({"gpu"}, 0) == "needs a GPU; none visible"
    assert hardware_skip_reason({"multi_gpu"}, 1) == "needs 2+ GPUs; 1 visible"
    assert hardware_skip_reason({"gpu", "multi_gpu"}, 2) is None


# -- real cards (skipped without them) ----------------------------------------------------
def _run(tmp_path: Path, *args: str) -> Any:
    from bench.results.store import load_sweep

    out = tmp_path / "sweep"
    proc = bench("run", "--workload", "mlp", *TINY, "--batch", "32", *args, "--out", str(out),
                 timeout=600)
    assert proc.returncode in (0, 3), proc.stdout + proc.stderr
    return {(r.spec.strategy, r.spec.devices): r for r in load_sweep(out).results}


@pytest.mark.gpu
def test_gpu_one_device_run_reports_gpu_memory(tmp_path: Path) -> None:
    (r,) = _run(tmp_path, "--strategy", "one_device", "--devices", "1").values()
    assert r.status == "ok", r.reason
    assert r.environment["devices"]["kind"] == "GPU"
    assert r.figures is not None and "GPU:0" in r.figures.memory.device_peak_bytes
    assert r.environment["env_vars"]["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"


@pytest.mark.multi_gpu
def test_mirrored_with_nccl_on_two_gpus_reports_memory_per_device(tmp_path: Path) -> None:
    (r,) = _run(tmp_path, "--strategy", "mirrored", "--devices", "2",
                "--cross-device-ops", "nccl").values()
    assert r.status == "ok", r.reason
    assert r.figures is not None
    assert {"GPU:0", "GPU:1"} <= set(r.figures.memory.device_peak_bytes)
    assert r.figures.memory.device_scope == "per_device"


@pytest.mark.gpu
def test_several_workers_on_one_gpu_share_it_over_ring(tmp_path: Path) -> None:
    runs = _run(tmp_path, "--strategy", "multi_worker_mirrored", "--devices", "1",
                "--workers-per-device", "2")
    r = runs[("multi_worker_mirrored", 1)]
    assert r.status == "ok", r.reason
    assert r.environment["env_vars"]["STRATBENCH_COMMUNICATION"] == "ring"
    assert r.environment["env_vars"]["STRATBENCH_PROCESSES_ON_DEVICE"] == "2"


@pytest.mark.multi_gpu
def test_multi_worker_on_two_gpus_runs_nccl(tmp_path: Path) -> None:
    r = _run(tmp_path, "--strategy", "multi_worker_mirrored", "--devices", "2")[
        ("multi_worker_mirrored", 2)]
    assert r.status == "ok", r.reason
    assert r.environment["env_vars"]["STRATBENCH_COMMUNICATION"] == "nccl"


@pytest.mark.multi_gpu
def test_parameter_server_chief_runs_without_a_gpu(tmp_path: Path) -> None:
    r = _run(tmp_path, "--strategy", "parameter_server", "--devices", "2")[
        ("parameter_server", 2)]
    assert r.status == "ok", r.reason
    assert r.environment["env_vars"]["CUDA_VISIBLE_DEVICES"] == ""  # the chief's own


def test_the_topology_is_parsed_into_one_link_per_pair(smi: Any) -> None:
    smi(cards(2))
    assert hardware.gpu_fingerprint()["links"] == [{"a": "GPU0", "b": "GPU1", "link": "NV12"}]
    four = ("\t\x1b[4mGPU0\tGPU1\tGPU2\tGPU3\tNIC0\tCPU Affinity\x1b[0m\n"
            "GPU0\t X \tNV4\tPHB\tSYS\tPIX\t0-31\n"
            "GPU1\tNV4\t X \tPHB\tSYS\tPHB\t0-31\n"
            "GPU2\tPHB\tPHB\t X \tNV4\tSYS\t32-63\n"
            "GPU3\tSYS\tSYS\tNV4\t X \tSYS\t32-63\n"
            "NIC0\tPIX\tPHB\tSYS\tSYS\t X \n\nLegend:\n  X    = Self")
    links = {(d["a"], d["b"]): d["link"] for d in hardware.topology_links(four)}
    assert links == {("GPU0", "GPU1"): "NV4", ("GPU0", "GPU2"): "PHB",
                     ("GPU0", "GPU3"): "SYS", ("GPU1", "GPU2"): "PHB",
                     ("GPU1", "GPU3"): "SYS", ("GPU2", "GPU3"): "NV4"}


def test_the_h100_alone_has_no_links(smi: Any) -> None:
    smi(h100())
    assert hardware.gpu_fingerprint()["links"] == []
