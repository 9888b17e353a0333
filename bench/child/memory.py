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
        return self._read("peak")

    def current(self) -> dict[str, int]:
        """Bytes in use now, per probed device (empty where no statistics are kept)."""
        return self._read("current")

    def _read(self, field: str) -> dict[str, int]:
        out: dict[str, int] = {}
        for name in self.names:
            try:
                out[name] = int(self._tf.config.experimental.get_memory_info(name)[field])
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


class ArmMemory:
    """One arm's own share of an allocator that several arms share (``bench.child.arms``).

    The process's peak is every arm's together. What is this arm's: the bytes it holds
    once built and warm (the allocator's use after its warm-up less before its build,
    while no other arm ran: ``built``), plus, in each of its windows, the peak above the
    use at the window's start (the other arms then hold their state and do not run).
    Its own process would report the same sum, less what TensorFlow allocates once per
    process (which the first arm built carries). ``scope`` is "arm".
    """

    scope = "arm"

    def __init__(self, probe: DeviceMemory) -> None:
        self._probe = probe
        self._before: dict[str, int] = {}
        self._start: dict[str, int] = {}
        self.held: dict[str, int] = {}

    @property
    def reason(self) -> str | None:
        return self._probe.reason

    @reason.setter
    def reason(self, value: str | None) -> None:
        self._probe.reason = value

    def building(self) -> None:
        """Call before the arm is built."""
        self._before = self._probe.current()

    def built(self) -> None:
        """Call once the arm is built and warm."""
        now = self._probe.current()
        self.held = {k: max(0, v - self._before.get(k, 0)) for k, v in now.items()}

    def reset(self) -> None:
        self._start = self._probe.current()
        self._probe.reset()

    def peaks(self) -> dict[str, int]:
        return {k: self.held.get(k, 0) + max(0, v - self._start.get(k, 0))
                for k, v in self._probe.peaks().items()}
