"""GPU state in results: sampled around the measured windows, judged by the reports.

No TensorFlow: the sampler (bench.hardware.GpuRun, what the child calls around its
windows) runs against the fake nvidia-smi of tests/gpu_fakes.py, and the verdict reads
hand-built results.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from bench import hardware
from bench.hardware import gpu_sampler
from bench.results.schema import RunResult
from reports.report import build_from_results
from reports.verdicts import Verdict
from tests.gpu_fakes import FakeSmi, cards, gpu_row
from tests.helpers import fake_environment, measured, replicated

POWER_CAP = "0x0000000000000004"
IDLE_AND_APP_CLOCKS = "0x0000000000000003"


def _install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake: FakeSmi) -> Path:
    """Put ``fake`` first on PATH (it reads its answers from a file: rewrite to change)."""
    directory = fake.write(tmp_path / "smi")
    monkeypatch.setenv("PATH", f"{directory}{os.pathsep}{os.environ['PATH']}")
    return directory


def test_a_run_records_the_fingerprint_and_the_state_at_both_ends(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = cards(2)
    directory = _install(tmp_path, monkeypatch, fake)
    run = hardware.GpuRun()
    run.begin()
    assert set(run.environment()) == {"gpu"}  # no windows yet: the fingerprint alone
    run.at_start()
    # The card heats up and hits its power cap during the windows.
    fake.gpus[1].update({"clocks.sm": 1005, "temperature.gpu": 83,
                         "clocks_event_reasons.active": POWER_CAP})
    fake.write(directory)
    run.at_end()
    env = run.environment()
    assert "NV12" in env["gpu"]["topology"] and len(env["gpu"]["gpu_state"]) == 2
    assert "nccl" in env["gpu"]
    start, end = env["gpu_state"]["start"], env["gpu_state"]["end"]
    assert [s["index"] for s in start] == [s["index"] for s in end] == [0, 1]
    assert start[1]["sm_clock_mhz"] == 1410 and start[1]["throttle_reasons"] == []
    assert end[1]["sm_clock_mhz"] == 1005 and end[1]["temperature_c"] == 83
    assert end[1]["throttle_reasons"] == ["sw_power_cap"]
    assert end[0]["power_limit_w"] == 400.0 and end[0]["persistence_mode"] == "Enabled"
    # The power cap alone is no fault; the clock that fell by 29% during the windows is.
    (finding,) = hardware.throttle_findings(start, end)
    assert finding == ("GPU 1: SM clock moved from 1410 to 1005 MHz during the windows "
                       "(sw_power_cap)")
    assert "problem" not in env["gpu_state"]


def test_without_nvidia_smi_nothing_is_added(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    run = hardware.GpuRun()
    run.begin()
    run.at_start()
    run.at_end()
    assert run.environment() == {} and run.start is None and run.end is None


def test_a_driver_that_never_answers_costs_one_bounded_wait(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # nvidia-smi stuck in the kernel cannot even be killed and reaped: the call is
    # abandoned after its deadline, and the later samples are not tried at all.
    _install(tmp_path, monkeypatch, cards(1))
    release = threading.Event()
    calls = []

    def stuck(timeout_s: float = 0.0, ids: Any = None) -> Any:
        calls.append(timeout_s)
        release.wait(30)
        return {}

    monkeypatch.setattr(gpu_sampler, "gpu_fingerprint", stuck)  # where GpuRun reads it
    try:
        run = hardware.GpuRun(timeout_s=0.05)
        t = time.monotonic()
        run.begin()
        run.at_start()
        run.at_end()
        assert time.monotonic() - t < 10  # bounded (1.2 s here), never the 30 s hang
        assert len(calls) == 1
        env = run.environment()
        assert env["gpu"] == {} and "did not answer" in env["gpu_state"]["problem"]
    finally:
        release.set()


def test_a_slow_nvidia_smi_is_killed_after_its_timeout(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    directory = tmp_path / "slow"
    directory.mkdir()
    exe = directory / "nvidia-smi"
    exe.write_text("#!/bin/sh\nexec sleep 30\n")
    exe.chmod(0o755)
    monkeypatch.setenv("PATH", f"{directory}{os.pathsep}{os.environ['PATH']}")
    run = hardware.GpuRun(timeout_s=0.2)
    t = time.monotonic()
    run.begin()
    assert time.monotonic() - t < 10
    assert run.environment() == {}  # no answer: treated as no GPU


# -- the verdict ------------------------------------------------------------------------
def _state(mask: str, sm: int = 1410) -> list[dict[str, Any]]:
    """Two GPUs as gpu_state gives them; GPU 1 with the reasons of ``mask``."""
    return [
        {"index": 0, "uuid": "GPU-0", "sm_clock_mhz": 1410, "sm_clock_max_mhz": 1410,
         "throttle_reasons": []},
        {"index": 1, "uuid": "GPU-1", "sm_clock_mhz": sm, "sm_clock_max_mhz": 1410,
         "throttle_reasons": hardware.throttle_reasons(int(mask, 16))}]


def _env(start: str, end: str, sm_end: int = 1410) -> dict[str, Any]:
    env = fake_environment("gpu-box", gpus=2)
    env["gpu"] = {"nccl": None, "topology": None, "gpu_state": _state(start)}
    env["gpu_state"] = {"start": _state(start), "end": _state(end, sm_end)}
    return env


def _verdicts(results: list[RunResult], key: str) -> dict[str, Verdict]:
    (machine,) = [m for m in build_from_results(results, Path("/nonexistent/sweep")).machines
                  if key in m.verdicts]
    return {v.kind: v for v in machine.verdicts[key]}


def test_a_run_that_throttled_gets_a_verdict() -> None:
    ok = _env("0x0", "0x0")
    runs = [*replicated("mirrored", 2, 64, 1800.0, env=ok, run_cv=0.02)]
    runs[1].environment = _env("0x0", POWER_CAP, sm_end=1005)
    steady = measured("one_device", 1, 64, 1000.0, env=ok)
    v = _verdicts([*runs, steady], runs[0].key)["GPU throttled"]
    assert v.severity == "high"
    assert "1 of 3 runs (run 2: GPU 1: SM clock moved from 1410 to 1005 MHz during the " \
           "windows (sw_power_cap))" in v.text
    assert "GPU throttled" not in _verdicts([*runs, steady], steady.key)


def test_a_steady_clock_at_the_power_cap_is_no_verdict() -> None:
    capped = measured("mirrored", 2, 64, 1800.0, env=_env(POWER_CAP, POWER_CAP, sm_end=1380))
    assert "GPU throttled" not in _verdicts([capped], capped.key)


def test_idle_application_clocks_and_old_results_are_no_verdict() -> None:
    idle = measured("mirrored", 2, 64, 1800.0, env=_env(IDLE_AND_APP_CLOCKS,
                                                         IDLE_AND_APP_CLOCKS))
    cpu = measured("one_device", 1, 64, 1000.0)  # no GPU state recorded at all
    results = [idle, cpu]
    assert "GPU throttled" not in _verdicts(results, idle.key)
    assert "GPU throttled" not in _verdicts(results, cpu.key)


def test_a_thermal_slowdown_at_the_start_of_a_single_run() -> None:
    hot = measured("one_device", 1, 64, 1000.0, env=_env("0x40", "0x0"))
    v = _verdicts([hot], hot.key)["GPU throttled"]
    assert "its run (GPU 1 at the start of the windows: hw_thermal_slowdown" in v.text


def test_gpu_row_fields_cover_the_state() -> None:
    # The fake answers every field gpu_state asks for (else the tests above test less).
    row = gpu_row(0)
    for f in [*gpu_sampler._STATE_FIELDS, *gpu_sampler._REASON_FIELDS]:
        assert f in row


# -- sampled during the windows -----------------------------------------------------------
def test_the_state_is_sampled_during_the_windows_and_summarised(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = cards(1)
    fake.gpus[0].update({"clocks.sm": 1350, "power.draw": 698.0,
                         "clocks_event_reasons.active": POWER_CAP})
    directory = _install(tmp_path, monkeypatch, fake)
    run = hardware.GpuRun(every_s=0.05)
    run.begin()
    run.at_start()
    deadline = time.monotonic() + 10
    while len(run.samples) < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    fake.gpus[0]["clocks.sm"] = 1000  # the clock falls while the windows run
    fake.write(directory)
    while not any(st[0]["sm_clock_mhz"] == 1000 for st in run.samples) and \
            time.monotonic() < deadline:
        time.sleep(0.05)
    run.at_end()
    (during,) = run.environment()["gpu_state"]["during"]
    assert during["samples"] == len(run.samples) >= 4
    assert during["sm_clock_min_mhz"] == 1000 and 1000 < during["sm_clock_mean_mhz"] < 1350
    assert during["reasons"] == ["sw_power_cap"] and during["power_max_w"] == 698.0
    assert run._sampler is not None and not run._sampler.is_alive()  # stopped at the end
    state = run.environment()["gpu_state"]
    findings = hardware.throttle_findings(state["start"], state["end"], state["during"])
    assert any("SM clock fell to 1000 MHz during the windows" in f for f in findings)


def test_power_capped_samples_at_a_steady_clock_are_no_finding() -> None:
    samples = [[{"index": 0, "sm_clock_mhz": mhz, "power_draw_w": 698.0,
                 "throttle_reasons": ["sw_power_cap"]}] for mhz in (1335, 1350, 1380)]
    during = hardware.summarise_samples(samples)
    assert during[0]["sm_clock_mean_mhz"] == pytest.approx(1355.0)
    assert hardware.throttle_findings([], [], during) == []
    during[0]["reasons"] = ["sw_power_cap", "hw_thermal_slowdown"]
    (finding,) = hardware.throttle_findings([], [], during)
    assert finding == "GPU 0 during the windows: hw_thermal_slowdown in 3 samples"


def test_the_sustained_clock_prefers_the_samples_and_falls_back_to_both_ends() -> None:
    ends = {"start": [{"sm_clock_mhz": 1400}], "end": [{"sm_clock_mhz": 1300}]}
    assert hardware.sustained_clock(ends) == 1350.0
    assert hardware.sustained_clock({**ends, "during": [{"sm_clock_mean_mhz": 1200.0}]}) \
        == 1200.0
    assert hardware.sustained_clock({}) is None


@pytest.mark.parametrize("clocks,differ", [
    ({"a": 1350.0, "b": 1380.0}, False),   # the power-capped H100's own spread: 2%
    ({"a": 1350.0, "b": 1980.0}, True),    # one run at the power cap, one unloaded
    ({"a": 1350.0, "b": 1350.0 * 1.11}, True),
    ({"a": 1350.0}, False),
])
def test_clocks_of_compared_runs_differ_only_beyond_the_drift(clocks: dict[str, float],
                                                              differ: bool) -> None:
    found = hardware.clock_mismatch(clocks)
    assert (found is not None) == differ
    if differ:
        assert found is not None and "b at" in found and "a at 1350 MHz" in found


def _clocked(strategy: str, devices: int, mhz: int) -> RunResult:
    env = _env(POWER_CAP, POWER_CAP, sm_end=mhz)
    env["gpu_state"]["during"] = [{"index": 1, "samples": 5, "sm_clock_mean_mhz": mhz,
                                   "sm_clock_min_mhz": mhz, "reasons": ["sw_power_cap"]}]
    return measured(strategy, devices, 64, 1000.0, env=env)


def test_configurations_of_one_place_at_different_clocks_get_a_verdict() -> None:
    fast, slow = _clocked("one_device", 1, 1410), _clocked("mirrored", 2, 1100)
    v = _verdicts([fast, slow], slow.key)["GPU clocks differ"]
    assert v.severity == "high" and "one_device on 1 run 1 at 1410 MHz" in v.text
    assert "GPU throttled" not in _verdicts([fast, slow], fast.key)  # the cap is no fault
    same = _clocked("mirrored", 2, 1400)
    assert "GPU clocks differ" not in _verdicts([fast, same], same.key)


def test_mfu_at_the_sustained_clock_of_a_power_capped_h100() -> None:
    from bench.results.mfu import at_sustained_clock
    from tests.helpers import fake_figures

    figures = fake_figures()
    figures.achieved_flops_per_s = 200e12
    figures.theoretical_peak_flops_per_s = 494.7e12  # H100 SXM dense TF32 at 1980 MHz
    state = {"start": [{"sm_clock_mhz": 1350, "sm_clock_max_mhz": 1980}],
             "end": [{"sm_clock_mhz": 1335, "sm_clock_max_mhz": 1980}],
             "during": [{"sm_clock_mean_mhz": 1350.0}]}
    out = at_sustained_clock(figures, state)
    assert out.sustained_sm_clock_mhz == 1350.0
    # Against the peak at 1350 of 1980 MHz: 1.47x the datasheet MFU.
    assert out.mfu_at_clock == pytest.approx(200e12 / (494.7e12 * 1350 / 1980))
    assert at_sustained_clock(figures, {}) is figures  # a CPU run: unchanged


def test_idle_samples_stay_out_of_the_clock_as_on_the_real_h100() -> None:
    # On the H100 the sampler started before the first kernel: 345 MHz with gpu_idle,
    # which is no slowdown of the work (tests/fixtures/nvidia-h100/gpu-readings.txt).
    samples = [[{"index": 0, "sm_clock_mhz": 345, "power_draw_w": 70.0,
                 "throttle_reasons": ["gpu_idle"]}]] * 2 + \
        [[{"index": 0, "sm_clock_mhz": mhz, "power_draw_w": 699.0,
           "throttle_reasons": ["sw_power_cap"]}] for mhz in (1980, 1350, 1335)]
    (during,) = hardware.summarise_samples(samples)
    assert during["idle_samples"] == 2 and during["sm_clock_min_mhz"] == 1335
    assert during["power_mean_w"] == 699.0
    # Boosting at the first window and settling at the cap is how it runs: no finding,
    # although the two ends alone (1980 -> 1335 MHz) would have given one.
    start = [{"index": 0, "sm_clock_mhz": 1980, "throttle_reasons": []}]
    end = [{"index": 0, "sm_clock_mhz": 1335, "throttle_reasons": ["sw_power_cap"]}]
    assert hardware.throttle_findings(start, end) != []
    assert hardware.throttle_findings(start, end, [during]) == []
