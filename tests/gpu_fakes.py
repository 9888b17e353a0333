"""A fake ``nvidia-smi`` for the GPU paths on machines without GPUs.

``fake_smi(tmp_path, gpus)`` writes an executable ``nvidia-smi`` (a Python script)
that answers the three forms the harness uses as a driver would:
``--query-gpu=F1,F2 --format=csv,noheader,nounits`` (an unknown field exits 2 with
nvidia-smi's message; ``--id=``/``-i`` keep the GPUs named by index or UUID), ``-L``
(MIG slices nested under their GPU) and ``topo -m``. Every call's arguments are
appended to ``nvidia-smi.calls`` beside it, one JSON list a line.
Prepend its directory to PATH and clear ``bench.hardware.detect``'s cache.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

_SCRIPT = '''#!{python}
import json, sys
cfg = json.load(open({config!r}))
args = sys.argv[1:]
with open({calls!r}, "a") as log:
    log.write(json.dumps(args) + "\\n")
query = [a for a in args if a.startswith("--query-gpu=")]
ids = [a.split("=", 1)[1] for a in args if a.startswith("--id=")]
ids += [args[k + 1] for k, a in enumerate(args[:-1]) if a == "-i"]
wanted = [x for i in ids for x in i.split(",")]
if query:
    fields = query[0].split("=", 1)[1].split(",")
    for f in fields:
        if f in cfg["reject"] or f not in cfg["known"]:
            print(f'Field "{{f}}" is not a valid field to query.')
            sys.exit(2)
    for gpu in cfg["gpus"]:
        if wanted and str(gpu["index"]) not in wanted and gpu.get("uuid") not in wanted:
            continue
        print(", ".join(str(gpu.get(f, "[N/A]")) for f in fields))
elif args[:1] == ["-L"]:
    for gpu in cfg["gpus"]:
        print(f"GPU {{gpu['index']}}: {{gpu['name']}} (UUID: {{gpu['uuid']}})")
        for k, (profile, uuid) in enumerate(cfg["mig"].get(str(gpu["index"]), [])):
            print(f"  MIG {{profile:<11s}} Device {{k:2d}}: (UUID: {{uuid}})")
elif args[:2] == ["topo", "-m"]:
    print(cfg["topo"])
else:
    sys.exit(1)
'''

KNOWN_FIELDS = ("index", "uuid", "name", "memory.total", "driver_version", "pci.bus_id",
                "mig.mode.current", "clocks.sm", "clocks.mem", "clocks.max.sm",
                "clocks.max.mem", "power.draw", "power.limit", "temperature.gpu",
                "persistence_mode", "clocks_event_reasons.active",
                "clocks_throttle_reasons.active")


def uuid_of(i: int) -> str:
    return f"GPU-{i:08x}-1111-2222-3333-44445555{i:04x}"


def gpu_row(i: int, **over: Any) -> dict[str, Any]:
    """One A100's answers to every field, busy and unthrottled."""
    row: dict[str, Any] = {
        "index": i, "uuid": uuid_of(i), "name": "NVIDIA A100-SXM4-80GB",
        "memory.total": 81920, "driver_version": "550.54.15",
        "pci.bus_id": f"00000000:{0x07 + i:02X}:00.0", "mig.mode.current": "Disabled",
        "clocks.sm": 1410, "clocks.mem": 1593, "clocks.max.sm": 1410, "clocks.max.mem": 1593,
        "power.draw": 312.45, "power.limit": 400.00, "temperature.gpu": 61,
        "persistence_mode": "Enabled", "clocks_event_reasons.active": "0x0000000000000000",
        "clocks_throttle_reasons.active": "0x0000000000000000"}
    row.update(over)
    return row


TOPO_2 = ("\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\n"
          "GPU0\t X \tNV12\t0-63\t0\n"
          "GPU1\tNV12\t X \t0-63\t0")


@dataclass
class FakeSmi:
    """What the fake answers; ``write`` puts it in ``directory``."""

    gpus: list[dict[str, Any]]
    mig: dict[int, list[tuple[str, str]]] = field(default_factory=dict)
    reject: tuple[str, ...] = ()  # fields this "driver" does not know
    topo: str = TOPO_2

    def write(self, directory: Path) -> Path:
        directory.mkdir(parents=True, exist_ok=True)
        config = directory / "nvidia-smi.json"
        config.write_text(json.dumps({
            "gpus": self.gpus, "mig": {str(k): v for k, v in self.mig.items()},
            "reject": list(self.reject), "known": list(KNOWN_FIELDS), "topo": self.topo}))
        exe = directory / "nvidia-smi"
        exe.write_text(_SCRIPT.format(python=sys.executable, config=str(config),
                                      calls=str(directory / "nvidia-smi.calls")))
        exe.chmod(0o755)
        return directory


def cards(n: int) -> FakeSmi:
    """``n`` whole A100s."""
    return FakeSmi([gpu_row(i) for i in range(n)])


@contextlib.contextmanager
def detected(smi: FakeSmi, directory: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """``bench.hardware.detect()`` sees ``smi``'s GPUs inside the block (the fake first
    on PATH, CUDA_VISIBLE_DEVICES unset) and this machine's again after it."""
    from bench import hardware

    bin_dir = smi.write(directory)
    with monkeypatch.context() as m:
        m.delenv("CUDA_VISIBLE_DEVICES", raising=False)
        m.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
        hardware.detect.cache_clear()
        try:
            yield
        finally:
            hardware.detect.cache_clear()


def mig_uuid(gpu: int, k: int) -> str:
    return f"MIG-{gpu:04x}{k:04x}-aaaa-5bbb-8ccc-dddd{gpu:04x}{k:04x}"


def mig_machine() -> FakeSmi:
    """GPU 0 in MIG mode with two 3g.40gb slices, GPU 1 whole."""
    return FakeSmi([gpu_row(0, **{"mig.mode.current": "Enabled"}), gpu_row(1)],
                   mig={0: [("3g.40gb", mig_uuid(0, 0)), ("3g.40gb", mig_uuid(0, 1))]})


H100_ANSWERS = Path(__file__).resolve().parent / "fixtures" / "nvidia-h100"


def _answer_blocks(name: str) -> dict[str, str]:
    """A recorded answers file as {heading: text} (``### heading`` lines split it)."""
    blocks: dict[str, list[str]] = {}
    current = ""
    for line in (H100_ANSWERS / name).read_text().splitlines():
        if line.startswith("### "):
            current = line[4:]
            blocks[current] = []
        elif not line.startswith("rc="):
            blocks.setdefault(current, []).append(line)
    return {k: "\n".join(v).strip("\n") for k, v in blocks.items()}


def h100(state: str = "idle", sample: int = 1) -> FakeSmi:
    """The recorded H100 (one GPU): its idle answers, or busy sample 1-3 at the power
    cap, and its real ``topo -m`` with the escapes nvidia-smi prints into a pipe."""
    idle = _answer_blocks("idle-answers.txt")
    row = (idle["--query-gpu=ALL"] if state == "idle" else
           _answer_blocks("busy-answers.txt")[f"busy sample {sample}: --query-gpu=ALL"])
    values: list[Any] = [v.strip() for v in row.split(",")]
    return FakeSmi([dict(zip(KNOWN_FIELDS, values, strict=True))], topo=idle["topo -m"])


def h100s(n: int, link: str = "NV18") -> FakeSmi:
    """``n`` of the recorded H100 (its idle answers, each card with its own index, UUID
    and bus id), every pair joined by ``link`` in ``topo -m`` (NV18: an HGX H100 board's
    NVLink; PHB: PCIe through the host bridge)."""
    (row,) = h100().gpus
    gpus = [{**row, "index": i, "uuid": f"{row['uuid'][:-4]}{i:04x}",
             "pci.bus_id": f"00000000:{0x18 + 0x10 * i:02X}:00.0"} for i in range(n)]
    names = [f"GPU{i}" for i in range(n)]
    topo = "\t" + "\t".join([*names, "CPU Affinity", "NUMA Affinity"]) + "\n" + "\n".join(
        f"{a}\t" + "\t".join(" X " if a == b else link for b in names) + "\t0-95\t0"
        for a in names)
    return FakeSmi(gpus, topo=topo)


def two_socket_topo(n: int, cores_per_node: int = 48) -> str:
    """``topo -m`` of ``n`` PCIe GPUs across two sockets: the first half on NUMA node 0
    (CPU Affinity ``0-{c-1}``), the rest on node 1 (``c-{2c-1}``), ``c`` =
    ``cores_per_node``. Pairs of cards share a PCIe switch (PIX, or PXB through two
    bridges on every other pair), other cards of one socket meet at its host bridges
    (NODE), cards of two sockets across the CPUs' interconnect (SYS)."""
    half = max(1, n // 2)
    names = [f"GPU{i}" for i in range(n)]

    def link(a: int, b: int) -> str:
        if a == b:
            return " X "
        if a // half != b // half:
            return "SYS"
        if a // 2 != b // 2:
            return "NODE"
        return "PIX" if (a // 2) % 2 == 0 else "PXB"

    def node(i: int) -> int:
        return i // half

    rows = [f"{names[i]}\t" + "\t".join(link(i, j) for j in range(n)) +
            f"\t{node(i) * cores_per_node}-{(node(i) + 1) * cores_per_node - 1}\t{node(i)}\t\tN/A"
            for i in range(n)]
    header = "\t" + "\t".join([*names, "CPU Affinity", "NUMA Affinity", "GPU NUMA ID"])
    return "\n".join([header, *rows])


def l40s(n: int = 4) -> FakeSmi:
    """``n`` NVIDIA L40S (48 GB, 46068 MiB) on PCIe across two sockets, no NVLink."""
    return FakeSmi([gpu_row(i, name="NVIDIA L40S", **{"memory.total": 46068})
                    for i in range(n)], topo=two_socket_topo(n))
