"""What the machine has, found without importing TensorFlow.

The sweep parent never imports TensorFlow (it would pin devices and hold
~550 MiB); it still needs to know how many GPUs exist to decide which
configurations are `unsupported` before spawning anything.
"""

from __future__ import annotations

import functools
import importlib.metadata
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from bench import sim


@dataclass(frozen=True)
class GpuInfo:
    """One GPU as nvidia-smi reports it, or one MIG slice of a GPU.

    ``index`` is nvidia-smi's (PCI bus order; a MIG slice carries its GPU's index).
    ``uuid`` is what children get in CUDA_VISIBLE_DEVICES: it names the device
    whatever CUDA_DEVICE_ORDER says, and a MIG slice has no other name.
    """

    index: int
    name: str
    memory_mib: int | None
    driver: str | None
    uuid: str | None = None
    pci_bus_id: str | None = None
    mig: str | None = None  # a MIG slice: its profile, e.g. "3g.20gb"
    mig_enabled: bool = False  # a physical GPU in MIG mode (its slices are the devices)

    @property
    def cuda_id(self) -> str:
        """This device in CUDA_VISIBLE_DEVICES: its UUID, else its index."""
        return self.uuid or str(self.index)


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


# -- GPU models and their datasheet peaks ----------------------------------------------
@dataclass(frozen=True)
class GpuModel:
    """One GPU model's dense (no sparsity) datasheet peaks, FLOP/s per GPU.

    ``pattern`` matches nvidia-smi's name with word boundaries (so "L4" never matches
    an "L40"); ``float32`` is the CUDA-core rate, ``tf32`` the TensorFloat-32 tensor-core
    rate at which TensorFlow runs float32 matmuls and convolutions on Ampere and newer
    GPUs by default (None before Ampere).
    """

    name: str
    pattern: str
    float32: float
    tf32: float | None
    bfloat16: float | None
    float16: float

    def peaks(self, tf32: bool) -> dict[str, float]:
        """Per dtype; float32 at the math mode the run used."""
        out = {"float32": self.tf32 if tf32 and self.tf32 else self.float32,
               "float16": self.float16}
        if self.bfloat16:
            out["bfloat16"] = self.bfloat16
        return out


# Datasheet peaks: here, on the parent side, so that a sweep can price its plan from a
# card's peak (bench.adaptive.pricing) without the child's probes; the child's peak
# probe reads them from here too.
# Most specific first: the first model whose pattern matches wins. The datasheets quote
# tensor-core rates with 2:4 sparsity; these are half of them (dense). "H100 80GB HBM3"
# is the SXM part (its PCIe sibling says PCIe, NVL says NVL); an A100's memory size does
# not change its compute.
GPU_MODELS: tuple[GpuModel, ...] = (
    GpuModel("H100 NVL", r"\bH100 NVL\b", 60e12, 417.5e12, 835e12, 835e12),
    GpuModel("H100 PCIe", r"\bH100\b.*\bPCIe\b", 51.2e12, 378e12, 756e12, 756e12),
    GpuModel("GH200", r"\bGH200\b", 67e12, 494.5e12, 989e12, 989e12),
    GpuModel("H200 NVL", r"\bH200 NVL\b", 60e12, 417.5e12, 835e12, 835e12),
    GpuModel("H200", r"\bH200\b", 67e12, 494.5e12, 989e12, 989e12),
    GpuModel("H100 SXM", r"\bH100\b", 67e12, 494.5e12, 989e12, 989e12),
    GpuModel("B200", r"\bB200\b", 80e12, 1.1e15, 2.25e15, 2.25e15),
    GpuModel("A100", r"\bA100\b", 19.5e12, 156e12, 312e12, 312e12),
    GpuModel("A10G", r"\bA10G\b", 31.2e12, 35e12, 70e12, 70e12),
    GpuModel("A10", r"\bA10\b", 31.2e12, 62.5e12, 125e12, 125e12),
    GpuModel("L40S", r"\bL40S\b", 91.6e12, 183e12, 362e12, 362e12),
    GpuModel("L40", r"\bL40\b", 90.5e12, 90.5e12, 181e12, 181e12),
    GpuModel("L4", r"\bL4\b", 30.3e12, 60e12, 121e12, 121e12),
    GpuModel("V100", r"\bV100\b", 15.7e12, None, None, 125e12),
    GpuModel("T4", r"\bT4\b", 8.1e12, None, None, 65e12),
)


def gpu_model(name: str) -> GpuModel | None:
    """The datasheet entry of nvidia-smi's ``name`` (None: not a listed model; an
    unknown card is never matched to a neighbour)."""
    return next((m for m in GPU_MODELS if re.search(m.pattern, name, re.IGNORECASE)), None)


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


_SMI_TIMEOUT_S = 10.0
_MISSING = ("", "[N/A]", "N/A", "[Not Supported]", "Not Supported", "[Unknown Error]")


def smi_present() -> bool:
    """Whether nvidia-smi can be asked (on a simulated server, always)."""
    return sim.active() is not None or shutil.which("nvidia-smi") is not None


def _smi(args: list[str], timeout_s: float = _SMI_TIMEOUT_S) -> str | None:
    """nvidia-smi's output, or None (no driver, an error, a field it does not know).
    On a simulated server (``bench.sim``) the profile answers, in process."""
    simulated = sim.active()
    if simulated is not None:
        return sim.answer_smi(simulated, args)
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        return subprocess.run([exe, *args], capture_output=True, text=True, timeout=timeout_s,
                              check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None


def _query(fields: list[str], timeout_s: float = _SMI_TIMEOUT_S,
           ids: Sequence[str] | None = None) -> list[dict[str, str | None]]:
    """``nvidia-smi --query-gpu=FIELDS``: one dict per GPU ([N/A] and the like -> None).
    ``ids``: only these GPUs (``--id=``: UUIDs or indices); None: every GPU."""
    args = [f"--query-gpu={','.join(fields)}", "--format=csv,noheader,nounits"]
    if ids:
        args.append(f"--id={','.join(ids)}")
    out = _smi(args, timeout_s)
    rows = []
    for line in (out or "").strip().splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != len(fields):
            continue
        rows.append({f: (None if v in _MISSING else v) for f, v in zip(fields, parts,
                                                                         strict=True)})
    return rows


def parse_int(text: str | None) -> int | None:
    """An integer read from tool output ("6", "0x1f", "81920.0"), or None when absent or
    unreadable."""
    if text is None:
        return None
    try:
        return int(text, 0)  # base 0: the hexadecimal of /proc/cpuinfo fields too
    except ValueError:
        pass
    try:  # a decimal ("81920.0"), or a leading zero, which base 0 refuses ("010")
        return int(float(text))
    except (ValueError, OverflowError):  # OverflowError: "inf"
        return None


def parse_float(text: str | None) -> float | None:
    """A float read from tool output, or None when absent or unreadable."""
    try:
        return float(text) if text is not None else None
    except ValueError:
        return None


_GPU_FIELDS = ["index", "uuid", "name", "memory.total", "driver_version", "pci.bus_id",
               "mig.mode.current"]


def nvidia_gpus(timeout_s: float = _SMI_TIMEOUT_S) -> tuple[GpuInfo, ...]:
    """Every physical GPU nvidia-smi reports (whatever CUDA_VISIBLE_DEVICES says); empty
    when there is no driver."""
    rows = _query(_GPU_FIELDS, timeout_s)
    if not rows:  # an older driver without some field: the fields every driver has
        rows = _query(["index", "name", "memory.total", "driver_version"], timeout_s)
    gpus = []
    for r in rows:
        index = parse_int(r.get("index"))
        if index is None:
            continue
        gpus.append(GpuInfo(index, r.get("name") or "GPU", parse_int(r.get("memory.total")),
                            r.get("driver_version"), uuid=r.get("uuid"),
                            pci_bus_id=r.get("pci.bus_id"),
                            mig_enabled=(r.get("mig.mode.current") or "") == "Enabled"))
    return tuple(gpus)


# `nvidia-smi -L`: "GPU 0: NAME (UUID: GPU-...)" then, for a GPU in MIG mode, one line per
# slice: "  MIG 3g.20gb     Device  0: (UUID: MIG-...)" (drivers before R470 print the
# slice as "MIG-GPU-<gpu uuid>/<gi>/<ci>"; either is a valid CUDA_VISIBLE_DEVICES entry).
_L_GPU = re.compile(r"^GPU\s+(\d+):.*\(UUID:\s*(\S+?)\)\s*$")
_L_MIG = re.compile(r"^\s+MIG\s+(\S+)\s+Device\s+(\d+):\s*\(UUID:\s*(\S+?)\)\s*$")
_MIG_GB = re.compile(r"\.(\d+)gb$")


def query_compute_cap(gpu: GpuInfo, timeout_s: float = _SMI_TIMEOUT_S) -> str | None:
    """nvidia-smi's ``compute_cap`` of ``gpu`` ("9.0"); None where the driver does not
    know the field (older than R510)."""
    rows = _query(["compute_cap"], timeout_s, [gpu.uuid or str(gpu.index)])
    return rows[0].get("compute_cap") if rows else None


def mig_devices(gpus: tuple[GpuInfo, ...], timeout_s: float = _SMI_TIMEOUT_S
                ) -> dict[int, tuple[GpuInfo, ...]]:
    """The MIG slices of each GPU in MIG mode, by GPU index (from ``nvidia-smi -L``).

    A slice's memory is its profile's nominal size (``3g.20gb``: 20 GiB): nvidia-smi's
    per-GPU query reports the whole card's.
    """
    if not any(g.mig_enabled for g in gpus):
        return {}
    by_index = {g.index: g for g in gpus}
    slices: dict[int, list[GpuInfo]] = {}
    current: GpuInfo | None = None
    for line in (_smi(["-L"], timeout_s) or "").splitlines():
        if m := _L_GPU.match(line):
            current = by_index.get(int(m.group(1)))
        elif (m := _L_MIG.match(line)) and current is not None:
            gb = _MIG_GB.search(m.group(1))
            slices.setdefault(current.index, []).append(GpuInfo(
                current.index, f"{current.name} MIG {m.group(1)}",
                int(gb.group(1)) * 1024 if gb else None, current.driver, uuid=m.group(3),
                pci_bus_id=current.pci_bus_id, mig=m.group(1)))
    return {k: tuple(v) for k, v in slices.items()}


def cuda_devices(gpus: tuple[GpuInfo, ...], slices: dict[int, tuple[GpuInfo, ...]] | None = None
                 ) -> tuple[GpuInfo, ...]:
    """What CUDA can be given: each GPU, or its MIG slices when it is in MIG mode."""
    slices = mig_devices(gpus) if slices is None else slices
    out: list[GpuInfo] = []
    for g in gpus:
        out += slices.get(g.index, ()) if g.mig_enabled else (g,)
    return tuple(out)


def visible(gpus: tuple[GpuInfo, ...], listed: str | None = None) -> tuple[GpuInfo, ...]:
    """The devices this process may use: CUDA_VISIBLE_DEVICES honoured as CUDA does.

    Entries are indices (nvidia-smi's, i.e. PCI bus order: what CUDA uses with
    CUDA_DEVICE_ORDER=PCI_BUS_ID, which the launcher sets for its children), GPU
    UUIDs or MIG slice UUIDs, whole or as a unique prefix. As in CUDA, the list
    stops at the first entry that names no device, and its order is kept.
    ``listed`` defaults to the environment's value.
    """
    if listed is None:
        listed = os.environ.get("CUDA_VISIBLE_DEVICES")
    if listed is None:
        return gpus
    chosen: list[GpuInfo] = []
    for entry in (e.strip() for e in listed.split(",")):
        found = _lookup(gpus, entry)
        if not found:
            break
        chosen += [g for g in found if g not in chosen]
    return tuple(chosen)


def _lookup(gpus: tuple[GpuInfo, ...], entry: str) -> tuple[GpuInfo, ...]:
    if entry.isdigit():  # an index names a GPU: itself, or its MIG slices
        return tuple(g for g in gpus if g.index == int(entry))
    if not entry:
        return ()
    exact = tuple(g for g in gpus if g.uuid == entry)
    if exact:
        return exact
    # CUDA also accepts a UUID cut short, as long as it names one device.
    prefixed = tuple(g for g in gpus if g.uuid and g.uuid.startswith(entry))
    return prefixed if len(prefixed) == 1 else ()


def card_ids(devices: Iterable[GpuInfo], machine: Iterable[GpuInfo]) -> tuple[str, ...]:
    """The physical GPUs behind CUDA ``devices``, as nvidia-smi ``--id`` and NVML know
    them (UUID, else index), once each: a MIG slice is read through its card, which
    holds its clocks, power and energy counter. ``machine``: every physical GPU."""
    by_index = {g.index: g for g in machine}
    ids: list[str] = []
    for g in devices:
        card = by_index.get(g.index, g) if g.mig else g
        ident = card.uuid or str(card.index)
        if ident not in ids:
            ids.append(ident)
    return tuple(ids)


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


# -- GPU state: what moves benchmark numbers by tens of percent ----------------------
# Bits of nvidia-smi's clocks_event_reasons.active (NVML's clocksEventReasons).
THROTTLE_BITS = {0x1: "gpu_idle", 0x2: "applications_clocks_setting", 0x4: "sw_power_cap",
                 0x8: "hw_slowdown", 0x10: "sync_boost", 0x20: "sw_thermal_slowdown",
                 0x40: "hw_thermal_slowdown", 0x80: "hw_power_brake_slowdown",
                 0x100: "display_clocks_setting"}
# The reasons that mean a fault: heat, a hardware slowdown or power brake. The power cap
# (sw_power_cap) is not one: an H100 under a sustained load sits at its 700 W cap with
# that bit set and its SM clock at 1335-1380 of 1980 MHz, which is how it runs, not a
# fault. What moves a comparison there is the clock itself: a run whose SM clock moved
# by more than CLOCK_DRIFT between the two ends of its windows is reported.
SLOWDOWNS = ("hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown",
             "hw_power_brake_slowdown")
CLOCK_DRIFT = 0.10
_STATE_FIELDS = ["index", "uuid", "clocks.sm", "clocks.mem", "clocks.max.sm", "clocks.max.mem",
                 "power.draw", "power.limit", "temperature.gpu", "persistence_mode"]
# Renamed in driver R535; older drivers know only the first name.
_REASON_FIELDS = ("clocks_event_reasons.active", "clocks_throttle_reasons.active")


def throttle_reasons(mask: int | None) -> list[str]:
    """Names of the bits set in a clocks-event-reasons mask."""
    if mask is None:
        return []
    return [name for bit, name in THROTTLE_BITS.items() if mask & bit]


def gpu_state(timeout_s: float = _SMI_TIMEOUT_S,
              ids: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """Per physical GPU, now: clocks (SM, memory, and their maxima, MHz), power draw and
    limit (W), temperature (C), persistence mode and active throttle reasons.

    ``ids``: only these GPUs (``smi_ids``: a run's own cards); None: every GPU of the
    host. Empty without nvidia-smi. Sample it at the start and at the end of the
    measured windows: a run whose GPU slowed down (``throttle_findings``) is not
    comparable.
    """
    rows: list[dict[str, str | None]] = []
    reason_field = _REASON_FIELDS[0]
    for reason_field in _REASON_FIELDS:
        rows = _query([*_STATE_FIELDS, reason_field], timeout_s, ids)
        if rows:
            break
    states = []
    for r in rows:
        raw = r.get(reason_field)
        try:
            mask = int(raw, 16) if raw else None
        except ValueError:
            mask = None
        states.append({
            "index": parse_int(r.get("index")), "uuid": r.get("uuid"),
            "sm_clock_mhz": parse_int(r.get("clocks.sm")),
            "mem_clock_mhz": parse_int(r.get("clocks.mem")),
            "sm_clock_max_mhz": parse_int(r.get("clocks.max.sm")),
            "mem_clock_max_mhz": parse_int(r.get("clocks.max.mem")),
            "power_draw_w": parse_float(r.get("power.draw")),
            "power_limit_w": parse_float(r.get("power.limit")),
            "temperature_c": parse_int(r.get("temperature.gpu")),
            "persistence_mode": r.get("persistence_mode"),
            "throttle_mask": raw, "throttle_reasons": throttle_reasons(mask)})
    return states


def throttle_findings(start: list[dict[str, Any]], end: list[dict[str, Any]],
                      during: list[dict[str, Any]] | None = None) -> list[str]:
    """One line per GPU slowed down by a fault (``SLOWDOWNS``) at either end or in the
    samples ``during`` the windows, or whose SM clock moved by more than
    ``CLOCK_DRIFT`` over them (empty: none).

    For a verdict: such a run measured another GPU than the one named in its
    fingerprint. A GPU at its power cap with a steady clock is not one.
    """
    findings = []
    for when, states in (("start", start), ("end", end)):
        for st in states:
            slow = [r for r in st.get("throttle_reasons") or [] if r in SLOWDOWNS]
            if slow:
                clock = (f"; SM clock {st.get('sm_clock_mhz')} of "
                         f"{st.get('sm_clock_max_mhz')} MHz" if st.get("sm_clock_mhz") else "")
                findings.append(f"GPU {st.get('index')} at the {when} of the windows: "
                                f"{', '.join(slow)}{clock}")
    for d in during or []:
        slow = [r for r in d.get("reasons") or [] if r in SLOWDOWNS]
        if slow:
            findings.append(f"GPU {d.get('index')} during the windows: {', '.join(slow)} "
                            f"in {d.get('samples')} samples")
        # Against the median: a card boosting for the first second and settling at its
        # power cap has a high first sample, not a fall.
        low = d.get("sm_clock_min_mhz")
        typical = d.get("sm_clock_median_mhz") or d.get("sm_clock_mean_mhz")
        if low and typical and 1.0 - low / typical > CLOCK_DRIFT:
            findings.append(f"GPU {d.get('index')}: SM clock fell to {low} MHz during the "
                            f"windows (median {typical:.0f} MHz over {d.get('samples')} "
                            f"samples)")
    # Samples taken during the windows say how the clock went; the two ends alone would
    # also catch a GPU boosting at the first window and settling at its power cap.
    sampled = {d.get("index") for d in during or [] if d.get("sm_clock_mean_mhz")}
    before = {st.get("index"): st for st in start}
    for st in end:
        if st.get("index") in sampled:
            continue
        first = before.get(st.get("index"))
        a, b = (first or {}).get("sm_clock_mhz"), st.get("sm_clock_mhz")
        if a and b and abs(b / a - 1.0) > CLOCK_DRIFT:
            why = ", ".join(st.get("throttle_reasons") or []) or "no reason given"
            findings.append(f"GPU {st.get('index')}: SM clock moved from {a} to {b} MHz "
                            f"during the windows ({why})")
    return findings


def sustained_clock(gpu_state_entry: dict[str, Any]) -> float | None:
    """The mean SM clock (MHz) a run's windows ran at, over its GPUs: the samples
    taken during the windows where there are any, else the mean of both ends."""
    during = gpu_state_entry.get("during") or []
    means = [d["sm_clock_mean_mhz"] for d in during if d.get("sm_clock_mean_mhz")]
    if not means:
        ends = (gpu_state_entry.get("start") or []) + (gpu_state_entry.get("end") or [])
        means = [st["sm_clock_mhz"] for st in ends if st.get("sm_clock_mhz")]
    return sum(means) / len(means) if means else None


def clock_mismatch(clocks: dict[str, float]) -> str | None:
    """A line when the sustained SM clocks of runs being compared (label -> MHz)
    differ by more than ``CLOCK_DRIFT``: their figures are of GPUs running at
    different speeds, whatever the fingerprint says. None when they agree."""
    if len(clocks) < 2:
        return None
    low, high = min(clocks.items(), key=lambda kv: kv[1]), max(clocks.items(),
                                                               key=lambda kv: kv[1])
    if high[1] / low[1] - 1.0 <= CLOCK_DRIFT:
        return None
    return (f"the GPUs ran at different clocks: {high[0]} at {high[1]:.0f} MHz, "
            f"{low[0]} at {low[1]:.0f} MHz (more than {CLOCK_DRIFT:.0%} apart)")


def summarise_samples(samples: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Per GPU, from ``gpu_state`` samples taken during the windows: how many, how many
    found it idle, the SM clock's mean and minimum and power's mean and maximum over the
    busy ones, and every reason seen.

    An idle GPU (``gpu_idle``: between steps of a host-bound run, or before its first
    kernel) drops to its idle clock, 345 MHz on the H100: that is no slowdown of the
    work, so such samples stay out of the clock and power figures.
    """
    by_gpu: dict[Any, list[dict[str, Any]]] = {}
    for sample in samples:
        for st in sample:
            by_gpu.setdefault(st.get("index"), []).append(st)
    out = []
    for index, states in sorted(by_gpu.items(), key=lambda kv: str(kv[0])):
        busy = [st for st in states if "gpu_idle" not in (st.get("throttle_reasons") or [])]
        clocks = [st["sm_clock_mhz"] for st in busy if st.get("sm_clock_mhz")]
        power = [st["power_draw_w"] for st in busy if st.get("power_draw_w") is not None]
        reasons = sorted({r for st in states for r in st.get("throttle_reasons") or []})
        out.append({"index": index, "samples": len(states),
                    "idle_samples": len(states) - len(busy),
                    "sm_clock_mean_mhz": sum(clocks) / len(clocks) if clocks else None,
                    "sm_clock_median_mhz": statistics.median(clocks) if clocks else None,
                    "sm_clock_min_mhz": min(clocks) if clocks else None,
                    "power_mean_w": sum(power) / len(power) if power else None,
                    "power_max_w": max(power) if power else None, "reasons": reasons})
    return out


def topology(timeout_s: float = _SMI_TIMEOUT_S) -> str | None:
    """``nvidia-smi topo -m``: how the GPUs are linked (NVLink, PCIe switch, CPU)."""
    out = _smi(["topo", "-m"], timeout_s)
    # nvidia-smi underlines the header with terminal escapes even into a pipe.
    return _ANSI.sub("", out).rstrip() if out else None


_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
# How two GPUs are linked in ``topo -m``, fastest first: NV<n> (n bonded NVLinks), then
# PCIe through at most one bridge (PIX), several (PXB), a host bridge (PHB), a NUMA
# node's interconnect (NODE) or the CPUs' (SYS).
LINK_KINDS = ("NV", "PIX", "PXB", "PHB", "NODE", "SYS")


def topology_links(text: str | None) -> list[dict[str, str]]:
    """Every pair of GPUs in ``topo -m``'s matrix and its link (``NV12``, ``PHB``...),
    once per pair; empty for one GPU or no matrix. Escapes and NIC rows are ignored."""
    if not text:
        return []
    lines = [ln for ln in _ANSI.sub("", text).splitlines() if ln.strip()]
    header = next((ln.split("\t") for ln in lines if ln.startswith("\t")), None)
    if header is None:
        return []
    gpus = [h.strip() for h in header if re.fullmatch(r"GPU\d+", h.strip())]
    links = []
    for ln in lines:
        cells = [c.strip() for c in ln.split("\t")]
        if not cells or cells[0] not in gpus:
            continue
        row = gpus.index(cells[0])
        for j, other in enumerate(gpus):
            link = cells[1 + j] if 1 + j < len(cells) else ""
            if j > row and link and link != "X" and \
                    any(link.startswith(k) for k in LINK_KINDS):
                links.append({"a": cells[0], "b": other, "link": link})
    return links
_NCCL_DISTS = ("nvidia-nccl-cu13", "nvidia-nccl-cu12", "nvidia-nccl-cu11")
_NCCL_LIB = re.compile(r"^libnccl\.so\.(\d+\.\d+\.\d+)$")
_NCCL_DIRS = ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64",
              "/usr/local/cuda/lib64", "/usr/local/nccl/lib")


# `ldconfig -p` only reads the loader's cache file: it answers in milliseconds.
_LDCONFIG_TIMEOUT_S = 2.0
# ldconfig lives in sbin, which a user's PATH often lacks.
_LDCONFIG_PATHS = ("/sbin/ldconfig", "/usr/sbin/ldconfig")
# "\tlibnccl.so.2 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libnccl.so.2"
_LD_CACHE_LINE = re.compile(r"^\s*(\S+)\s+\(.*\)\s+=>\s+(\S+)\s*$")


def ld_cache_dirs(prefix: str = "libnccl.so",
                  timeout_s: float = _LDCONFIG_TIMEOUT_S) -> list[str]:
    """Directories holding the libraries named ``prefix*`` in the dynamic loader's cache
    (``ldconfig -p``), each entry's own and its resolved target's. Empty without
    ldconfig, or when it fails or does not answer in ``timeout_s``."""
    exe = shutil.which("ldconfig") or next(
        (p for p in _LDCONFIG_PATHS if os.access(p, os.X_OK)), None)
    if exe is None:
        return []
    try:
        out = subprocess.run([exe, "-p"], capture_output=True, text=True, timeout=timeout_s,
                             check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    dirs: list[str] = []
    for line in out.splitlines():
        m = _LD_CACHE_LINE.match(line)
        if m and m.group(1).startswith(prefix):
            # The cache names the soname (libnccl.so.2), a link to the versioned file.
            path = m.group(2)
            dirs += [os.path.dirname(path), os.path.dirname(os.path.realpath(path))]
    return list(dict.fromkeys(dirs))


def nccl_version(dists: tuple[str, ...] = _NCCL_DISTS,
                 dirs: list[str] | None = None) -> dict[str, str] | None:
    """The NCCL TensorFlow would load, without loading it: the pip wheel that
    ``tensorflow[and-cuda]`` installs, else the newest ``libnccl.so.X.Y.Z`` in ``dirs``
    (default: LD_LIBRARY_PATH, the wheels' directories, the usual system ones and those
    of the loader's cache). None when there is none."""
    for dist in dists:
        try:
            return {"version": importlib.metadata.version(dist), "source": f"pip {dist}"}
        except importlib.metadata.PackageNotFoundError:
            continue
    if dirs is None:
        dirs = [*os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep),
                *(os.path.join(p, "nvidia", "nccl", "lib") for p in sys.path if p),
                *_NCCL_DIRS, *ld_cache_dirs()]
    found: list[tuple[tuple[int, ...], str, str]] = []
    for d in dict.fromkeys(d for d in dirs if d):
        try:
            names = os.listdir(d)
        except OSError:
            continue
        for name in names:
            if m := _NCCL_LIB.match(name):
                found.append((tuple(int(x) for x in m.group(1).split(".")), m.group(1),
                              os.path.join(d, name)))
    if not found:
        return None
    _, version, path = max(found)
    return {"version": version, "source": path}


def gpu_fingerprint(timeout_s: float = _SMI_TIMEOUT_S,
                    ids: Sequence[str] | None = None) -> dict[str, Any]:
    """The GPU part of a run's fingerprint: NCCL version, ``nvidia-smi topo -m`` and
    the state now of the GPUs ``ids`` (None: every GPU; call again at the end of the
    windows for the second sample). Empty on a machine without nvidia-smi, so CPU
    fingerprints are unchanged."""
    if not nvidia_gpus(timeout_s):
        return {}
    topo = topology(timeout_s)
    return {"nccl": nccl_version(), "topology": topo, "links": topology_links(topo),
            "gpu_state": gpu_state(timeout_s, ids)}


# Inside a run every nvidia-smi call is on the clock: a healthy driver answers in well
# under a second, so a few seconds is generous and a broken one costs little.
RUN_SMI_TIMEOUT_S = 5.0
# GPU state sampled during the windows: every SAMPLE_EVERY_S, at most MAX_SAMPLES (an
# hour of windows), each call bounded as every other.
SAMPLE_EVERY_S = 1.0
MAX_SAMPLES = 3600
# Calls per fingerprint (devices, topology, state with either reason field), for the
# backstop below.
_CALLS_PER_FINGERPRINT = 4


def _bounded(fn: Callable[[], Any], deadline_s: float) -> tuple[bool, Any]:
    """``(True, fn())``, or ``(False, None)`` if it has not returned in ``deadline_s``.

    subprocess's own timeout kills nvidia-smi, then waits for it: a process stuck in
    the kernel on a broken driver never ends, so that wait would hang the run. The
    call runs in a daemon thread instead and is abandoned when late (the child exits
    with os._exit, which does not wait for it)."""
    box: list[Any] = []
    thread = threading.Thread(target=lambda: box.append(fn()), daemon=True,
                              name="nvidia-smi")
    thread.start()
    thread.join(deadline_s)
    return (True, box[0]) if box else (False, None)


# NVML's enums as nvidia-ml-py defines them (read from the module where it has them).
_NVML_ENUMS = {"NVML_CLOCK_SM": 1, "NVML_CLOCK_MEM": 2, "NVML_TEMPERATURE_GPU": 0}


def nvml_module() -> Any:
    """``pynvml`` (nvidia-ml-py, the gpu extra; ImportError where it is not installed),
    or the simulated server's NVML (``bench.sim``)."""
    simulated = sim.active()
    if simulated is not None:
        return sim.SimNvml(simulated)
    return importlib.import_module("pynvml")


def _nvml_enum(nvml: Any, name: str) -> int:
    return int(getattr(nvml, name, _NVML_ENUMS[name]))


def nvml_state(nvml: Any, handles: Sequence[Any]) -> list[dict[str, Any]]:
    """``gpu_state``'s dicts read in-process through NVML (``nvml``: the ``pynvml``
    module of nvidia-ml-py, or a fake), one per handle: no process started, so a
    sample costs microseconds, not nvidia-smi's tens of milliseconds of a core. A
    field NVML does not give on this card is None, as nvidia-smi's [N/A]."""
    def get(h: Any, name: str, *args: Any) -> Any:
        fn = getattr(nvml, name, None)
        if fn is None:
            return None
        try:
            return fn(h, *args)
        except Exception:  # NVML_ERROR_NOT_SUPPORTED and the like: no such field here
            return None

    sm, mem = _nvml_enum(nvml, "NVML_CLOCK_SM"), _nvml_enum(nvml, "NVML_CLOCK_MEM")
    states = []
    for h in handles:
        # Renamed in R535 as nvidia-smi's field was; older bindings know the first name.
        mask = get(h, "nvmlDeviceGetCurrentClocksEventReasons")
        if mask is None:
            mask = get(h, "nvmlDeviceGetCurrentClocksThrottleReasons")
        uuid = get(h, "nvmlDeviceGetUUID")
        power, limit = get(h, "nvmlDeviceGetPowerUsage"), \
            get(h, "nvmlDeviceGetPowerManagementLimit")
        persistence = get(h, "nvmlDeviceGetPersistenceMode")
        # Every process's use of the card as the driver counts it: the allocator's pool
        # and what no allocator sees (the CUDA context, cuDNN's and cuBLAS's workspaces,
        # NCCL's buffers), which a multi-GPU run holds more of than one card alone.
        procs = get(h, "nvmlDeviceGetComputeRunningProcesses")
        used = [getattr(x, "usedGpuMemory", None) for x in procs or []]
        states.append({
            "index": get(h, "nvmlDeviceGetIndex"),
            "uuid": uuid.decode() if isinstance(uuid, bytes) else uuid,
            "sm_clock_mhz": get(h, "nvmlDeviceGetClockInfo", sm),
            "mem_clock_mhz": get(h, "nvmlDeviceGetClockInfo", mem),
            "sm_clock_max_mhz": get(h, "nvmlDeviceGetMaxClockInfo", sm),
            "mem_clock_max_mhz": get(h, "nvmlDeviceGetMaxClockInfo", mem),
            "power_draw_w": power / 1000.0 if power is not None else None,  # mW
            "power_limit_w": limit / 1000.0 if limit is not None else None,
            "temperature_c": get(h, "nvmlDeviceGetTemperature",
                                 _nvml_enum(nvml, "NVML_TEMPERATURE_GPU")),
            "persistence_mode": None if persistence is None else
            ("Enabled" if persistence else "Disabled"),
            "throttle_mask": f"0x{mask:016x}" if mask is not None else None,
            "throttle_reasons": throttle_reasons(mask),
            "processes": len(used) if procs is not None else None,
            "process_memory_bytes": sum(u for u in used if isinstance(u, int))
            if procs is not None else None})
    return states


@dataclass(frozen=True)
class StateReader:
    """Where a run's GPU state comes from: ``source`` (``nvml`` or ``nvidia-smi``),
    ``read(timeout_s)`` (one state per card) and ``calls``, the nvidia-smi calls a
    read may take (its deadline is that many timeouts)."""

    source: str
    read: Callable[[float], list[dict[str, Any]]]
    calls: int = 1


def _nvml_reader(cards: Sequence[str], nvml: Any) -> StateReader | None:
    """NVML in this process, where nvidia-ml-py is installed and the driver answers."""
    if nvml is False:
        return None
    if nvml is None:
        try:
            nvml = nvml_module()
        except ImportError:
            return None
    try:
        nvml.nvmlInit()
        if cards:
            handles = [nvml.nvmlDeviceGetHandleByIndex(int(c)) if c.isdigit()
                       else nvml.nvmlDeviceGetHandleByUUID(c) for c in cards]
        else:
            handles = [nvml.nvmlDeviceGetHandleByIndex(i)
                       for i in range(nvml.nvmlDeviceGetCount())]
    except Exception:  # no driver, a card NVML does not know: nvidia-smi then
        return None
    return StateReader("nvml", lambda _timeout_s: nvml_state(nvml, handles))


def _smi_reader(cards: Sequence[str], nvml: Any) -> StateReader | None:
    """One nvidia-smi call naming only the run's cards (``--id``)."""
    ids = list(cards) or None
    return StateReader("nvidia-smi", lambda timeout_s: gpu_state(timeout_s, ids),
                       len(_REASON_FIELDS))


# The readers in order of preference: the first that can read the cards samples them.
STATE_READERS: tuple[Callable[[Sequence[str], Any], StateReader | None], ...] = (
    _nvml_reader, _smi_reader)


def state_reader(cards: Sequence[str], nvml: Any = None) -> StateReader:
    """The first of ``STATE_READERS`` that can read ``cards`` (empty: every GPU)."""
    for make in STATE_READERS:
        reader = make(cards, nvml)
        if reader is not None:
            return reader
    raise AssertionError("nvidia-smi's reader always answers")  # pragma: no cover


@dataclass
class GpuRun:
    """The GPU part of one run's environment, sampled by the process that measures.

    ``begin()`` once devices are set up (``gpu_fingerprint``: NCCL, topology, state),
    ``at_start()`` just before the measured windows and ``at_end()`` just after them;
    ``environment()`` gives the entries to add to the run's environment: ``gpu`` and
    ``gpu_state`` (``{"start": [...], "end": [...]}``, one dict per GPU as
    ``gpu_state`` returns, for ``throttle_findings``).

    ``cards``: the physical GPUs the run trains on (``run_cards``), the only ones read:
    on an 8-GPU server a 1-GPU run's clocks are its card's. None: every GPU of the host
    (``scripts.gpu_readings``). A process that sees none (the parameter-server
    coordinator) still reads the cards its workers train on: nvidia-smi and NVML see
    every GPU whatever CUDA_VISIBLE_DEVICES says. ``sample``: False in a run's other
    processes, so that one sampler per run reads the cards (eight workers used to run
    nvidia-smi eight times a second over every GPU). The sampler reads through NVML
    in-process where nvidia-ml-py and the driver answer (``nvml``: a module, a fake,
    or False for never), else one nvidia-smi call naming the cards.

    Nothing without nvidia-smi (no entries at all: CPU results are unchanged). Every
    call is bounded; once one does not answer, later samples are skipped and the
    environment says why.
    """

    timeout_s: float = RUN_SMI_TIMEOUT_S
    fingerprint: dict[str, Any] = field(default_factory=dict)
    start: list[dict[str, Any]] | None = None
    end: list[dict[str, Any]] | None = None
    problem: str | None = None
    every_s: float = SAMPLE_EVERY_S
    samples: list[list[dict[str, Any]]] = field(default_factory=list)
    cards: tuple[str, ...] | None = None
    sample: bool = True
    nvml: Any = None
    reader: StateReader | None = None
    # When each sample was taken (epoch seconds, the middle of its read): the arms of
    # one process take the samples that fell inside their own windows.
    sample_ts: list[float] = field(default_factory=list)
    start_ts: float | None = None
    end_ts: float | None = None
    _stop: threading.Event = field(default_factory=threading.Event)
    _sampler: threading.Thread | None = None

    def _call(self, fn: Callable[[], Any], calls: int) -> Any:
        if self.problem is not None:
            return None
        deadline = self.timeout_s * calls + 1.0
        done, value = _bounded(fn, deadline)
        if not done:
            self.problem = (f"nvidia-smi did not answer within {deadline:.0f} s; later GPU "
                            f"samples were skipped")
        return value

    def begin(self) -> None:
        """The fingerprint: empty (and every later sample skipped) without a GPU, or
        in a process that does not ``sample``."""
        if not self.sample or not smi_present():
            return  # the common CPU case, and a run's other processes: no thread at all
        ids = list(self.cards or ()) or None
        self.fingerprint = self._call(lambda: gpu_fingerprint(self.timeout_s, ids),
                                      _CALLS_PER_FINGERPRINT) or {}
        if self.fingerprint:
            self.reader = self._call(lambda: state_reader(self.cards or (), self.nvml),
                                     _CALLS_PER_FINGERPRINT)

    def _read(self) -> list[dict[str, Any]] | None:
        reader = self.reader
        if reader is None:
            return None
        return self._call(lambda: reader.read(self.timeout_s), reader.calls)

    def at_start(self) -> None:
        """Sample the state as the measured windows begin, then every ``every_s``
        until ``at_end`` (at most ``MAX_SAMPLES``), in a thread of its own."""
        if self.fingerprint and self.reader is not None:
            self.start_ts = time.time()
            self.start = self._read()
            if self.problem is None:
                self._sampler = threading.Thread(target=self._sample, daemon=True,
                                                 name="gpu-sampler")
                self._sampler.start()

    def _sample(self) -> None:
        # nvidia-smi takes a core for tens of ms a call: once a second is a small,
        # steady share beside a GPU run, and clocks and power move more slowly.
        while not self._stop.wait(self.every_s) and len(self.samples) < MAX_SAMPLES:
            if not self.sample_once():
                return  # a driver that stopped answering: the samples so far stand

    def sample_once(self) -> bool:
        """Take one sample now, stamped with the middle of its read; False once the
        reader did not answer within its bound."""
        reader = self.reader
        assert reader is not None
        t0 = time.time()
        done, state = _bounded(lambda: reader.read(self.timeout_s),
                               self.timeout_s * reader.calls + 1.0)
        if not done:
            return False
        if state:
            self.samples.append(state)
            self.sample_ts.append((t0 + time.time()) / 2)
        return True

    def at_end(self) -> None:
        """Sample the state as the measured windows end (the sampler stops first)."""
        if self._sampler is not None:
            self._stop.set()
            self._sampler.join(self.timeout_s * len(_REASON_FIELDS) + 2.0)
        if self.fingerprint and self.reader is not None:
            self.end = self._read()
            self.end_ts = time.time()

    def environment(self) -> dict[str, Any]:
        """``{"gpu": ..., "gpu_state": {"start": ..., "end": ...}}``, or {} without GPUs.

        ``gpu_state`` only once a sample was taken (or failed): a run without measured
        windows (the all-reduce probe) has the fingerprint alone."""
        return self._entries(self.samples, None)

    def environment_over(self, windows: Sequence[tuple[float | None, float | None]],
                         cards: Sequence[str] | None = None) -> dict[str, Any]:
        """``environment()`` of one arm of a shared process: ``during`` from the samples
        taken inside its ``windows`` ((start, end) epoch seconds; a window without
        either holds none) only, and every entry of its own ``cards`` only (UUIDs or
        indices; None: all read)."""
        spans = [(a, b) for a, b in windows if a is not None and b is not None]
        inside = [s for s, t in zip(self.samples, self.sample_ts, strict=True)
                  if any(a <= t <= b for a, b in spans)]
        return self._entries(inside, cards)

    def _entries(self, samples: list[list[dict[str, Any]]],
                 cards: Sequence[str] | None) -> dict[str, Any]:
        if not self.fingerprint and self.problem is None:
            return {}

        def own(states: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
            if cards is None:
                return list(states or [])
            return [st for st in states or [] if st.get("uuid") in cards
                    or str(st.get("index")) in cards]

        fingerprint = dict(self.fingerprint)
        if cards is not None and "gpu_state" in fingerprint:
            fingerprint["gpu_state"] = own(fingerprint["gpu_state"])
        out: dict[str, Any] = {"gpu": fingerprint}
        if self.start is not None or self.end is not None or self.problem is not None:
            out["gpu_state"] = {"start": own(self.start), "end": own(self.end),
                                "during": summarise_samples([own(s) for s in samples])}
            if self.reader is not None:
                out["gpu_state"]["source"] = self.reader.source
            if self.problem is not None:
                out["gpu_state"]["problem"] = self.problem
        return out


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
