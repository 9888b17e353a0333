"""Asking the machine's tools: nvidia-smi (or a simulated server's answers, ``bench.sim``)
and the numbers in their output."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence

from bench import sim

SMI_TIMEOUT_S = 10.0
_MISSING = ("", "[N/A]", "N/A", "[Not Supported]", "Not Supported", "[Unknown Error]")


def smi_present() -> bool:
    """Whether nvidia-smi can be asked (on a simulated server, always)."""
    return sim.active() is not None or shutil.which("nvidia-smi") is not None


def run_smi(args: list[str], timeout_s: float = SMI_TIMEOUT_S) -> str | None:
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


def query_gpus(fields: list[str], timeout_s: float = SMI_TIMEOUT_S,
           ids: Sequence[str] | None = None) -> list[dict[str, str | None]]:
    """``nvidia-smi --query-gpu=FIELDS``: one dict per GPU ([N/A] and the like -> None).
    ``ids``: only these GPUs (``--id=``: UUIDs or indices); None: every GPU."""
    args = [f"--query-gpu={','.join(fields)}", "--format=csv,noheader,nounits"]
    if ids:
        args.append(f"--id={','.join(ids)}")
    out = run_smi(args, timeout_s)
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
