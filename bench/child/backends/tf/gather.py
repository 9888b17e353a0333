"""Every host's own figures, gathered through the cluster itself (child side).

A multi-host run has no shared filesystem: the chief can only learn what the
other hosts measured over the network the run already uses. ``bench worker``
marks its task with ``extra["gather"]``; once the task's runner returned, the
child calls ``gather_hosts`` and the chief's report gains ``hosts``: one
``HostReport`` per cluster task, in cluster order (its TaskFigures, status, reason
and the peaks of its own devices), serialised and loaded like the task report.

- MultiWorkerMirrored (runner ``train``): every worker serialises its own report
  (JSON) and all workers all-gather them with two collective ops (lengths, then
  the padded bytes) on their first CPU device, under a group key the strategy
  never uses. The ops go through the collective executor the strategy configured
  at start-up, so no strategy object is needed here, and ``timeout_seconds``
  bounds the wait for a worker that never arrives. A worker that failed still
  takes part (when its collectives are up) so the chief learns why it failed.
- ParameterServer (runner ``ps_chief``): the servers measure nothing, and their
  Python never gets control back (``server.join()``); the coordinator reaches
  them through its cluster connection instead: it reads each server process's
  ``/proc/self/status`` with a dataset op placed on that task (pid, peak RSS,
  cores) and times matmuls placed on each worker task (its peak FLOP/s, for the
  run's MFU). A task that cannot be reached is reported ``failed``.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from bench.registry import Registry
from bench.results.payload import HostReport, TaskReport, task_figures
from bench.results.schema import TaskFigures
from bench.spec import RunSpec
from bench.strategies import STRATEGIES
from bench.tasks import Task

GATHER_FLAG = "gather"
# Far above the keys tf.distribute's CollectiveKeys hands out (they start at 1).
GROUP_KEY = 0x5B_0001
INSTANCE_KEYS = (0x5B_0001, 0x5B_0002)
GATHER_TIMEOUT_S = 60.0
REASON_CHARS = 1500

Gatherer = Callable[[Task, RunSpec, TaskReport], list[HostReport]]
GATHERERS: Registry[Gatherer] = Registry("host gatherer")


def gather_hosts(task: Task, spec: RunSpec, run_dir: Path, report: TaskReport) -> TaskReport:
    """``report`` plus ``hosts`` (every task's report) for tasks marked to gather.

    Skipped when the task never brought its strategy up (no ``ready`` file: there
    is no cluster connection to gather over). A failed gather costs the reports,
    not the task's own result: ``hosts_error`` says what happened.
    """
    if not task.extra.get(GATHER_FLAG) or task.runner not in GATHERERS:
        return report
    if not (run_dir / f"ready.{task.name}").exists():
        return report
    t0 = time.perf_counter()
    hosts: list[HostReport] | None = None
    error: str | None = None
    try:
        hosts = GATHERERS.get(task.runner)(task, spec, report)
    except Exception as exc:
        lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
        error = f"{type(exc).__name__}: {(lines or [''])[0][:500]}"
    return replace(report, hosts=hosts, hosts_error=error, gather_s=time.perf_counter() - t0)


def own_report(task: Task, spec: RunSpec, report: TaskReport) -> HostReport:
    """This task's host report: its TaskFigures (its replicas' share), status and peaks."""
    factory = STRATEGIES.get(spec.strategy)
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    rss = _status_fields(_read_lines("/proc/self/status")).get("host_peak_rss_bytes")
    figures = task_figures(task, report, lambda local: factory.task_share(spec, local),
                           pid=os.getpid(), cores=cores, threads={}, host_peak_rss_bytes=rss)
    f = report.figures
    return HostReport(
        task_figures=figures, status=report.status,
        reason=(report.reason or "")[:REASON_CHARS] or None,
        peak_flops_per_s=f.peak_flops_per_s if f else None,
        theoretical_peak_flops_per_s=f.theoretical_peak_flops_per_s if f else None,
        peak_fault=f.peak_fault if f else None)


def _tf_config() -> tuple[dict[str, list[str]], str, int]:
    conf = json.loads(os.environ["TF_CONFIG"])
    return conf["cluster"], conf["task"]["type"], int(conf["task"]["index"])


def _all_gather(task: Task, spec: RunSpec, report: TaskReport) -> list[HostReport]:
    """All-gather every worker's report over the collectives (MultiWorkerMirrored)."""
    import numpy as np
    import tensorflow as tf

    cluster, job, index = _tf_config()
    # Cluster order: the chief job (if any) first, then the workers, as TF ranks them.
    members = [(j, i) for j in ("chief", "worker") for i in range(len(cluster.get(j, [])))]
    n = len(members)
    own = json.dumps(own_report(task, spec, report).to_dict())
    data = np.frombuffer(own.encode(), np.uint8)
    device = f"/job:{job}/replica:0/task:{index}/device:CPU:0"

    def gather(values: Any, key: int) -> Any:
        return tf.raw_ops.CollectiveGatherV2(
            input=values, group_size=n, group_key=GROUP_KEY, instance_key=key,
            ordering_token=[], communication_hint="auto", timeout_seconds=GATHER_TIMEOUT_S)

    with tf.device(device):
        lengths = gather(tf.constant([data.size], tf.int64), INSTANCE_KEYS[0]).numpy()
        width = int(lengths.max())
        padded = np.zeros(width, np.int32)  # collectives carry no uint8 on CPU
        padded[:data.size] = data
        rows = gather(tf.constant(padded), INSTANCE_KEYS[1]).numpy().reshape(n, width)
    return [HostReport.from_dict(json.loads(bytes(row[:size].astype(np.uint8)).decode()))
            for row, size in zip(rows, lengths, strict=True)]


def _through_coordinator(task: Task, spec: RunSpec, report: TaskReport) -> list[HostReport]:
    """The coordinator reads every server's figures through its cluster connection."""
    import tensorflow as tf

    from bench.child.backends.tf.peak import measure_dtype
    from bench.child.probes.peak import PRECISION_DTYPE

    cluster, _, _ = _tf_config()
    reports = [own_report(task, spec, report)]
    if report.status != "ok":
        return reports
    dtype = PRECISION_DTYPE[spec.precision]
    for job in ("ps", "worker"):
        for i in range(len(cluster.get(job, []))):
            device = f"/job:{job}/replica:0/task:{i}/device:CPU:0"
            fig = TaskFigures(task=f"{job}{i}", role=job)
            status, reason, peak = "ok", None, None
            try:
                fields = _status_fields(_remote_lines(tf, device, "/proc/self/status"))
                fig.pid = fields.get("pid")
                fig.host_peak_rss_bytes = fields.get("host_peak_rss_bytes")
                fig.cores = fields.get("cores", [])
                if job == "worker":  # where the steps run: its peak counts for MFU
                    peak = measure_dtype(tf, dtype, device, remote=True)
            except Exception as exc:
                lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
                status, reason = "failed", (
                    f"not reachable through the cluster ({cluster[job][i]}): "
                    f"{type(exc).__name__}: {(lines or [''])[0][:300]}")
            reports.append(HostReport(fig, status, reason, peak_flops_per_s=peak))
    return reports


# Per runner: how the reports reach the chief.
GATHERERS.register("train", _all_gather)
GATHERERS.register("ps_chief", _through_coordinator)


def _remote_lines(tf: Any, device: str, path: str) -> list[str]:
    """Lines of ``path`` as read by the process serving ``device``.

    A dataset reads to end of file (``tf.io.read_file`` trusts the file size,
    which is 0 for files in /proc).
    """
    with tf.device(device):
        @tf.function
        def read() -> Any:
            return tf.data.TextLineDataset(path).batch(100_000).get_single_element()

        return [line.decode() for line in read().numpy()]


def _read_lines(path: str) -> list[str]:
    try:
        with open(path, encoding="ascii", errors="replace") as fh:
            return fh.read().splitlines()
    except OSError:
        return []


def _status_fields(lines: list[str]) -> dict[str, Any]:
    """pid, peak RSS (bytes) and allowed cores from ``/proc/<pid>/status`` lines."""
    out: dict[str, Any] = {}
    for line in lines:
        key, _, value = line.partition(":")
        value = value.strip()
        if key == "Pid":
            out["pid"] = int(value)
        elif key == "VmHWM":
            out["host_peak_rss_bytes"] = int(value.split()[0]) * 1024
        elif key == "Cpus_allowed_list":
            out["cores"] = _core_list(value)
    return out


def _core_list(text: str) -> list[int]:
    """``"0-2,5"`` -> ``[0, 1, 2, 5]``."""
    cores: list[int] = []
    for part in filter(None, re.split(r"\s*,\s*", text)):
        lo, _, hi = part.partition("-")
        cores.extend(range(int(lo), int(hi or lo) + 1))
    return cores
