"""Energy counters read around each measured window: NVML on GPUs, RAPL on CPUs.

A window's energy is the difference of a cumulative counter read as the window opens
and as it closes (after the synchronisations that bound it), summed over the devices
this process trains on:

- **GPUs**: NVML's total-energy counter (``nvmlDeviceGetTotalEnergyConsumption``, mJ
  since the driver loaded), one per GPU this process sees (``CUDA_VISIBLE_DEVICES``,
  by UUID), through ``nvidia-ml-py`` (the ``gpu`` extra). On an H100 it read 6987 J
  over 10 s of a power-capped load where power sampled every 0.1 s integrated to
  6653 J: the counter, not sampled power, is the figure. A MIG slice has no counter of
  its own (the card's counts every slice): no figure, and the reason says so.
- **CPUs**: the kernel's RAPL package zones (``/sys/class/powercap/intel-rapl:N``,
  also on AMD), whole sockets: every process on them counts, so on a shared machine
  the figure is an upper bound. The counter wraps at ``max_energy_range_uj``.

Where neither exists the meter says why, and the figure is empty with that reason,
as device memory is on CPUs. No TensorFlow here: the child reads it around windows.
"""

from __future__ import annotations

import functools
import glob
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from bench.hardware import GpuInfo, detect, nvml_module

RAPL_ROOT = "/sys/class/powercap"
NVML = "nvml"
RAPL = "rapl"


@dataclass
class EnergyMeter:
    """A cumulative energy counter in joules (``read``), or why there is none.

    ``source``: ``nvml`` or ``rapl`` (None: no counter, ``reason`` says why);
    ``devices``: what it sums (GPU UUIDs or RAPL zone names).
    """

    source: str | None
    reason: str | None = None
    devices: list[str] = field(default_factory=list)
    _read: Callable[[], float] | None = None

    def read(self) -> float | None:
        """Joules so far (only differences mean anything); None without a counter or
        when a read fails (the reason then says so, and later reads give None)."""
        if self._read is None:
            return None
        try:
            return self._read()
        except Exception as exc:  # a driver error mid-run: no figure, and why
            self.reason = f"the {self.source} energy counter failed: {exc}"
            self._read = None
            return None


def window_energy(before: float | None, after: float | None) -> float | None:
    """Joules between two reads (None when either is missing)."""
    return None if before is None or after is None else max(0.0, after - before)


class _Rapl:
    """Package zones' counters in joules, each unwrapped at its own range."""

    def __init__(self, zones: Sequence[str]) -> None:
        self.zones = list(zones)
        self.ranges = [_read_int(os.path.join(z, "max_energy_range_uj")) for z in zones]
        self.last = [_read_int(os.path.join(z, "energy_uj")) for z in zones]
        self.total_uj = 0

    def __call__(self) -> float:
        for i, zone in enumerate(self.zones):
            now = _read_int(os.path.join(zone, "energy_uj"))
            step = now - self.last[i]
            if step < 0:  # wrapped (once: windows are far shorter than a wrap)
                step += self.ranges[i]
            self.total_uj += step
            self.last[i] = now
        return self.total_uj / 1e6


def _read_int(path: str) -> int:
    with open(path, encoding="ascii") as fh:
        return int(fh.read().strip())


def rapl_zones(root: str = RAPL_ROOT) -> list[str]:
    """The package zones (``intel-rapl:0``, not their ``intel-rapl:0:0`` sub-zones,
    which the package already counts) whose counter this process can read."""
    zones = []
    for path in sorted(glob.glob(os.path.join(root, "intel-rapl:*"))):
        name = os.path.basename(path)
        if name.count(":") != 1:
            continue
        if os.access(os.path.join(path, "energy_uj"), os.R_OK):
            zones.append(path)
    return zones


def rapl_meter(root: str = RAPL_ROOT) -> EnergyMeter:
    """RAPL's package counters, or why not."""
    zones = rapl_zones(root)
    if not zones:
        why = ("no readable RAPL package zone under " + root +
               (" (the directory is absent: the kernel or hypervisor exposes no RAPL)"
                if not os.path.isdir(root) else ""))
        return EnergyMeter(None, why)
    try:
        counter = _Rapl(zones)
    except (OSError, ValueError) as exc:
        return EnergyMeter(None, f"RAPL under {root} cannot be read: {exc}")
    return EnergyMeter(RAPL, None, [os.path.basename(z) for z in zones], counter)


def nvml_meter(gpus: Sequence[GpuInfo], nvml: Any = None) -> EnergyMeter:
    """NVML's total-energy counters of ``gpus``, or why not. ``nvml``: the module
    (``pynvml`` from nvidia-ml-py; tests pass a fake)."""
    if any(g.mig for g in gpus):
        return EnergyMeter(None, "a MIG slice has no energy counter of its own (NVML "
                                 "counts the whole card, every slice's work)")
    if nvml is None:
        try:
            nvml = nvml_module()
        except ImportError:
            return EnergyMeter(None, "nvidia-ml-py is not installed (pip install "
                                     "nvidia-ml-py, part of the gpu extra)")
    try:
        nvml.nvmlInit()
        handles = [nvml.nvmlDeviceGetHandleByUUID(g.uuid) for g in gpus]
        for h in handles:  # not every GPU has the counter (before Volta): ask now
            nvml.nvmlDeviceGetTotalEnergyConsumption(h)
    except Exception as exc:
        return EnergyMeter(None, f"NVML gives no energy counter here: {exc}")

    def read() -> float:
        return sum(nvml.nvmlDeviceGetTotalEnergyConsumption(h) for h in handles) / 1000.0
    return EnergyMeter(NVML, None, [g.uuid or "" for g in gpus], read)


@functools.lru_cache(maxsize=8)
def energy_meter(gpus: int | None = None) -> EnergyMeter:
    """This process's meter: its GPUs' NVML counters where it trains on GPUs (the
    launcher shows each process only its own, by UUID), else the CPU packages' RAPL
    counters, else none with the reason (both tried). ``gpus``: only the first that
    many of its GPUs, those an arm of a shared process trains on (its devices are the
    process's first ones): a 1-GPU arm beside a 2-GPU one counts its own card only."""
    visible = detect().gpus
    if visible:
        return nvml_meter(visible[:gpus] if gpus else visible)
    meter = rapl_meter()
    if meter.source is None:
        meter.reason = f"no energy counter: no GPU in this process, and {meter.reason}"
    return meter
