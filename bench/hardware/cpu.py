"""The CPUs: their model, the cores and memory this process may use, a launcher's or a
cgroup's CPU budget, and whether the cores are quiet (/proc/stat's times)."""

from __future__ import annotations

import os
import platform
from collections.abc import Iterable
from dataclasses import dataclass

from bench.hardware.tools import parse_float


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


# The CPUs' worth of time this process may use (e.g. "0.5"), set by a launcher that put
# it in a cgroup with that quota: inside `ip netns exec` /sys is remounted and the
# cgroup files are out of sight, so the launcher says it.
CPU_BUDGET_VAR = "STRATBENCH_CPU_BUDGET"


def cpu_budget() -> float | None:
    """CPUs' worth of time this process may use, or None (no quota).

    From ``STRATBENCH_CPU_BUDGET`` where a launcher set it, else from this process's
    own cgroup (v2 ``cpu.max``, v1 ``cpu.cfs_quota_us`` / ``cpu.cfs_period_us``), as a
    container's CPU limit sets it.
    """
    given = os.environ.get(CPU_BUDGET_VAR)
    if given:
        try:
            value = float(given)
        except ValueError:
            return None
        return value if value > 0 else None
    try:
        with open("/proc/self/cgroup", encoding="ascii") as fh:
            lines = fh.read().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        try:
            if controllers == "":  # v2: "0::/path"
                quota, period = open_text(f"/sys/fs/cgroup{path}/cpu.max").split()[:2]
            elif "cpu" in controllers.split(","):
                base = f"/sys/fs/cgroup/{controllers}{path}"
                quota = open_text(f"{base}/cpu.cfs_quota_us")
                period = open_text(f"{base}/cpu.cfs_period_us")
            else:
                continue
            if quota.strip() not in ("max", "-1"):
                return int(quota) / int(period)
        except (OSError, ValueError):
            continue
    return None


def open_text(path: str) -> str:
    with open(path, encoding="ascii") as fh:
        return fh.read().strip()


def memory_bytes() -> int | None:
    try:
        with open("/proc/meminfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


# -- is the machine quiet? (for measurements that need all of it, e.g. the peak probe) --------
# A measurement of what the hardware can do reads low when anything else runs: others'
# processes on the same cores, or (on a VM) the hypervisor taking the core for another
# guest (steal). Both are in /proc/stat, per processor, as cumulative clock ticks. The
# 1-minute load average is kept for the record only: it is an exponential average over a
# minute and counts this process's own work just before (a training run's windows), so it
# cannot say who used the cores during a probe of a few seconds; /proc/stat's times over
# the probe's own interval can.
QUIET_OTHERS_SHARE = 0.10  # others may use at most this share of the cores' time
QUIET_STEAL_SHARE = 0.05  # the hypervisor may take at most this share
# /proc/stat's fields, in order: user nice system idle iowait irq softirq steal (guest time
# is already inside user and nice).
_STAT_FIELDS = 8
_IDLE, _IOWAIT, _STEAL = 3, 4, 7


@dataclass(frozen=True)
class CpuTimes:
    """Cumulative CPU time of some processors (seconds since boot, from /proc/stat) and
    of this process (``own``: user + system of all its threads), read at one moment."""

    total: float
    idle: float  # idle and waiting for I/O
    steal: float
    own: float
    load_1m: float | None = None


def parse_proc_stat(text: str, cpus: Iterable[int] | None = None,
                    ticks_per_s: float = 100.0) -> tuple[float, float, float] | None:
    """(total, idle, steal) seconds of the processors ``cpus`` (all when None) from
    /proc/stat text; None when none of them is listed."""
    wanted = set(cpus) if cpus is not None else None
    total = idle = steal = 0.0
    found = False
    for line in text.splitlines():
        name, *values = line.split()
        if not name.startswith("cpu") or name == "cpu" or not name[3:].isdigit():
            continue
        if wanted is not None and int(name[3:]) not in wanted:
            continue
        ticks = [float(v) for v in values[:_STAT_FIELDS]]
        ticks += [0.0] * (_STAT_FIELDS - len(ticks))  # old kernels lack steal
        total += sum(ticks)
        idle += ticks[_IDLE] + ticks[_IOWAIT]
        steal += ticks[_STEAL]
        found = True
    if not found:
        return None
    return total / ticks_per_s, idle / ticks_per_s, steal / ticks_per_s


def parse_loadavg(text: str) -> float | None:
    """The 1-minute load average from /proc/loadavg text."""
    return parse_float(text.split()[0]) if text.split() else None


def cpu_times(cpus: Iterable[int] | None = None, stat_path: str = "/proc/stat",
              loadavg_path: str = "/proc/loadavg") -> CpuTimes | None:
    """Now: the processors' CPU times (``cpus``: this process's usable ones by default)
    and this process's own; None where /proc is not there (not Linux)."""
    if cpus is None:
        try:
            cpus = os.sched_getaffinity(0)
        except AttributeError:
            cpus = None
    try:
        with open(stat_path, encoding="utf-8") as fh:
            stat = fh.read()
        with open(loadavg_path, encoding="utf-8") as fh:
            load = parse_loadavg(fh.read())
    except OSError:
        return None
    parsed = parse_proc_stat(stat, cpus, float(os.sysconf("SC_CLK_TCK")))
    if parsed is None:
        return None
    t = os.times()
    return CpuTimes(*parsed, own=t.user + t.system, load_1m=load)


@dataclass(frozen=True)
class Activity:
    """What the processors did between two readings, as shares of their time (wall time
    x processors): ``others`` used by other processes, ``steal`` taken by the
    hypervisor."""

    seconds: float
    others: float
    steal: float
    load_1m: tuple[float | None, float | None] = (None, None)

    @property
    def quiet(self) -> bool:
        return self.others <= QUIET_OTHERS_SHARE and self.steal <= QUIET_STEAL_SHARE

    def text(self) -> str:
        """``others used 3% of the cores, steal 0% (load 0.47 -> 1.90)``."""
        load = (f" (1-minute load {self.load_1m[0]:.2f} -> {self.load_1m[1]:.2f})"
                if None not in self.load_1m else "")
        return f"others used {self.others:.0%} of the cores, steal {self.steal:.0%}{load}"


def activity(before: CpuTimes, after: CpuTimes) -> Activity:
    """The processors' activity between two readings (see Activity)."""
    total = after.total - before.total
    if total <= 0:  # no tick elapsed: nothing seen, nothing to blame
        return Activity(0.0, 0.0, 0.0, (before.load_1m, after.load_1m))
    steal = after.steal - before.steal
    busy = total - (after.idle - before.idle) - steal
    others = max(0.0, busy - (after.own - before.own))
    return Activity(total, min(1.0, others / total), min(1.0, steal / total),
                    (before.load_1m, after.load_1m))
