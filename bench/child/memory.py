"""Memory probes: device peak (TensorFlow allocator) and host peak RSS."""

from __future__ import annotations

import contextlib
import os
import resource
from collections.abc import Mapping
from typing import Any

from bench.env import CPU_ALLOCATOR_VAR


def reset_host_peak() -> bool:
    """Reset the kernel's peak-RSS counter (VmHWM) for this process.

    Writing "5" to /proc/self/clear_refs resets VmHWM (Linux >= 4.0). Returns
    False where that is not possible; the peak is then the lifetime peak.
    """
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as fh:
            fh.write("5")
        return True
    except OSError:
        return False


def host_peak_rss_bytes() -> int | None:
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:  # ru_maxrss is in KiB on Linux
        return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024
    except (OSError, ValueError):
        return None


class DeviceMemory:
    """Peak allocator bytes per device via tf.config.experimental.get_memory_info.

    On CPU all logical devices share one allocator, so only ``CPU:0`` is probed
    and the figure is process-wide (``scope == "process"``). A device whose
    allocator keeps no statistics reports no peak, and ``reason`` says why.
    """

    def __init__(self, tf: Any, device_type: str, count: int,
                 environ: Mapping[str, str] | None = None) -> None:
        self._tf = tf
        self._environ = os.environ if environ is None else environ
        self.reason: str | None = None
        if device_type == "CPU":
            self.names = ["CPU:0"]
            self.scope = "process"
        else:
            self.names = [f"{device_type}:{i}" for i in range(count)]
            self.scope = "per_device"

    def reset(self) -> None:
        for name in self.names:
            # A device without allocator stats raises; peaks() then says why.
            with contextlib.suppress(ValueError, RuntimeError):
                self._tf.config.experimental.reset_memory_stats(name)

    def peaks(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for name in self.names:
            try:
                out[name] = int(self._tf.config.experimental.get_memory_info(name)["peak"])
            except (ValueError, RuntimeError) as exc:
                self.reason = self._why(name, exc)
        return out

    def _why(self, name: str, exc: Exception) -> str:
        told = self._environ.get(CPU_ALLOCATOR_VAR)
        cause = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc) else ''}"
        if name.startswith("CPU") and told is not None and told.strip().lower() in (
                "0", "false"):
            return (f"the CPU allocator keeps no statistics on this machine and "
                    f"{CPU_ALLOCATOR_VAR}={told} in the environment keeps it "
                    f"(get_memory_info({name!r}) -> {cause})")
        return f"the allocator of {name} keeps no statistics (get_memory_info -> {cause})"
