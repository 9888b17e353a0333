"""A simulated GPU server: its cards, links, software and what each phase costs there.

A profile is a JSON file (``bench/sim/profiles/<name>.json``, or any path): the cards
nvidia-smi and NVML report, how they are linked (``topo -m``), the TensorFlow wheel the
machine would run (its build info, ``bench/sim/wheels/``), and the costs of each phase
of a run's life there, in seconds, with the throughput model's anchors. Every number
is data a user can edit: copied and changed, a profile answers "would this plan fit on
that machine?" before the machine is bought. Parent side: no TensorFlow.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from bench.errors import UsageError

PROFILES_DIR = Path(__file__).resolve().parent.joinpath("profiles")
WHEELS_DIR = Path(__file__).resolve().parent.joinpath("wheels")


@dataclass(frozen=True)
class Card:
    """One model of card as nvidia-smi reports it, idle and under a sustained load."""

    name: str
    memory_mib: int
    compute_capability: str  # "9.0": sm_90
    sm_max_mhz: int
    mem_mhz: int
    sm_idle_mhz: int
    sm_busy_mhz: int
    power_limit_w: float
    power_idle_w: float
    power_busy_w: float
    temp_idle_c: int
    temp_busy_c: int
    # clocks_event_reasons.active under load: 0x4 (sw_power_cap) on an H100 at its cap.
    busy_reasons: int = 0x4

    @property
    def sm(self) -> str:
        """``sm_90`` for compute capability 9.0."""
        return "sm_" + self.compute_capability.replace(".", "")


@dataclass(frozen=True)
class Costs:
    """Seconds each phase of a run's life takes on the machine (per process unless said)."""

    process_start_s: float  # the interpreter and bench, before the framework
    import_tf_s: float  # `import tensorflow` with its CUDA libraries
    cuda_init_s: float  # the CUDA context of the first GPU a process opens
    cuda_init_per_gpu_s: float  # each more GPU the process opens
    build_s: float  # model, optimizer and data on the devices, per unit of cost_hint
    trace_s: float  # the step's graph traced and optimised, per unit of cost_hint
    trace_per_replica_share: float  # each more replica in one process traces again
    jit_s: float  # JIT of the wheel's PTX for a card without SASS, once per cold cache
    jit_cache_mib: int  # what that JIT leaves in the CUDA cache (CUDA_CACHE_MAXSIZE)
    cudnn_autotune_s: float  # the first convolution step's autotuning, per GPU
    nccl_init_s: float  # a communicator over the run's GPUs (first collective)
    peak_probe_s: float  # the matmul peak measured once on the machine
    cupti_s: float  # the profiler's start and stop
    trace_parse_per_gpu_s: float  # reading one GPU's trace after a profile

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
                raise ValueError(f"a simulated profile's costs.{f.name} must be a number "
                                 f">= 0. Received: {f.name}={value!r}")


@dataclass(frozen=True)
class Throughput:
    """The step-time model: ``anchor_examples_s`` examples/s for ``anchor_workload`` on
    one card in float32 (TF32 where the card has it) at batch ``anchor_batch``, from a
    published figure (``source``); other workloads at the same achieved FLOP/s, mixed
    precision ``mixed_factor`` times faster, a batch b at b / (b + ``half_batch``) of
    the card's best. Several replicas add the all-reduce of the gradients (``overlap``
    of it hidden behind the backward pass) and, per replica one process drives, the host
    time of dispatching its ops (``host_ms_per_replica``, Keras 3 without XLA)."""

    anchor_workload: str
    anchor_examples_s: float
    anchor_batch: int
    source: str
    mixed_factor: float = 2.6
    half_batch: float = 8.0
    overlap: float = 0.1
    host_ms_per_replica: float = 1.5
    noise_cv: float = 0.01  # window to window
    # Host <-> device copies of central_storage's variables and gradients, GB/s.
    host_link_gbs: float = 25.0
    # Device memory: what a process holds before the model, and per example of a
    # replica's batch at the anchor workload (activations), in MiB.
    context_mib: float = 600.0
    activation_mib_per_example: float = 175.0
    nccl_mib: float = 1024.0


@dataclass(frozen=True)
class Profile:
    """A simulated server (``bench.sim``): ``count`` cards of ``card``, their links, the
    wheel the machine runs and what things cost there."""

    name: str
    description: str
    card: Card
    count: int
    driver: str
    cuda_driver: str  # the newest CUDA the driver supports, e.g. "13.0"
    wheel: str  # bench/sim/wheels/<wheel>.txt: TensorFlow's build info
    link: str  # topo -m between two cards of one NUMA node, e.g. "NV18", "PIX"
    cross_link: str  # between nodes: "NV18" through NVSwitch, "SYS" across sockets
    numa_nodes: tuple[tuple[int, ...], ...]
    cpu_affinity: tuple[str, ...]  # per NUMA node, as topo -m prints it
    busbw_gbs: dict[int, float]  # all-reduce bus bandwidth by GPU count (nccl-tests)
    costs: Costs
    throughput: Throughput
    sources: tuple[str, ...] = ()
    path: str = ""

    def numa_of(self, gpu: int) -> int:
        return next((k for k, node in enumerate(self.numa_nodes) if gpu in node), 0)

    def busbw(self, gpus: int) -> float:
        """Bus bandwidth (bytes/s) of an all-reduce over ``gpus`` cards: the figure for
        the nearest count measured at or below it (a single figure serves every count)."""
        known = sorted(self.busbw_gbs)
        below = [n for n in known if n <= gpus] or known[:1]
        return self.busbw_gbs[below[-1]] * 1e9

    def wheel_build_info(self) -> str:
        """The text of the wheel's ``tensorflow/python/platform/build_info.py``."""
        return (WHEELS_DIR / f"{self.wheel}.txt").read_text(encoding="utf-8")


def profile_names() -> list[str]:
    return sorted(p.stem for p in PROFILES_DIR.glob("*.json"))


def load_profile(text: str) -> Profile:
    """The profile ``text`` names: a shipped one by name, or a JSON file by path.
    UsageError (exit 2) naming the value otherwise."""
    path = PROFILES_DIR / f"{text}.json"
    if not path.is_file():
        path = Path(text)
    if not path.is_file():
        raise UsageError(f"STRATBENCH_GPU_SIM names no simulated server: neither a profile "
                         f"({', '.join(profile_names())}) nor a JSON file. "
                         f"Received: STRATBENCH_GPU_SIM={text}")
    try:
        return _parse(json.loads(path.read_text(encoding="utf-8")), str(path))
    except (ValueError, KeyError, TypeError) as exc:
        raise UsageError(f"the simulated server's profile {path} cannot be read: {exc}. "
                         f"Received: STRATBENCH_GPU_SIM={text}") from None


def _parse(doc: dict[str, Any], path: str) -> Profile:
    count = int(doc["count"])
    nodes = tuple(tuple(int(i) for i in node) for node in doc["numa_nodes"])
    if sorted(i for node in nodes for i in node) != list(range(count)):
        raise ValueError(f"numa_nodes must place each of the {count} GPUs once. "
                         f"Received: numa_nodes={doc['numa_nodes']!r}")
    if len(doc["cpu_affinity"]) != len(nodes):
        raise ValueError(f"cpu_affinity needs one entry per NUMA node ({len(nodes)}). "
                         f"Received: cpu_affinity={doc['cpu_affinity']!r}")
    profile = Profile(
        name=str(doc["name"]), description=str(doc.get("description", "")),
        card=Card(**doc["card"]), count=count, driver=str(doc["driver"]),
        cuda_driver=str(doc["cuda_driver"]), wheel=str(doc["wheel"]),
        link=str(doc["link"]), cross_link=str(doc["cross_link"]), numa_nodes=nodes,
        cpu_affinity=tuple(str(a) for a in doc["cpu_affinity"]),
        busbw_gbs={int(k): float(v) for k, v in doc["busbw_gbs"].items()},
        costs=Costs(**doc["costs"]), throughput=Throughput(**doc["throughput"]),
        sources=tuple(doc.get("sources", ())), path=path)
    if not (WHEELS_DIR / f"{profile.wheel}.txt").is_file():
        raise ValueError(f"wheel names no build info under {WHEELS_DIR}. "
                         f"Received: wheel={profile.wheel!r}")
    return profile
