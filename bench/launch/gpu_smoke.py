"""``make gpu-smoke``: does TensorFlow train on this machine's GPUs under the harness?

The first thing to run on a GPU machine (about 3 minutes). Small runs of the paths a
GPU sweep takes, each in its own processes as a sweep runs them: one_device on one GPU,
mirrored on 2 GPUs (one process, NCCL all-reduce), multi_worker_mirrored on 2 GPUs (a
process per GPU, NCCL between processes) and one_device in ``mixed_float16``; every run
with ``NCCL_DEBUG=INFO``, so that its log says which transport NCCL chose (NVLink, P2P,
SHM, NET). The machine's checks (``bench.launch.gpu_preflight``: ``/dev/shm``, peer
access, CUPTI) come first. Everything lands in one text file, written as each step
ends, that a user can attach to a bug report.

Parent side: no TensorFlow (the runs are children, ``bench.launch.launcher``).
"""

from __future__ import annotations

import platform
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.env import now_iso
from bench.hardware import Hardware, gpu_fingerprint, topology
from bench.launch.gpu_preflight import (
    SHM_MIN_BYTES,
    Finding,
    Probe,
    Scope,
    gpu_preflight,
)
from bench.launch.launcher import run_isolated
from bench.results.schema import RunResult
from bench.results.store import SweepStore
from bench.spec import RunSpec

# Every smoke run's environment: NCCL says what it found and which transport it took.
SMOKE_ENV = {"NCCL_DEBUG": "INFO"}
# A run's NCCL lines kept in the file (the INFO log repeats per channel and rank).
NCCL_LINES = 40
# Small and short: the point is that each path trains, not how fast.
_BASE: dict[str, Any] = {
    "workload": "cnn", "size": "tiny", "batch": 64, "batch_mode": "per_replica", "repeats": 2,
    "max_seconds": 1.0, "min_steps": 5, "max_steps": 200, "warmup_steps": 3,
    "timeout_s": 240.0}


@dataclass(frozen=True)
class SmokeStep:
    """One run of the smoke test: its name, the spec, the GPUs it needs and why it is
    there (what a failure of it points at)."""

    name: str
    gpus: int
    spec: RunSpec
    why: str


# The steps, in order: each needs ``gpus`` GPUs and is left out (with that said) below.
STEPS: tuple[SmokeStep, ...] = (
    SmokeStep("one_device", 1, RunSpec(strategy="one_device", devices=1, **_BASE),
              "TensorFlow sees a GPU and trains on it"),
    SmokeStep("mirrored-2gpu", 2, RunSpec(strategy="mirrored", devices=2,
                                          cross_device_ops="nccl", **_BASE),
              "NCCL all-reduce between two GPUs of one process"),
    SmokeStep("multi_worker_mirrored-2gpu", 2,
              RunSpec(strategy="multi_worker_mirrored", devices=2, **_BASE),
              "NCCL between processes, a GPU each (uses /dev/shm and peer access)"),
    SmokeStep("mixed_float16", 1, RunSpec(strategy="one_device", devices=1,
                                          precision="mixed_float16", **_BASE),
              "float16 compute with a loss scale (Tensor Cores)"),
)


@dataclass
class SmokePlan:
    """What the smoke test will run on ``hw`` and what it leaves out (and why)."""

    steps: list[SmokeStep]
    skipped: list[str]
    findings: list[Finding]
    checks: list[str] = field(default_factory=list)


def smoke_plan(hw: Hardware, probe: Probe | None = None) -> SmokePlan:
    """The steps ``hw``'s GPUs allow, and the machine's checks as every multi-process
    and profiled GPU run would meet them."""
    probe = probe or Probe()
    steps, skipped = [], []
    for step in STEPS:
        if len(hw.gpus) >= step.gpus:
            steps.append(step)
        else:
            skipped.append(f"{step.name}: needs {step.gpus} GPUs, {len(hw.gpus)} visible")
    # The two GPUs the 2-GPU steps take, in processes of their own, and profiles asked
    # for: the file is for the machine, not for one run.
    findings = gpu_preflight(Scope(tuple(hw.gpus[:2]), profiled=True), probe)
    size = probe.shm_size(probe.shm_path)
    checks = [
        f"{probe.shm_path}: " + (f"{size / 2**20:.0f} MiB (NCCL between processes wants "
                                 f"{SHM_MIN_BYTES / 2**20:.0f} MiB or more)"
                                 if size is not None else "absent"),
        f"CUPTI: {probe.cupti() or 'not found'}",
        "peer access: " + ("; ".join(f.problem for f in findings if f.check == "p2p")
                           or ("no problem found" if len(hw.gpus) > 1
                               else "one GPU, nothing to connect")),
    ]
    return SmokePlan(steps, skipped, findings, checks)


def plan_text(hw: Hardware, plan: SmokePlan) -> str:
    """The plan and the checks, as the file's first part and ``--plan`` prints them."""
    lines = [f"GPUs: {len(hw.gpus)} visible"]
    lines += [f"  GPU {g.index}: {g.name} {g.uuid or ''} ({g.memory_mib} MiB, driver "
              f"{g.driver})" for g in hw.gpus]
    lines += ["", "checks:", *(f"  {c}" for c in plan.checks)]
    lines += ["", "findings:" if plan.findings else "findings: none"]
    lines += [f"  {f.text()}" for f in plan.findings]
    lines += ["", "runs (NCCL_DEBUG=INFO):"]
    lines += [f"  {s.name}: {s.spec.label()} - {s.why}" for s in plan.steps]
    lines += [f"  left out: {why}" for why in plan.skipped]
    return "\n".join(lines)


def nccl_lines(result: RunResult, most: int = NCCL_LINES) -> list[str]:
    """The NCCL INFO lines of a run's logs (every task's), at most ``most``."""
    paths = {t.get("log") for t in result.launcher.get("tasks", [])} | \
        {result.launcher.get("log")}
    lines: list[str] = []
    for path in sorted(p for p in paths if p):
        try:
            text = Path(path).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        lines += [ln for ln in text.splitlines() if "NCCL" in ln]
    return lines[:most]


def step_text(step: SmokeStep, result: RunResult) -> str:
    """One run's part of the file: status, throughput, GPU state, NCCL lines, and the
    reason (with its log tail) when it did not train."""
    lines = [f"## {step.name}: {result.status}", f"spec: {step.spec.label()}",
             f"checks: {step.why}", f"wall: {result.wall_s:.1f} s"]
    if result.figures is not None:
        lines.append(f"throughput: {result.figures.global_throughput:,.1f} examples/s")
    state = result.environment.get("gpu_state") or {}
    for d in state.get("during") or []:
        lines.append(f"GPU {d.get('index')}: SM clock mean {d.get('sm_clock_mean_mhz')} MHz, "
                     f"power mean {d.get('power_mean_w')} W, reasons {d.get('reasons')}")
    if result.reason:
        lines += ["reason:", result.reason]
    nccl = nccl_lines(result)
    if nccl:
        lines += ["NCCL:", *nccl]
    return "\n".join(lines)


def run_smoke(hw: Hardware, out: Path, *, probe: Probe | None = None,
              run: Callable[..., RunResult] = run_isolated,
              progress: Callable[[str], None] = print) -> tuple[Path, list[RunResult]]:
    """Run the plan's steps, one after the other, each in its own processes; write
    ``out/gpu-smoke.txt`` (rewritten as each step ends, so a hang still leaves the
    steps before it). Returns the file and the results."""
    plan = smoke_plan(hw, probe)
    out.mkdir(parents=True, exist_ok=True)
    report = out / "gpu-smoke.txt"
    fingerprint = gpu_fingerprint()
    head = [f"# stratbench gpu-smoke, {now_iso()}", f"host: {platform.node()}",
            f"NCCL: {fingerprint.get('nccl')}", "", plan_text(hw, plan), "",
            "nvidia-smi topo -m:", topology() or "(none)", ""]
    parts: list[str] = []
    results: list[RunResult] = []

    def write() -> None:
        report.write_text("\n".join([*head, *parts]) + "\n", encoding="utf-8")

    write()
    for step in plan.steps:
        progress(f"gpu-smoke: {step.name} ({step.why})")
        t0 = time.monotonic()
        result = run(step.spec, SweepStore(out).logs_dir / f"{step.name}.log", env=SMOKE_ENV)
        results.append(result)
        parts += [step_text(step, result), ""]
        write()
        progress(f"gpu-smoke: {step.name}: {result.status} in {time.monotonic() - t0:.0f} s")
    return report, results


def all_trained(results: Sequence[RunResult]) -> bool:
    """Whether every step trained."""
    return all(r.status == "ok" for r in results)
