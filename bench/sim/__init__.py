"""A simulated GPU server for the parent side: ``STRATBENCH_GPU_SIM=<profile>``.

TensorFlow cannot reach a GPU machine from here, yet everything the parent does on one
(detection, the plan and its price, the budget, deadlines, sessions, probes, the
preflight, the reports) must run end to end before it meets a real server. With
``STRATBENCH_GPU_SIM`` set to a profile (``bench/sim/profiles``: ``1xH100``, ``8xH100``,
``4xL40S``, ``8xB200``, or a JSON file of your own):

- nvidia-smi and NVML answer from the profile (``answer_smi``, ``SimNvml``), in process:
  hardware detection sees the profile's cards; no fake binary is put on PATH, so what
  ``make`` installs stays this machine's own (CPU TensorFlow here);
- each child process of a run replaces only its training with a stand-in
  (``bench.child.backends.sim``) that acts out the configuration's life at the
  profile's costs, in real time: process start, CUDA init, the first call's JIT when
  the wheel has no SASS for the card, cuDNN autotuning, NCCL's set-up, steps at the
  throughput model's rate, the peak probe and the profile's capture;
- faults on demand (``STRATBENCH_GPU_SIM_FAULTS``, ``bench.sim.faults``).

Every result of a simulated run says so (``environment.simulated``, part of the
machine's identity, so it is never compared with a real machine's), reports label it,
and the nightly history and the peak cache refuse it. Shared root: no TensorFlow.
"""

from __future__ import annotations

import functools
import os
import time
import types
from collections.abc import Sequence
from typing import Any

from bench.sim.profile import Profile, load_profile, profile_names

SIM_VAR = "STRATBENCH_GPU_SIM"
SIMULATED_LABEL = "SIMULATED"

__all__ = ["SIM_VAR", "Profile", "SimNvml", "active", "answer_smi", "profile_names"]


def active() -> Profile | None:
    """The simulated server this process runs on, or None (a real machine)."""
    name = os.environ.get(SIM_VAR, "").strip()
    return _load(name) if name else None


@functools.lru_cache(maxsize=8)
def _load(name: str) -> Profile:
    return load_profile(name)


def uuid_of(profile: Profile, i: int) -> str:
    """A stable UUID per simulated card (the profile's name in it, so that two
    profiles' cards never share one)."""
    tag = sum(ord(c) * (k + 1) for k, c in enumerate(profile.name)) & 0xFFFF
    return f"GPU-5{tag:04x}{i:03x}-0000-4000-8000-00000000{i:04x}"


# Which simulated cards this process keeps busy (a stand-in child's steps), and since
# when: nvidia-smi's and NVML's answers read it, so that the sampler sees clocks and
# power at the cap while the windows run, idle otherwise.
_busy_since: float | None = None
_busy_total = 0.0
_epoch = time.monotonic()
# What this process holds on each of its cards as the driver counts it (the stand-in's
# model: context, weights, activations, NCCL's buffers), for NVML's process list.
_held_bytes = 0


def set_held(nbytes: int) -> None:
    """The stand-in's device memory per card, as NVML reports it for this process."""
    global _held_bytes
    _held_bytes = max(0, int(nbytes))


def set_busy(busy: bool) -> None:
    """The stand-in's cards start (True) or stop (False) working."""
    global _busy_since, _busy_total
    now = time.monotonic()
    if busy and _busy_since is None:
        _busy_since = now
    elif not busy and _busy_since is not None:
        _busy_total += now - _busy_since
        _busy_since = None


def busy_seconds() -> float:
    """Seconds this process's cards have worked so far."""
    extra = time.monotonic() - _busy_since if _busy_since is not None else 0.0
    return _busy_total + extra


def _mine(profile: Profile) -> set[int]:
    """The cards this process trains on (CUDA_VISIBLE_DEVICES, as the launcher set it
    by UUID); none in a process that was shown none."""
    listed = os.environ.get("CUDA_VISIBLE_DEVICES")
    if listed is None:
        return set(range(profile.count))
    ids = {uuid_of(profile, i): i for i in range(profile.count)}
    out = set()
    for entry in (e.strip() for e in listed.split(",") if e.strip()):
        if entry.isdigit():
            out.add(int(entry))
        elif entry in ids:
            out.add(ids[entry])
    return out


def _row(profile: Profile, i: int, busy: bool) -> dict[str, str]:
    c = profile.card
    reasons = f"0x{(c.busy_reasons if busy else 0x1):016x}"
    return {
        "index": str(i), "uuid": uuid_of(profile, i), "name": c.name,
        "memory.total": str(c.memory_mib), "driver_version": profile.driver,
        "compute_cap": c.compute_capability,
        "pci.bus_id": f"00000000:{0x18 + 0x10 * i:02X}:00.0", "mig.mode.current": "Disabled",
        "clocks.sm": str(c.sm_busy_mhz if busy else c.sm_idle_mhz),
        "clocks.mem": str(c.mem_mhz), "clocks.max.sm": str(c.sm_max_mhz),
        "clocks.max.mem": str(c.mem_mhz),
        "power.draw": f"{c.power_busy_w if busy else c.power_idle_w:.2f}",
        "power.limit": f"{c.power_limit_w:.2f}",
        "temperature.gpu": str(c.temp_busy_c if busy else c.temp_idle_c),
        "persistence_mode": "Enabled",
        "clocks_event_reasons.active": reasons, "clocks_throttle_reasons.active": reasons}


def topology(profile: Profile) -> str:
    """``nvidia-smi topo -m`` as the driver prints it, header underlined with escapes."""
    n = profile.count
    head = "\t".join([*(f"GPU{i}" for i in range(n)), "CPU Affinity", "NUMA Affinity",
                      "GPU NUMA ID"])
    lines = [f"\t\x1b[4m{head}\x1b[0m"]
    for i in range(n):
        node = profile.numa_of(i)
        links = [" X " if j == i else
                 (profile.link if profile.numa_of(j) == node else profile.cross_link)
                 for j in range(n)]
        lines.append("\t".join([f"GPU{i}", *links, profile.cpu_affinity[node], str(node),
                                "\tN/A"]))
    return "\n".join(lines) + "\n"


def answer_smi(profile: Profile, args: Sequence[str]) -> str | None:
    """What nvidia-smi prints for ``args`` on the simulated server (None: it would exit
    non-zero, e.g. a field it does not know)."""
    args = list(args)
    if args[:1] == ["-L"]:
        return "".join(f"GPU {i}: {profile.card.name} (UUID: {uuid_of(profile, i)})\n"
                       for i in range(profile.count))
    if args[:2] == ["topo", "-m"]:
        return topology(profile)
    query = [a.split("=", 1)[1] for a in args if a.startswith("--query-gpu=")]
    if not query:
        return None
    ids = [a.split("=", 1)[1] for a in args if a.startswith("--id=")]
    ids += [args[k + 1] for k, a in enumerate(args[:-1]) if a == "-i"]
    wanted = {x for i in ids for x in i.split(",")}
    mine = _mine(profile)
    busy = _busy_since is not None
    out = []
    for i in range(profile.count):
        row = _row(profile, i, busy and i in mine)
        if wanted and str(i) not in wanted and row["uuid"] not in wanted:
            continue
        fields = query[0].split(",")
        if any(f not in row for f in fields):
            return None
        out.append(", ".join(row[f] for f in fields))
    return "".join(line + "\n" for line in out)


class SimNvml:
    """The parts of ``pynvml`` the harness calls, answering for the simulated cards:
    clocks, power and the total-energy counter (idle power all along, the profile's
    power under load while this process's stand-in works its cards)."""

    NVML_CLOCK_SM = 1
    NVML_CLOCK_MEM = 2
    NVML_TEMPERATURE_GPU = 0

    def __init__(self, profile: Profile) -> None:
        self.profile = profile

    def nvmlInit(self) -> None:
        return None

    def nvmlDeviceGetCount(self) -> int:
        return self.profile.count

    def nvmlDeviceGetHandleByIndex(self, i: int) -> int:
        if not 0 <= i < self.profile.count:
            raise ValueError(f"NVML_ERROR_INVALID_ARGUMENT: index {i}")
        return i

    def nvmlDeviceGetHandleByUUID(self, uuid: str | bytes) -> int:
        text = uuid.decode() if isinstance(uuid, bytes) else uuid
        for i in range(self.profile.count):
            if uuid_of(self.profile, i) == text:
                return i
        raise ValueError(f"NVML_ERROR_NOT_FOUND: {text}")

    def _busy(self, h: int) -> bool:
        return _busy_since is not None and h in _mine(self.profile)

    def nvmlDeviceGetIndex(self, h: int) -> int:
        return h

    def nvmlDeviceGetUUID(self, h: int) -> str:
        return uuid_of(self.profile, h)

    def nvmlDeviceGetClockInfo(self, h: int, kind: int) -> int:
        c = self.profile.card
        if kind == self.NVML_CLOCK_MEM:
            return c.mem_mhz
        return c.sm_busy_mhz if self._busy(h) else c.sm_idle_mhz

    def nvmlDeviceGetMaxClockInfo(self, h: int, kind: int) -> int:
        c = self.profile.card
        return c.mem_mhz if kind == self.NVML_CLOCK_MEM else c.sm_max_mhz

    def nvmlDeviceGetPowerUsage(self, h: int) -> int:
        c = self.profile.card
        return int(1000 * (c.power_busy_w if self._busy(h) else c.power_idle_w))

    def nvmlDeviceGetPowerManagementLimit(self, h: int) -> int:
        return int(1000 * self.profile.card.power_limit_w)

    def nvmlDeviceGetTemperature(self, h: int, sensor: int) -> int:
        c = self.profile.card
        return c.temp_busy_c if self._busy(h) else c.temp_idle_c

    def nvmlDeviceGetPersistenceMode(self, h: int) -> int:
        return 1

    def nvmlDeviceGetCurrentClocksEventReasons(self, h: int) -> int:
        return self.profile.card.busy_reasons if self._busy(h) else 0x1

    def nvmlDeviceGetComputeRunningProcesses(self, h: int) -> list[Any]:
        """This process, on its own cards once its stand-in holds memory there."""
        if h not in _mine(self.profile) or not _held_bytes:
            return []
        return [types.SimpleNamespace(pid=os.getpid(), usedGpuMemory=_held_bytes)]

    def nvmlDeviceGetTotalEnergyConsumption(self, h: int) -> int:
        """mJ since this process started: idle power all along, plus the load's extra
        power over the seconds its stand-in worked this card."""
        c = self.profile.card
        worked = busy_seconds() if h in _mine(self.profile) else 0.0
        joules = c.power_idle_w * (time.monotonic() - _epoch) + \
            (c.power_busy_w - c.power_idle_w) * worked
        return int(1000 * joules)
