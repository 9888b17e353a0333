"""Builders shared by tests (no TensorFlow)."""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

from bench.launch.launcher import make_result
from bench.results.schema import (
    BREAKDOWN_PARTS,
    Breakdown,
    Figures,
    Memory,
    ModelInfo,
    PartTime,
    RunResult,
    Startup,
    StepTimes,
    Warmup,
    Window,
)
from bench.spec import RunSpec

# Two ``make bench`` sweeps of a 2-core Xeon with AMX, their ``results/`` and
# ``sweep.jsonl`` only: in the repository, so that tests read them on every machine.
STORED_SWEEPS = Path(__file__).parent / "fixtures" / "stored-sweeps.tar.xz"


def stored_sweeps(into: Path) -> list[Path]:
    """The stored sweeps, extracted under ``into``: [a, b]."""
    with tarfile.open(STORED_SWEEPS) as tar:
        tar.extractall(into, filter="data")
    return [into / "a", into / "b"]


def tiny_spec(**over: Any) -> RunSpec:
    base: dict[str, Any] = {"workload": "mlp", "strategy": "mirrored", "devices": 2,
                            "batch": 32, "size": "tiny", "repeats": 2, "max_seconds": 0.3,
                            "min_steps": 3, "max_steps": 20, "warmup_steps": 2,
                            "timeout_s": 120.0, "optimizer": "adam",
                            "learning_rate": 0.01}
    base.update(over)
    return RunSpec(**base)


def fake_figures(throughputs: tuple[float, ...] = (1000.0, 1100.0), replicas: int = 2,
                 batch: int = 32) -> Figures:
    st = StepTimes(median_s=batch / throughputs[0], p90_s=0.04, p99_s=0.05, mean_s=0.031,
                   std_s=0.002, min_s=0.02, max_s=0.06, samples=10)
    windows = [Window(index=i, steps=10, examples=10 * batch, wall_s=10 * batch / t,
                      global_throughput=t, per_replica_throughput=t / replicas, step_time=st,
                      loss_first=1.5, loss_last=1.0, device_peak_bytes={"CPU:0": 2**20},
                      host_peak_rss_bytes=600 * 2**20) for i, t in enumerate(throughputs)]
    med = sorted(throughputs)[len(throughputs) // 2]
    return Figures(
        global_throughput=med, per_replica_throughput=med / replicas, step_time=st,
        windows=windows, warmup=Warmup(first_call_s=0.5, steps=2, total_s=0.6),
        startup=Startup(import_framework_s=2.0, device_setup_s=0.01, build_s=0.4,
                        launch_to_first_step_s=3.1),
        memory=Memory(device_peak_bytes={"CPU:0": 2**20}, device_scope="process",
                      host_peak_rss_bytes=600 * 2**20, host_scope="window"),
        model=ModelInfo(params=100, trainable_params=100, grad_bytes_per_step=400,
                        forward_flops_per_example=200.0, train_flops_per_example=600.0,
                        flops_method="analytic"),
        achieved_flops_per_s=600.0 * med, loss_start=1.6, loss_end=1.0, learned=True,
        replica_divergence=0.0, throughput_cv=0.05)


def with_builds(result: RunResult, rounds_per_build: int) -> RunResult:
    """``result``'s windows as blocks of ``rounds_per_build``, each on a build of its
    own (``Window.build``), as a session that rebuilt its arms records them."""
    assert result.figures is not None
    for w in result.figures.windows:
        w.build = w.index // rounds_per_build
    return result


def fake_result(status: str = "ok", **spec_over: Any) -> RunResult:
    spec = tiny_spec(**spec_over)
    figures = fake_figures(replicas=spec.replicas, batch=spec.global_batch) \
        if status == "ok" else None
    return make_result(spec, status, None if status == "ok" else f"{status} for a test",
                       figures=figures, environment={"machine_id": "test"})


# -- report fixtures: hand-built sweeps with controlled figures -------------
def fake_environment(machine: str = "cpu-box", gpus: int = 0) -> dict[str, Any]:
    """A fingerprint like bench.env's, for a CPU-only box or one with ``gpus`` GPUs."""
    return {"machine_id": machine, "host": machine, "cpu_model": "Test CPU @ 2.0GHz",
            "cpu_cores": 2, "memory_bytes": 16 * 2**30, "python": "3.11.7",
            "tensorflow": "2.21.0", "keras": "3.15.1", "platform": "Linux-test",
            "gpus": [{"name": "Test GPU", "memory_mib": 16384, "driver": "550.1"}
                     for _ in range(gpus)],
            "tpu": False, "git": {"commit": "0123456789abcdef", "dirty": False}}


def measured(strategy: str, devices: int, batch: int, throughput: float, *,
             env: dict[str, Any] | None = None, cv: float = 0.02, status: str = "ok",
             reason: str | None = None, **spec_over: Any) -> RunResult:
    """A result whose median window throughput is exactly ``throughput`` (examples/s)."""
    spec = tiny_spec(strategy=strategy, devices=devices, batch=batch, **spec_over)
    figures = None
    if status == "ok":
        figures = fake_figures(throughputs=(throughput * (1 - cv), throughput,
                                            throughput * (1 + cv)),
                               replicas=spec.replicas, batch=spec.global_batch)
        figures.step_time.median_s = spec.global_batch / throughput
        figures.throughput_cv = cv
    elif reason is None:
        reason = f"{status} for a test\n--- log tail ---\nline one\nline two"
    return make_result(spec, status, reason, figures=figures,
                       environment=env if env is not None else fake_environment())


def replicated(strategy: str, devices: int, batch: int, throughput: float, *, runs: int = 3,
               run_cv: float = 0.05, **over: Any) -> list[RunResult]:
    """``runs`` runs of one configuration (replicate 1, 2, ...), as separate processes
    leave them: their figures have median ``throughput`` exactly and a run-to-run
    coefficient of variation (sample std / mean) of exactly ``run_cv``; each run's
    windows spread by ``cv`` (``measured``'s keyword) around its figure.
    """
    z = [i - (runs - 1) / 2 for i in range(runs)]
    sd = (sum(v * v for v in z) / (runs - 1)) ** 0.5 if runs > 1 else 1.0
    out = []
    for i, offset in enumerate(z, 1):
        r = measured(strategy, devices, batch, throughput * (1 + run_cv * offset / sd), **over)
        r.replicate = i
        out.append(r)
    return out


def fake_breakdown(step_s: float, shares: dict[str, float],
                   ops: dict[str, dict[str, float]] | None = None,
                   profile_dir: str = "/tmp/profile") -> Breakdown:
    """A profiled step of ``step_s`` split by ``shares`` (part -> share of the step; the
    rest is idle), with ``ops`` (part -> op type -> share of the step) as its top lists."""
    seconds = {p: shares.get(p, 0.0) * step_s for p in BREAKDOWN_PARTS}
    seconds["idle"] = step_s - sum(v for p, v in seconds.items() if p != "idle")
    top = [PartTime(part, name, share * step_s)
           for part, by_op in (ops or {}).items() for name, share in by_op.items()]
    share = {p: v / step_s for p, v in seconds.items()}
    return Breakdown(
        step_s=step_s, input_s=seconds["input"], compute_s=seconds["compute"],
        communication_s=seconds["communication"], host_s=seconds["host"],
        idle_s=seconds["idle"], input_share=share["input"], compute_share=share["compute"],
        communication_share=share["communication"], host_share=share["host"],
        idle_share=share["idle"], top=top, profile_dir=profile_dir, profiled_steps=5,
        profiler_overhead=1.1, capture_s=0.5)


def report_results() -> list[RunResult]:
    """A CPU sweep with every status and the optional probe figures, for report tests.

    Throughputs fall with the device count as they do on logical CPU devices; one run
    carries a profile (communication), one an MFU, one an all-reduce probe.
    """
    from bench.results.schema import AllReduceFigures, AllReducePoint, Communication

    out = []
    for batch, base in ((32, 20_000.0), (64, 36_000.0)):
        out.append(measured("one_device", 1, batch, base))
        out.append(measured("default", 1, batch, base * 0.99))
        for n, keep in ((1, 0.97), (2, 0.7), (4, 0.45)):
            out.append(measured("mirrored", n, batch, base * keep))
            out.append(measured("central_storage", n, batch, base * keep * 0.8))
    profiled = measured("mirrored", 2, 64, 36_000.0 * 0.69, profile_steps=10)
    assert profiled.figures is not None
    step = profiled.figures.step_time.median_s
    profiled.figures.communication = Communication(
        step_s=step, collective_s=0.2 * step, compute_s=0.7 * step, other_s=0.1 * step,
        comm_fraction=0.2, op_types={"CollectiveReduceV2": 20, "_Send": 10},
        profile_dir="/tmp/profile", profiled_steps=10, profiler_overhead=1.08)
    profiled.figures.breakdown = fake_breakdown(
        step, {"compute": 0.7, "communication": 0.2, "host": 0.08},
        {"compute": {"MatMul": 0.5, "AddV2": 0.2}, "communication": {"CollectiveReduceV2": 0.2},
         "host": {"Python and dispatch": 0.08}})
    profiled.figures.mfu = 0.12
    out.append(profiled)
    probe = measured("mirrored", 2, 32, 1.0, mode="allreduce", status="ok")
    probe.figures = None
    probe.allreduce = AllReduceFigures(
        implementation="CollectiveAllReduce", replicas=2, dtype="float32",
        warmup_iterations=3,
        points=[AllReducePoint(label=f"{2**k} KiB", bytes=2**k * 1024, tensors=1,
                               time_median_s=1e-4 * 2**k, time_p90_s=1.2e-4 * 2**k,
                               algbw=2**k * 1024 / (1e-4 * 2**k),
                               busbw=2**k * 1024 / (1e-4 * 2**k), iterations=20)
                for k in range(0, 12, 2)])
    out.append(probe)
    out.append(measured("mirrored", 4, 128, 0.0, status="failed",
                        reason="child exited with code 1 without writing a result\n"
                               "--- log tail ---\nValueError: boom"))
    out.append(measured("mirrored", 4, 256, 0.0, status="oom"))
    out.append(measured("central_storage", 4, 128, 0.0, status="timeout",
                        reason="killed after exceeding the 120 s timeout"))
    out.append(measured("one_device", 2, 32, 0.0, status="unsupported",
                        reason="one_device places everything on one device; devices must be 1"))
    return out


def child_processes(under: Path | None = None) -> list[int]:
    """PIDs of live bench.child processes (zombies excluded).

    With ``under``, only those whose output goes to a log below that directory:
    the children of one test, whatever else runs on the machine.
    """
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ")
            state = (entry / "stat").read_text().split(")")[-1].split()[0]
        except OSError:
            continue
        if b"bench.child" not in cmd or state == "Z":
            continue
        if under is not None:
            try:
                out = os.readlink(entry / "fd" / "1")
            except OSError:
                continue
            if not out.startswith(str(under)):
                continue
        pids.append(int(entry.name))
    return pids


def writers_under(path: Path) -> list[int]:
    """Live processes whose stdout goes below ``path`` (one test's processes, whatever
    they are and whichever namespace they run in)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            out = os.readlink(entry / "fd" / "1")
            state = (entry / "stat").read_text().rsplit(")", 1)[-1].split()[0]
        except OSError:
            continue
        if out.startswith(str(path)) and state != "Z":
            pids.append(int(entry.name))
    return pids


ROOT = Path(__file__).resolve().parent.parent
# Options that make a CLI sweep of tiny workloads take seconds.
TINY = ["--size", "tiny", "--repeats", "2", "--max-seconds", "0.3", "--min-steps", "3",
        "--max-steps", "20", "--warmup-steps", "1"]


# The matrix of the tiny sweep the read-only sweep tests share (conftest.tiny_sweep).
TINY_SWEEP_MATRIX = ("--workload", "mlp", "--strategy", "one_device,mirrored", "--devices",
                     "1,2", "--batch", "16,32", "--runs", "2", "--max-runs", "2")


def bench(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """``python -m bench ARGS`` from the repository root, output captured."""
    return subprocess.run([sys.executable, "-m", "bench", *args], cwd=ROOT, text=True,
                          capture_output=True, timeout=timeout)



def bench_all(*commands: list[str], timeout: float = 300) -> list[subprocess.CompletedProcess[str]]:
    """``bench(*command)`` for each of ``commands``, run at once (their results in
    order): each CLI process spends ~2 s importing the reports' libraries, mostly on
    one core, so independent invocations that start no TensorFlow overlap well."""
    procs = [subprocess.Popen([sys.executable, "-m", "bench", *args], cwd=ROOT, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for args in commands]
    done = []
    try:
        for proc in procs:
            out, err = proc.communicate(timeout=timeout)
            done.append(subprocess.CompletedProcess(proc.args, proc.returncode, out, err))
    finally:
        for proc in procs:  # a timeout above must not leave the others running
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return done
