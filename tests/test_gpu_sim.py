"""The simulated GPU server (bench.sim): what the parent side sees on it, the stand-in
child's model, the wheel's build info, and whole runs on a fast profile.

Timings are never asserted: the runs check statuses, reasons and what was recorded.
The faults run against short deadlines so that each ends in seconds.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bench import gpu_build, sim
from bench.errors import UsageError
from bench.hardware import detect, gpu_state, topology, topology_links
from bench.sim.profile import PROFILES_DIR, load_profile, profile_names
from bench.sim_model import device_memory_mib, step_model
from bench.spec import RunSpec

WHEEL = (Path(gpu_build.__file__).parent / "sim" / "wheels" /
         "tf-2.21-cuda12.5.txt").read_text()
FIXTURES = Path(__file__).parent / "fixtures" / "wheels"


@pytest.fixture
def on(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Any]:
    """``on("8xH100")``: this process (and its children) on that simulated server, with
    a cache directory of its own; this machine again afterwards."""
    monkeypatch.setenv("STRATBENCH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)

    def use(name: str) -> sim.Profile:
        monkeypatch.setenv(sim.SIM_VAR, name)
        detect.cache_clear()
        found = sim.active()
        assert found is not None
        return found
    yield use
    monkeypatch.delenv(sim.SIM_VAR, raising=False)
    detect.cache_clear()


def test_the_four_profiles_ship_and_load() -> None:
    assert {"1xH100", "8xH100", "4xL40S", "8xB200"} <= set(profile_names())
    for name in profile_names():
        p = load_profile(name)
        assert p.count == sum(len(n) for n in p.numa_nodes)
        assert p.throughput.anchor_examples_s > 0


def test_an_unknown_profile_is_refused_naming_the_value() -> None:
    with pytest.raises(UsageError, match="Received: STRATBENCH_GPU_SIM=9xQ100") as err:
        load_profile("9xQ100")
    assert "8xH100" in str(err.value)


def test_a_profile_of_your_own_loads_from_a_file(tmp_path: Path) -> None:
    doc = json.loads((PROFILES_DIR / "4xL40S.json").read_text())
    doc["name"], doc["count"] = "2xL40S-mine", 2
    doc["numa_nodes"], doc["cpu_affinity"] = [[0, 1]], ["0-31"]
    path = tmp_path / "mine.json"
    path.write_text(json.dumps(doc))
    assert load_profile(str(path)).count == 2
    doc["numa_nodes"] = [[0]]
    path.write_text(json.dumps(doc))
    with pytest.raises(UsageError, match="numa_nodes"):
        load_profile(str(path))


@pytest.mark.parametrize("name,count,card,link", [
    ("8xH100", 8, "NVIDIA H100 80GB HBM3", "NV18"), ("4xL40S", 4, "NVIDIA L40S", "SYS"),
    ("8xB200", 8, "NVIDIA B200", "NV18"), ("1xH100", 1, "NVIDIA H100 80GB HBM3", None)])
def test_detection_sees_the_profiles_cards_without_a_binary_on_path(
        on: Any, name: str, count: int, card: str, link: str | None) -> None:
    on(name)
    hw = detect()
    assert len(hw.gpus) == count and {g.name for g in hw.gpus} == {card}
    assert len({g.uuid for g in hw.gpus}) == count
    # What make installs stays this machine's own: no nvidia-smi was put on PATH.
    assert shutil.which("nvidia-smi") is None
    links = {x["link"] for x in topology_links(topology())}
    assert (link in links) if link else not links


def test_the_cards_read_busy_only_while_the_stand_in_works_them(on: Any) -> None:
    on("1xH100")
    idle = gpu_state()[0]
    sim.set_busy(True)
    try:
        busy = gpu_state()[0]
        meter = sim.SimNvml(sim.active())  # type: ignore[arg-type]
        before = meter.nvmlDeviceGetTotalEnergyConsumption(0)
    finally:
        sim.set_busy(False)
    assert idle["sm_clock_mhz"] == 345 and "gpu_idle" in idle["throttle_reasons"]
    assert busy["sm_clock_mhz"] == 1350 and busy["power_draw_w"] > 690
    assert "sw_power_cap" in busy["throttle_reasons"]
    assert meter.nvmlDeviceGetTotalEnergyConsumption(0) >= before


def test_results_say_they_are_simulated_and_never_share_a_machine_id(on: Any) -> None:
    from bench.env import fingerprint

    on("8xH100")
    simulated = fingerprint()
    assert simulated["simulated"] == "8xH100"
    other = {**simulated}
    other.pop("simulated")
    from bench.env import machine_id
    assert machine_id(other) != simulated["machine_id"]


# -- the wheel's build info and what it means on a card --------------------------------
def test_the_wheels_build_info_is_read_as_data() -> None:
    build = gpu_build.parse_build_info(WHEEL)
    assert build["cuda_compute_capabilities"][-1] == "compute_90"
    assert build["cuda_version"] == "12.5.1" and build["is_cuda_build"] is True
    assert gpu_build.parse_build_info("import os\nos.system('x')\n") == {}


@pytest.mark.parametrize("cc,driver,kind,words", [
    ("9.0", "580.159.04", "jit", "sm_90 has no SASS"),
    ("10.0", "580.95.05", "jit", "sm_100 has no SASS"),
    ("8.9", "550.90.07", "sass", "SASS for sm_89"),
    ("8.6", "535.104.05", "sass", "(sm_80)"),
    ("9.0", "535.104.05", "old_driver", "driver 535.104.05 runs CUDA 12.2"),
])
def test_what_a_wheel_does_on_each_card(cc: str, driver: str, kind: str, words: str) -> None:
    support = gpu_build.card_support(cc, gpu_build.parse_build_info(WHEEL), driver)
    assert support.kind == kind and words in support.reason
    assert support.runs == (kind in ("sass", "jit"))


def test_blackwell_workstation_cards_are_refused_by_the_wheels_xla() -> None:
    support = gpu_build.card_support("12.0", gpu_build.parse_build_info(WHEEL), "580.95.05")
    assert support.kind == "jit"
    assert support.xla_problem and "sm_120" in support.xla_problem
    assert gpu_build.card_support("9.0", gpu_build.parse_build_info(WHEEL),
                                  "580.95.05").xla_problem is None


def test_a_wheel_with_sass_for_the_card_needs_no_jit() -> None:
    build = gpu_build.parse_build_info((FIXTURES / "sm90-sass.txt").read_text())
    assert gpu_build.card_support("9.0", build, "550.1").kind == "sass"
    build = gpu_build.parse_build_info((FIXTURES / "compute90-only.txt").read_text())
    assert gpu_build.card_support("9.0", build, "580.1").kind == "jit"
    assert gpu_build.card_support("8.0", build, "580.1").kind == "none"


def test_children_keep_the_cuda_cache_and_its_size(on: Any) -> None:
    env = gpu_build.cuda_cache_env({})
    assert int(env["CUDA_CACHE_MAXSIZE"]) >= 2**32 - 1
    assert env["CUDA_CACHE_PATH"].endswith("cuda")
    assert gpu_build.cuda_cache_env({"CUDA_CACHE_PATH": "/x", "CUDA_CACHE_MAXSIZE": "5"}) == {}


# -- the throughput model -------------------------------------------------------------
def _spec(strategy: str, devices: int, **kw: Any) -> RunSpec:
    return RunSpec(workload="resnet50", strategy=strategy, devices=devices, batch=64,
                   batch_mode="per_replica", params={"image_size": 224}, **kw)


def test_the_model_is_anchored_on_its_published_figure() -> None:
    p = load_profile("8xH100")
    one = step_model(p, _spec("one_device", 1).replace(batch=256), 1)
    assert 256 / one.seconds == pytest.approx(p.throughput.anchor_examples_s, rel=0.01)


def test_scaling_in_the_model_ranks_the_strategies_both_ways() -> None:
    nvlink, pcie = load_profile("8xH100"), load_profile("4xL40S")

    def rate(p: sim.Profile, strategy: str, n: int, local: int) -> float:
        spec = _spec(strategy, n)
        return spec.global_batch / step_model(p, spec, local).seconds

    single = rate(nvlink, "one_device", 1, 1)
    # Every replica a process drives costs host time: one process for eight replicas
    # scales worse than a process each; independent copies are the ceiling.
    mirrored, mwms = rate(nvlink, "mirrored", 8, 8), rate(nvlink, "multi_worker_mirrored", 8, 1)
    ceiling = rate(nvlink, "independent", 8, 1)
    assert mirrored < mwms < ceiling == pytest.approx(8 * single)
    # Over PCIe the all-reduce costs more than over NVLink, relative to the step.
    assert rate(pcie, "mirrored", 4, 4) / (4 * rate(pcie, "one_device", 1, 1)) < \
        rate(nvlink, "mirrored", 4, 4) / (4 * single)


# What nvidia-smi reports for a 24 GB card (an L4; an A10G: 23,028).
L4_MIB = 23034


def test_a_batch_of_128_overflows_a_24_gb_card_and_fits_an_80_gb_one() -> None:
    p = load_profile("8xH100")
    assert device_memory_mib(p, _spec("one_device", 1).replace(batch=128), 1) > L4_MIB
    assert device_memory_mib(p, _spec("one_device", 1).replace(batch=128), 1) < 80 * 1024
    assert device_memory_mib(p, _spec("one_device", 1).replace(batch=64), 1) < L4_MIB


# -- whole runs on a fast simulated server ---------------------------------------------
def fast_profile(tmp_path: Path, count: int = 2, **costs: float) -> str:
    """The 8xH100 profile with ``count`` cards and every cost cut to a fraction of a
    second (``costs`` override), written to a file: whole runs in seconds."""
    doc = json.loads((PROFILES_DIR / "8xH100.json").read_text())
    doc["name"], doc["count"] = f"fast-{count}xH100", count
    doc["numa_nodes"], doc["cpu_affinity"] = [list(range(count))], ["0-1"]
    doc["costs"] = {k: (0.0 if k == "jit_cache_mib" else 0.1) for k in doc["costs"]}
    doc["costs"].update({"jit_s": 0.0, **costs})
    path = tmp_path / "fast.json"
    path.write_text(json.dumps(doc))
    return str(path)


def _run(spec: RunSpec, tmp_path: Path, timeout_s: float = 120.0) -> Any:
    from bench.launch.launcher import run_isolated

    return run_isolated(spec, tmp_path / "logs" / "run.log", timeout_s=timeout_s)


def _small(strategy: str, devices: int, **kw: Any) -> RunSpec:
    base = dict(workload="resnet50", strategy=strategy, devices=devices, batch=64,
                batch_mode="per_replica", params={"image_size": 224}, repeats=2,
                max_seconds=0.3, warmup_steps=2, min_steps=2, max_steps=50)
    return RunSpec(**{**base, **kw})


@pytest.fixture
def short_idle(monkeypatch: pytest.MonkeyPatch) -> None:
    """A run hung when every task is idle and silent for 3 s (the default is 90)."""
    from bench.launch import launcher

    monkeypatch.setattr(launcher, "IDLE_TIMEOUT_S", 3.0)


def test_a_run_on_the_simulated_server_is_recorded_as_simulated(
        on: Any, tmp_path: Path) -> None:
    on(fast_profile(tmp_path))
    result = _run(_small("mirrored", 2), tmp_path)
    assert result.status == "ok", result.reason
    env, f = result.environment, result.figures
    assert env["simulated"] == "fast-2xH100" and "simulated" in env["tensorflow"]
    assert env["devices"]["kind"] == "GPU" and len(env["devices"]["names"]) == 2
    assert f.global_throughput > 0 and f.memory.device_peak_bytes
    assert f.joules_per_example and f.joules_per_example > 0  # NVML's counter, simulated
    assert env["gpu_state"]["start"] and env["gpu_state"]["source"] == "nvml"
    assert env["env_vars"]["CUDA_CACHE_MAXSIZE"] == str(gpu_build.CUDA_CACHE_MAXSIZE)
    # Nothing of it in a real machine's caches: its peak and CUDA cache stay apart.
    from bench.files import cache_dir
    assert not (cache_dir() / gpu_build.PEAK_CACHE_FILE).exists()
    assert env["env_vars"]["CUDA_CACHE_PATH"].startswith(
        str(gpu_build.sim_state_dir(sim.active())))
    # NVML's count of what the process holds on each card, beside the allocator's peak:
    # with NCCL's buffers a 2-GPU run holds more per card than one card alone.
    end = env["gpu_state"]["end"]
    assert [c["processes"] for c in end] == [1, 1]
    held = end[0]["process_memory_bytes"]
    one = _run(_small("one_device", 1), tmp_path).environment["gpu_state"]["end"][0]
    assert held > one["process_memory_bytes"] > 0


@pytest.mark.usefixtures("short_idle")
def test_a_collective_that_hangs_after_ready_is_a_timeout_naming_the_hang(
        on: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    on(fast_profile(tmp_path))
    monkeypatch.setenv("STRATBENCH_GPU_SIM_FAULTS", "hang@mirrored")
    result = _run(_small("mirrored", 2), tmp_path, timeout_s=300)
    assert result.status == "timeout", result.reason
    assert "hang after ready" in result.reason and "idle and silent" in result.reason
    assert "first collective started" in result.reason  # the last phase it said
    assert result.wall_s < 60  # ended by the idle deadline, not the run's 300 s


@pytest.mark.usefixtures("short_idle")
def test_a_long_jit_with_a_busy_cpu_is_not_taken_for_a_hang(
        on: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    on(fast_profile(tmp_path))
    monkeypatch.setenv("STRATBENCH_GPU_SIM_FAULTS", "jit=8")
    result = _run(_small("one_device", 1), tmp_path)
    assert result.status == "ok", result.reason
    assert result.figures.warmup.first_call_s >= 8  # the JIT, twice the idle deadline


@pytest.mark.usefixtures("short_idle")
def test_an_idle_silent_child_is_killed_within_its_deadline(
        on: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    on(fast_profile(tmp_path))
    monkeypatch.setenv("STRATBENCH_FAULT", "single0:hang_at_start")
    result = _run(_small("one_device", 1), tmp_path, timeout_s=300)
    assert result.status == "timeout", result.reason
    assert "start-up hang" in result.reason and "single0" in result.reason
    assert result.wall_s < 60


def test_a_worker_that_dies_is_recorded_naming_it(
        on: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    on(fast_profile(tmp_path))
    monkeypatch.setenv("STRATBENCH_FAULT", "worker1:kill_after_warmup")
    result = _run(_small("multi_worker_mirrored", 2), tmp_path)
    assert result.status == "failed", result.reason
    assert "worker1" in result.reason


def test_a_batch_too_large_for_the_card_is_an_oom(
        on: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    on(fast_profile(tmp_path))
    monkeypatch.setenv("STRATBENCH_GPU_SIM_FAULTS", f"memory_mib={L4_MIB}")
    assert _run(_small("one_device", 1, batch=128), tmp_path).status == "oom"
    assert _run(_small("one_device", 1, batch=64), tmp_path).status == "ok"


@pytest.mark.usefixtures("short_idle")
def test_the_all_reduce_probe_hangs_for_its_idle_deadline_only(
        on: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    on(fast_profile(tmp_path))
    spec = _small("mirrored", 2, mode="allreduce", batch=1, allreduce_max_bytes=2**20)
    result = _run(spec, tmp_path, timeout_s=300)
    assert result.status == "ok", result.reason
    assert result.allreduce.points and result.allreduce.points[-1].busbw > 0
    monkeypatch.setenv("STRATBENCH_GPU_SIM_FAULTS", "hang")
    result = _run(spec, tmp_path, timeout_s=300)
    assert result.status == "timeout" and "hang after ready" in result.reason
    assert result.wall_s < 60


def test_the_jit_is_paid_once_when_the_cache_keeps_it_and_again_when_it_cannot(
        on: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    on(fast_profile(tmp_path, jit_s=3.0, jit_cache_mib=1400))
    spec = _small("one_device", 1)
    first, second = _run(spec, tmp_path), _run(spec, tmp_path)
    assert first.figures.warmup.first_call_s >= 3 > second.figures.warmup.first_call_s
    # The run says which of its seconds were the JIT: the budget keeps them apart.
    assert first.figures.warmup.jit_s == 3.0 and second.figures.warmup.jit_s == 0.0
    assert gpu_build.jit_marker().exists()
    # CUDA's default cache (256 MiB) cannot hold the kernels: every process compiles.
    shutil.rmtree(gpu_build.cuda_cache_dir())
    monkeypatch.setenv("CUDA_CACHE_MAXSIZE", str(gpu_build.CUDA_CACHE_DEFAULT_BYTES))
    for _ in range(2):
        assert _run(spec, tmp_path).figures.warmup.first_call_s >= 3


# -- the preflight reads the wheel ---------------------------------------------------------
def _profile_file(tmp_path: Path, base: str, **over: Any) -> str:
    doc = json.loads((PROFILES_DIR / f"{base}.json").read_text())
    card = {**doc["card"], **over.pop("card", {})}
    doc.update(card=card, **over)
    path = tmp_path / f"{doc['name']}.json"
    path.write_text(json.dumps(doc))
    return str(path)


def _wheel_findings(build_text: str, cc: str, driver: str, xla: bool = False) -> list[Any]:
    from bench.hardware import GpuInfo
    from bench.launch.gpu_preflight import Probe, Scope, check_wheel

    gpu = GpuInfo(0, "NVIDIA TEST", 81559, driver, uuid="GPU-0")
    probe = Probe(build_info=lambda: gpu_build.parse_build_info(build_text),
                  compute_capability=lambda _g: cc)
    return check_wheel(Scope(gpus=(gpu,), xla=xla), probe)


def test_the_preflight_names_a_missing_sass_an_old_driver_and_sm_120() -> None:
    only_ptx = (FIXTURES / "compute90-only.txt").read_text()
    [jit] = _wheel_findings(only_ptx, "9.0", "580.159.04")
    assert not jit.fatal and "sm_90 has no SASS" in jit.problem and "compute_90" in jit.problem
    [old] = _wheel_findings(WHEEL, "9.0", "535.104.05")
    assert old.fatal and "CUDA 12.5.1" in old.problem and "535.104.05" in old.problem
    assert "CUDA 12.2" in old.problem
    blackwell = _wheel_findings(WHEEL, "12.0", "580.95.05", xla=True)
    assert [f.fatal for f in blackwell] == [False, True]
    assert "sm_120" in blackwell[1].problem
    assert _wheel_findings((FIXTURES / "sm90-sass.txt").read_text(), "9.0", "550.54.15") == []


def test_a_driver_too_old_for_the_wheel_refuses_before_anything_runs(
        on: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from bench.cli.main import main

    on(_profile_file(tmp_path, "8xH100", name="8xH100-r535", driver="535.104.05"))
    out = tmp_path / "sweep"
    code = main(["run", "--workload", "resnet50", "--strategy", "one_device", "--devices",
                 "1", "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "535.104.05" in err and "12.5.1" in err and "nothing was run" in err
    assert not out.exists()


def test_a_process_past_its_first_call_marks_the_jit_kept_where_the_cache_can_hold_it(
        on: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    on("1xH100")
    monkeypatch.setenv("CUDA_CACHE_PATH", str(tmp_path / "nv"))
    monkeypatch.setenv("CUDA_CACHE_MAXSIZE", str(gpu_build.CUDA_CACHE_DEFAULT_BYTES))
    assert not gpu_build.note_jit_kept()  # 256 MiB keeps nothing of TensorFlow's
    monkeypatch.setenv("CUDA_CACHE_MAXSIZE", str(gpu_build.CUDA_CACHE_MAXSIZE))
    assert gpu_build.note_jit_kept() and gpu_build.jit_marker(tmp_path / "nv").exists()
    assert not gpu_build.note_jit_kept()  # once


def test_the_budget_prices_the_jit_and_the_peak_once_while_uncached(on: Any) -> None:
    from bench.adaptive.pricing import Pricer

    p = on("8xH100")
    [(jit, jit_s), (peak, peak_s)] = Pricer(detect()).one_time()
    assert (jit_s, peak_s) == (p.costs.jit_s, p.costs.peak_probe_s)
    assert "sm_90" in jit and "peak" in peak
    gpu_build.jit_marker().parent.mkdir(parents=True)
    gpu_build.jit_marker().touch()
    assert [w for w, _ in Pricer(detect()).one_time()] == [peak]
    (gpu_build.sim_state_dir(p) / "peak-float32.done").touch()
    assert Pricer(detect()).one_time() == []
    on("4xL40S")  # sm_89: the wheel has its SASS; its peak not measured yet
    assert [w for w, _ in Pricer(detect()).one_time()] == [peak]


def test_where_the_cache_cannot_keep_the_jit_every_process_is_priced_with_it(
        on: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from bench.adaptive.pricing import Pricer

    p = on("8xH100")
    kept = Pricer(detect())
    monkeypatch.setenv("CUDA_CACHE_MAXSIZE", str(gpu_build.CUDA_CACHE_DEFAULT_BYTES))
    lost = Pricer(detect())
    assert not kept.jit_every_process and lost.jit_every_process
    spec = _spec("one_device", 1)
    assert lost.first_guess(spec).startup_s == pytest.approx(
        kept.first_guess(spec).startup_s + p.costs.jit_s)
    assert "JIT" not in " ".join(w for w, _ in lost.one_time())


def test_a_gpu_runs_windows_are_priced_at_their_time_bound_with_its_fixed_costs(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from bench.adaptive.pricing import Pricer
    from tests.gpu_fakes import detected, h100s

    with detected(h100s(8), tmp_path / "bin", monkeypatch):
        pricer = Pricer(detect(), evidence_steps=3)
        spec = _spec("mirrored", 8).replace(max_seconds=10.0, repeats=3, max_steps=200)
        # A guessed step of ~40 ms makes 200 steps shorter than the 10 s bound; the
        # window runs to its bound whenever the real step is slower.
        assert pricer.step_s(spec) * spec.max_steps < spec.max_seconds
        price = pricer.first_guess(spec)
        assert price.windows_s == 30.0
        c = pricer.costs
        assert price.startup_s >= c.startup_s + 8 * c.cudnn_autotune_s  # each GPU tunes
        assert price.profile_s >= c.cupti_s + 8 * c.trace_parse_per_gpu_s
        one = pricer.first_guess(_spec("one_device", 1))
        assert price.warmup_s - one.warmup_s >= c.nccl_init_s


def test_independent_copies_each_train_a_replicas_share(on: Any, tmp_path: Path) -> None:
    on(fast_profile(tmp_path))
    one = _run(_small("one_device", 1), tmp_path)
    copies = _run(_small("independent", 2), tmp_path)
    assert one.status == copies.status == "ok", (one.reason, copies.reason)
    ratio = copies.figures.global_throughput / one.figures.global_throughput
    assert 1.8 < ratio < 2.2  # two copies of one card's work, not of two cards' each


def test_in_process_mirrored_across_sockets_gets_the_shm_and_p2p_checks(on: Any) -> None:
    from bench.launch.gpu_preflight import Probe, gpu_preflight, scope_of

    on("4xL40S")  # two cards a socket: GPU0-GPU2 cross the sockets (SYS)
    hw = detect()
    small_shm = Probe(shm_size=lambda _path: 64 << 20, nvml=lambda: None,
                      cupti=lambda: None, build_info=lambda: None)
    across = scope_of([_spec("mirrored", 4)], hw)
    assert not across.cards and len(across.in_process) == 4
    checks = {f.check for f in gpu_preflight(across, small_shm)}
    assert checks == {"shm", "p2p"}
    on("8xH100")  # NVSwitch: every pair has peer access, one process needs no shm
    assert gpu_preflight(scope_of([_spec("mirrored", 8)], detect()), small_shm) == []
    assert gpu_preflight(scope_of([_spec("one_device", 1)], detect()), small_shm) == []


def test_bench_list_on_the_simulated_servers(
        on: Any, capsys: pytest.CaptureFixture[str]) -> None:
    from bench.cli.main import main

    on("4xL40S")
    assert main(["list", "--preset", "default"]) == 0
    out = capsys.readouterr().out
    assert not any("central_storage" in ln and "will run" in ln for ln in out.splitlines())
    assert "opt=sgd" in out and "at 2 and 4 GPUs" in out
    on("8xH100")
    assert main(["list", "--preset", "default"]) == 0
    out = capsys.readouterr().out
    assert "the all-reduce probe it runs first, at 2 and 8 GPUs" in out
    running = [ln for ln in out.splitlines() if "  will run" in ln]
    assert running and all("opt=sgd" in ln for ln in running)
    by_batch: dict[int, set[str]] = {}  # per-replica batch -> what runs there
    for ln in running:
        m = re.search(r"resnet50 (\w+) n=(\d+) b=(\d+)", ln)
        assert m is not None, ln
        by_batch.setdefault(int(m[3]) // int(m[2]), set()).add(f"{m[1]}-{m[2]}")
    assert all(runs - {"one_device-1"} for runs in by_batch.values()), by_batch
    assert "once, before the first step: ~150 s for the first call's JIT" in out


def test_an_unknown_fault_is_refused_before_anything_runs(
        on: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    from bench.cli.main import main
    from bench.sim.faults import Faults

    on("1xH100")
    monkeypatch.setenv("STRATBENCH_GPU_SIM_FAULTS", "hang@mirrored,boom=1")
    out = tmp_path / "sweep"
    assert main(["run", "--workload", "resnet50", "--strategy", "one_device", "--out",
                 str(out)]) == 2
    assert "Received: 'boom=1'" in capsys.readouterr().err and not out.exists()
    assert Faults.parse("hang@mirrored,jit=3", "mirrored") == Faults(True, 3.0)
    assert Faults.parse("hang@mirrored", "one_device") == Faults()


def test_on_one_gpu_the_probe_has_nothing_to_time(
        on: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from bench.cli.allreduce import default_devices
    from bench.cli.main import main

    assert default_devices(0) == [2] and default_devices(1) == []
    assert default_devices(2) == [2] and default_devices(8) == [2, 8]
    on("1xH100")
    assert main(["allreduce", "--out", str(tmp_path / "probe")]) == 0
    assert "nothing to all-reduce between" in capsys.readouterr().out
    assert main(["list", "--preset", "default"]) == 0
    assert "no all-reduce probe (one GPU)" in capsys.readouterr().out
