"""The device allocator's peak through TensorFlow (tf.config.experimental.get_memory_info)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from typing import Any

from bench.env import CPU_ALLOCATOR_VAR


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
