"""How the GPUs are linked (``nvidia-smi topo -m``) and the NCCL TensorFlow would load,
found without loading it."""

from __future__ import annotations

import importlib.metadata
import os
import re
import shutil
import subprocess
import sys

from bench.hardware.tools import SMI_TIMEOUT_S, run_smi


def topology(timeout_s: float = SMI_TIMEOUT_S) -> str | None:
    """``nvidia-smi topo -m``: how the GPUs are linked (NVLink, PCIe switch, CPU)."""
    out = run_smi(["topo", "-m"], timeout_s)
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
