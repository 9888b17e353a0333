"""Multi-process strategies as real processes on 127.0.0.1, and their failure modes.

The pytest process only supervises (bench.launch.launcher.run_isolated); every
TensorFlow task is its own child process, as in a sweep.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path

import pytest

import bench.launch.launcher as launcher
from bench.launch.launcher import run_isolated
from bench.results.schema import RunResult
from tests.helpers import child_processes, tiny_spec

FAST = {"repeats": 2, "max_seconds": 0.3, "min_steps": 3, "max_steps": 30, "warmup_steps": 2}


def run(tmp_path: Path, timeout: float = 180, **over: object) -> RunResult:
    spec = tiny_spec(**{**FAST, **over})
    result = run_isolated(spec, tmp_path / "logs" / "run.log", timeout_s=timeout)
    assert not child_processes(tmp_path), "a process of the run survived it"
    return result


@pytest.fixture(scope="module")
def mwms_time_bounded(tmp_path_factory: pytest.TempPathFactory) -> RunResult:
    """One MultiWorkerMirrored run on two workers, its windows bounded by seconds.

    Two tests read it (each such run is two TensorFlow processes): the workers train
    in sync, and time-bounded windows end on the same step on both. A step-bounded
    run showed nothing the time-bounded one does not: the same strategy and tasks,
    and windows of 0.4 s hold at least as many steps as FAST's 0.3 s ones.
    """
    return run(tmp_path_factory.mktemp("mwms"), strategy="multi_worker_mirrored", devices=2,
               max_seconds=0.4, max_steps=10**6, repeats=3)


@pytest.mark.logical_cpu
def test_multi_worker_mirrored_two_workers_train_in_sync(mwms_time_bounded: RunResult) -> None:
    """Two MWMS workers learn, agree on loss and weights, split the cores and each
    report their own half of the throughput, threads, memory and device figure."""
    r = mwms_time_bounded
    assert r.status == "ok", r.reason
    f = r.figures
    assert f is not None and f.tasks is not None and f.combination
    assert r.replicas == 2 and f.learned
    workers = {t.task: t for t in f.tasks}
    assert set(workers) == {"worker0", "worker1"}
    a, b = workers["worker0"], workers["worker1"]
    assert a.loss_end == pytest.approx(b.loss_end, rel=1e-6)  # workers agree on the loss
    assert a.weights_checksum == pytest.approx(b.weights_checksum, rel=1e-6, abs=1e-6)
    assert a.local_replicas == b.local_replicas == 1
    # Each worker's own share is half of the global figure.
    assert a.throughput == pytest.approx(f.global_throughput / 2)
    assert a.cores and b.cores and not set(a.cores) & set(b.cores)  # split cores
    assert a.threads["intra_op"] >= 1 and a.host_peak_rss_bytes
    # A missing device figure says why, per task as for the run.
    assert all(t.device_peak_bytes or t.device_peak_reason for t in (a, b))


@pytest.mark.logical_cpu
def test_parameter_server_one_ps_two_workers(tmp_path: Path) -> None:
    r = run(tmp_path, strategy="parameter_server", devices=2)
    assert r.status == "ok", r.reason
    f = r.figures
    assert f is not None and f.learned and f.tasks is not None
    names = {t.task for t in f.tasks}
    assert names == {"chief0", "ps0", "worker0", "worker1"}
    # Servers never report figures; the launcher samples their memory.
    assert all(t.host_peak_rss_bytes for t in f.tasks)
    assert r.global_batch == r.per_replica_batch == 32 and r.replicas == 2
    assert f.startup.launch_to_first_step_s > 0


@pytest.mark.logical_cpu
def test_independent_copies_and_several_workers_per_device(tmp_path: Path) -> None:
    r = run(tmp_path / "a", strategy="independent", devices=2)
    assert r.status == "ok", r.reason
    f = r.figures
    assert f is not None and f.tasks is not None and len(f.tasks) == 2
    # Judged on the windows the copies measured together (barrier after warm-up), each
    # copy's own windows kept in its task figures.
    assert f.combination is not None and not f.combination.startswith("NOT CONCURRENT")
    assert f.global_throughput == pytest.approx(
        statistics.median(w.global_throughput for w in f.windows))
    assert all(len(t.windows) == 2 for t in f.tasks)
    assert all(t.loss_end is not None for t in f.tasks)
    # Pinned to one core each, the copies still fingerprint the whole machine, so the
    # run groups with single-process runs of the same machine.
    from bench.env import fingerprint

    assert r.environment["machine_id"] == fingerprint()["machine_id"]
    assert r.environment["task"]["cores"] == list(f.tasks[0].cores)
    # Two copies sharing one device: same core set, half the threads each.
    shared = run(tmp_path / "b", strategy="independent", devices=1, workers_per_device=2)
    assert shared.status == "ok", shared.reason
    assert shared.figures is not None and shared.figures.tasks is not None
    t0, t1 = shared.figures.tasks
    assert t0.cores == t1.cores and shared.replicas == 2


@pytest.mark.logical_cpu
def test_multi_worker_mirrored_two_workers_on_one_device(tmp_path: Path) -> None:
    r = run(tmp_path, strategy="multi_worker_mirrored", devices=1, workers_per_device=2)
    assert r.status == "ok", r.reason
    assert r.replicas == 2 and r.figures is not None and r.figures.tasks is not None
    assert {t.task for t in r.figures.tasks} == {"worker0", "worker1"}


@pytest.mark.logical_cpu
def test_worker_killed_mid_run_fails_the_run(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STRATBENCH_FAULT", "worker1:kill_after_warmup")
    t0 = time.monotonic()
    r = run(tmp_path, strategy="multi_worker_mirrored", devices=2, max_seconds=5.0,
            max_steps=10**6)
    assert r.status == "failed", r.reason
    assert "worker1" in (r.reason or "")
    assert time.monotonic() - t0 < 90


@pytest.mark.logical_cpu
def test_worker_that_never_starts_is_a_startup_timeout(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    # The leader would wait forever in the MWMS constructor: the start-up deadline ends it.
    monkeypatch.setenv("STRATBENCH_FAULT", "worker1:hang_at_start")
    monkeypatch.setattr(launcher, "STARTUP_TIMEOUT_S", 15.0)
    # It says "process up", then hangs: its silence after that phase ends it. The
    # deadline must outlast worker0's longest honest phase before the constructor
    # (importing TensorFlow, ~4 s on one pinned core, twice that while another test
    # uses the cores), so that worker0 is never named alone before worker1. The wait
    # costs the suite little: `make test` runs another file beside it.
    monkeypatch.setattr(launcher, "PROGRESS_SILENCE_S", 15.0)
    monkeypatch.setattr(launcher, "IDLE_TIMEOUT_S", 15.0)
    t0 = time.monotonic()
    r = run(tmp_path, strategy="multi_worker_mirrored", devices=2)
    assert r.status == "timeout", r.reason
    assert "start-up hang" in (r.reason or "") and "worker1" in (r.reason or "")
    assert time.monotonic() - t0 < 60
    # Before the kill, every task was asked for its Python stacks.
    logs = "".join(p.read_text() for p in (tmp_path / "logs").glob("*.log"))
    assert "most recent call first" in logs


@pytest.mark.logical_cpu
def test_run_beyond_its_deadline_is_a_timeout(tmp_path: Path) -> None:
    t0 = time.monotonic()
    r = run(tmp_path, timeout=12, strategy="multi_worker_mirrored", devices=2,
            max_seconds=60.0, max_steps=10**6, repeats=3)
    assert r.status == "timeout", r.reason
    assert "12 s timeout" in (r.reason or "")
    assert time.monotonic() - t0 < 12 + 2 * launcher.KILL_GRACE_S


def test_tpu_is_unsupported_without_a_tpu(tmp_path: Path) -> None:
    r = run(tmp_path, strategy="tpu", devices=1)
    assert r.status == "unsupported" and "no TPU" in (r.reason or "")


@pytest.mark.logical_cpu
def test_time_bounded_windows_end_together_across_workers(mwms_time_bounded: RunResult
                                                          ) -> None:
    """Windows bounded by seconds, not steps: workers must still stop on the same step
    (each stopping on its own clock left a peer's all-reduce without a partner)."""
    r = mwms_time_bounded
    assert r.status == "ok", r.reason
    assert r.figures is not None and r.figures.tasks is not None
    steps = {t.task: t.examples for t in r.figures.tasks}
    assert steps["worker0"] == steps["worker1"]


def test_worker_command_chief_whose_peer_never_starts_times_out(tmp_path: Path) -> None:
    """`bench worker` has no launcher above it: its own watchdog must end the wait of a
    chief whose peer never starts (MWMS waits in its constructor forever) and record it."""
    import json
    import os
    import subprocess
    import sys

    from bench.launch.launcher import free_ports
    from bench.results.store import load_sweep
    from tests.helpers import ROOT

    a, b = free_ports(2)
    tf_config = {"cluster": {"worker": [f"127.0.0.1:{a}", f"127.0.0.1:{b}"]},
                 "task": {"type": "worker", "index": 0}}
    out = tmp_path / "sweep"
    t0 = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "worker", "--workload", "mlp", "--size", "tiny",
         "--strategy", "multi_worker_mirrored", "--devices", "2", "--batch", "32",
         "--timeout", "8", "--out", str(out)],
        cwd=ROOT, env={**os.environ, "TF_CONFIG": json.dumps(tf_config)},
        capture_output=True, text=True, timeout=120)
    assert proc.returncode == 3, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert time.monotonic() - t0 < 60
    logs = "".join(p.read_text() for p in (out / "logs").glob("*.log"))
    assert "most recent call first" in logs  # where it was stuck
    (result,) = load_sweep(out).results
    assert result.status == "timeout" and "8 s timeout" in (result.reason or "")


def test_worker_command_runs_two_hosts_worth_of_tasks(tmp_path: Path) -> None:
    """Two `bench worker` processes with TF_CONFIG (as two hosts would run it): the chief
    writes an ok result, both tasks exit 0."""
    import json
    import os
    import subprocess
    import sys

    from bench.launch.launcher import free_ports
    from bench.results.store import load_sweep
    from tests.helpers import ROOT, TINY

    ports = free_ports(2)
    cluster = {"worker": [f"127.0.0.1:{p}" for p in ports]}
    out = tmp_path / "sweep"
    cmd = [sys.executable, "-m", "bench", "worker", "--workload", "mlp",
           "--strategy", "multi_worker_mirrored", "--devices", "2", "--batch", "32",
           *TINY, "--timeout", "120", "--out", str(out)]
    procs = [subprocess.Popen(cmd, cwd=ROOT, text=True, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, env={**os.environ, "TF_CONFIG":
                              json.dumps({"cluster": cluster,
                                          "task": {"type": "worker", "index": i}})})
             for i in (1, 0)]
    outputs = [p.communicate(timeout=180)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outputs
    (result,) = load_sweep(out).results
    assert result.status == "ok" and result.figures is not None and result.figures.learned
    assert result.replicas == 2
    # Every host's own figures, gathered through the cluster as typed host reports.
    assert [t.task for t in result.figures.tasks or []] == ["worker0", "worker1"]
    assert result.launcher["gather_s"] is not None
    assert not child_processes(tmp_path)
