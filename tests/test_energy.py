"""Energy per example (bench.energy): NVML on GPUs, RAPL on CPUs, a reason elsewhere."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import Any

import pytest

from bench import energy
from bench.hardware import GpuInfo
from bench.results.combination import tasks_energy
from bench.results.figures import FIGURES
from bench.results.schema import TaskFigures
from tests.helpers import fake_figures


class FakeNvml:
    """nvidia-ml-py's calls the meter makes; each GPU's counter (mJ) moves by ``step``
    a read."""

    def __init__(self, step_mj: dict[str, int], supported: bool = True) -> None:
        self.step, self.supported = step_mj, supported
        self.mj = dict.fromkeys(step_mj, 1_000_000)

    def nvmlInit(self) -> None:
        pass

    def nvmlDeviceGetHandleByUUID(self, uuid: str) -> str:
        if uuid not in self.mj:
            raise RuntimeError(f"NVML_ERROR_NOT_FOUND: {uuid}")
        return uuid

    def nvmlDeviceGetTotalEnergyConsumption(self, handle: str) -> int:
        if not self.supported:
            raise RuntimeError("NVML_ERROR_NOT_SUPPORTED")
        self.mj[handle] += self.step[handle]
        return self.mj[handle]


def gpu(uuid: str, mig: bool = False) -> GpuInfo:
    return GpuInfo(index=0, uuid=uuid, name="NVIDIA H100 80GB HBM3", memory_mib=81559,
                   driver="580.159.04", mig="3g.40gb" if mig else None)


def test_nvml_sums_the_runs_gpus_in_joules() -> None:
    nvml = FakeNvml({"GPU-a": 70_000, "GPU-b": 30_000})
    meter = energy.nvml_meter([gpu("GPU-a"), gpu("GPU-b")], nvml)
    assert meter.source == "nvml" and meter.reason is None
    assert meter.devices == ["GPU-a", "GPU-b"]
    before = meter.read()
    after = meter.read()
    assert energy.window_energy(before, after) == pytest.approx(100.0)  # 70 J + 30 J


@pytest.mark.parametrize("case,why", [
    ("unsupported", "NVML gives no energy counter here: NVML_ERROR_NOT_SUPPORTED"),
    ("mig", "a MIG slice has no energy counter of its own"),
    ("missing", "nvidia-ml-py is not installed"),
])
def test_without_a_counter_the_reason_is_stated(case: str, why: str,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    nvml: Any = FakeNvml({"GPU-a": 1}, supported=case != "unsupported")
    if case == "missing":
        monkeypatch.setitem(sys.modules, "pynvml", None)  # import then raises ImportError
        nvml = None
    meter = energy.nvml_meter([gpu("GPU-a", mig=case == "mig")], nvml)
    assert meter.source is None and why in (meter.reason or "")
    assert meter.read() is None


def test_a_counter_that_fails_mid_run_gives_no_figure_and_says_why() -> None:
    nvml = FakeNvml({"GPU-a": 1})
    meter = energy.nvml_meter([gpu("GPU-a")], nvml)
    nvml.supported = False
    assert meter.read() is None and "nvml energy counter failed" in (meter.reason or "")


def _zone(root: Path, name: str, uj: int, span: int = 1000) -> Path:
    zone = root / name
    zone.mkdir(parents=True)
    (zone / "energy_uj").write_text(f"{uj}\n")
    (zone / "max_energy_range_uj").write_text(f"{span}\n")
    return zone


def test_rapl_counts_packages_not_their_subzones_and_unwraps(tmp_path: Path) -> None:
    pkg = _zone(tmp_path, "intel-rapl:0", 900)
    _zone(tmp_path, "intel-rapl:0:0", 10)  # a sub-zone: the package counts it already
    meter = energy.rapl_meter(str(tmp_path))
    assert meter.source == "rapl" and meter.devices == ["intel-rapl:0"]
    first = meter.read()
    (pkg / "energy_uj").write_text("100\n")  # wrapped at 1000 uJ: 200 uJ went by
    assert energy.window_energy(first, meter.read()) == pytest.approx(200e-6)


def test_no_rapl_says_why(tmp_path: Path) -> None:
    meter = energy.rapl_meter(str(tmp_path / "powercap"))
    assert meter.source is None and "directory is absent" in (meter.reason or "")


def test_this_machine_has_a_meter_or_a_reason() -> None:
    energy.energy_meter.cache_clear()
    meter = energy.energy_meter()
    assert (meter.source is None) == (meter.reason is not None)
    if not energy.rapl_zones() and meter.source is None:
        assert "no GPU in this process" in (meter.reason or "")


def test_energy_is_a_declared_figure_explained_when_empty() -> None:
    (fig,) = [f for f in FIGURES if f.name == "joules_per_example"]
    assert fig.family == "energy" and fig.better == "lower" and fig.explained
    assert fig.window == ("joules_per_example",) and fig.unit == "J/example"
    figures = fake_figures()
    figures.energy_reason = "no energy counter: no GPU in this process, and no RAPL"
    assert fig.absence(figures) == figures.energy_reason


def _with_energy(joules: list[float | None], source: str = "nvml") -> Any:
    f = fake_figures(tuple(1000.0 for _ in joules))
    f.windows = [dataclasses.replace(w, energy_j=j) for w, j in zip(f.windows, joules,
                                                                     strict=True)]
    f.energy_source = source
    return f


def test_a_multi_process_run_on_nvml_sums_every_tasks_gpus_window_by_window() -> None:
    main = _with_energy([10.0, 12.0])
    tasks = [TaskFigures(task=f"worker{i}", role="worker", windows=main.windows if i == 0 else
                         _with_energy([20.0, 22.0]).windows) for i in range(2)]
    out = tasks_energy(main, tasks)
    assert [w.energy_j for w in out.windows] == [30.0, 34.0]
    examples = sum(w.examples for w in out.windows)
    assert out.energy_j == 64.0 and out.joules_per_example == pytest.approx(64.0 / examples)
    # A task without a reading: no figure rather than a part of one.
    tasks[1] = TaskFigures(task="worker1", role="worker",
                           windows=_with_energy([20.0, None]).windows)
    out = tasks_energy(main, tasks)
    assert out.joules_per_example is None and "not every task" in (out.energy_reason or "")
    # RAPL counts the whole socket: the main task's reading stands.
    rapl = _with_energy([10.0, 12.0], "rapl")
    assert tasks_energy(rapl, tasks) is rapl
