"""The GPUs' state around a run's windows: clocks, power, temperature and throttle reasons
read through NVML or nvidia-smi, the GPU fingerprint, and ``GpuRun``, the sampler the
measuring process runs."""

from __future__ import annotations

import importlib
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from bench import sim
from bench.hardware.gpus import nvidia_gpus
from bench.hardware.links import nccl_version, topology, topology_links
from bench.hardware.slowdowns import summarise_samples, throttle_reasons
from bench.hardware.tools import SMI_TIMEOUT_S, parse_float, parse_int, query_gpus, smi_present

_STATE_FIELDS = ["index", "uuid", "clocks.sm", "clocks.mem", "clocks.max.sm", "clocks.max.mem",
                 "power.draw", "power.limit", "temperature.gpu", "persistence_mode"]
# Renamed in driver R535; older drivers know only the first name.
_REASON_FIELDS = ("clocks_event_reasons.active", "clocks_throttle_reasons.active")


def gpu_state(timeout_s: float = SMI_TIMEOUT_S,
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
        rows = query_gpus([*_STATE_FIELDS, reason_field], timeout_s, ids)
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


def gpu_fingerprint(timeout_s: float = SMI_TIMEOUT_S,
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
