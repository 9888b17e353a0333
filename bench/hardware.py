"""What the machine has, found without importing TensorFlow.

The sweep parent never imports TensorFlow (it would pin devices and hold
~550 MiB); it still needs to know how many GPUs exist to decide which
configurations are `unsupported` before spawning anything.
"""

from __future__ import annotations

import functools
import os
import platform
import shutil
import subprocess
from dataclasses import dataclass, field


@dataclass(frozen=True)
class GpuInfo:
    index: int
    name: str
    memory_mib: int | None
    driver: str | None


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


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def memory_bytes() -> int | None:
    try:
        with open("/proc/meminfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def nvidia_gpus(timeout_s: float = 10.0) -> tuple[GpuInfo, ...]:
    """Every GPU nvidia-smi reports (whatever CUDA_VISIBLE_DEVICES says); empty
    when there is no driver."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return ()
    try:
        out = subprocess.run(
            [exe, "--query-gpu=index,name,memory.total,driver_version",
             "--format=csv,noheader,nounits"],
            capture_output=True, text=True, timeout=timeout_s, check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return ()
    gpus = []
    for line in out.strip().splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 4:
            continue
        mem = int(parts[2]) if parts[2].isdigit() else None
        gpus.append(GpuInfo(int(parts[0]), parts[1], mem, parts[3]))
    return tuple(gpus)


def visible(gpus: tuple[GpuInfo, ...]) -> tuple[GpuInfo, ...]:
    """The GPUs this process may use: CUDA_VISIBLE_DEVICES honoured as CUDA would."""
    listed = os.environ.get("CUDA_VISIBLE_DEVICES")
    if listed is None:
        return gpus
    wanted = [v.strip() for v in listed.split(",") if v.strip()]
    return tuple(g for g in gpus if str(g.index) in wanted)


def tpu_present() -> bool:
    # Cloud TPU VMs expose /dev/accel* (v4+) or /dev/vfio; TPU_NAME names a remote TPU.
    return bool(os.environ.get("TPU_NAME")) or any(
        os.path.exists(f"/dev/accel{i}") for i in range(8)
    )


@functools.lru_cache(maxsize=1)
def detect() -> Hardware:
    """Detect the machine once per process."""
    every_gpu = nvidia_gpus()
    return Hardware(cpu_model(), usable_cores(), memory_bytes(), visible(every_gpu),
                    tpu_present(), machine_cores=os.cpu_count() or usable_cores(),
                    machine_gpus=every_gpu)
