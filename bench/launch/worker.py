"""One task of a multi-host run (``stratbench worker``), supervised like a local run.

Every host runs the same command with the same configuration; the cluster comes
from TF_CONFIG (set by the user or by Kubernetes tooling) or, under Slurm, from
Slurm's variables through TensorFlow's SlurmClusterResolver (resolved in a short
child process: this side never imports TensorFlow). The chief (the
MultiWorkerMirrored worker 0, or the ParameterServer coordinator) writes the
run's result like a sweep; the other tasks print a line and exit. The task runs
in a supervised child process; past the spec's timeout it dumps its stacks into
its log and is killed, and the chief records a ``timeout`` result.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from bench.env import now_iso
from bench.errors import BenchError
from bench.exits import Exit
from bench.hardware import detect
from bench.launch.launcher import STACK_DUMP_WAIT_S, child_env, kill_group, log_tail, make_result
from bench.results.schema import figures_from_dict
from bench.results.store import SweepStore, save
from bench.spec import RunSpec
from bench.strategies import STRATEGIES
from bench.tasks import Task

SLURM_RESOLVE_TIMEOUT_S = 120.0


class UsageError(BenchError):
    """The cluster description does not fit the configuration (the CLI exits 2)."""


def tf_config_from_slurm(strategy: str, ps_tasks: int) -> dict[str, Any]:
    """TF_CONFIG for this Slurm task, from TensorFlow's SlurmClusterResolver (child)."""
    cmd = [sys.executable, "-m", "bench.child.slurm", "--strategy", strategy,
           "--ps-tasks", str(ps_tasks)]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, check=True,
                             timeout=SLURM_RESOLVE_TIMEOUT_S, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as exc:
        raise BenchError(f"resolving the Slurm cluster took over "
                         f"{SLURM_RESOLVE_TIMEOUT_S:g} s") from exc
    except subprocess.CalledProcessError as exc:
        raise BenchError(f"resolving the Slurm cluster failed: {exc.stderr.strip()[-500:]}"
                         ) from exc
    return dict(json.loads(out.stdout))


def run_worker(spec: RunSpec, cluster: str, out: Path) -> int:
    """Run this host's task of ``spec``; the chief stores the run's result in ``out``.

    Returns 0 when the task ended ok or unsupported, ``Exit.RUNS_FAILED`` (3) otherwise.
    Raises UsageError for a cluster description that does not fit the spec.
    """

    factory = STRATEGIES.get(spec.strategy)
    source = cluster
    if source == "auto":
        source = "tf_config" if os.environ.get("TF_CONFIG") else "slurm"
    if source == "slurm":
        if "SLURM_JOB_ID" not in os.environ:
            raise UsageError("no TF_CONFIG and not inside a Slurm job (SLURM_JOB_ID unset)")
        os.environ["TF_CONFIG"] = json.dumps(tf_config_from_slurm(spec.strategy,
                                                                  spec.ps_tasks or 1))
    try:
        tf_config = json.loads(os.environ["TF_CONFIG"])
        job, index = tf_config["task"]["type"], int(tf_config["task"]["index"])
    except (KeyError, ValueError, TypeError) as exc:
        raise UsageError(f"TF_CONFIG must be JSON with cluster and task.type/task.index. "
                         f"Received: TF_CONFIG={os.environ.get('TF_CONFIG')!r}") from exc
    tasks = [t for t in factory.plan(spec, detect()) if t.cluster_job]
    task = next((t for t in tasks if t.cluster_job == job and t.index == index), None)
    if task is None:
        raise UsageError(f"strategy {spec.strategy} has no task {job}:{index} for "
                         f"{spec.devices} devices; its tasks: "
                         f"{', '.join(f'{t.cluster_job}:{t.index}' for t in tasks)}")
    # Other hosts have their own cores: no pinning computed for this machine's cores.
    task = replace(task, cores=(), intra_threads=0, inter_threads=0)
    started = now_iso()
    t0 = time.monotonic()
    paths = SweepStore(out).paths(spec)
    log = paths.log.with_name(f"{paths.log.stem}.{task.name}.log")
    status, payload = _run_supervised(spec, task, tf_config, log, paths.profile)
    if status == "timeout":
        payload = {"status": "timeout", "reason": (
            f"task {job}:{index} exceeded the {spec.timeout_s:g} s timeout (a peer that "
            f"never started, or a blocked collective)\n--- log tail ---\n{log_tail(log)}")}
    elif payload is None:
        payload = {"status": "failed", "reason": f"task {job}:{index} {status}"
                                                 f"\n--- log tail ---\n{log_tail(log)}"}
    if not task.main:
        print(f"task {job}:{index} finished: {payload.get('status')}; log: {log}")
        return 0 if payload.get("status") in ("ok", "unsupported") else Exit.RUNS_FAILED
    figures = figures_from_dict(payload["figures"]) if payload.get("figures") else None
    if figures is not None:
        figures = replace(figures, combination="multi-host: the chief's own figures (other "
                                               "hosts' tasks are not gathered)")
    result = make_result(spec, payload["status"], payload.get("reason"), figures=figures,
                         environment=payload.get("environment"), started_at=started,
                         wall_s=time.monotonic() - t0, launcher={"tf_config": tf_config})
    save(result, paths.result)
    print(f"chief result: {paths.result} ({result.status}); log: {log}")
    return 0 if result.status in ("ok", "unsupported") else Exit.RUNS_FAILED


def _run_supervised(spec: RunSpec, task: Task, tf_config: dict[str, Any], log: Path,
                    profile_dir: Path) -> tuple[str, dict[str, Any] | None]:
    """Run the task in a child process (``bench.child``) under the run's timeout.

    The watch has to come from outside: a MultiWorkerMirrored constructor waiting for
    a peer that never starts blocks inside TensorFlow without releasing the GIL, so
    no thread of that process could end it. On timeout the child is asked for its
    stacks (into the log), then its process group is SIGKILLed.
    Returns (``"done"``, ``"timeout"`` or a description of the exit, payload or None).
    """
    log.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="stratbench-worker-") as tmp:
        run_dir = Path(tmp)
        spec_file = run_dir / "spec.json"
        spec_file.write_text(json.dumps(spec.to_dict()), encoding="utf-8")
        cmd = [sys.executable, "-m", "bench.child", "--spec", str(spec_file), "--run-dir",
               str(run_dir), "--task", json.dumps(task.to_dict()), "--launch-ts",
               repr(time.time()), "--profile-dir", str(profile_dir)]
        with open(log, "ab") as fh:
            proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL,
                                    env=child_env(task, tf_config, detect()),
                                    start_new_session=True)
        status = "done"
        try:
            proc.wait(timeout=spec.timeout_s)
        except subprocess.TimeoutExpired:
            status = "timeout"
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGUSR1)
            time.sleep(STACK_DUMP_WAIT_S)
        finally:
            kill_group(proc)  # also on Ctrl-C: nothing of the task outlives it
        payload_file = run_dir / f"payload.{task.name}.json"
        payload = json.loads(payload_file.read_text(encoding="utf-8")) \
            if payload_file.exists() else None
    if status == "done" and payload is None:
        status = f"exited with code {proc.returncode} without a result"
    return status, payload
