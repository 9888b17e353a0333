"""The processes of one run: roles, device shares, cores and threads.

A strategy factory plans its tasks (bench/strategies.py); the launcher starts
them (bench/launch/launcher.py); the child runs its role (bench/child/main.py). In-process
strategies have one task; multi-process strategies have one per worker,
parameter server and coordinator.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field, replace
from typing import Any

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
    bench.child.gather) samples its own host's cards: one sampler per machine."""
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
