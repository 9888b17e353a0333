"""Peak FLOP/s of one device per dtype: the theoretical one and the achievable one.

MFU needs "the hardware limit". Two are recorded, and results say which MFU uses which:

- **theoretical**: what the hardware could do at best. CPU: physical cores this
  process may use x clock x FLOPs per cycle of the core's vector units for the dtype
  (``cpu_flops_per_cycle``: from the /proc/cpuinfo flags and vendor); GPU: the
  datasheet figure of the model and dtype (``GPU_MODELS``). Unknown where the
  inputs are (an unlisted GPU, a CPU without a recognised vector unit). With the
  maximum clock (cpufreq's ``cpuinfo_max_freq``, lscpu's "CPU max MHz", or the
  highest boost clock of the CPU's line, ``LINE_BOOST``) it is an upper bound
  (``Theoretical.bound``): a measured figure above it is a probe error, reported as
  one (``probe_errors``). A base or current clock (a model name's "@ x GHz", "cpu
  MHz") is no bound: a theoretical peak below the measured one is then recorded as
  such and not used for MFU.
- **achievable**: measured with work that saturates the device, so that no run can
  beat it honestly: chained square matmuls inside one compiled function (a loop of
  ``k`` dependent matmuls, synchronised once per call by fetching one element),
  ``k`` sized so that a call lasts ``MIN_CALL_S`` and the launch and fetch latency
  do not count, at several sizes; the best rate wins. (A per-call probe of single
  matmuls, synchronised every call, read half of what training reached here.) It is
  measured when the machine is quiet: /proc/stat's times before (``QUIET_SAMPLE_S``
  idle) and during each measurement say how much of the cores others and the
  hypervisor took (``bench.hardware.activity``); a measurement that was not quiet is
  taken again, up to ``MAX_MEASUREMENTS``, and the best of ``QUIET_MEASUREMENTS``
  quiet ones is kept (the best of all, marked not quiet, when none was).

Achievable figures are measured by each lane (TensorFlow's: bench.child.backends.tf.peak;
JAX's: bench.child.backends.jax.peak) and cached per machine, framework version, device
kind, intra-op threads, usable cores and method in a JSON file ($STRATBENCH_CACHE_DIR, else
~/.cache/stratbench), per dtype, measured the first time a dtype is needed. The probe
runs on one device; logical CPU devices share the same cores, so a CPU's peak counts
once however many logical devices a run uses.

A run whose achieved FLOP/s exceed the achievable peak has it re-measured
(``settle_mfu``); if it still reads low, the run stores no MFU and says why in its
reason. MFU above 100% is therefore never stored.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import math
import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bench.files import cache_dir, replace_whole
from bench.gpu_build import PEAK_CACHE_FILE
from bench.hardware import (  # the GPU datasheet table lives there: the sweep prices from it
    gpu_model,
    parse_float,
    parse_int,
)

# Which dtype's peak bounds a run of each precision (the dtype of its matmuls).
PRECISION_DTYPE = {"float32": "float32", "mixed_bfloat16": "bfloat16",
                   "mixed_float16": "float16"}
DTYPES = ("float32", "bfloat16", "float16")
# Square matmul sizes per device kind. GPUs get large ones: a 2048^2 matmul takes
# ~0.1 ms on a large GPU, where the launch would still show.
SIZES = {"CPU": (512, 1024, 2048), "GPU": (2048, 4096, 8192)}
MIN_CALL_S = 0.2  # a timed call lasts at least this long: fixed latencies vanish
CALLS_PER_SIZE = 3  # best of
MAX_CHAIN = 4096
SLOW_SINGLE_S = 1.0  # a single matmul slower than this: larger sizes are not tried
LSCPU_TIMEOUT_S = 2.0  # lscpu reads /proc and /sys: it answers in milliseconds
QUIET_SAMPLE_S = 0.5  # idle before each measurement, to see who else uses the cores
QUIET_MEASUREMENTS = 2  # quiet measurements to keep the best of
MAX_MEASUREMENTS = 4  # then the best of what there is, marked not quiet
METHOD_VERSION = "chained-matmul-1"
CACHE_FILE = PEAK_CACHE_FILE  # its keys: bench.gpu_build.peak_cached reads them too
# How long a process waits for another one measuring a peak before measuring itself
# (a measurement takes seconds; one stuck past this is not waited on forever).
MEASURING_WAIT_S = 120.0
MEASURING_POLL_S = 0.1


def method_text(device: str, sizes: Iterable[int]) -> str:
    return (f"achievable: chained square matmuls (n = {', '.join(str(n) for n in sizes)}) "
            f"on {device}, each call one tf.function looping k dependent n x n matmuls "
            f"(k sized for >= {MIN_CALL_S:g} s per call) synchronised once by fetching one "
            f"element; best of {CALLS_PER_SIZE} calls per size, best size wins; "
            f"2 n^3 FLOPs per matmul")


# -- theoretical peak (pure: no TensorFlow) ---------------------------------------------
@dataclass(frozen=True)
class CpuInfo:
    """What the theoretical CPU peak needs from /proc/cpuinfo (and the affinity)."""

    vendor: str
    family: int | None
    model: int | None
    model_name: str
    flags: frozenset[str]
    physical_cores: int  # distinct (package, core) among the usable processors
    mhz: float | None  # "cpu MHz" of the first usable processor (often nominal)


def parse_cpuinfo(text: str, usable: Iterable[int] | None = None) -> CpuInfo:
    """Parse /proc/cpuinfo text; ``usable`` limits it to those processor numbers."""
    blocks = [b for b in re.split(r"\n\s*\n", text.strip()) if b.strip()]
    procs: list[dict[str, str]] = []
    for block in blocks:
        entry: dict[str, str] = {}
        for line in block.splitlines():
            key, sep, value = line.partition(":")
            if sep:
                entry[key.strip()] = value.strip()
        if entry:
            procs.append(entry)
    wanted = set(usable) if usable is not None else None
    chosen = [p for p in procs if wanted is None
              or parse_int(p.get("processor")) in wanted] or procs
    first = chosen[0] if chosen else {}
    cores = {(p.get("physical id", "0"), p.get("core id", p.get("processor", str(i))))
             for i, p in enumerate(chosen)}
    flags = first.get("flags", first.get("Features", ""))
    return CpuInfo(vendor=first.get("vendor_id", ""),
                   family=parse_int(first.get("cpu family")),
                   model=parse_int(first.get("model")), model_name=first.get("model name", ""),
                   flags=frozenset(flags.split()), physical_cores=max(1, len(cores)),
                   mhz=parse_float(first.get("cpu MHz")))


def cpu_flops_per_cycle(info: CpuInfo) -> dict[str, tuple[float, str]]:
    """FLOPs per cycle per core for each dtype, with the reason, from vendor and flags.

    The table follows the vendors' optimisation manuals (Intel 64 and IA-32
    Architectures Optimization Reference Manual: two 256-bit FMA ports since Haswell,
    two 512-bit on server cores with AVX-512, AMX-BF16 at 1024 FLOPs per cycle per
    core; AMD's Software Optimization Guides for families 17h and 19h: two 256-bit FMA
    pipes from Zen 2, two 128-bit on Zen 1, AVX-512 on 256-bit pipes on Zen 4). Two
    FMA pipes are assumed (an FMA = 2 FLOPs per lane), the widest configuration of
    these cores: the theoretical peak is an upper bound. AMD Zen 4 executes 512-bit
    instructions on 256-bit pipes, so AVX-512 does not double its rate there. A dtype
    without its own instructions is converted to float32 by the math library and is
    bounded by the float32 rate.
    """
    f = info.flags
    amd = info.vendor == "AuthenticAMD"
    out: dict[str, tuple[float, str]] = {}
    if "avx512f" in f and not (amd and (info.family or 0) < 0x1A):
        out["float32"] = (64.0, "AVX-512: 2 FMA pipes x 16 float32 lanes x 2")
    elif "avx512f" in f:
        out["float32"] = (32.0, "AVX-512 on 256-bit pipes (AMD Zen 4): 2 FMA pipes x 8 "
                                "float32 lanes x 2")
    elif "avx2" in f and "fma" in f:
        if amd and info.family == 0x17 and (info.model or 0) < 0x30:
            out["float32"] = (16.0, "AVX2 on 128-bit pipes (AMD Zen 1): 2 FMA pipes x 4 "
                                    "float32 lanes x 2")
        else:
            out["float32"] = (32.0, "AVX2+FMA: 2 FMA pipes x 8 float32 lanes x 2")
    elif "avx" in f:
        out["float32"] = (16.0, "AVX without FMA: 8-lane add + 8-lane multiply per cycle")
    elif "sse2" in f:
        out["float32"] = (8.0, "SSE2: 4-lane add + 4-lane multiply per cycle")
    elif "asimd" in f:
        out["float32"] = (16.0, "NEON: 2 FMA pipes x 4 float32 lanes x 2")
    else:
        return out
    fp32, _ = out["float32"]
    if "amx_bf16" in f:
        out["bfloat16"] = (1024.0, "AMX-BF16 tile unit: 1024 FLOPs per cycle")
    elif "avx512_bf16" in f:
        out["bfloat16"] = (2 * fp32, "AVX512_BF16 dot products: 2 bfloat16 products per "
                                     "float32 lane, twice the float32 rate")
    else:
        out["bfloat16"] = (fp32, "no bfloat16 instructions: converted, float32 rate")
    if "amx_fp16" in f:
        out["float16"] = (1024.0, "AMX-FP16 tile unit: 1024 FLOPs per cycle")
    elif "avx512_fp16" in f:
        out["float16"] = (2 * fp32, "AVX512-FP16: 32 float16 lanes, twice the float32 rate")
    else:
        out["float16"] = (fp32, "no float16 arithmetic: converted, float32 rate")
    return out


@dataclass(frozen=True)
class LineBoost:
    """The highest boost clock of any model of one CPU line: an upper bound for every
    machine of the line, for one that hides its own clock (a VM)."""

    vendor: str
    family: int
    models: frozenset[int]
    name_has: str  # a word the model name must contain (the server line, not a desktop)
    ghz: float
    source: str


# Extend as machines are met; each entry says where its figure comes from.
LINE_BOOST: tuple[LineBoost, ...] = (
    LineBoost("AuthenticAMD", 0x17, frozenset({0x31}), "EPYC", 3.9,
              "EPYC 7002 (Rome, Zen 2): the 7F52 and 7F32 boost to 3.9 GHz, the line's "
              "highest (AMD's specifications)"),
    LineBoost("AuthenticAMD", 0x19, frozenset({0x01}), "EPYC", 4.1,
              "EPYC 7003 (Milan, Zen 3): the 72F3 boosts to 4.1 GHz, the line's highest "
              "(AMD's specifications)"),
)


def line_boost(info: CpuInfo) -> LineBoost | None:
    """The boost-clock entry of the CPU's line, or None for a line not in ``LINE_BOOST``."""
    return next((b for b in LINE_BOOST if b.vendor == info.vendor and b.family == info.family
                 and info.model in b.models and b.name_has in info.model_name), None)


@dataclass(frozen=True)
class Clock:
    """The clock a theoretical peak uses: ``maximum`` when it is the most the cores
    reach, so that the peak is an upper bound."""

    hz: float | None
    source: str
    maximum: bool


def lscpu_max_mhz(text: str) -> float | None:
    """``CPU max MHz`` from lscpu's output (None: not listed, as on most VMs)."""
    m = re.search(r"^CPU max MHz:\s*([\d.]+)", text, re.MULTILINE)
    return float(m.group(1)) if m else None


def cpu_max_clock_hz(info: CpuInfo, sysfs_khz: float | None,
                     lscpu_mhz: float | None = None) -> Clock:
    """The clock the theoretical peak uses, where it came from, and whether it is the
    maximum.

    The kernel's cpufreq maximum is the boost clock, and lscpu's "CPU max MHz" reads
    it; a VM shows neither, and then the highest boost clock of the CPU's line
    (``LINE_BOOST``) still bounds it. The "@ x GHz" of a model name is a base clock,
    and "cpu MHz" the current or nominal one: both can sit below what the cores reach
    under load, so neither is a bound.
    """
    if sysfs_khz:
        return Clock(sysfs_khz * 1e3, "cpufreq cpuinfo_max_freq (boost clock)", True)
    if lscpu_mhz:
        return Clock(lscpu_mhz * 1e6, "lscpu 'CPU max MHz' (boost clock)", True)
    boost = line_boost(info)
    if boost is not None:
        return Clock(boost.ghz * 1e9, f"highest boost clock of the line: {boost.source}", True)
    m = re.search(r"@\s*([\d.]+)\s*GHz", info.model_name)
    if m:
        return Clock(float(m.group(1)) * 1e9,
                     "model name '@ GHz' (base clock; boost may be higher)", False)
    if info.mhz:
        return Clock(info.mhz * 1e6, "/proc/cpuinfo 'cpu MHz' (current or nominal clock; "
                                     "boost may be higher)", False)
    return Clock(None, "no clock found", False)


@dataclass
class Theoretical:
    """A theoretical peak per dtype of the hardware one process may use, with its inputs."""

    flops_per_s: dict[str, float] = field(default_factory=dict)
    source: str = ""
    inputs: dict[str, Any] = field(default_factory=dict)
    # An upper bound (the maximum clock, a datasheet): a measured figure above it is a
    # probe error. A base or current clock is no bound.
    bound: bool = False
    # Dtypes without instructions of their own here (converted, at the float32 rate).
    emulated: frozenset[str] = frozenset()


def cpu_theoretical(info: CpuInfo, sysfs_khz: float | None = None,
                    lscpu_mhz: float | None = None) -> Theoretical:
    """cores x clock x FLOPs per cycle per dtype (empty when an input is unknown)."""
    clock = cpu_max_clock_hz(info, sysfs_khz, lscpu_mhz)
    per_cycle = cpu_flops_per_cycle(info)
    inputs: dict[str, Any] = {
        "cpu": info.model_name, "vendor": info.vendor, "family": info.family,
        "model": info.model, "physical_cores": info.physical_cores, "clock_hz": clock.hz,
        "clock_source": clock.source, "clock_is_maximum": clock.maximum,
        "flops_per_cycle": {d: {"value": v, "why": why} for d, (v, why) in per_cycle.items()}}
    emulated = frozenset(d for d, (_, why) in per_cycle.items() if why.startswith("no "))
    if clock.hz is None or not per_cycle:
        return Theoretical({}, "unknown: " + ("no clock" if clock.hz is None else
                                              "no recognised vector unit"), inputs,
                           emulated=emulated)
    table = {d: info.physical_cores * clock.hz * v for d, (v, _) in per_cycle.items()}
    return Theoretical(table, "cores x clock x FLOPs per cycle (/proc/cpuinfo)", inputs,
                       bound=clock.maximum, emulated=emulated)


def bound_of(theo: Theoretical, dtype: str) -> float | None:
    """The theoretical peak of ``dtype`` where it is an upper bound, else None."""
    return theo.flops_per_s.get(dtype) if theo.bound else None


def probe_errors(achievable: dict[str, float], theo: Theoretical) -> dict[str, str]:
    """Why a measured peak cannot be right, per dtype (empty: none found).

    Above the theoretical peak, where that is a bound (maximum clock, datasheet): the
    hardware cannot do it, so the probe measured wrong (its timing or its FLOP count).
    A converted dtype (no instructions of its own here) above the float32 rate: it
    runs on the float32 units, so one of the two figures is wrong (often float32
    measured on a busy machine).
    """
    out: dict[str, str] = {}
    for d, value in achievable.items():
        t = bound_of(theo, d)
        if t and value > t:
            out[d] = (f"probe error: measured {value / 1e9:,.1f} GFLOP/s {d}, above the "
                      f"theoretical maximum of this hardware ({t / 1e9:,.1f} GFLOP/s: "
                      f"{theo.source}, clock from {theo.inputs.get('clock_source', '-')}): "
                      f"the probe is wrong, not the hardware fast; not used for MFU")
    fp32 = achievable.get("float32")
    for d in sorted(theo.emulated & achievable.keys()):
        if fp32 and achievable[d] > fp32 and d not in out:
            out[d] = (f"probe error: {d} measured {achievable[d] / 1e9:,.1f} GFLOP/s, above "
                      f"float32's {fp32 / 1e9:,.1f} on a CPU without {d} instructions (it is "
                      f"converted and runs on the float32 units): one of the two figures is "
                      f"wrong; measure both again on a quiet machine")
    return out


def gpu_theoretical(name: str, tf32: bool = True) -> Theoretical:
    """The datasheet peaks of a GPU model at the run's float32 math mode (``tf32``:
    TensorFloat-32 enabled, TensorFlow's default); empty for a model not in the table."""
    model = gpu_model(name)
    if model is None:
        return Theoretical({}, f"unknown: {name!r} is not in the datasheet table",
                           {"gpu": name})
    mode = ("float32 at the TF32 tensor-core rate" if tf32 and model.tf32 else
            "float32 at the CUDA-core rate")
    return Theoretical(model.peaks(tf32), f"datasheet of {model.name} (dense; {mode})",
                       {"gpu": name, "model": model.name, "tf32": tf32}, bound=True)


def _sysfs_max_khz(cpus: Iterable[int]) -> float | None:
    best = None
    for c in cpus:
        with contextlib.suppress(OSError, ValueError):
            text = Path(f"/sys/devices/system/cpu/cpu{c}/cpufreq/cpuinfo_max_freq").read_text()
            best = max(best or 0.0, float(text))
    return best


def usable_cpus() -> list[int]:
    try:
        return sorted(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return list(range(os.cpu_count() or 1))


def theoretical_for(device: str, gpu_name: str | None = None, tf32: bool = True
                    ) -> Theoretical:
    """The theoretical peak of this process's first device (CPU: its usable cores; a
    GPU at the float32 math mode ``tf32``, see ``tf32_enabled``)."""
    if "gpu" in device.lower():
        return gpu_theoretical(gpu_name or "", tf32)
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        return Theoretical({}, f"unknown: /proc/cpuinfo unreadable ({exc})")
    cpus = usable_cpus()
    return cpu_theoretical(parse_cpuinfo(text, cpus), _sysfs_max_khz(cpus), _lscpu_max_mhz())


def _lscpu_max_mhz() -> float | None:
    exe = shutil.which("lscpu")
    if exe is None:
        return None
    try:
        out = subprocess.run([exe], capture_output=True, text=True, timeout=LSCPU_TIMEOUT_S,
                             check=True, env={**os.environ, "LC_ALL": "C"}).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return lscpu_max_mhz(out)


# -- achievable peak (measured by a lane: bench.child.backends.<lane>.peak; cached) -------
def cache_path() -> Path:
    return cache_dir() / CACHE_FILE


def device_kind(device: str) -> str:
    return "GPU" if "gpu" in device.lower() else "CPU"


def chain_length(rate_estimate: float, n: int, min_call_s: float = MIN_CALL_S,
                 cap: int = MAX_CHAIN) -> int:
    """Matmuls per call so that one call lasts ``min_call_s`` at ``rate_estimate``."""
    if rate_estimate <= 0 or not math.isfinite(rate_estimate):
        return 1
    return max(1, min(cap, math.ceil(min_call_s * rate_estimate / (2.0 * n**3))))


@dataclass
class DtypePeak:
    """The achievable peak of one dtype on one device, as cached."""

    flops_per_s: float
    by_size: dict[str, float]
    chain: dict[str, int]
    measured_at: float
    load_avg_1m: float | None  # for the record (see bench.hardware: not a quietness test)
    remeasured: int = 0  # times a run beat it and it was measured again
    # Every measurement's best rate in order, and whether the machine was quiet during
    # it (None: /proc not readable); the kept figure is the best of the quiet ones.
    measurements: list[float] = field(default_factory=list)
    quiet: list[bool | None] = field(default_factory=list)
    conditions: str = ""  # the same in words

    @property
    def measured_quiet(self) -> bool | None:
        """The kept figure was measured on a quiet machine (None: not checked)."""
        if not self.quiet:
            return None
        return any(self.quiet) if all(q is not None for q in self.quiet) else None


def _read_cache() -> dict[str, Any]:
    with contextlib.suppress(OSError, json.JSONDecodeError):
        data = json.loads(cache_path().read_text(encoding="utf-8"))
        if isinstance(data, dict):
            return data
    return {}


def cached(key: str, dtype: str) -> DtypePeak | None:
    raw = ((_read_cache().get(key) or {}).get("achievable") or {}).get(dtype)
    try:
        return DtypePeak(**raw) if raw else None
    except TypeError:
        return None


@contextlib.contextmanager
def measuring(wait_s: float = MEASURING_WAIT_S) -> Iterator[bool]:
    """Hold the machine's peak-measuring lock (beside the cache file) while measuring;
    yields whether it was taken within ``wait_s`` (False: measure anyway, unlocked).

    The processes of one run (a cluster's workers and chief, independent copies) miss
    the cache at the same moment: measuring all at once, each read the others' load,
    was not quiet, and measured again up to ``MAX_MEASUREMENTS`` times (20 s of a
    three-host run's 31 s here). One at a time, the first measures and the others then
    read its figure from the cache."""
    path = cache_path().with_suffix(".lock")
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+b") as fh:
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    yield False
                    return
                time.sleep(MEASURING_POLL_S)
        try:
            yield True
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def cached_or_measured(key: str, dtype: str, measure: Callable[[], DtypePeak], *,
                       device: str, method: str, refresh: bool = False,
                       ceiling: float | None = None) -> DtypePeak:
    """The peak of ``dtype`` cached under ``key``, else ``measure()``d and cached, one
    process of the machine measuring at a time (``measuring``); each framework's lane
    brings its key and its measurement (the JAX lane's: bench.child.backends.jax.peak).

    A refresh keeps the higher of the new and the cached figure: a peak is the best
    the hardware showed, and a measurement on a busy machine only reads low. A cached
    figure above ``ceiling`` (the theoretical peak where it is a bound: ``bound_of``)
    is a probe error, not the best: the new figure replaces it.
    """
    old = cached(key, dtype)
    if old is not None and not refresh:
        return old
    with measuring():
        if not refresh and (found := cached(key, dtype)) is not None:
            return found  # measured by another process while this one waited
        new = measure()
        if old is not None:
            new.remeasured = old.remeasured + 1
            wrong = ceiling is not None and old.flops_per_s > ceiling
            if old.flops_per_s > new.flops_per_s and not wrong:
                new.conditions += (f"; the cached {old.flops_per_s / 1e9:,.1f} GFLOP/s is "
                                   f"higher and stays")
                new.flops_per_s = old.flops_per_s
                new.by_size = {n: max(v, old.by_size.get(n, 0.0))
                               for n, v in new.by_size.items()}
        cache = _read_cache()  # re-read: another process may have added a dtype meanwhile
        entry = cache.setdefault(key, {})
        entry["device"] = device
        entry["method"] = method
        entry.setdefault("achievable", {})[dtype] = asdict(new)
        # Several children may measure at once: each replaces the file whole, never half.
        replace_whole(cache_path(), json.dumps(cache, indent=1))
        return new


def gpu_name() -> str | None:
    """The first visible GPU's model name (nvidia-smi; None without GPUs)."""
    from bench.hardware import detect

    gpus = detect().gpus
    return gpus[0].name if gpus else None


# -- MFU --------------------------------------------------------------------------------
def mfu(train_flops_per_example: float, global_throughput: float,
        peak_per_device: float | None, physical_devices: int) -> tuple[float | None,
                                                                        float | None]:
    """``(mfu, peak used)``: achieved / (per-device peak x physical devices)."""
    if not peak_per_device or peak_per_device <= 0 or physical_devices < 1:
        return None, None
    peak = peak_per_device * physical_devices
    return train_flops_per_example * global_throughput / peak, peak


@dataclass
class MfuOutcome:
    """What a run stores about its MFU; ``fault`` (for its reason) when the peak failed."""

    mfu: float | None = None
    peak_flops_per_s: float | None = None
    mfu_theoretical: float | None = None
    theoretical_peak_flops_per_s: float | None = None
    fault: str | None = None
    remeasured: bool = False


def settle_mfu(achieved_flops_per_s: float, physical_devices: int,
               achievable: Callable[[bool], float | None],
               theoretical_per_device: float | None, method: str = "",
               theoretical_bound: bool = False) -> MfuOutcome:
    """MFU against both peaks, never above 100%.

    ``achieved_flops_per_s`` is what this process's devices did; ``achievable(refresh)``
    returns the per-device achievable peak (cached, or measured again with
    ``refresh=True``). A run that beats the achievable peak has it re-measured; if the
    run still beats it, the peak is at fault: no MFU is stored and ``fault`` says so.
    ``theoretical_bound``: the theoretical peak is an upper bound (``Theoretical.bound``),
    so an achievable peak above it is a probe error: it is measured again, and if it is
    still above, no MFU is stored and ``fault`` says so. The theoretical MFU is left
    empty where that peak is unknown or, not being a bound, reads below the achievable
    one (its inputs are then wrong, e.g. a nominal clock).
    """
    out = MfuOutcome()
    n = max(1, physical_devices)
    theo = theoretical_per_device
    bound = theo if theo and theoretical_bound else None
    how = method or "see the fingerprint"
    peak = achievable(False)
    if peak and (achieved_flops_per_s > peak * n or (bound and peak > bound)):
        first = peak
        peak = achievable(True)
        out.remeasured = True
        if peak and achieved_flops_per_s > peak * n:
            out.peak_flops_per_s = peak * n
            out.fault = (
                f"no MFU: the run achieved {achieved_flops_per_s:.4g} FLOP/s, above the "
                f"achievable peak of its hardware ({first * n:.4g} FLOP/s, re-measured "
                f"{peak * n:.4g}): the peak probe reads low here ({how}), not the run fast")
            peak = None
    if peak and bound and peak > bound:
        out.peak_flops_per_s = peak * n
        out.fault = (f"no MFU: probe error: the achievable peak measured {peak * n:.4g} "
                     f"FLOP/s, above the theoretical maximum of its hardware "
                     f"({bound * n:.4g} FLOP/s): the probe is wrong ({how}), not the "
                     f"hardware fast")
        peak = None
    if peak:
        out.mfu, out.peak_flops_per_s = achieved_flops_per_s / (peak * n), peak * n
    if theo and (bound or peak is None or theo >= peak) and achieved_flops_per_s <= theo * n:
        out.theoretical_peak_flops_per_s = theo * n
        out.mfu_theoretical = achieved_flops_per_s / (theo * n)
    return out
