"""What the installed TensorFlow wheel was compiled for, read from its files, and what
that means on this machine's cards and driver. Shared root: no TensorFlow is imported.

TensorFlow's CUDA wheels carry machine code (SASS) for some GPU architectures and PTX,
a portable intermediate form, for the newest one they knew (``build_info.py``'s
``cuda_compute_capabilities``: ``sm_60 ... sm_89, compute_90`` for 2.20 and 2.21). A
card runs a kernel from:

- SASS of its own major architecture and an equal or lower minor one (an sm_86 card
  runs sm_80 code);
- else PTX of an equal or lower architecture, which the driver JIT-compiles on the
  first call of every process, before the first step: minutes of one busy CPU core,
  kept in the CUDA cache (``CUDA_CACHE_PATH``, at most ``CUDA_CACHE_MAXSIZE`` bytes,
  256 MiB by default: too small for TensorFlow's kernels, so every process compiles
  again). An H100 (sm_90) and a B200 (sm_100) run TensorFlow 2.21 this way.
- The driver JIT-compiles only PTX of a CUDA it knows: a driver older than the wheel's
  CUDA (R535, CUDA 12.2, with 12.5's PTX) fails every run ("the provided PTX was
  compiled with an unsupported toolchain"). SASS of a newer CUDA 12 still runs on an
  older 12.x driver (minor version compatibility).
- XLA compiles PTX for the card itself and refuses an architecture its own CUDA does
  not know (TensorFlow 2.21 on sm_120: "PTX version 8.5 does not support target
  'sm_120'").
"""

from __future__ import annotations

import ast
import importlib.util
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.files import cache_dir

# Where TensorFlow keeps its build info, relative to the package.
BUILD_INFO_FILE = Path("python") / "platform" / "build_info.py"
# The newest CUDA each driver branch runs (NVIDIA's CUDA compatibility table).
DRIVER_CUDA: tuple[tuple[int, str], ...] = (
    (580, "13.0"), (575, "12.9"), (570, "12.8"), (565, "12.7"), (560, "12.6"),
    (555, "12.5"), (550, "12.4"), (545, "12.3"), (535, "12.2"), (530, "12.1"),
    (525, "12.0"), (520, "11.8"), (515, "11.7"), (510, "11.6"), (495, "11.5"),
    (470, "11.4"), (465, "11.3"), (460, "11.2"), (455, "11.1"), (450, "11.0"))
# The newest architecture each CUDA's PTX assembler (and so XLA built with it) targets.
CUDA_NEWEST_SM: tuple[tuple[str, int], ...] = (
    ("12.8", 120), ("12.7", 100), ("12.0", 90), ("11.8", 90), ("11.1", 86), ("11.0", 80))
# CUDA's cache: a size that holds TensorFlow's JIT-compiled kernels (CUDA's maximum,
# 4 GiB), in a directory that outlives the process (the default is ~/.nv/ComputeCache).
CUDA_CACHE_MAXSIZE = 4 * 2**30
CUDA_CACHE_DEFAULT_BYTES = 256 * 2**20


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", text)[:2])


def parse_build_info(text: str) -> dict[str, Any]:
    """The ``build_info`` dict of a wheel's ``build_info.py`` text, read as data (the
    file is never executed); {} where it holds none."""
    m = re.search(r"build_info\s*=\s*collections\.OrderedDict\((.*)\)\s*$", text,
                  re.MULTILINE | re.DOTALL)
    try:
        if m:
            return dict(ast.literal_eval(m.group(1).strip()))
        m = re.search(r"build_info\s*=\s*(\{.*\})\s*$", text, re.MULTILINE | re.DOTALL)
        return dict(ast.literal_eval(m.group(1))) if m else {}
    except (ValueError, SyntaxError, TypeError):
        return {}


def installed_build_info() -> dict[str, Any] | None:
    """This interpreter's TensorFlow build info, from its files (None: no TensorFlow, or
    no build info file). On a simulated server, the profile's wheel."""
    from bench import sim

    simulated = sim.active()
    if simulated is not None:
        return parse_build_info(simulated.wheel_build_info())
    try:
        spec = importlib.util.find_spec("tensorflow")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for root in spec.submodule_search_locations:
        path = Path(root) / BUILD_INFO_FILE
        if path.is_file():
            return parse_build_info(path.read_text(encoding="utf-8", errors="replace"))
    return None


def driver_cuda(driver: str | None) -> str | None:
    """The newest CUDA a driver version ("550.90.07") runs; None when unknown."""
    if not driver:
        return None
    major = _version(driver)[:1]
    if not major:
        return None
    return next((cuda for branch, cuda in DRIVER_CUDA if major[0] >= branch), None)


@dataclass(frozen=True)
class CardSupport:
    """How a wheel runs on a card: ``kind`` is ``sass`` (compiled for it), ``jit``
    (PTX compiled by the driver on each process's first call unless cached), ``none``
    (no code for it) or ``old_driver`` (PTX the driver is too old to compile);
    ``reason`` says it for a person; ``xla_problem``: why XLA cannot compile for it."""

    kind: str
    reason: str
    xla_problem: str | None = None

    @property
    def runs(self) -> bool:
        return self.kind in ("sass", "jit")


def card_support(compute_capability: str, build: dict[str, Any],
                 driver: str | None) -> CardSupport:
    """How the wheel of ``build`` runs on a card of ``compute_capability`` ("9.0")
    under ``driver``."""
    archs = [str(a) for a in build.get("cuda_compute_capabilities") or []]
    cuda = str(build.get("cuda_version") or "")
    major, minor = (*_version(compute_capability), 0, 0)[:2]
    card = major * 10 + minor
    sm = f"sm_{card}"
    sass = [a for a in archs if a.startswith("sm_")]
    ptx = [a for a in archs if a.startswith("compute_")]
    own = [a for a in sass if int(a[3:]) // 10 == major and int(a[3:]) <= card]
    xla = _xla_problem(card, cuda)
    listed = ", ".join(archs) or "none listed"
    if own:
        return CardSupport("sass", f"the wheel has SASS for {sm} ({own[-1]})", xla)
    older_ptx = [a for a in ptx if int(a[8:]) <= card]
    if not older_ptx:
        return CardSupport("none", f"the wheel has neither SASS for {sm} nor PTX of an "
                                   f"older architecture (it carries {listed})", xla)
    have = driver_cuda(driver)
    if cuda and have and _version(have) < _version(cuda):
        return CardSupport(
            "old_driver",
            f"{sm} has no SASS in the wheel, so the driver must JIT-compile its "
            f"{older_ptx[-1]} PTX, built with CUDA {cuda}; driver {driver} runs CUDA "
            f"{have} at most and cannot. Install a driver for CUDA {cuda} or newer "
            f"(R{_branch_for(cuda)}+)", xla)
    return CardSupport(
        "jit", f"{sm} has no SASS in the wheel (it carries {listed}): each process "
               f"JIT-compiles TensorFlow's {older_ptx[-1]} PTX on its first call unless "
               f"the CUDA cache holds it", xla)


def _branch_for(cuda: str) -> int:
    want = _version(cuda)
    return min((b for b, c in DRIVER_CUDA if _version(c) >= want), default=DRIVER_CUDA[0][0])


def _xla_problem(card: int, cuda: str) -> str | None:
    if not cuda:
        return None
    newest = next((sm for c, sm in CUDA_NEWEST_SM if _version(cuda) >= _version(c)), None)
    if newest is None or card <= newest:
        return None
    return (f"XLA in this wheel (CUDA {cuda}) cannot compile for sm_{card}: its PTX "
            f"assembler knows sm_{newest} at most")


def sim_state_dir(profile: Any) -> Path:
    """What a simulated server (``bench.sim``) keeps across processes and sweeps: its
    CUDA cache and the mark of its peak probe, apart per profile so that its first runs
    can be replayed cold by removing the directory."""
    return cache_dir() / "gpu-sim" / profile.name


def cuda_cache_dir() -> Path:
    """Where runs keep CUDA's JIT cache: one directory for every run of this user, so a
    sweep's processes after the first find TensorFlow's kernels compiled; a simulated
    server's (``bench.sim``) apart, per profile, so that its first runs can be replayed
    cold by removing it."""
    from bench import sim

    simulated = sim.active()
    if simulated is not None:
        return sim_state_dir(simulated) / "cuda"
    return cache_dir() / "cuda"


def cuda_cache_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The CUDA cache variables for a child: a directory that outlives the run and a
    size that holds TensorFlow's JIT-compiled kernels; values the user set are kept."""
    out = {}
    if "CUDA_CACHE_PATH" not in environ:
        out["CUDA_CACHE_PATH"] = str(cuda_cache_dir())
    if "CUDA_CACHE_MAXSIZE" not in environ:
        out["CUDA_CACHE_MAXSIZE"] = str(CUDA_CACHE_MAXSIZE)
    return out


# What TensorFlow's JIT-compiled kernels take in the CUDA cache, where nothing says
# better (on a simulated server, its profile's figure).
JIT_CACHE_BYTES = 1 << 30


def jit_cache_bytes() -> int:
    """What the JIT leaves in the CUDA cache (a first guess; a simulated server's own)."""
    from bench import sim

    simulated = sim.active()
    return int(simulated.costs.jit_cache_mib * 2**20) if simulated is not None \
        else JIT_CACHE_BYTES


def cache_keeps_jit(environ: Mapping[str, str]) -> bool:
    """Whether a CUDA cache under ``environ`` holds TensorFlow's JIT-compiled kernels."""
    return cache_bytes(environ) >= jit_cache_bytes()


def cache_bytes(environ: Mapping[str, str]) -> int:
    """What the CUDA cache may hold under ``environ`` (CUDA_CACHE_MAXSIZE, or CUDA's
    default)."""
    try:
        return int(environ.get("CUDA_CACHE_MAXSIZE", CUDA_CACHE_DEFAULT_BYTES))
    except ValueError:
        return CUDA_CACHE_DEFAULT_BYTES


# Where a process that JIT-compiled TensorFlow's kernels for its card says so, in the
# CUDA cache it kept them in (CUDA's own cache is opaque): the budget then prices no
# JIT for the runs after it.
JIT_MARKER = "stratbench-jit.done"


def jit_marker(cache: Path | None = None) -> Path:
    return (cache or cuda_cache_dir()) / JIT_MARKER


# Compute capability by model, for drivers whose nvidia-smi lacks ``compute_cap``.
_COMPUTE_CAPABILITY = (
    (r"\bB200\b|\bGB200\b", "10.0"), (r"\bH100\b|\bH200\b|\bGH200\b|\bH800\b", "9.0"),
    (r"\bL40S?\b|\bL4\b|\bRTX 40|\bRTX 6000 Ada", "8.9"), (r"\bA10G?\b|\bA40\b|\bRTX 30", "8.6"),
    (r"\bA100\b|\bA30\b", "8.0"), (r"\bT4\b|\bRTX 20", "7.5"), (r"\bV100\b", "7.0"),
    (r"\bRTX 50|\bRTX PRO 6000 Blackwell", "12.0"))


def compute_capability(gpu: Any) -> str | None:
    """The compute capability ("9.0") of a ``GpuInfo``: nvidia-smi's ``compute_cap``
    where the driver gives it, else from the model's name (None: unknown)."""
    from bench.hardware import query_compute_cap

    found = query_compute_cap(gpu)
    if found:
        return found
    return next((cc for pattern, cc in _COMPUTE_CAPABILITY
                 if re.search(pattern, gpu.name, re.IGNORECASE)), None)


def support_of(gpu: Any) -> CardSupport | None:
    """How the installed wheel runs on ``gpu`` (a ``GpuInfo``); None without a CUDA
    build's build info, or where the card's architecture is unknown."""
    build = installed_build_info()
    if not build or not build.get("is_cuda_build"):
        return None
    cc = compute_capability(gpu)
    return card_support(cc, build, gpu.driver) if cc else None


def note_jit_kept(cache: Path | None = None) -> bool:
    """After a process's first call on a card its wheel has no SASS for: mark the CUDA
    cache as holding TensorFlow's compiled kernels (where its size lets it keep them),
    so that the budget prices no JIT for the runs after. Returns whether it marked."""
    from bench.hardware import detect

    gpus = detect().gpus
    if not gpus or not cache_keeps_jit(os.environ):
        return False
    marker = jit_marker(cache or (Path(os.environ["CUDA_CACHE_PATH"])
                                  if os.environ.get("CUDA_CACHE_PATH") else None))
    if marker.exists():
        return False
    support = support_of(gpus[0])
    if support is None or support.kind != "jit":
        return False
    try:
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.touch()
    except OSError:
        return False
    return True


# The child's cache of achievable peaks (bench.child.probes.peak.CACHE_FILE), and, on a
# simulated server, the mark its stand-in leaves once it "measured" one.
PEAK_CACHE_FILE = "peak_flops_v2.json"  # v1 held single-call figures of another method


def peak_cached() -> bool:
    """Whether a run on this machine measured a GPU's achievable peak already (the
    child's cache holds a GPU entry; on a simulated server, its stand-in's mark)."""
    from bench import sim

    simulated = sim.active()
    if simulated is not None:
        return any(sim_state_dir(simulated).glob("peak-*.done"))
    from bench.env import fingerprint

    try:
        text = (cache_dir() / PEAK_CACHE_FILE).read_text(encoding="utf-8")
    except OSError:
        return False
    return f"{fingerprint()['machine_id']}|" in text and "|GPU|" in text
