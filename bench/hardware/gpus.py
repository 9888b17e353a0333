"""The GPUs nvidia-smi lists: each card or MIG slice (``GpuInfo``), the GPU models'
datasheet peaks (``GPU_MODELS``), and which of them CUDA_VISIBLE_DEVICES lets a process
use (``visible``)."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass

from bench.hardware.tools import SMI_TIMEOUT_S, parse_int, query_gpus, run_smi


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


_GPU_FIELDS = ["index", "uuid", "name", "memory.total", "driver_version", "pci.bus_id",
               "mig.mode.current"]


def nvidia_gpus(timeout_s: float = SMI_TIMEOUT_S) -> tuple[GpuInfo, ...]:
    """Every physical GPU nvidia-smi reports (whatever CUDA_VISIBLE_DEVICES says); empty
    when there is no driver."""
    rows = query_gpus(_GPU_FIELDS, timeout_s)
    if not rows:  # an older driver without some field: the fields every driver has
        rows = query_gpus(["index", "name", "memory.total", "driver_version"], timeout_s)
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


def query_compute_cap(gpu: GpuInfo, timeout_s: float = SMI_TIMEOUT_S) -> str | None:
    """nvidia-smi's ``compute_cap`` of ``gpu`` ("9.0"); None where the driver does not
    know the field (older than R510)."""
    rows = query_gpus(["compute_cap"], timeout_s, [gpu.uuid or str(gpu.index)])
    return rows[0].get("compute_cap") if rows else None


def mig_devices(gpus: tuple[GpuInfo, ...], timeout_s: float = SMI_TIMEOUT_S
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
    for line in (run_smi(["-L"], timeout_s) or "").splitlines():
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
