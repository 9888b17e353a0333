"""Multi-host runs under a real Slurm: Debian's slurmctld, slurmd and munged, started by
the tests on emulated hosts (``bench.launch.slurm.private``), one node and two.
They take the namespace lock only while making their networks, so other tests making
namespaces run beside their jobs.

What runs is what a user types: the sbatch script ``stratbench slurm-script`` wrote,
and ``srun ... stratbench worker --cluster slurm``. Faults end as recorded results:
``scancel`` of a running step, a task killed, the job's time limit. After every
test no task, step daemon or shell of it is left on the nodes; after the module no
daemon, namespace or CPU group. Where Slurm is not installed the tests skip with the
reason (``apt-get install slurm-wlm munge``); under CI (``CI=true``) they fail
instead: ``.ci/run`` installs it.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from bench.launch.cgroups import CpuBudget
from bench.launch.interpreter import require_tensorflow
from bench.launch.netns import LinkShape, ours, pids_in
from bench.launch.slurm.private import PrivateSlurm, unavailable
from bench.launch.slurm_demo import run_on_slurm
from bench.spec import RunSpec
from conftest import shared_dir

REASON = unavailable()
VENV = Path(sys.prefix)
WORKER = [str(VENV / "bin" / "stratbench"), "worker", "--cluster", "slurm"]
# Short windows: these tests check the plumbing, not the figures.
SHORT = ["--workload", "mlp", "--batch", "256", "--warmup-steps", "2", "--min-steps", "3",
         "--max-steps", "10", "--max-seconds", "1", "--repeats", "2"]
MWM = [*SHORT, "--strategy", "multi_worker_mirrored", "--devices", "2"]
STEP_TIMEOUT_S = 180.0


def _require() -> None:
    if REASON is None:
        return
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"a real Slurm is required on CI (.ci/run installs slurm-wlm and munge): "
                    f"{REASON}")
    pytest.skip(f"{REASON}; CI fails instead of skipping")


@contextmanager
def making_namespaces(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The lock that keeps tests making namespaces from doing so beside each other
    (conftest.py: a new Network removes the namespaces of dead owners, which another
    test checks right after killing their owner). Held while this module makes its
    networks, not while its jobs run in them."""
    shared = shared_dir(tmp_path_factory)
    if shared is None:
        yield
        return
    with open(shared / "netns.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _cluster(tmp_path_factory: pytest.TempPathFactory, name: str,
             **kwargs: Any) -> Iterator[PrivateSlurm]:
    _require()
    slurm = PrivateSlurm(work=tmp_path_factory.mktemp(name), **kwargs)
    with making_namespaces(tmp_path_factory):
        slurm.__enter__()
    try:
        assert slurm.network is not None
        names = {h.netns for h in slurm.network.hosts}
        yield slurm
    finally:
        slurm.__exit__(None, None, None)
    assert names & set(ours()) == set(), "a namespace was left behind"
    assert daemons_of(slurm) == [], "a Slurm or munge daemon outlived its cluster"


@pytest.fixture(scope="module")
def one_node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrivateSlurm]:
    # Every task checks that TensorFlow imports before it runs (cached per interpreter):
    # checked once here, not by four tasks at once on two cores.
    _require()
    require_tensorflow(0)
    yield from _cluster(tmp_path_factory, "slurm1", nodes=1)


@pytest.fixture(scope="module")
def timed_out_job(one_node: PrivateSlurm, tmp_path_factory: pytest.TempPathFactory
                  ) -> tuple[int, Path]:
    """A job whose run outlasts its one-minute time limit (worker1 never starts, worker0
    waits for it), submitted as soon as the cluster is up: the test that reads it comes
    last and finds it over, the minute spent beside the other tests."""
    out = tmp_path_factory.mktemp("limit")
    script = out / "job.sh"
    made = stratbench("slurm-script", *MWM, "--out", str(out / "run"), "--overcommit",
                      "--time", "1", "--output", str(script))
    assert made.returncode == 0, made.stderr
    env = {"STRATBENCH_FAULT": "worker1:hang_at_start"}
    job = int(one_node.run(["sbatch", "--parsable", str(script)], env=env).stdout.strip())
    return job, out / "run"


def stratbench(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(VENV / "bin" / "stratbench"), *args], capture_output=True,
                          text=True, timeout=60)


def daemons_of(slurm: PrivateSlurm) -> list[str]:
    """Processes anywhere on the machine whose command line names this cluster's files."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if str(slurm.work) in cmdline and state != "Z":
            found.append(f"{entry.name}: {cmdline.strip()}")
    return found


def strays(slurm: PrivateSlurm, job: int, timeout_s: float = 15.0) -> list[str]:
    """What of ``job`` still runs on the compute nodes (its step daemons, tasks and
    their children) once it has had ``timeout_s`` to end."""
    assert slurm.network is not None
    deadline = time.monotonic() + timeout_s
    while True:
        left = [f"{host.label} {pid} {what}" for host in slurm.network.hosts[1:]
                for pid in pids_in(host.netns) if (what := _of_job(pid, job))]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.5)


def _of_job(pid: int, job: int) -> str | None:
    """The command line of ``pid`` if it is a live process of ``job``, else None."""
    proc = Path(f"/proc/{pid}")
    try:
        if (proc / "stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
            return None
        cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
        environ = (proc / "environ").read_bytes().split(b"\0")
    except (OSError, IndexError):
        return None
    ours = f"SLURM_JOB_ID={job}".encode() in environ or f"[{job}." in cmdline
    return cmdline if ours else None


def job_named(slurm: PrivateSlurm, name: str) -> int:
    out = slurm.run(["scontrol", "show", "job", "-o"]).stdout
    ids = [int(f["JobId"]) for f in (dict(p.split("=", 1) for p in line.split() if "=" in p)
                                     for line in out.splitlines()) if f.get("JobName") == name]
    assert len(ids) == 1, out
    return ids[0]


def only_result(out: Path) -> dict[str, Any]:
    files = sorted((out / "results").glob("*.json"))
    assert len(files) == 1, files
    return dict(json.loads(files[0].read_text(encoding="utf-8")))


def srun(slurm: PrivateSlurm, layout: list[str], run: list[str], out: Path,
         env: dict[str, str] | None = None) -> tuple[subprocess.CompletedProcess[str], int]:
    """``srun`` of the worker as a job named after ``out``; its outcome and job id."""
    done = slurm.run(["srun", f"--job-name={out.name}", *layout, *WORKER, *run, "--out",
                      str(out)], timeout=STEP_TIMEOUT_S, env=env, check=False)
    return done, job_named(slurm, out.name)


# -- runs that end ok ----------------------------------------------------------------
def test_the_sbatch_script_runs_as_written_on_one_node(one_node: PrivateSlurm,
                                                       timed_out_job: tuple[int, Path],
                                                       tmp_path: Path) -> None:
    script = tmp_path / "job.sh"
    made = stratbench("slurm-script", *MWM, "--out", str(tmp_path / "run"), "--overcommit",
                      "--output", str(script))
    assert made.returncode == 0, made.stderr
    job = int(one_node.run(["sbatch", "--parsable", str(script)]).stdout.strip())
    fields = one_node.wait_job(job, STEP_TIMEOUT_S)
    assert (fields["JobState"], fields["ExitCode"]) == ("COMPLETED", "0:0"), fields
    result = only_result(tmp_path / "run")
    assert result["status"] == "ok", result["reason"]
    assert [t["task"] for t in result["figures"]["tasks"]] == ["worker0", "worker1"]
    assert result["launcher"]["slurm"]["job_id"] == job
    assert (tmp_path / "run" / f"slurm-{job}.out").exists()
    assert strays(one_node, job) == []


def test_parameter_server_runs_a_chief_a_ps_and_two_workers(one_node: PrivateSlurm,
                                                            tmp_path: Path) -> None:
    done, job = srun(one_node, ["-N1", "-n4", "--overcommit"],
                [*SHORT, "--strategy", "parameter_server", "--ps-tasks", "1", "--devices", "2"],
                tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    result = only_result(tmp_path)
    assert result["status"] == "ok", result["reason"]
    assert result["launcher"]["tf_config"]["cluster"].keys() == {"chief", "ps", "worker"}
    assert {t["task"] for t in result["figures"]["tasks"]} >= {"worker0", "worker1"}
    assert strays(one_node, job) == []


def test_the_labs_hosts_as_slurm_nodes_run_multi_worker_mirrored_across_two(
        one_node: PrivateSlurm, tmp_path: Path,
        tmp_path_factory: pytest.TempPathFactory) -> None:
    # The scaling lab's engine: each host a node with its own slurmd and CPU quota.
    spec = RunSpec(workload="mlp", strategy="multi_worker_mirrored", devices=2, batch=256,
                   warmup_steps=2, min_steps=3, max_steps=10, max_seconds=1.0, repeats=2,
                   timeout_s=120.0)
    with making_namespaces(tmp_path_factory):  # its network lives only as long as the run
        demo = run_on_slurm(spec, tmp_path, LinkShape(rate_bps=1e9), cpu=CpuBudget(1.0))
    assert demo.result is not None and demo.result.status == "ok", demo.result
    assert demo.clean and demo.leftovers == {}
    launcher = demo.result.launcher or {}
    assert launcher["slurm"]["nodes"] == ["node1", "node2"]
    assert launcher["budget"]["cpu"]["cpus"] == 1.0
    hosts = {h["address"].rsplit(":", 1)[0] for h in launcher["hosts"]}
    assert len(hosts) == 2 and all(h.startswith("198.18.") for h in hosts)
    assert demo.result.figures is not None
    tasks = demo.result.figures.tasks or []
    assert [t.task for t in tasks] == ["worker0", "worker1"]
    assert all((t.throughput or 0) > 0 for t in tasks)
    assert set(demo.cpu_stats) >= {"host1", "host2"}


# -- faults ----------------------------------------------------------------------------
def test_scancel_of_a_running_step_is_recorded_and_leaves_nothing(one_node: PrivateSlurm,
                                                                  tmp_path: Path) -> None:
    name = f"cancel-{tmp_path.name}"
    proc = one_node.popen(["srun", "-N1", "-n2", "--overcommit", f"--job-name={name}",
                           *WORKER, *MWM, "--out", str(tmp_path)],
                          env={"STRATBENCH_FAULT": "worker1:hang_at_start"},
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    chief_log = tmp_path / "logs"
    deadline = time.monotonic() + 90
    while not any("TensorFlow imported" in p.read_text(errors="replace")
                  for p in chief_log.glob("*.worker0.log")):
        assert time.monotonic() < deadline and proc.poll() is None, "worker0 never started"
        time.sleep(0.3)
    job = job_named(one_node, name)
    running = strays(one_node, job, timeout_s=0)
    # Both tasks' supervisors, worker0's TensorFlow child and the step daemon.
    assert len(running) >= 4, running
    one_node.run(["scancel", str(job)])
    output, _ = proc.communicate(timeout=60)
    assert one_node.wait_job(job, 30)["JobState"] == "CANCELLED"
    result = only_result(tmp_path)
    assert result["status"] == "failed"
    assert result["reason"].startswith("cancelled"), result["reason"]
    logs = sorted(chief_log.glob("*.log"))
    assert len(logs) == 2 and "TensorFlow imported" in logs[0].read_text(), output
    assert strays(one_node, job) == []


def test_a_killed_task_fails_the_run_naming_its_node(one_node: PrivateSlurm,
                                                     tmp_path: Path) -> None:
    done, job = srun(one_node, ["-N1", "-n2", "--overcommit"], MWM, tmp_path,
                env={"STRATBENCH_FAULT": "worker1:kill_after_warmup"})
    assert done.returncode == 3, done.stderr[-3000:]
    fields = one_node.wait_job(job, 30)
    assert (fields["JobState"], fields["ExitCode"]) == ("FAILED", "3:0"), fields
    result = only_result(tmp_path)
    assert result["status"] == "failed"
    assert "worker1" in result["reason"] and "node node1" in result["reason"], result["reason"]
    assert strays(one_node, job) == []


def test_a_run_past_the_jobs_time_limit_is_recorded_as_a_timeout(
        one_node: PrivateSlurm, timed_out_job: tuple[int, Path]) -> None:
    job, out = timed_out_job
    fields = one_node.wait_job(job, 150)
    # The worker ends its run before Slurm's limit, so the job fails with the run's
    # exit code rather than being killed.
    assert (fields["JobState"], fields["ExitCode"]) == ("FAILED", "3:0"), fields
    result = only_result(out)
    assert result["status"] == "timeout"
    assert "Slurm job's time limit" in result["reason"], result["reason"]
    assert strays(one_node, job) == []
