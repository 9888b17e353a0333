"""Which CPU cores sit near each GPU: the ``CPU Affinity`` and ``NUMA Affinity`` columns
of ``nvidia-smi topo -m``, read once per detected machine.

A GPU's DMA, its driver's interrupts and the host side of every step (kernel launches,
the input pipeline, NCCL's proxy threads) go fastest from the cores of the NUMA node its
PCIe root hangs off; ``bench.tasks.with_gpu_cores`` gives each GPU task those cores.
No TensorFlow here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from bench.hardware import Hardware, topology

# topo -m's column names (nvidia-smi R450 and later print both).
CPU_COLUMN = "CPU Affinity"
NUMA_COLUMN = "NUMA Affinity"
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")


@dataclass(frozen=True)
class CardAffinity:
    """One GPU's place among the CPUs, as ``topo -m`` gives it."""

    cores: tuple[int, ...]  # the CPU Affinity: the cores of the card's NUMA node(s)
    numa: int | None = None  # the NUMA Affinity (None: not given, "N/A")


def parse_cores(text: str) -> tuple[int, ...] | None:
    """A core list as ``topo -m`` and the kernel write it (``0-47,96-143``, ``0,2,4``)
    as sorted cores; None for ``N/A``, an empty cell or anything else."""
    cores: set[int] = set()
    for part in text.strip().split(","):
        m = _RANGE.match(part.strip())
        if m is None:
            return None
        first, last = int(m.group(1)), int(m.group(2) or m.group(1))
        if last < first:
            return None
        cores.update(range(first, last + 1))
    return tuple(sorted(cores)) or None


def parse_affinity(text: str | None) -> dict[int, CardAffinity]:
    """Each GPU's affinity in ``topo -m``'s table, by its index (``GPU3`` -> 3, nvidia-smi's
    index); a GPU whose CPU Affinity is ``N/A`` or missing is left out, and so is every
    GPU of a table without that column. Escapes and NIC rows are ignored.

    Cells are taken by their header's position: nvidia-smi leaves an empty cell before
    ``GPU NUMA ID``'s value, so that the columns after it do not line up, but the two
    read here come before it."""
    if not text:
        return {}
    lines = [ln for ln in _ANSI.sub("", text).splitlines() if ln.strip()]
    header = next(([c.strip() for c in ln.split("\t")] for ln in lines
                   if ln.startswith("\t")), None)
    if header is None or CPU_COLUMN not in header:
        return {}
    cpu_at = header.index(CPU_COLUMN)
    numa_at = header.index(NUMA_COLUMN) if NUMA_COLUMN in header else None
    found: dict[int, CardAffinity] = {}
    for ln in lines:
        cells = [c.strip() for c in ln.split("\t")]
        m = re.fullmatch(r"GPU(\d+)", cells[0])
        if m is None or cpu_at >= len(cells):
            continue
        cores = parse_cores(cells[cpu_at])
        if cores is None:
            continue
        numa = cells[numa_at] if numa_at is not None and numa_at < len(cells) else ""
        found[int(m.group(1))] = CardAffinity(cores, int(numa) if numa.isdigit() else None)
    return found


# The last machine asked about and its answer: a run's tasks are planned many times (its
# plan, its price, whether it can share a process), and topo -m costs a process. Kept
# per Hardware object, not per equal one: ``bench.hardware.detect()`` returns a new one
# only after its cache is cleared, which is when the machine may have changed.
_last: tuple[Hardware, dict[int, CardAffinity]] | None = None


def card_affinity(hw: Hardware) -> dict[int, CardAffinity]:
    """The affinity of ``hw``'s GPUs by nvidia-smi index (empty without GPUs, or where
    ``topo -m`` does not answer or gives none)."""
    global _last
    if not hw.gpus:
        return {}
    if _last is None or _last[0] is not hw:
        _last = (hw, parse_affinity(topology()))
    return _last[1]
