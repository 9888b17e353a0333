"""Memory the harness reads whatever the lane: the host's peak RSS, and an arm's own
share of an allocator several arms share (the allocator itself is the lane's:
``bench.child.backends.tf.memory``)."""

from __future__ import annotations

import resource
from typing import Protocol


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


class AllocatorProbe(Protocol):
    """A lane's device allocator as ``ArmMemory`` reads it."""

    scope: str
    reason: str | None

    def reset(self) -> None: ...

    def peaks(self) -> dict[str, int]: ...

    def current(self) -> dict[str, int]: ...


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

    def __init__(self, probe: AllocatorProbe) -> None:
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
