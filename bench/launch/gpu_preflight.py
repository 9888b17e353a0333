"""What would make a GPU run slow, fail or profile nothing, said before it starts.

Three things NCCL and the profiler need from the machine rather than from TensorFlow,
none of which a run reports clearly once it has started:

- ``shm``: NCCL between processes on one host passes data through ``/dev/shm`` where
  GPUs cannot reach each other directly. Docker gives a container 64 MB there; NCCL
  then fails at its first collective ("unhandled system error", a failed ``posix_fallocate``)
  or hangs. NVIDIA's containers ask for ``--shm-size=1g`` or ``--ipc=host``.
- ``p2p``: processes with one GPU each talk over NVLink or PCIe peer access; without
  peer access NCCL copies through host memory (its shm transport), several times
  slower, and the run measures that rather than the strategy.
- ``cupti``: TensorFlow's profiler records GPU kernels through CUPTI; without
  ``libcupti`` a profile holds host events only and the step breakdown has no device
  time.

- ``wheel``: the installed TensorFlow's build info, read from its files
  (``bench.gpu_build``): a card the wheel has no SASS for JIT-compiles its kernels on
  the first call (said, and priced once by the budget); a driver too old to compile
  the wheel's PTX, or no code at all for the card, fails every run: refused (exit 2)
  before anything starts, both versions named.

Parent side: no TensorFlow. Everything read here can be replaced (``Probe``), so the
checks run against a fake ``/dev/shm``, a fake NVML and a wheel's build info in tests.
"""

from __future__ import annotations

import glob
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from bench.gpu_build import (
    CUDA_CACHE_MAXSIZE,
    card_support,
    compute_capability,
    cuda_cache_dir,
    installed_build_info,
)
from bench.hardware import (
    GpuInfo,
    Hardware,
    ld_cache_dirs,
    nvml_module,
    topology,
    topology_links,
)
from bench.spec import RunSpec
from bench.strategies import STRATEGIES

SHM_PATH = "/dev/shm"
# NCCL's shm transport takes a few buffers of NCCL_BUFFSIZE (4 MiB) per channel and peer;
# 1 GiB is what NVIDIA's container guides ask for, and 16 x Docker's 64 MB default.
SHM_MIN_BYTES = 1 << 30
# Links of `nvidia-smi topo -m` across which NCCL does not use peer-to-peer by default:
# through the CPUs' interconnect (SYS) or a NUMA node's host bridges (NODE).
NO_P2P_LINKS = ("SYS", "NODE")
# Where TensorFlow's GPU wheels and CUDA installs keep CUPTI.
_CUPTI_DIRS = ("/usr/local/cuda/extras/CUPTI/lib64", "/usr/local/cuda/lib64",
               "/usr/lib/x86_64-linux-gnu", "/usr/lib64")
# nvidia-ml-py's p2p query: read capability, and its "OK" status.
_P2P_CAPS_INDEX_READ = 0
_P2P_STATUS_OK = 0


def shm_bytes(path: str) -> int | None:
    """The size of the file system at ``path`` (bytes), or None where it is absent."""
    try:
        st = os.statvfs(path)
    except OSError:
        return None
    return st.f_frsize * st.f_blocks


def cupti_library(dirs: Sequence[str] | None = None) -> str | None:
    """The ``libcupti.so*`` TensorFlow's profiler would load, or None: the pip wheel's
    (``nvidia/cuda_cupti/lib`` on sys.path), LD_LIBRARY_PATH, the CUDA toolkit's and the
    loader's cache."""
    if dirs is None:
        dirs = [*(os.path.join(p, "nvidia", "cuda_cupti", "lib") for p in sys.path if p),
                *os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep),
                *_CUPTI_DIRS, *ld_cache_dirs("libcupti.so")]
    for d in dict.fromkeys(d for d in dirs if d):
        found = sorted(glob.glob(os.path.join(d, "libcupti.so*")))
        if found:
            return found[0]
    return None


def _pynvml() -> Any:
    try:
        return nvml_module()
    except ImportError:
        return None


@dataclass(frozen=True)
class Probe:
    """What the checks read, each replaceable (tests pass fakes): the size of
    ``shm_path``, NVML (a module, or None: nvidia-ml-py where installed), ``topo -m``
    and the CUPTI library."""

    shm_path: str = SHM_PATH
    shm_size: Callable[[str], int | None] = shm_bytes
    nvml: Callable[[], Any] = _pynvml
    topology: Callable[[], str | None] = topology
    cupti: Callable[[], str | None] = cupti_library
    build_info: Callable[[], dict[str, Any] | None] = installed_build_info
    compute_capability: Callable[[GpuInfo], str | None] = compute_capability


@dataclass(frozen=True)
class Finding:
    """One problem found before a run: which check, what, and what to do."""

    check: str
    problem: str
    fix: str
    fatal: bool = False  # every run would fail: nothing is started

    def text(self) -> str:
        """``shm: /dev/shm is 64 MiB ... Fix: ...``"""
        return f"{self.check}: {self.problem}. Fix: {self.fix}"


@dataclass(frozen=True)
class Scope:
    """What the checks are asked about: the GPUs processes of a run train on, one per
    process (``cards``), and whether any run is profiled."""

    cards: tuple[GpuInfo, ...] = ()
    profiled: bool = False
    gpus: tuple[GpuInfo, ...] = ()  # every card any run trains on
    xla: bool = False  # some run compiles its step with XLA
    # The cards of in-process runs on 2+ GPUs: NCCL inside one process also falls back
    # on its shared-memory transport between cards without peer access.
    in_process: tuple[GpuInfo, ...] = ()


def _without_p2p(cards: Sequence[GpuInfo], probe: Probe) -> list[dict[str, str]]:
    """The links of ``topo -m`` between ``cards`` through the CPUs (no peer access)."""
    wanted = {f"GPU{g.index}" for g in cards}
    return [link for link in topology_links(probe.topology())
            if link["a"] in wanted and link["b"] in wanted and link["link"] in NO_P2P_LINKS]


def check_shm(scope: Scope, probe: Probe) -> list[Finding]:
    """/dev/shm too small for NCCL between processes, or between the cards of one
    process that have no peer access (its shared-memory transport then carries them)."""
    if len(scope.cards) < 2 and not (len(scope.in_process) >= 2
                                     and _without_p2p(scope.in_process, probe)):
        return []
    size = probe.shm_size(probe.shm_path)
    if size is None:
        return [Finding("shm", f"{probe.shm_path} is absent: NCCL between processes has "
                               f"no shared memory to fall back on",
                        "mount a tmpfs there (docker run --shm-size=1g, or --ipc=host)")]
    if size >= SHM_MIN_BYTES:
        return []
    return [Finding("shm", f"{probe.shm_path} is {size / 2**20:.0f} MiB, under the "
                           f"{SHM_MIN_BYTES / 2**20:.0f} MiB NCCL's shared-memory transport "
                           f"needs between processes (Docker's default is 64 MB): NCCL fails "
                           f"or hangs at the first collective",
                    "start the container with docker run --shm-size=1g (or --ipc=host), "
                    "or in Kubernetes mount an emptyDir with medium: Memory at /dev/shm")]


def _nvml_no_p2p(nvml: Any, cards: Sequence[GpuInfo]) -> list[tuple[int, int]] | None:
    """Pairs of ``cards`` NVML says cannot read each other's memory; None when NVML
    cannot say (not installed, no driver, no such call)."""
    if nvml is None or not hasattr(nvml, "nvmlDeviceGetP2PStatus"):
        return None
    try:
        nvml.nvmlInit()
        handles = [nvml.nvmlDeviceGetHandleByUUID(g.uuid) if g.uuid
                   else nvml.nvmlDeviceGetHandleByIndex(g.index) for g in cards]
        index = getattr(nvml, "NVML_P2P_CAPS_INDEX_READ", _P2P_CAPS_INDEX_READ)
        ok = getattr(nvml, "NVML_P2P_STATUS_OK", _P2P_STATUS_OK)
        return [(a.index, b.index)
                for i, (a, ha) in enumerate(zip(cards, handles, strict=True))
                for b, hb in list(zip(cards, handles, strict=True))[i + 1:]
                if nvml.nvmlDeviceGetP2PStatus(ha, hb, index) != ok]
    except Exception:  # an NVML error: the topology then
        return None


def check_p2p(scope: Scope, probe: Probe) -> list[Finding]:
    """Processes with one GPU each whose cards have no peer access: NVML's p2p status
    where it answers, else the links of ``nvidia-smi topo -m``."""
    cards = [g for g in dict.fromkeys([*scope.cards, *scope.in_process]) if not g.mig]
    if len(cards) < 2:
        return []
    fix = ("expect NCCL over host memory, not NVLink or PCIe peer-to-peer; pick GPUs on one "
           "PCIe switch or NVLink domain (CUDA_VISIBLE_DEVICES), or run the GPUs in one "
           "process (mirrored)")
    pairs = _nvml_no_p2p(probe.nvml(), cards)
    if pairs is not None:
        if not pairs:
            return []
        listed = ", ".join(f"GPU {a}-GPU {b}" for a, b in pairs)
        return [Finding("p2p", f"NVML reports no peer access between {listed}: NCCL "
                               f"moves their data through host shared memory", fix)]
    slow = _without_p2p(cards, probe)
    if not slow:
        return []
    listed = ", ".join(f"{x['a']}-{x['b']} ({x['link']})" for x in slow)
    return [Finding("p2p", f"nvidia-smi topo -m links {listed} through the CPUs: NCCL does "
                           f"not use peer-to-peer across them by default and moves the data "
                           f"through host shared memory", fix)]


def check_cupti(scope: Scope, probe: Probe) -> list[Finding]:
    """A profiled GPU run without CUPTI."""
    if not scope.profiled or not scope.cards or probe.cupti() is not None:
        return []
    return [Finding("cupti", "no libcupti.so found (pip wheel nvidia-cuda-cupti, "
                             "LD_LIBRARY_PATH, /usr/local/cuda/extras/CUPTI/lib64, the loader's "
                             "cache): profiles will hold host events only, with no GPU kernels",
                    "pip install tensorflow[and-cuda] (it brings the CUPTI wheel), or add "
                    "CUDA's extras/CUPTI/lib64 to LD_LIBRARY_PATH")]


def check_wheel(scope: Scope, probe: Probe) -> list[Finding]:
    """What the installed wheel was compiled for against each model of card and its
    driver: a JIT on every first call (said), or no way to run at all (fatal)."""
    build = probe.build_info() if scope.gpus else None
    if not build or not build.get("is_cuda_build"):
        return []
    out: list[Finding] = []
    seen: set[tuple[str, str | None]] = set()
    for gpu in scope.gpus:
        cc = probe.compute_capability(gpu)
        if cc is None or (cc, gpu.driver) in seen:
            continue
        seen.add((cc, gpu.driver))
        support = card_support(cc, build, gpu.driver)
        card = f"{gpu.name} (compute capability {cc}, driver {gpu.driver})"
        if support.kind == "jit":
            out.append(Finding(
                "wheel", f"{card}: {support.reason}. The first process compiles them once, "
                         f"minutes of one busy core; the sweep prices it and keeps them in "
                         f"{cuda_cache_dir()} (CUDA_CACHE_MAXSIZE {CUDA_CACHE_MAXSIZE >> 20} "
                         f"MiB) for every later process",
                "nothing, or a TensorFlow wheel built with SASS for this card"))
        elif support.kind in ("old_driver", "none"):
            out.append(Finding("wheel", f"{card}: {support.reason}",
                               "install a driver or a TensorFlow build that runs on this card",
                               fatal=True))
        if scope.xla and support.xla_problem:
            out.append(Finding("wheel", f"{card}: {support.xla_problem}",
                               "run without --xla on", fatal=True))
    return out


Check = Callable[[Scope, Probe], list[Finding]]
CHECKS: dict[str, Check] = {"shm": check_shm, "p2p": check_p2p, "cupti": check_cupti,
                            "wheel": check_wheel}


def process_cards(spec: RunSpec, hw: Hardware) -> tuple[GpuInfo, ...]:
    """The GPUs of ``spec``'s run that sit in processes of their own (one per
    process): what NCCL connects across processes. Empty for an in-process run."""
    tasks = [t for t in STRATEGIES.get(spec.strategy).plan(spec, hw) if t.gpus]
    if len(tasks) < 2:
        return ()
    by_id = {g.cuda_id: g for g in hw.gpus}
    cards = [by_id[t.gpus[0]] for t in tasks if t.gpus[0] in by_id]
    return tuple(dict.fromkeys(cards))


def scope_of(specs: Sequence[RunSpec], hw: Hardware, profiled: bool = False) -> Scope:
    """The cards the multi-process runs of ``specs`` put in processes of their own, and
    whether any is profiled (``profiled``: a sweep's evidence profiles)."""
    cards: list[GpuInfo] = []
    shared: list[GpuInfo] = []
    for spec in specs:
        if STRATEGIES.get(spec.strategy).unsupported_reason(spec, hw) is None:
            own = process_cards(spec, hw)
            cards += [g for g in own if g not in cards]
            if not own and spec.devices > 1:  # one process on several cards
                shared += [g for g in hw.gpus[:spec.devices] if g not in shared]
    return Scope(tuple(cards), profiled or any(s.profile_steps for s in specs),
                 gpus=hw.gpus, xla=any(s.xla for s in specs), in_process=tuple(shared))


def gpu_preflight(scope: Scope, probe: Probe | None = None,
                  checks: Sequence[str] = tuple(CHECKS)) -> list[Finding]:
    """Every finding of ``checks`` (names in ``CHECKS``) for ``scope``: empty when
    nothing stands in the way."""
    probe = probe or Probe()
    return [f for name in checks for f in CHECKS[name](scope, probe)]
