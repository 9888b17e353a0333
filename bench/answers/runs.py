"""A flat, read-only view of one stored result, and the machines the runs came from.

``RunView`` reads the typed fields of a ``RunResult`` (optional probe figures are
None where a run was made without the probes) and adds what the reports group by:
machine, variant, strategy label. ``by_machine`` groups the views per fingerprint
``machine_id`` and describes each machine from the stored fingerprints only: figures
from different machines are never averaged or ranked together. Strategy traits come
from the registry (``bench.strategies``), never from names spelled here. Nothing here
imports TensorFlow.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from bench.results.schema import AllReduceFigures, Communication, RunResult, TaskFigures
from bench.spec import RunSpec, declaration, label_tokens, strategy_label, workload_label
from bench.strategies import STRATEGIES

MIB = 2**20
# Read from the strategy registry: adding a strategy never touches reports/.
ONE_DEVICE_BASELINES = tuple(sorted(
    (n for n, f in STRATEGIES.items() if f.single_device_rank is not None),
    key=lambda n: STRATEGIES.get(n).single_device_rank or 0))  # best first
# Baselines: measured and shown as a ceiling, never recommended (independent copies).
BASELINES = tuple(n for n, f in STRATEGIES.items() if not f.is_choice)
IDEAL_BASELINE = BASELINES[0]  # the ideal-scaling reference ("vs independent")


def trait_of(strategy: str) -> str:
    """Why a strategy behaves as it does, from its registry entry."""
    if strategy in STRATEGIES:
        return STRATEGIES.get(strategy).trait or f"of how {strategy} works"
    return f"of how {strategy} works"


@dataclass(frozen=True)
class Variant:
    """What a group of comparable runs shares: the machine, the workload parameters and
    the value of every RunSpec field declared ``variant`` (``bench.spec.FieldInfo``:
    what makes two runs measure different things, beyond strategy, devices and batch),
    read as attributes: ``variant.workload``, ``variant.data``.
    """

    machine: str
    params: str  # JSON of the workload parameters, sorted
    # (name, value) of the spec type's variant fields, in declaration order.
    values: tuple[tuple[str, Any], ...]
    spec_type: type[RunSpec] = dataclasses.field(default=RunSpec, compare=False, repr=False)

    def __getattr__(self, name: str) -> Any:
        # Reached only for names that are not attributes: the variant fields.
        for key, value in self.__dict__.get("values", ()):
            if key == name:
                return value
        raise AttributeError(f"Variant has no field {name!r}. Received: {name!r}")

    def label(self) -> str:
        """Short human label: ``mlp``, ``resnet50 image_size=32 classes=10 mixed_bfloat16``,
        with the same token for each field as ``RunSpec.label``."""
        parts = [workload_label(self.workload, self.size)]
        parts += [f"{k}={v}" for k, v in json.loads(self.params).items()]
        parts += label_tokens(self, [f for f in declaration(self.spec_type) if f.info.variant])
        return " ".join(parts)

    def replace(self, **changes: Any) -> Variant:
        """This variant with some fields changed (e.g. ``data="synthetic"``: its twin)."""
        unknown = sorted(set(changes) - {k for k, _ in self.values})
        if unknown:
            raise AttributeError(f"Variant has no field(s) {', '.join(unknown)}. "
                                 f"Received: {changes!r}")
        return dataclasses.replace(
            self, values=tuple((k, changes.get(k, v)) for k, v in self.values))

    def with_data(self, data: str) -> Variant:
        return self.replace(data=data)


@dataclass(frozen=True)
class RunView:
    """One result with the figures the reports use, optional ones resolved."""

    result: RunResult
    machine: str
    variant: Variant
    strategy: str  # label, e.g. "mirrored(hierarchical_copy)"
    base_strategy: str  # registry name, e.g. "mirrored"
    replicas: int
    devices: int
    global_batch: int
    per_replica_batch: int
    batch_mode: str
    batch_setting: int  # the user's --batch value, read per batch_mode

    @property
    def key(self) -> str:
        return self.result.key

    @property
    def status(self) -> str:
        return self.result.status

    @property
    def ok(self) -> bool:
        return self.result.status == "ok" and self.result.figures is not None

    @property
    def throughput(self) -> float | None:
        f = self.result.figures
        return f.global_throughput if f is not None and self.ok else None

    @property
    def step_s(self) -> float | None:
        f = self.result.figures
        return f.step_time.median_s if f is not None and self.ok else None

    @property
    def cv(self) -> float | None:
        f = self.result.figures
        return f.throughput_cv if f is not None and self.ok else None

    @property
    def window_range(self) -> tuple[float, float] | None:
        """Lowest and highest window throughput (examples/s), the spread of repeats."""
        f = self.result.figures
        if f is None or not f.windows:
            return None
        values = [w.global_throughput for w in f.windows]
        return min(values), max(values)

    @property
    def device_peak_bytes(self) -> int | None:
        """Largest device peak; process-wide on CPU (see ``memory_scope``)."""
        f = self.result.figures
        if f is None or not f.memory.device_peak_bytes:
            return None
        return max(f.memory.device_peak_bytes.values())

    @property
    def memory_scope(self) -> str | None:
        f = self.result.figures
        return f.memory.device_scope if f is not None else None

    @property
    def host_peak_bytes(self) -> int | None:
        f = self.result.figures
        return f.memory.host_peak_rss_bytes if f is not None else None

    # -- optional figures: absent from runs made without the probes -----------
    @property
    def communication(self) -> Communication | None:
        f = self.result.figures
        return f.communication if f is not None else None

    @property
    def comm_fraction(self) -> float | None:
        c = self.communication
        return c.comm_fraction if c is not None else None

    @property
    def mfu(self) -> float | None:
        f = self.result.figures
        return f.mfu if f is not None else None

    @property
    def tasks(self) -> list[TaskFigures]:
        f = self.result.figures
        return list(f.tasks or []) if f is not None else []

    @property
    def combination(self) -> str | None:
        f = self.result.figures
        return f.combination if f is not None else None

    @property
    def allreduce(self) -> AllReduceFigures | None:
        return self.result.allreduce

    @property
    def reason_line(self) -> str:
        """First line of the reason (the rest is usually a log tail)."""
        return (self.result.reason or "").strip().splitlines()[0] if self.result.reason else ""


def variant_of(result: RunResult) -> Variant:
    """The variant of ``result``'s spec, from the declaration of the spec's type; a
    field the stored spec lacks (written before the field existed) reads as its
    default."""
    spec = result.spec
    spec_type = type(spec)
    values = tuple((f.name, getattr(spec, f.name, f.default))
                   for f in declaration(spec_type) if f.info.variant)
    return Variant(machine=machine_of(result),
                   params=json.dumps(dict(spec.params), sort_keys=True), values=values,
                   spec_type=spec_type)


def place_identity(spec: RunSpec) -> tuple[Any, ...]:
    """What the place of ``spec`` is made of, its machine aside: the variant (workload
    parameters and every field declared ``variant``) and the batch setting. Two
    configurations of one place differ in strategy, devices and their knobs only."""
    values = tuple((f.name, getattr(spec, f.name, f.default))
                   for f in declaration(type(spec)) if f.info.variant)
    return (json.dumps(dict(spec.params), sort_keys=True), values, spec.batch_mode,
            spec.batch)


def machine_of(result: RunResult) -> str:
    """The fingerprint's machine_id: results of different machines are never mixed."""
    return str(result.environment.get("machine_id") or "unknown")


def view(result: RunResult) -> RunView:
    spec = result.spec
    return RunView(result=result, machine=machine_of(result), variant=variant_of(result),
                   strategy=strategy_label(spec), base_strategy=spec.strategy,
                   replicas=result.replicas, devices=spec.devices,
                   global_batch=result.global_batch,
                   per_replica_batch=result.per_replica_batch, batch_mode=spec.batch_mode,
                   batch_setting=spec.batch)


def views(results: Iterable[RunResult]) -> list[RunView]:
    return [view(r) for r in results]

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
