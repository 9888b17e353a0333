"""The task report that crosses the process boundary (no TensorFlow).

The child writes a TaskReport, the launcher and ``bench worker`` read it back with
the result schema's strict loader; a host's report travels the same way.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from bench.errors import SchemaError
from bench.results.payload import (
    HostReport,
    TaskReport,
    read_report,
    report_path,
    task_figures,
)
from bench.results.schema import AllReduceFigures, AllReducePoint, Memory, TaskFigures
from bench.tasks import Task
from tests.helpers import fake_figures, tiny_spec

WORKER1 = Task("worker", 1, "train", cores=(2, 3), intra_threads=2, inter_threads=1)


def full_report() -> TaskReport:
    """A report with every field set, as a multi-host chief sends it."""
    host = HostReport(TaskFigures(task="worker1", role="worker", pid=7, cores=[2, 3],
                                  windows=fake_figures().windows),
                      "ok", peak_flops_per_s=2e11, theoretical_peak_flops_per_s=4e11)
    probe = AllReduceFigures("CollectiveAllReduce", replicas=2, dtype="float32",
                             warmup_iterations=2,
                             points=[AllReducePoint("1 KiB", 1024, 1, 1e-4, 2e-4, 1e7, 1e7,
                                                    10)])
    return TaskReport("ok", "no MFU: the peak read low", figures=fake_figures(),
                      allreduce=probe, environment={"threads": {"intra_op": 2}},
                      local_replicas=1, weights_checksum=12.5, task=WORKER1, pid=7,
                      hosts=[host], hosts_error=None, gather_s=0.25)


def as_json(report: TaskReport) -> dict[str, Any]:
    return dict(json.loads(json.dumps(report.to_dict())))


def test_a_report_round_trips_through_json() -> None:
    sent = full_report()
    assert TaskReport.from_dict(as_json(sent)) == sent
    assert TaskReport.from_dict(as_json(TaskReport("timeout", "killed"))) == \
        TaskReport("timeout", "killed")


def test_an_unknown_field_is_refused_by_name_at_any_depth() -> None:
    top = {**as_json(full_report()), "field_of_the_future": 1}
    with pytest.raises(SchemaError, match="TaskReport has no field.s. field_of_the_future. "
                                          "Received: field_of_the_future=1"):
        TaskReport.from_dict(top)
    nested = as_json(full_report())
    nested["figures"]["memory"]["swap_bytes"] = 3
    with pytest.raises(SchemaError, match="Memory has no field.s. swap_bytes"):
        TaskReport.from_dict(nested)
    with pytest.raises(SchemaError, match="task report must be a JSON object"):
        TaskReport.from_dict(["ok"])


def test_a_bad_status_or_a_failure_without_reason_is_refused() -> None:
    with pytest.raises(SchemaError, match="TaskReport.status .* Received: status='done'"):
        TaskReport.from_dict({"status": "done"})
    with pytest.raises(SchemaError, match="TaskReport.reason must explain a 'failed'"):
        TaskReport("failed", "  ")
    with pytest.raises(SchemaError, match="HostReport.status"):
        HostReport(TaskFigures(task="ps0", role="ps"), "gone")


def test_what_the_child_writes_the_parent_reads(tmp_path: Path) -> None:
    assert read_report(tmp_path, "worker1") is None  # not written yet
    sent = full_report()
    assert sent.write(tmp_path, "worker1") == report_path(tmp_path, "worker1")
    assert read_report(tmp_path, "worker1") == sent
    with pytest.raises(FileExistsError):  # a report is never overwritten
        sent.write(tmp_path, "worker1")


def test_a_bad_payload_file_becomes_a_failed_report_naming_the_fault(tmp_path: Path) -> None:
    report_path(tmp_path, "replica0").write_text("{not json", encoding="utf-8")
    broken = read_report(tmp_path, "replica0")
    assert broken is not None and broken.status == "failed"
    assert "unreadable payload of task replica0" in (broken.reason or "")
    report_path(tmp_path, "replica1").write_text(
        json.dumps({"status": "ok", "throughput": 1.0}), encoding="utf-8")
    newer = read_report(tmp_path, "replica1")
    assert newer is not None and newer.status == "failed"
    assert "does not match" in (newer.reason or "") and "throughput" in (newer.reason or "")


def test_task_figures_take_the_tasks_share_and_fill_gaps_from_the_process() -> None:
    f = fake_figures(throughputs=(1000.0, 1000.0))
    f = dataclasses.replace(f, memory=Memory({}, "process", None, "window",
                                             device_peak_reason="no allocator statistics"))
    report = TaskReport("ok", figures=f, local_replicas=1, weights_checksum=3.0,
                        environment={"threads": {"intra_op": 2, "inter_op": 1}})
    t = task_figures(WORKER1, report, lambda local: local / 4, pid=9, cores=[2, 3],
                     threads={"intra_op": 0, "inter_op": 0}, host_peak_rss_bytes=5)
    assert (t.task, t.role, t.pid, t.local_replicas) == ("worker1", "worker", 9, 1)
    assert t.throughput == pytest.approx(250.0)
    assert t.examples == sum(w.examples for w in f.windows) // 4
    assert t.host_peak_rss_bytes == 5  # the figures had none: the process's own
    assert t.device_peak_reason == "no allocator statistics"
    assert t.threads == {"intra_op": 2, "inter_op": 1} and t.weights_checksum == 3.0
    assert t.windows == f.windows
    silent = task_figures(WORKER1, None, lambda local: 1.0, pid=None, cores=[],
                          threads={"intra_op": 2, "inter_op": 1})
    assert silent.throughput is None and silent.windows == []
    assert silent.threads == {"intra_op": 2, "inter_op": 1}


def test_a_hosts_own_report_carries_its_figures_and_peaks() -> None:
    from bench.child.backends.tf.gather import REASON_CHARS, own_report

    spec = tiny_spec(strategy="multi_worker_mirrored", devices=2)
    f = dataclasses.replace(fake_figures(), peak_flops_per_s=1e11, peak_fault="low")
    host = own_report(Task("worker", 0, "train"), spec,
                      TaskReport("ok", "x" * (2 * REASON_CHARS), figures=f, local_replicas=1))
    assert host.task_figures.task == "worker0"
    assert host.task_figures.throughput == pytest.approx(f.global_throughput / 2)
    assert (host.peak_flops_per_s, host.peak_fault) == (1e11, "low")
    assert len(host.reason or "") == REASON_CHARS  # it travels through the cluster
    assert HostReport.from_dict(json.loads(json.dumps(host.to_dict()))) == host
