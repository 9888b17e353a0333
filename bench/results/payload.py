"""What one process of a run reports to its parent: ``payload.<task>.json``.

The child writes a ``TaskReport`` when its task ends, whatever happened; the
launcher (local runs) and ``bench worker`` (multi-host runs) read it back with
the loader of the result schema, which refuses an unknown field or status by
name: a child of another stratbench version fails the run loudly instead of
losing figures silently. On a multi-host run the chief's report also carries a
``HostReport`` per cluster task, gathered through the cluster
(bench/child/backends/tf/gather.py), with the same strict loading.

``task_figures`` is the one place a task's ``TaskFigures`` are made from its
report (the launcher's processes, a host's own report).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Self

from bench.errors import SchemaError
from bench.results.schema import (
    AllReduceFigures,
    Figures,
    TaskFigures,
    check_outcome,
    load_strict,
    unit,
)
from bench.results.store import write_new
from bench.tasks import Task


class _Message:
    """A report that crosses a process boundary: its outcome is checked when it is
    made, and it is loaded back strictly (unknown fields and statuses refused by
    name: a peer of another stratbench version fails loudly)."""

    what: ClassVar[str]  # how errors name the document
    __dataclass_fields__: ClassVar[dict[str, Any]]  # every subclass is a dataclass
    status: str
    reason: str | None

    def __post_init__(self) -> None:
        check_outcome(type(self).__name__, self.status, self.reason)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Any) -> Self:
        """The report from its ``to_dict`` form; raises SchemaError naming what does
        not fit (an unknown field, a status outside STATUSES, a failure without a
        reason)."""
        return load_strict(cls, data, cls.what)


@dataclass
class HostReport(_Message):
    """One cluster task's own figures and peaks, as its host measured them."""

    what = "host report"
    task_figures: TaskFigures
    status: str
    reason: str | None = None
    # The peaks of this task's own hardware (None where it has none or measured none).
    peak_flops_per_s: float | None = unit("FLOP/s", None)
    theoretical_peak_flops_per_s: float | None = unit("FLOP/s", None)
    peak_fault: str | None = None


@dataclass
class TaskReport(_Message):
    """What a task's process reports when it ends (``payload.<task>.json``).

    ``figures`` for training tasks, ``allreduce`` for the all-reduce probe; failures
    carry only status and reason. ``environment`` is the child's fingerprint (None:
    the process never got that far; the parent's own is stored then).
    """

    what = "task report"
    status: str
    reason: str | None = None
    figures: Figures | None = None
    allreduce: AllReduceFigures | None = None
    environment: dict[str, Any] | None = None
    local_replicas: int | None = unit("replicas", None)  # replicas this process ran
    # Sum of every trainable weight after training: synchronous workers must agree.
    weights_checksum: float | None = unit("sum of weights", None)
    task: Task | None = None  # the task as the child ran it
    pid: int | None = None
    # Multi-host runs (the chief's report only): every cluster task's report in
    # cluster order, or why they could not be gathered, and how long it took.
    hosts: list[HostReport] | None = None
    hosts_error: str | None = None
    gather_s: float | None = unit("s", None)

    def write(self, run_dir: Path, task_name: str) -> Path:
        """Write this report as ``task_name``'s into ``run_dir`` (never over another)."""
        path = report_path(run_dir, task_name)
        write_new(path, json.dumps(self.to_dict()) + "\n")
        return path


def report_path(run_dir: Path, task_name: str) -> Path:
    """Where the process of ``task_name`` leaves its report."""
    return run_dir / f"payload.{task_name}.json"


def read_report(run_dir: Path, task_name: str) -> TaskReport | None:
    """The report ``task_name`` left in ``run_dir``: None if it left none yet; a
    ``failed`` report naming the fault if the file cannot be read or does not fit
    this version's schema (a run is recorded, never crashed, by a bad payload)."""
    path = report_path(run_dir, task_name)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, json.JSONDecodeError) as exc:
        return TaskReport("failed", f"unreadable payload of task {task_name}: {exc}")
    try:
        return TaskReport.from_dict(data)
    except SchemaError as exc:
        return TaskReport("failed", f"payload of task {task_name} does not match this "
                                    f"stratbench's result schema: {exc}")


def task_figures(task: Task, report: TaskReport | None, share: Callable[[int], float], *,
                 pid: int | None, cores: list[int], threads: dict[str, int],
                 host_peak_rss_bytes: int | None = None) -> TaskFigures:
    """One task's TaskFigures from its report (None: it left none).

    ``share(local_replicas)`` is the fraction of the measured examples its replicas
    did (the strategy's ``task_share``; 1 for a task that reports no replicas). The
    other arguments are what the caller knows of the process beside its report: its
    pid and cores, its threads and peak RSS where the report has none.
    """
    f = report.figures if report else None
    local = report.local_replicas if report else None
    part = share(local) if local else 1.0
    env_threads = ((report.environment if report else None) or {}).get("threads")
    return TaskFigures(
        task=task.name, role=task.role, pid=pid, local_replicas=local,
        examples=int(sum(w.examples for w in f.windows) * part) if f else None,
        throughput=f.global_throughput * part if f else None,
        step_median_s=f.step_time.median_s if f else None,
        launch_to_first_step_s=f.startup.launch_to_first_step_s if f else None,
        host_peak_rss_bytes=(f.memory.host_peak_rss_bytes if f else None) or
        host_peak_rss_bytes,
        device_peak_bytes=dict(f.memory.device_peak_bytes) if f else {},
        device_peak_reason=f.memory.device_peak_reason if f else None,
        cores=cores, threads=dict(env_threads or threads),
        loss_end=f.loss_end if f else None,
        weights_checksum=report.weights_checksum if report else None,
        windows=f.windows if f else [])


def arm_name(index: int) -> str:
    """The payload name of arm ``index`` of a shared process (``payload.arm<i>.json``)."""
    return f"arm{index}"


# An arm's report as its windows were summarised, before its peak probe and profile
# (``payload.arm<i>.windows.json``): what the launcher keeps where the process does not
# finish those.
WINDOWS_ONLY = "the run ended before its peak probe and profile: no MFU or breakdown"


def windows_name(index: int) -> str:
    """The payload name of arm ``index``'s report as its windows were summarised (-1:
    the process's own)."""
    return f"{arm_name(index) if index >= 0 else 'process'}.windows"


def read_arm_report(run_dir: Path, index: int) -> TaskReport | None:
    """Arm ``index``'s final report, else the one its windows left, else None."""
    return read_report(run_dir, arm_name(index)) or read_report(run_dir, windows_name(index))
