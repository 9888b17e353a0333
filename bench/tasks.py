"""The processes of one run: roles, device shares, cores and threads.

A strategy factory plans its tasks (bench/strategies/); the launcher starts
them (bench/launch/launcher.py); the child runs its role (bench/child/main.py). In-process
strategies have one task; multi-process strategies have one per worker,
parameter server and coordinator.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from bench.gpu_affinity import CardAffinity, card_affinity
from bench.hardware import GpuRun, Hardware, run_cards


@dataclass(frozen=True)
class Task:
    """One process of a run.

    ``role`` is what the child does: ``single`` (the whole run in one process),
    ``worker`` (a MultiWorkerMirrored worker, or a ParameterServer worker server),
    ``chief`` (the ParameterServer coordinator), ``ps`` (a parameter server) or
    ``replica`` (an independent copy). ``cluster_job`` is its TF_CONFIG job name
    (None: not part of a TensorFlow cluster).
    """

    role: str
    index: int
    runner: str  # child-side procedure: "train", "server" or "ps_chief"
    main: bool = False  # its payload is the run's result
    local_devices: int = 1  # devices the process configures
    # The GPUs it may see, as CUDA_VISIBLE_DEVICES entries (UUIDs, or nvidia-smi
    # indices where no UUID is known). Empty: whatever the launcher may see, unless
    # ``no_gpu``: then none at all (parameter servers and coordinators).
    gpus: tuple[str, ...] = ()
    no_gpu: bool = False
    gpu_memory_limit_mb: int | None = None
    cores: tuple[int, ...] = ()  # CPU affinity; empty = all cores
    intra_threads: int = 0  # 0 = TensorFlow's default
    inter_threads: int = 0
    cluster_job: str | None = None
    barrier: bool = False  # wait for the launcher's "go" before the measured windows
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return f"{self.role}{self.index}"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Task:
        data = dict(data)
        data["gpus"] = tuple(str(g) for g in data.get("gpus", ()))
        data["cores"] = tuple(data.get("cores", ()))
        return cls(**data)


# Task.extra entry of a run's main task: every card of the run (its tasks' ``gpus``), which
# that one process samples for the whole run (``gpu_run``).
RUN_GPUS = "run_gpus"


def with_run_gpus(tasks: list[Task]) -> list[Task]:
    """``tasks`` with the run's cards (every task's ``gpus``, once each, in order) on the
    main task, so that one process samples them all: eight workers each sampling every
    GPU made eight nvidia-smi calls a second. Unchanged where no task has a GPU."""
    cards = list(dict.fromkeys(g for t in tasks for g in t.gpus))
    if not cards:
        return tasks
    return [replace(t, extra={**t.extra, RUN_GPUS: cards}) if t.main else t for t in tasks]


def gpu_run(task: Task, hw: Hardware | None = None) -> GpuRun:
    """The GPU sampler of ``task``'s process: the run's cards (``RUN_GPUS``, else the
    task's own, else the GPUs it sees) in its main task; nothing in the others (one
    sampler per run). A task of a multi-host run (``extra["gather"]``, see
    bench.child.backends.tf.gather) samples its own host's cards: one sampler per machine."""
    sample = task.main or bool(task.extra.get("gather"))
    if not sample:
        return GpuRun(sample=False)
    entries = [str(g) for g in task.extra.get(RUN_GPUS) or task.gpus]
    return GpuRun(cards=run_cards(entries, hw))


def core_ids() -> list[int]:
    try:
        return sorted(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return list(range(os.cpu_count() or 1))


def split_cores(groups: int) -> list[tuple[int, ...]]:
    """Disjoint core sets for ``groups`` groups; all cores for every group if too few."""
    cores = core_ids()
    if groups <= 1 or len(cores) < groups:
        return [tuple(cores)] * max(1, groups)
    per = len(cores) // groups
    return [tuple(cores[i * per:(i + 1) * per]) for i in range(groups)]


def shared_device_tasks(role: str, runner: str, devices: int, per_device: int, hw: Hardware,
                        *, cluster_job: str | None, barrier: bool,
                        memory_limit_mb: int | None) -> list[Task]:
    """``devices x per_device`` one-device processes; those on one device share it.

    GPU: the processes of GPU g see only g, each with a memory slice (the given
    limit, else the GPU's memory / per_device). CPU: each device is a disjoint
    set of cores (when there are enough), shared by its processes, each with
    cores / per_device intra-op threads and one inter-op thread (on 2 shared
    cores this was faster than TensorFlow's defaults).
    """
    tasks = []
    core_sets = split_cores(devices)
    for d in range(devices):
        for k in range(per_device):
            i = d * per_device + k
            if hw.gpus:
                mem = hw.gpus[d].memory_mib if d < len(hw.gpus) else None
                limit = memory_limit_mb or (int(mem * 0.9) // per_device
                                            if mem and per_device > 1 else None)
                tasks.append(Task(role, i, runner, main=i == 0, gpus=(hw.gpus[d].cuda_id,)
                                  if d < len(hw.gpus) else (), gpu_memory_limit_mb=limit,
                                  cluster_job=cluster_job, barrier=barrier,
                                  extra={"processes_on_device": per_device}
                                  if per_device > 1 else {}))
            else:
                cores = core_sets[d]
                tasks.append(Task(role, i, runner, main=i == 0, cores=cores,
                                  intra_threads=max(1, len(cores) // per_device),
                                  inter_threads=1, cluster_job=cluster_job,
                                  barrier=barrier))
    return tasks


def with_gpu_cores(tasks: list[Task], hw: Hardware,
                   affinity: Mapping[int, CardAffinity] | None = None,
                   usable: Sequence[int] | None = None) -> list[Task]:
    """``tasks`` with each GPU task pinned to the cores of its cards' NUMA node(s) and a
    thread budget to match, as CPU tasks get theirs (``shared_device_tasks``).

    The cores are ``topo -m``'s CPU Affinity of the task's cards (``affinity``, by
    nvidia-smi index; default: this machine's, ``card_affinity``) that this process may
    use (``usable``; default ``core_ids()``). The tasks whose cards have the same cores
    split them evenly, disjoint where there are enough (eight MultiWorkerMirrored
    workers on two nodes of 48 cores: twelve each), else each gets them all; intra-op
    threads as many as its cores, or its share of them. An in-process run's one task
    gets every core of its cards' nodes. The inter-op pool stays TensorFlow's default,
    which it sizes from the pinned cores: the single inter-op thread of CPU tasks was
    measured on CPUs, where the replicas' ops share the cores anyway; on a GPU the ops
    of several replicas are launched side by side from that pool.

    Unchanged: tasks without a GPU, or pinned already (a server that must keep every
    core, ``ParameterServer.plan``); and the whole run where any card has no affinity in
    ``topo -m`` (an old driver, ``N/A``), or where a card's node has none of the cores
    this process may use (a container's cpuset, or a ``topo -m`` of another machine):
    pinning the others would pile that task onto their cores.
    """
    gpu_tasks = [k for k, t in enumerate(tasks) if t.gpus and not t.no_gpu and not t.cores]
    if not hw.gpus or not gpu_tasks:
        return tasks
    affinity = card_affinity(hw) if affinity is None else affinity
    allowed = set(core_ids() if usable is None else usable)
    index_of = {g.cuda_id: g.index for g in hw.gpus}
    near: dict[int, tuple[int, ...]] = {}
    for k in gpu_tasks:
        cards = [index_of.get(entry) for entry in tasks[k].gpus]
        if any(c is None or c not in affinity for c in cards):
            return tasks
        cores = tuple(sorted({core for c in cards if c is not None
                              for core in affinity[c].cores} & allowed))
        if not cores:
            return tasks
        near[k] = cores
    groups: dict[tuple[int, ...], list[int]] = {}
    for k, cores in near.items():
        groups.setdefault(cores, []).append(k)
    out = list(tasks)
    for cores, members in groups.items():
        shares = split_near(cores, len(members))
        for k, share in zip(members, shares, strict=True):
            threads = len(share) if share != cores else max(1, len(cores) // len(members))
            out[k] = replace(tasks[k], cores=share, intra_threads=threads)
    return out


def split_near(cores: Sequence[int], parts: int) -> list[tuple[int, ...]]:
    """``cores`` (sorted) in ``parts`` disjoint shares of equal size, or all of them for
    each part where there are fewer cores than parts.

    Each share takes the same slice of every contiguous run of ``cores``: a node's
    affinity on a machine with SMT reads ``0-47,96-143``, where the second run is the
    first's hyperthread siblings (Linux numbers the siblings after every core), so the
    task with cores 0-11 also gets 96-107, their siblings, and no two tasks share a
    physical core. Where a run is shorter than ``parts``, the cores are cut in order."""
    cores = tuple(cores)
    if parts <= 1 or len(cores) < parts:
        return [cores] * max(1, parts)
    runs: list[list[int]] = []
    for core in cores:
        if runs and core == runs[-1][-1] + 1:
            runs[-1].append(core)
        else:
            runs.append([core])
    if any(len(r) < parts for r in runs):
        runs = [list(cores)]
    shares: list[list[int]] = [[] for _ in range(parts)]
    for run in runs:
        per = len(run) // parts
        for i in range(parts):
            shares[i] += run[i * per:(i + 1) * per]
    return [tuple(share) for share in shares]
