"""Each run reads its own GPUs only; arms carry GPU state; the GPU preflight and gpu-smoke.

No GPU and no TensorFlow: an 8-card fake ``nvidia-smi`` (tests/gpu_fakes.py, which
honours ``--id=`` and logs its calls) and a fake ``pynvml`` module with per-card energy
counters and clocks. What the child does is called directly: ``bench.tasks.gpu_run``
(the sampler of a task's process), ``bench.energy.energy_meter`` with the
CUDA_VISIBLE_DEVICES the launcher gives that process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from bench import energy, hardware
from bench.hardware import Hardware
from bench.launch.arms import arms_task
from bench.launch.gpu_preflight import (
    SHM_MIN_BYTES,
    Probe,
    Scope,
    gpu_preflight,
    scope_of,
)
from bench.launch.gpu_smoke import STEPS, run_smoke, smoke_plan
from bench.launch.launcher import child_env, make_result
from bench.results.mfu import at_sustained_clock
from bench.strategies import STRATEGIES
from bench.tasks import RUN_GPUS, gpu_run
from tests.gpu_fakes import FakeSmi, cards, gpu_row, h100, two_socket_topo, uuid_of
from tests.helpers import ROOT, fake_figures, tiny_spec

TOPO_SYS = ("\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\n"
            "GPU0\t X \tSYS\t0-31\t0\n"
            "GPU1\tSYS\t X \t32-63\t1")


class FakeNvml:
    """The nvidia-ml-py calls the harness makes, for ``n`` cards: an energy counter
    (mJ) that moves by 1000 x (index + 1) a read, clocks per card (``sm``), and the
    peer-access status (``p2p``: OK unless set). ``asked``: the cards whose handles
    were taken (by UUID or index)."""

    NVML_CLOCK_SM, NVML_CLOCK_MEM, NVML_TEMPERATURE_GPU = 1, 2, 0
    NVML_P2P_CAPS_INDEX_READ, NVML_P2P_STATUS_OK = 0, 0

    def __init__(self, n: int, p2p: int = 0) -> None:
        self.n, self.p2p = n, p2p
        self.mj = [1_000_000] * n
        self.sm = [1410] * n
        self.asked: list[int] = []

    def nvmlInit(self) -> None:
        pass

    def nvmlDeviceGetCount(self) -> int:
        return self.n

    def nvmlDeviceGetHandleByUUID(self, uuid: str) -> int:
        i = next((i for i in range(self.n) if uuid_of(i) == uuid), None)
        if i is None:
            raise RuntimeError(f"NVML_ERROR_NOT_FOUND: {uuid}")
        self.asked.append(i)
        return i

    def nvmlDeviceGetHandleByIndex(self, i: int) -> int:
        self.asked.append(i)
        return i

    def nvmlDeviceGetTotalEnergyConsumption(self, h: int) -> int:
        self.mj[h] += 1000 * (h + 1)
        return self.mj[h]

    def nvmlDeviceGetIndex(self, h: int) -> int:
        return h

    def nvmlDeviceGetUUID(self, h: int) -> bytes:
        return uuid_of(h).encode()  # older bindings answer bytes

    def nvmlDeviceGetClockInfo(self, h: int, kind: int) -> int:
        return self.sm[h] if kind == self.NVML_CLOCK_SM else 1593

    def nvmlDeviceGetMaxClockInfo(self, h: int, kind: int) -> int:
        return 1410 if kind == self.NVML_CLOCK_SM else 1593

    def nvmlDeviceGetPowerUsage(self, h: int) -> int:
        return 312_450

    def nvmlDeviceGetPowerManagementLimit(self, h: int) -> int:
        return 400_000

    def nvmlDeviceGetTemperature(self, h: int, sensor: int) -> int:
        return 61

    def nvmlDeviceGetPersistenceMode(self, h: int) -> int:
        return 1

    def nvmlDeviceGetCurrentClocksEventReasons(self, h: int) -> int:
        return 0x4  # at the power cap

    def nvmlDeviceGetP2PStatus(self, a: int, b: int, index: int) -> int:
        return self.p2p


@pytest.fixture
def smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """``smi(FakeSmi, visible)``: the fake first on PATH, CUDA_VISIBLE_DEVICES as the
    launcher would set it, caches cleared; returns the fake's directory."""
    def install(fake: FakeSmi, visible: str | None = None) -> Path:
        directory = fake.write(tmp_path / "smi")
        monkeypatch.setenv("PATH", f"{directory}{os.pathsep}{os.environ['PATH']}")
        if visible is None:
            monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
        else:
            monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
        hardware.detect.cache_clear()
        energy.energy_meter.cache_clear()
        return directory

    yield install
    hardware.detect.cache_clear()
    energy.energy_meter.cache_clear()


@pytest.fixture
def nvml(monkeypatch: pytest.MonkeyPatch) -> FakeNvml:
    """A fake ``pynvml`` of 8 cards, imported by the meter, the sampler and preflight."""
    fake = FakeNvml(8)
    monkeypatch.setitem(sys.modules, "pynvml", fake)  # type: ignore[arg-type]
    return fake


def _calls(directory: Path) -> list[list[str]]:
    path = directory / "nvidia-smi.calls"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _single(strategy: str, devices: int, hw: Hardware) -> Any:
    (task,) = STRATEGIES.get(strategy).plan(tiny_spec(strategy=strategy, devices=devices), hw)
    return task


# -- each run sees its own GPUs --------------------------------------------------------
@pytest.mark.parametrize(("strategy", "devices"), [("one_device", 1), ("default", 1),
                                                   ("mirrored", 2), ("central_storage", 4)])
def test_an_in_process_run_sees_only_its_cards_by_uuid(smi: Any, strategy: str,
                                                       devices: int) -> None:
    smi(cards(8))
    hw = hardware.detect()
    task = _single(strategy, devices, hw)
    assert task.gpus == tuple(uuid_of(i) for i in range(devices))
    assert child_env(task, None, hw)["CUDA_VISIBLE_DEVICES"] == \
        ",".join(uuid_of(i) for i in range(devices))


def test_an_arms_process_sees_the_cards_of_its_largest_arm(smi: Any) -> None:
    smi(cards(8))
    hw = hardware.detect()
    task = arms_task([tiny_spec(strategy="one_device", devices=1),
                      tiny_spec(strategy="mirrored", devices=2)], hw)
    assert task.gpus == (uuid_of(0), uuid_of(1)) and task.local_devices == 2
    assert child_env(task, None, hw)["CUDA_VISIBLE_DEVICES"] == f"{uuid_of(0)},{uuid_of(1)}"


def test_a_cpu_run_is_unchanged() -> None:
    task = _single("mirrored", 2, Hardware("cpu", 2, 2**34))
    assert task.gpus == () and RUN_GPUS not in task.extra


def test_a_one_gpu_runs_energy_reads_only_its_card(smi: Any, nvml: FakeNvml) -> None:
    smi(cards(8), visible=uuid_of(3))  # what the launcher now gives the process
    meter = energy.energy_meter()
    assert meter.source == "nvml" and meter.devices == [uuid_of(3)]
    joules = energy.window_energy(meter.read(), meter.read())
    assert joules == pytest.approx(4.0)  # card 3's 4000 mJ a read, none of the others'
    assert set(nvml.asked) == {3}


def test_an_arm_counts_only_its_own_cards_energy(smi: Any, nvml: FakeNvml) -> None:
    smi(cards(8), visible=f"{uuid_of(0)},{uuid_of(1)}")  # a process of a 1- and a 2-GPU arm
    one, two = energy.energy_meter(1), energy.energy_meter(2)
    assert one.devices == [uuid_of(0)] and two.devices == [uuid_of(0), uuid_of(1)]
    assert energy.window_energy(one.read(), one.read()) == pytest.approx(1.0)
    assert energy.window_energy(two.read(), two.read()) == pytest.approx(3.0)


def _sampled(task: Any, every_s: float = 0.02, samples: int = 2) -> Any:
    """``task``'s sampler run until its thread took ``samples`` (10 s at most: a
    fixed hold would take none on a loaded machine)."""
    run = gpu_run(task)
    run.every_s = every_s
    run.begin()
    run.at_start()
    deadline = time.monotonic() + 10
    while len(run.samples) < samples and time.monotonic() < deadline:
        time.sleep(every_s)
    run.at_end()
    return run


def test_a_one_gpu_runs_clocks_come_from_nvml_for_its_card_only(smi: Any,
                                                                nvml: FakeNvml) -> None:
    directory = smi(cards(8))
    task = _single("one_device", 1, hardware.detect())
    # The child's view: CUDA_VISIBLE_DEVICES names its one card.
    smi(cards(8), visible=task.gpus[0])
    nvml.asked.clear()
    run = _sampled(task)
    env = run.environment()
    state = env["gpu_state"]
    assert state["source"] == "nvml"
    assert [s["uuid"] for s in state["start"]] == [s["uuid"] for s in state["end"]] \
        == [uuid_of(0)]
    assert state["start"][0]["power_draw_w"] == pytest.approx(312.45)
    assert state["start"][0]["throttle_reasons"] == ["sw_power_cap"]
    assert [d["index"] for d in state["during"]] == [0] and state["during"][0]["samples"] >= 1
    assert set(nvml.asked) == {0}
    # The fingerprint's one nvidia-smi state query names the card too.
    queries = [c for c in _calls(directory) if any(a.startswith("--query-gpu=clocks") or
                                                   "clocks.sm" in a for a in c)]
    assert queries and all(f"--id={uuid_of(0)}" in c for c in queries)
    assert [s["index"] for s in env["gpu"]["gpu_state"]] == [0]


def test_without_nvml_one_nvidia_smi_call_names_only_the_runs_card(
        smi: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # not installed: import fails
    directory = smi(cards(8), visible=uuid_of(5))
    task = _single("one_device", 1, hardware.detect())
    assert task.gpus == (uuid_of(5),)
    run = _sampled(task)
    state = run.environment()["gpu_state"]
    assert state["source"] == "nvidia-smi"
    assert [s["index"] for s in state["start"] + state["end"]] == [5, 5]
    queries = [c for c in _calls(directory) if any("clocks.sm" in a for a in c)]
    assert len(queries) >= 3  # start, end and the samples between
    assert all(f"--id={uuid_of(5)}" in c for c in queries)


def test_one_sampler_per_multi_process_run_reads_every_card_of_the_run(smi: Any) -> None:
    smi(cards(8))
    hw = hardware.detect()
    spec = tiny_spec(strategy="multi_worker_mirrored", devices=4, batch=32)
    tasks = STRATEGIES.get(spec.strategy).plan(spec, hw)
    main = next(t for t in tasks if t.main)
    assert main.extra[RUN_GPUS] == [uuid_of(i) for i in range(4)]
    # The other workers start no sampler and call no nvidia-smi.
    other = gpu_run(next(t for t in tasks if not t.main))
    other.begin()
    other.at_start()
    other.at_end()
    assert other.environment() == {} and other._sampler is None
    assert gpu_run(main, hw).cards == tuple(uuid_of(i) for i in range(4))


def test_the_parameter_server_coordinator_reads_its_workers_cards(smi: Any) -> None:
    smi(cards(8))
    hw = hardware.detect()
    spec = tiny_spec(strategy="parameter_server", devices=2, ps_tasks=1)
    chief = next(t for t in STRATEGIES.get(spec.strategy).plan(spec, hw) if t.main)
    assert chief.no_gpu and gpu_run(chief, hw).cards == (uuid_of(0), uuid_of(1))


# -- arms carry GPU state ----------------------------------------------------------------
def test_each_arm_gets_the_gpu_state_of_its_own_windows_and_cards(smi: Any,
                                                                  nvml: FakeNvml) -> None:
    smi(cards(8), visible=f"{uuid_of(0)},{uuid_of(1)}")
    task = arms_task([tiny_spec(strategy="one_device", devices=1),
                      tiny_spec(strategy="mirrored", devices=2)], hardware.detect())
    run = gpu_run(task)
    # The samples are taken here, between the windows' edges, not by the sampler's
    # thread: a read in flight as the clock changes would be stamped on either side.
    run.every_s = 3600.0
    run.begin()
    run.at_start()
    t0 = time.time()
    assert run.sample_once() and run.sample_once()  # arm 0's window: full clock
    t1 = time.time()
    nvml.sm = [1005] * 8  # arm 1's window: the clock fell
    t2 = time.time()
    assert run.sample_once() and run.sample_once()
    t3 = time.time()
    run.at_end()
    assert len(run.samples) == 4
    one = run.environment_over([(t0, t1)], hardware.first_cards(1))
    two = run.environment_over([(t2, t3), (None, None)], hardware.first_cards(2))
    assert [d["index"] for d in one["gpu_state"]["during"]] == [0]
    assert [d["index"] for d in two["gpu_state"]["during"]] == [0, 1]
    assert one["gpu_state"]["during"][0]["sm_clock_mean_mhz"] == 1410
    assert {d["sm_clock_mean_mhz"] for d in two["gpu_state"]["during"]} == {1005}
    assert [s["index"] for s in one["gpu"]["gpu_state"]] == [0]
    # MFU at the clock each arm's own windows ran at.
    figures = at_sustained_clock(fake_figures(), two["gpu_state"])
    assert figures.sustained_sm_clock_mhz == 1005


def test_arms_on_cpu_carry_no_gpu_state(monkeypatch: pytest.MonkeyPatch,
                                        tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    hardware.detect.cache_clear()
    try:
        run = gpu_run(arms_task([tiny_spec(strategy="mirrored", devices=2)],
                                Hardware("cpu", 2, 2**34)))
        run.begin()
        run.at_start()
        run.at_end()
        assert run.environment_over([(0.0, 1e12)], ()) == {}
    finally:
        hardware.detect.cache_clear()


# -- preflight ------------------------------------------------------------------------
def _probe(shm: int | None = 16 << 30, nvml: Any = None, topo: str | None = None,
           cupti: str | None = "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so") -> Probe:
    return Probe(shm_size=lambda _path: shm, nvml=lambda: nvml, topology=lambda: topo,
                 cupti=lambda: cupti)


def _two_cards() -> Scope:
    return Scope(tuple(hardware.GpuInfo(i, "A100", 81920, "550", uuid=uuid_of(i))
                       for i in range(2)))


def test_a_big_shm_is_no_finding_and_dockers_64_mb_is_one() -> None:
    assert gpu_preflight(_two_cards(), _probe(shm=SHM_MIN_BYTES)) == []
    (finding,) = gpu_preflight(_two_cards(), _probe(shm=64 << 20))
    assert finding.check == "shm" and "/dev/shm is 64 MiB" in finding.problem
    assert "--shm-size=1g" in finding.fix
    (absent,) = gpu_preflight(_two_cards(), _probe(shm=None))
    assert "absent" in absent.problem


def test_shm_on_a_real_path_is_read_from_it(tmp_path: Path) -> None:
    assert gpu_preflight(_two_cards(), Probe(shm_path=str(tmp_path / "none"),
                                             topology=lambda: None, nvml=lambda: None,
                                             cupti=lambda: None))[0].check == "shm"


def test_peer_access_from_nvml_then_from_the_topology() -> None:
    assert gpu_preflight(_two_cards(), _probe(nvml=FakeNvml(2))) == []
    (finding,) = gpu_preflight(_two_cards(), _probe(nvml=FakeNvml(2, p2p=4)))
    assert finding.check == "p2p" and "GPU 0-GPU 1" in finding.problem
    assert gpu_preflight(_two_cards(), _probe(topo=FakeSmi([]).topo)) == []  # NV12
    (finding,) = gpu_preflight(_two_cards(), _probe(topo=TOPO_SYS))
    assert "GPU0-GPU1 (SYS)" in finding.problem and "host shared memory" in finding.problem


def test_cupti_is_asked_for_profiled_gpu_runs_only() -> None:
    profiled = Scope(_two_cards().cards, profiled=True)
    assert gpu_preflight(_two_cards(), _probe(cupti=None)) == []
    (finding,) = gpu_preflight(profiled, _probe(cupti=None))
    assert finding.check == "cupti" and "no GPU kernels" in finding.problem
    assert gpu_preflight(profiled, _probe()) == []


def test_the_scope_is_the_cards_of_multi_process_runs(smi: Any) -> None:
    smi(cards(8))
    hw = hardware.detect()
    assert scope_of([tiny_spec(strategy="mirrored", devices=2)], hw).cards == ()
    mwms = tiny_spec(strategy="multi_worker_mirrored", devices=2)
    assert [g.index for g in scope_of([mwms], hw).cards] == [0, 1]
    assert scope_of([mwms.replace(profile_steps=5)], hw).profiled


# -- gpu-smoke -------------------------------------------------------------------------
def _bench(*args: str, path: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
    return subprocess.run([sys.executable, "-m", "bench", *args], cwd=ROOT, text=True,
                          capture_output=True, timeout=120, env={**env, "PATH": path},
                          stdin=subprocess.DEVNULL)


def test_gpu_smoke_without_a_gpu_says_so_and_exits_2(tmp_path: Path) -> None:
    proc = _bench("gpu-smoke", "--out", str(tmp_path / "out"), path=str(tmp_path / "empty"))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "gpu-smoke needs a GPU" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "out").exists()


def test_gpu_smoke_plan_on_eight_cards(tmp_path: Path) -> None:
    directory = cards(8).write(tmp_path / "smi")
    proc = _bench("gpu-smoke", "--plan", "--shm-path", str(tmp_path),
                  path=f"{directory}{os.pathsep}{os.environ['PATH']}")
    assert proc.returncode == 0, proc.stderr
    for step in STEPS:
        assert f"  {step.name}: {step.spec.label()}" in proc.stdout
    assert "GPU 7: NVIDIA A100" in proc.stdout and f"{tmp_path}: " in proc.stdout
    assert "left out" not in proc.stdout


def test_gpu_smoke_on_one_card_leaves_the_two_gpu_runs_out(smi: Any) -> None:
    smi(cards(1))
    plan = smoke_plan(hardware.detect(), _probe())
    assert [s.name for s in plan.steps] == ["one_device", "mixed_float16"]
    assert [s.split(":")[0] for s in plan.skipped] == ["mirrored-2gpu",
                                                       "multi_worker_mirrored-2gpu"]
    assert {s.spec.precision for s in plan.steps} == {"float32", "mixed_float16"}


def test_gpu_smoke_checks_shm_and_writes_one_file(smi: Any, tmp_path: Path) -> None:
    smi(FakeSmi([gpu_row(0), gpu_row(1)], topo=TOPO_SYS))
    hw = hardware.detect()
    probe = _probe(shm=64 << 20, topo=TOPO_SYS, cupti=None)
    plan = smoke_plan(hw, probe)
    assert {f.check for f in plan.findings} == {"shm", "p2p", "cupti"}
    seen: list[tuple[str, dict[str, str]]] = []

    def fake_run(spec: Any, log: Path, env: dict[str, str]) -> Any:
        seen.append((spec.strategy, env))
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text("x NCCL INFO Channel 00 : 0[0] -> 1[1] via SHM/direct/direct\nnoise\n")
        ok = spec.strategy != "multi_worker_mirrored"
        return make_result(spec, "ok" if ok else "failed", None if ok else "NCCL error",
                           figures=fake_figures((123.0,)) if ok else None, environment={},
                           launcher={"log": str(log), "tasks": [{"log": str(log)}]})

    report, results = run_smoke(hw, tmp_path / "out", probe=probe, run=fake_run,
                                progress=lambda _: None)
    assert [s for s, _ in seen] == ["one_device", "mirrored", "multi_worker_mirrored",
                                    "one_device"]
    assert all(env["NCCL_DEBUG"] == "INFO" for _, env in seen)
    text = report.read_text()
    assert report.parent == tmp_path / "out" and "/dev/shm is 64 MiB" in text
    assert "## multi_worker_mirrored-2gpu: failed" in text and "NCCL error" in text
    assert "via SHM/direct/direct" in text and "noise" not in text
    assert "GPU0\t X \tSYS" in text  # topo -m for the bug report
    assert [r.status for r in results].count("ok") == 3


# -- each GPU task gets the cores near its cards ------------------------------------------
def _plan(strategy: str, devices: int, hw: Hardware, **over: Any) -> list[Any]:
    return STRATEGIES.get(strategy).plan(
        tiny_spec(strategy=strategy, devices=devices, **over), hw)


def test_topo_m_gives_each_cards_cores_and_numa_node() -> None:
    from bench.gpu_affinity import CardAffinity, parse_affinity, parse_cores

    # The real H100's table: escapes, and the empty cell before GPU NUMA ID's N/A.
    assert parse_affinity(h100().topo) == {0: CardAffinity(tuple(range(16)), 0)}
    two = parse_affinity(two_socket_topo(8))
    assert two[3] == CardAffinity(tuple(range(48)), 0)
    assert two[4] == CardAffinity(tuple(range(48, 96)), 1)
    assert parse_cores("0-2,96-97") == (0, 1, 2, 96, 97) and parse_cores("N/A") is None
    assert parse_affinity("\tGPU0\tGPU1\nGPU0\t X \tNV12\nGPU1\tNV12\t X ") == {}
    assert parse_affinity(TOPO_SYS.replace("32-63", "N/A")) == {
        0: CardAffinity(tuple(range(32)), 0)}


def test_each_gpu_task_gets_its_nodes_cores_split_among_the_tasks_there(
        smi: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Eight cards on two NUMA nodes (GPU0-3: cores 0-47, GPU4-7: 48-95). The plan's own
    data (Task.cores), on a launcher that may use all 96 cores: nothing is pinned here."""
    from bench import tasks

    monkeypatch.setattr(tasks, "core_ids", lambda: list(range(96)))
    smi(FakeSmi([gpu_row(i) for i in range(8)], topo=two_socket_topo(8)))
    hw = hardware.detect()
    workers = _plan("multi_worker_mirrored", 8, hw)
    assert [len(t.cores) for t in workers] == [12] * 8
    assert [t.intra_threads for t in workers] == [12] * 8
    assert all(set(t.cores) <= set(range(48)) for t in workers[:4])
    assert all(set(t.cores) <= set(range(48, 96)) for t in workers[4:])
    assert len({c for t in workers for c in t.cores}) == 96  # disjoint
    assert all(t.inter_threads == 0 for t in workers)  # TensorFlow's, from the pinned cores
    # Two copies on node 0 split its cores; in-process runs get their cards' node(s).
    assert [t.cores for t in _plan("independent", 2, hw)] == [tuple(range(24)),
                                                               tuple(range(24, 48))]
    (four,) = _plan("mirrored", 4, hw)
    assert four.cores == tuple(range(48)) and four.intra_threads == 48
    (eight,) = _plan("mirrored", 8, hw)
    assert eight.cores == tuple(range(96))
    arms = arms_task([tiny_spec(strategy="one_device", devices=1),
                      tiny_spec(strategy="mirrored", devices=2)], hw)
    assert arms.cores == tuple(range(48))
    # Parameter-server worker servers keep every core; the chief and ps see no GPU.
    assert all(t.cores == () for t in _plan("parameter_server", 2, hw))


def test_a_nodes_cores_and_their_siblings_are_split_together(smi: Any) -> None:
    from bench.gpu_affinity import CardAffinity
    from bench.tasks import Task, split_near, with_gpu_cores

    node = (*range(24), *range(48, 72))  # topo -m: "0-23,48-71" (cores, then siblings)
    assert split_near(node, 4)[0] == (*range(6), *range(48, 54))
    assert split_near((0, 1), 4) == [(0, 1)] * 4  # fewer cores than tasks: all share
    smi(cards(2))
    hw = hardware.detect()
    tasks = [Task("worker", i, "train", main=i == 0, gpus=(uuid_of(i),)) for i in range(2)]
    near = {0: CardAffinity(node, 0), 1: CardAffinity(node, 0)}
    pinned = with_gpu_cores(tasks, hw, near, usable=range(96))
    assert [t.cores for t in pinned] == [(*range(12), *range(48, 60)),
                                         (*range(12, 24), *range(60, 72))]


def test_cores_this_machine_lacks_or_no_affinity_leave_the_tasks_as_they_were(
        smi: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """This machine has 2 cores: topo -m's 48-95 names none of them, so a run with a card
    on that node is not pinned at all (pinning the others would pile that task onto their
    cores); a run on node 0 gets the cores it has there."""
    from bench import tasks

    monkeypatch.setattr(tasks, "core_ids", lambda: [0, 1])
    smi(FakeSmi([gpu_row(i) for i in range(8)], topo=two_socket_topo(8)))
    hw = hardware.detect()
    assert all(t.cores == () and t.intra_threads == 0
               for t in _plan("multi_worker_mirrored", 8, hw))
    assert [t.cores for t in _plan("multi_worker_mirrored", 2, hw)] == [(0,), (1,)]
    hardware.detect.cache_clear()
    smi(cards(8))  # TOPO_2: GPU0 and GPU1 only, so cards 2-7 have no affinity
    hw = hardware.detect()
    assert all(t.cores == () for t in _plan("multi_worker_mirrored", 4, hw))
    assert [t.cores for t in _plan("multi_worker_mirrored", 2, hw)] == [(0,), (1,)]


# -- the JAX device script on a card of its own ---------------------------------------------
def test_the_jax_script_shows_itself_one_card_before_jax_and_meters_only_it(
        smi: Any, nvml: FakeNvml, monkeypatch: pytest.MonkeyPatch) -> None:
    from bench.errors import UsageError
    from scripts.jax_gpu_check import own_card

    smi(cards(8))
    monkeypatch.delenv("CUDA_DEVICE_ORDER", raising=False)  # restored after the test
    card = own_card("3", imported=set())
    assert card is not None and card.uuid == uuid_of(3)
    assert os.environ["CUDA_VISIBLE_DEVICES"] == uuid_of(3)
    assert os.environ["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
    assert [g.uuid for g in hardware.detect().gpus] == [uuid_of(3)]
    meter = energy.energy_meter()
    assert meter.devices == [uuid_of(3)]
    assert energy.window_energy(meter.read(), meter.read()) == pytest.approx(4.0)
    assert set(nvml.asked) == {3}
    # By UUID (a prefix CUDA accepts), and the first card by default.
    smi(cards(8))
    environ: dict[str, str] = {}
    assert own_card(uuid_of(5)[:-2], environ, imported=set()) is not None
    assert environ["CUDA_VISIBLE_DEVICES"] == uuid_of(5)
    smi(cards(8))
    assert own_card(None, environ, imported=set()) is not None
    assert environ["CUDA_VISIBLE_DEVICES"] == uuid_of(0)
    smi(cards(8))
    with pytest.raises(UsageError, match="Received: --gpu 9"):
        own_card("9", {}, imported=set())
    with pytest.raises(UsageError, match="jax in sys.modules"):
        own_card("1", {}, imported={"jax"})


def test_the_jax_script_without_a_gpu_changes_nothing(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from scripts.jax_gpu_check import own_card

    monkeypatch.setenv("PATH", str(tmp_path))  # no nvidia-smi
    hardware.detect.cache_clear()
    environ: dict[str, str] = {}
    try:
        assert own_card(None, environ, imported=set()) is None and environ == {}
    finally:
        hardware.detect.cache_clear()
