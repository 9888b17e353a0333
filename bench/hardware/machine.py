"""The machine as a whole (``Hardware``, found once per process by ``detect()``) and the
physical cards a run trains on (``run_cards``, ``first_cards``)."""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence
from dataclasses import dataclass, field

from bench.hardware.cpu import cpu_model, memory_bytes, usable_cores
from bench.hardware.gpus import GpuInfo, card_ids, cuda_devices, nvidia_gpus, visible


@dataclass(frozen=True)
class Hardware:
    cpu_model: str
    cores: int
    memory_bytes: int | None
    gpus: tuple[GpuInfo, ...] = field(default_factory=tuple)
    tpu: bool = False
    # The whole machine, whatever this process may use (its CPU affinity, its
    # CUDA_VISIBLE_DEVICES): what identifies the machine. Empty/0 = same as above.
    machine_cores: int = 0
    machine_gpus: tuple[GpuInfo, ...] = field(default_factory=tuple)

    @property
    def accelerator(self) -> str:
        return "GPU" if self.gpus else "CPU"

    @property
    def mig(self) -> bool:
        """The visible GPUs are MIG slices (a CUDA process can use only one of them)."""
        return any(g.mig for g in self.gpus)


def run_cards(entries: Sequence[str], hw: Hardware | None = None) -> tuple[str, ...]:
    """The physical GPUs a run trains on, from its tasks' CUDA_VISIBLE_DEVICES
    ``entries`` (empty: this process's visible GPUs), for ``GpuRun``'s ``cards``."""
    hw = hw or detect()
    if not entries:
        return card_ids(hw.gpus, hw.machine_gpus)
    devices = cuda_devices(hw.machine_gpus) if any(g.mig_enabled for g in hw.machine_gpus) \
        else hw.machine_gpus
    return card_ids(visible(devices, ",".join(entries)), hw.machine_gpus)


def first_cards(devices: int, hw: Hardware | None = None) -> tuple[str, ...]:
    """The cards of a process's first ``devices`` GPUs: those an arm of a shared
    process trains on (its devices are the process's first ones)."""
    hw = hw or detect()
    return card_ids(hw.gpus[:devices], hw.machine_gpus)


def tpu_present() -> bool:
    # Cloud TPU VMs expose /dev/accel* (v4+) or /dev/vfio; TPU_NAME names a remote TPU.
    return bool(os.environ.get("TPU_NAME")) or any(
        os.path.exists(f"/dev/accel{i}") for i in range(8)
    )


@functools.lru_cache(maxsize=1)
def detect() -> Hardware:
    """Detect the machine once per process.

    ``gpus`` are the devices this process may use (whole GPUs or MIG slices, after
    CUDA_VISIBLE_DEVICES); ``machine_gpus`` every physical GPU.
    """
    every_gpu = nvidia_gpus()
    return Hardware(cpu_model(), usable_cores(), memory_bytes(),
                    visible(cuda_devices(every_gpu)), tpu_present(),
                    machine_cores=os.cpu_count() or usable_cores(), machine_gpus=every_gpu)
