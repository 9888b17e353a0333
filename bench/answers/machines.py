"""Group runs per machine (fingerprint ``machine_id``) and describe each machine.

Figures from different machines are never averaged or ranked together: each machine
gets its own section. The description comes from the stored fingerprints only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from bench.answers.runs import RunView

CPU_ONLY_DISCLAIMER = (
    "CPU only: the device counts are logical devices that share the same {cores} CPU "
    "core(s). Every replica competes for the same cores, so more devices add no hardware: "
    "a speed-up above 1.0x means the one-device configuration used the cores less well "
    "than several devices do, not that it scaled; efficiency and speed-up here measure "
    "what a strategy's overhead costs, not how it would scale on real accelerators.")


@dataclass
class Machine:
    """One machine_id and everything the report says about it."""

    machine_id: str
    runs: list[RunView]
    facts: dict[str, str] = field(default_factory=dict)
    cpu_only: bool = True
    cores: int | None = None
    memory_bytes: int | None = None
    gpu_memory_bytes: int | None = None
    hardware: str = ""  # one line, used in plot titles
    dates: str = ""  # "2026-11-22" or "2026-11-21..2026-11-22"

    @property
    def disclaimer(self) -> str | None:
        if not self.cpu_only:
            return None
        return CPU_ONLY_DISCLAIMER.format(cores=self.cores if self.cores else "?")


def _values(envs: Sequence[dict[str, Any]], key: str) -> list[str]:
    seen: list[str] = []
    for env in envs:
        value = env.get(key)
        if value not in (None, "", [], {}) and str(value) not in seen:
            seen.append(str(value))
    return seen


def describe(machine_id: str, runs: list[RunView]) -> Machine:
    """Build a Machine from the fingerprints stored with its runs."""
    envs = [r.result.environment for r in runs]
    # The child's fingerprint carries TensorFlow's part; the parent's (unsupported,
    # timeout) lacks it, so prefer the richest one for single-valued facts.
    richest = max(envs, key=len) if envs else {}
    # The machine's cards, not the few one process was shown (CUDA_VISIBLE_DEVICES).
    gpus = richest.get("machine_gpus") or richest.get("gpus") or []
    cores = richest.get("cpu_cores")
    memory = richest.get("memory_bytes")
    gpu_names = [f"{g.get('name')} ({g.get('memory_mib')} MiB)" for g in gpus]
    gpu_mib = [g.get("memory_mib") for g in gpus if g.get("memory_mib")]
    tpu = bool(richest.get("tpu"))
    days = sorted({(r.result.started_at or r.result.finished_at)[:10] for r in runs
                   if (r.result.started_at or r.result.finished_at)})
    dates = days[0] if len(days) == 1 else (f"{days[0]}..{days[-1]}" if days else "undated")
    cpu = str(richest.get("cpu_model") or "unknown CPU")
    accel = (f"{len(gpus)}x {gpus[0].get('name')}" if gpus else ("TPU" if tpu else "CPU only"))
    simulated = richest.get("simulated")
    if simulated:  # a simulated GPU server (bench.sim): its model's figures, said everywhere
        accel = f"SIMULATED {simulated}: {accel}"
    facts = {
        "machine_id": machine_id,
        "CPU": f"{cpu}, {cores} core(s)" if cores else cpu,
        "memory": f"{memory / 2**30:.1f} GiB" if memory else "unknown",
        "GPUs": ", ".join(gpu_names) if gpu_names else "none",
        "TensorFlow": ", ".join(_values(envs, "tensorflow")) or "unknown",
        "Keras": ", ".join(_values(envs, "keras")) or "unknown",
        "Python": ", ".join(_values(envs, "python")) or "unknown",
        "host(s)": ", ".join(_values(envs, "host")) or "unknown",
        "platform": ", ".join(_values(envs, "platform")) or "unknown",
        "git commit(s)": ", ".join(
            sorted({f"{(e.get('git') or {}).get('commit', '')[:10]}"
                    f"{' (dirty)' if (e.get('git') or {}).get('dirty') else ''}"
                    for e in envs if (e.get("git") or {}).get("commit")})) or "unknown",
        "CUDA build": ", ".join(sorted({str((e.get("tf_build") or {}).get("is_cuda_build"))
                                        for e in envs if e.get("tf_build")})) or "unknown",
        "dates": dates,
    }
    if simulated:
        facts["SIMULATED"] = (f"every figure comes from the simulated server {simulated} "
                              f"(STRATBENCH_GPU_SIM): its profile's model, no real GPU")
    env_vars = richest.get("env_vars") or {}
    if env_vars:
        facts["environment variables"] = ", ".join(f"{k}={v}" for k, v in env_vars.items())
    return Machine(machine_id=machine_id, runs=runs, facts=facts,
                   cpu_only=not gpus and not tpu, cores=cores, memory_bytes=memory,
                   gpu_memory_bytes=min(gpu_mib) * 2**20 if gpu_mib else None,
                   hardware=f"{cpu.split(' @')[0]}, {cores} cores, {accel}" if cores
                   else f"{cpu}, {accel}", dates=dates)


def by_machine(runs: Sequence[RunView]) -> list[Machine]:
    """One Machine per machine_id, in order of first appearance."""
    groups: dict[str, list[RunView]] = {}
    for run in runs:
        groups.setdefault(run.machine, []).append(run)
    return [describe(mid, rs) for mid, rs in groups.items()]
