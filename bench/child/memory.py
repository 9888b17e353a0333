"""Memory probes: device peak (TensorFlow allocator) and host peak RSS."""

from __future__ import annotations

import contextlib
import resource
from typing import Any


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
    and the figure is process-wide (``scope == "process"``).
    """

    def __init__(self, tf: Any, device_type: str, count: int) -> None:
        self._tf = tf
        if device_type == "CPU":
            self.names = ["CPU:0"]
            self.scope = "process"
        else:
            self.names = [f"{device_type}:{i}" for i in range(count)]
            self.scope = "per_device"

    def reset(self) -> None:
        for name in self.names:
            # A device without allocator stats raises; it then reports no peak.
            with contextlib.suppress(ValueError, RuntimeError):
                self._tf.config.experimental.reset_memory_stats(name)

    def peaks(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for name in self.names:
            try:
                out[name] = int(self._tf.config.experimental.get_memory_info(name)["peak"])
            except (ValueError, RuntimeError):
                continue
        return out
