"""Expand axes (lists of values) into validated RunSpecs; the named presets of a sweep and
the benchmark matrices (pytest-benchmark, `bench nightly`)."""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from bench.errors import SpecError
from bench.hardware import Hardware
from bench.registry import Registry
from bench.spec import RunSpec, declaration, declared
from bench.strategies import STRATEGIES, StrategyFactory

# Axes a sweep may vary (the RunSpec fields declared cli="axis"); everything else in
# RunSpec is a fixed knob.
AXES = tuple(f.name for f in declaration() if f.info.cli == "axis")

# Axes only some strategies take; a value that none of a sweep's strategies takes is an
# error (a typo must never quietly measure the default), one that only some take is
# dropped for the others with a note.
STRATEGY_SPECIFIC = tuple(f.name for f in declaration()
                          if f.info.cli == "axis" and f.info.strategies != "all")


def _domain(axis: str) -> tuple[Any, ...] | None:
    """Values a strategy-specific axis can have at all, whatever the strategy: its
    declared choices, or the union of every strategy's own (None: an integer knob,
    which RunSpec checks)."""
    if declared(axis).info.strategies == "own":
        return tuple(dict.fromkeys(c for _, f in STRATEGIES.items() for c in getattr(f, axis)))
    return declared(axis).info.choices or None


def _default_of(axis: str) -> Any:
    return declared(axis).default


def takes(factory: StrategyFactory, axis: str, value: Any) -> bool:
    """Whether ``factory`` runs with ``axis=value`` (every strategy takes the default)."""
    if declared(axis).info.strategies == "own":
        return value in getattr(factory, axis)
    return value == _default_of(axis) or axis in factory.accepts


def _taken_by_none(axis: str, value: Any, sweep: list[StrategyFactory]) -> SpecError:
    names = ", ".join(f.name for f in sweep)
    domain = _domain(axis)
    if domain is not None and value not in domain:
        return SpecError(f"{axis} must be one of {', '.join(domain)}. "
                         f"Received: {axis}={value!r}")
    users = [n for n, f in STRATEGIES.items() if f not in sweep and takes(f, axis, value)]
    valid = sorted({str(v) for f in sweep for v in (domain or (_default_of(axis),))
                    if takes(f, axis, v)})
    return SpecError(
        f"{axis}={value!r} applies to none of the strategies in the sweep ({names}); "
        f"it is taken by {', '.join(users) or 'no strategy'}. Valid for this sweep: "
        f"{', '.join(valid)}. Received: {axis}={value!r}")


@dataclass(frozen=True)
class Expansion:
    """The validated configurations of a sweep, and what was dropped on the way."""

    specs: list[RunSpec]
    # One line per axis value that some of the sweep's strategies do not take (those
    # configurations run with the axis at its default).
    notes: list[str] = field(default_factory=list)


def expand_axes(axes: Mapping[str, Sequence[Any]], fixed: Mapping[str, Any] | None = None
                ) -> Expansion:
    """Cartesian product of ``axes`` (each a list), with ``fixed`` knobs applied.

    ``cross_device_ops`` and the multi-process knobs (STRATEGY_SPECIFIC) only vary
    for strategies that take them; the others get the default once, so
    ``--strategy mirrored,central_storage --cross-device-ops default,hierarchical_copy``
    gives three configurations, not four, and a note says hierarchical_copy was dropped
    for central_storage. A value that no strategy of the sweep takes raises SpecError
    naming the value and the valid choices.
    Duplicates are dropped, order is kept. Every spec is validated.
    """
    unknown = sorted(set(axes) - set(AXES))
    if unknown:
        raise SpecError(f"unknown axis {', '.join(unknown)}; valid: {', '.join(AXES)}. "
                        f"Received: {', '.join(unknown)}")
    strategy_names = list(axes.get("strategy") or [(fixed or {}).get("strategy", "")])
    sweep = list({n: STRATEGIES.get(n) for n in strategy_names}.values())
    notes = []
    for axis in STRATEGY_SPECIFIC:
        for value in dict.fromkeys(axes.get(axis, ())):
            if not any(takes(f, axis, value) for f in sweep):
                raise _taken_by_none(axis, value, sweep)
            others = [f.name for f in sweep if not takes(f, axis, value)]
            if others:
                notes.append(f"{axis}={value} does not apply to {', '.join(others)}; "
                             f"those configurations run with {axis}={_default_of(axis)}")
    names = [a for a in AXES if a in axes]
    specs: list[RunSpec] = []
    seen: set[str] = set()
    for combo in itertools.product(*(axes[a] for a in names)):
        values = dict(zip(names, combo, strict=True))
        factory = STRATEGIES.get(values["strategy"]) if "strategy" in values else sweep[0]
        for axis in STRATEGY_SPECIFIC:
            if axis in values and not takes(factory, axis, values[axis]):
                values[axis] = _default_of(axis)
        spec = RunSpec(**{**(fixed or {}), **values})
        if spec.key() not in seen:
            seen.add(spec.key())
            specs.append(spec)
    return Expansion(specs, notes)


def expand(axes: Mapping[str, Sequence[Any]], fixed: Mapping[str, Any] | None = None
           ) -> list[RunSpec]:
    """The configurations of ``expand_axes`` (for callers that need no notes)."""
    return expand_axes(axes, fixed).specs


# -- presets ----------------------------------------------------------------------
IN_PROCESS = ["default", "one_device", "mirrored", "central_storage"]


@dataclass(frozen=True)
class CpuWorkload:
    """One workload of the CPU preset and the points of it worth measuring."""

    name: str
    batches: list[int]  # global batches; two let the report fit the fixed overhead per step
    params: dict[str, Any]
    mirrored_devices: list[int]  # device counts of the multi-device in-process strategies
    single_device: list[str]  # the single-device references measured
    multi_process: list[str]  # multi-process strategies, at the first batch and 2 devices
    in_process: list[str] = field(default_factory=lambda: ["mirrored", "central_storage"])
    optimizer: str = "adam"

    def knobs(self, fixed: Mapping[str, Any]) -> dict[str, Any]:
        """The preset's ``fixed`` knobs with this workload's parameters and optimizer."""
        return {**fixed, "params": self.params, "optimizer": self.optimizer}


# A configuration that runs in processes of its own (ParameterServer, independent
# copies) is measured once in the first pass, in ~10 s of start-up against 5 s of ten
# windows: twenty windows measure it twice as long for the same start-up. ResNet50's
# sessions keep ten rounds, although they build for ~48 s against ~18 s of rounds: at
# 24 rounds (the session's noise is mostly its windows': scripts/session_noise) a
# session took ~105 s, and a 10-minute sweep could no longer give ResNet50 its second
# session, which is what settles its answer (a fresh clone's sweep at 24 rounds: one
# ResNet50 session, nothing settled, 57.7% measured).
ALONE_ROUNDS = 20
CPU_ROUNDS = 10  # windows of each configuration a session (the comment in preset_default)

# Chosen for information per second on a 2-core CPU, where logical devices share the
# cores (measured: a configuration costs ~5 s of start-up, mostly `import tensorflow`,
# against 1.5 s of windows; ResNet50 traces for 12 s on one device and 27 s on two):
# every single-device strategy runs the same computation, so one reference per workload
# is enough (the MLP, cheapest, also measures one_device beside default); 2 devices show
# what distribution costs (4 logical devices on 2 cores add overhead only: ask for them
# with --devices); ResNet50 at 32x32 with 10 classes, one batch, no multi-process
# variants beyond the independent baseline. CentralStorage cannot train Keras 3
# BatchNormalization with 2+ replicas (ResNet50), so it is measured on the MLP and CNN.
# ResNet50 trains with SGD and momentum 0.9, as the reference ResNet50 benchmarks do
# (tf_cnn_benchmarks, the Model Garden, MLPerf): Keras 3's Adam is half of each
# replica's graph (its per-variable updates), and with it the two-replica step took 20 s
# to trace and optimise against 13 s with SGD, a session 52-60 s against 37-44 s; its
# loss falls at the default learning rate (3.25 to 2.28 in ten windows).
CPU_WORKLOADS: list[CpuWorkload] = [
    CpuWorkload("mlp", [256, 1024], {}, [2], ["default", "one_device"],
                ["multi_worker_mirrored", "parameter_server", "independent"]),
    CpuWorkload("cnn", [64, 256], {}, [2], ["default"],
                ["multi_worker_mirrored", "parameter_server", "independent"]),
    CpuWorkload("resnet50", [16], {"image_size": 32, "classes": 10}, [2], ["default"],
                ["independent"], in_process=["mirrored"], optimizer="sgd"),
]


def preset_default(hw: Hardware, workloads: Sequence[str] = (), batches: Sequence[int] = (),
                   params: Mapping[str, Any] | None = None) -> list[RunSpec]:
    """What `make bench` runs: a matrix that fits the hardware found.

    ``workloads`` (``--workload``, a built-in name or a user's model) replaces the
    preset's workloads: a built-in one keeps its points, any other gets the generic
    points (``cpu_workload``); ``batches`` (``--batch``) and ``params`` (``--param``)
    replace theirs.

    CPU (logical devices sharing the cores): all three workloads; the in-process
    strategies at 1 and 2 devices and two batch sizes; the multi-process strategies and
    the independent-copies baseline at 2 devices. Short windows: every configuration is
    measured in
    two or more processes (``bench run --runs``), which is where the precision comes
    from; the sweep aims at 10 minutes on 2 cores.
    GPU: 1..N GPUs, ResNet50 at 224x224 with fixed per-replica batches, trained with the
    optimizer it has on CPUs (``preset_optimizer``).
    """
    if hw.gpus:
        n = len(hw.gpus)
        fixed = {"batch_mode": "per_replica", "repeats": 3, "max_seconds": 10.0,
                 "warmup_steps": 10, "timeout_s": 900.0}
        if params is not None:
            fixed["params"] = dict(params)
        gpu_specs: list[RunSpec] = []
        for name in list(workloads) or ["resnet50"]:
            gpu_specs += expand(
                {"workload": [name],
                 "strategy": [*IN_PROCESS, "multi_worker_mirrored", "independent"],
                 "devices": list(range(1, n + 1)), "batch": list(batches) or [64, 128]},
                {**fixed, "optimizer": preset_optimizer(name)})
        return [s for s in gpu_specs if _runs_on(s, hw)]
    # Ten windows a run, ten rounds a session of arms: the sessions' pair noise on the
    # Intel machine was mostly its windows' (round log ratios 0.07-0.18 SD, 3 rounds), and
    # a session's start-up and builds cost twice its three rounds (31% of a sweep measured;
    # 43% with six). Three steps a window at least, not more: at five a ResNet50 or
    # CNN-256 window doubled, a sweep measured 65-68% of its time instead of 60-63%, but
    # its answers' median half-width grew from 10% to 15% and it settled one place of five
    # instead of two or three: longer windows cost sessions, and a place's precision comes
    # from its sessions (runs differ process to process more than window to window).
    fixed = {"repeats": CPU_ROUNDS, "max_seconds": 0.5, "min_steps": 3, "max_steps": 400,
             "warmup_steps": 3, "timeout_s": 300.0}
    chosen = [cpu_workload(name, batches, params)
              for name in workloads or [w.name for w in CPU_WORKLOADS]]
    specs: list[RunSpec] = []
    for w in chosen:
        knobs = w.knobs(fixed)
        # The second single-device reference at the first batch only: a cross-check.
        specs += expand({"workload": [w.name], "strategy": w.single_device[:1],
                         "devices": [1], "batch": w.batches}, knobs)
        if w.single_device[1:]:
            specs += expand({"workload": [w.name], "strategy": w.single_device[1:],
                             "devices": [1], "batch": w.batches[:1]}, knobs)
        specs += expand({"workload": [w.name], "strategy": w.in_process,
                         "devices": w.mirrored_devices, "batch": w.batches}, knobs)
    for w in chosen:
        for strategy in w.multi_process:
            specs += expand({"workload": [w.name], "strategy": [strategy], "devices": [2],
                             "batch": w.batches[:1]},
                            {**w.knobs(fixed), "repeats": _windows(strategy)})
        knobs = {**w.knobs(fixed), "repeats": _windows("independent")}
        # The ideal-scaling baseline at every replica count the in-process ones reach.
        # Not two copies sharing one device: a logical CPU device is a set of cores, so
        # two copies on one device of 2 cores and one a device of 1 core each train on
        # the same 2 cores (38 stored sweeps of this kind, MLP and CNN: the shared
        # ones' throughput 0.95-1.05 times, geometric mean 1.002). What several workers
        # on one GPU cost is a GPU's question (``--workers-per-device``).
        specs += expand({"workload": [w.name], "strategy": ["independent"],
                         "devices": w.mirrored_devices, "batch": w.batches[:1]}, knobs)
    unique = {s.key(): s for s in reversed(specs)}  # first occurrence wins, order kept
    return [s for s in specs if unique.pop(s.key(), None) is s and _runs_on(s, hw)]


def preset_optimizer(name: str) -> str:
    """The optimizer the default preset trains workload ``name`` with, on CPUs and GPUs
    alike (the CPU preset's: ResNet50 with SGD and momentum, as its reference benchmarks;
    a per-variable optimizer such as Adam adds a kernel per variable and replica, which
    weighs on in-process replicas more than on a process per GPU)."""
    return cpu_workload(name).optimizer


def _windows(strategy: str) -> int:
    """Windows per run of ``strategy`` in the CPU preset: a session's ``CPU_ROUNDS``, or,
    where it runs in processes of its own that cannot take turns with a session's arms
    (not ``paced_processes``), ``ALONE_ROUNDS``."""
    return CPU_ROUNDS if STRATEGIES.get(strategy).paced_processes else ALONE_ROUNDS


def cpu_workload(name: str, batches: Sequence[int] = (),
                 params: Mapping[str, Any] | None = None) -> CpuWorkload:
    """The CPU preset's points for workload ``name``: a built-in one's own, any other
    (the Transformer, a user's model) the CNN's: one single-device reference, the
    in-process strategies at 2 devices and two batches, the multi-process ones at the
    first. ``batches``, where given, replace the points' own; ``params`` are laid over
    theirs (ResNet50's 32x32 images stay unless ``image_size`` is given)."""
    known = {w.name: w for w in CPU_WORKLOADS}
    base = known.get(name) or replace(known["cnn"], name=name, params={})
    return replace(base, batches=list(batches) or base.batches,
                   params={**base.params, **(params or {})})


def _runs_on(spec: RunSpec, hw: Hardware) -> bool:
    # The default preset leaves out what is unsupported by construction (one_device
    # at 4 devices is not a finding); `bench run` with explicit axes keeps them.
    return STRATEGIES.get(spec.strategy).unsupported_reason(spec, hw) is None


def preset_smoke(hw: Hardware, workloads: Sequence[str] = (), batches: Sequence[int] = (),
                 params: Mapping[str, Any] | None = None) -> list[RunSpec]:
    """A tiny end-to-end sweep: tiny MLP and CNN (or ``workloads``), three strategies,
    1-2 devices, batch 32 (or ``batches``)."""
    fixed: dict[str, Any] = {"size": "tiny", "repeats": 2, "max_seconds": 0.5, "min_steps": 3,
                             "max_steps": 50, "warmup_steps": 2, "timeout_s": 120.0}
    if params is not None:
        fixed["params"] = dict(params)
    specs = expand({"workload": list(workloads) or ["mlp", "cnn"],
                    "strategy": ["one_device", "mirrored", "central_storage"],
                    "devices": [1, 2], "batch": list(batches) or [32]}, fixed)
    return [s for s in specs if _runs_on(s, hw)]


# A preset takes the hardware, and the workloads, batches and parameters that narrow it
# (``--workload``, ``--batch``, ``--param`` beside ``--preset``; empty: its own).
Preset = Callable[[Hardware, Sequence[str], Sequence[int], "Mapping[str, Any] | None"],
                  list[RunSpec]]
PRESETS: dict[str, Preset] = {"default": preset_default, "smoke": preset_smoke}
# The axes a preset can be narrowed by; the others are its own.
PRESET_AXES = ("workload", "batch")


# -- benchmark matrices: pytest-benchmark (benchmarks/), `bench nightly`, scripts ------
# Short windows: the run is what a comparison judges (bench.regress.compare); windows only
# say how precisely their own run was measured.
BENCHMARK_WINDOWS: dict[str, Any] = {"repeats": 6, "min_steps": 3, "max_steps": 100_000,
                                     "timeout_s": 300.0}


def _two_devices(hw: Hardware) -> int:
    # Logical CPU devices share the cores: two of them measure strategy overhead.
    return 2 if not hw.gpus else min(2, len(hw.gpus))


def nightly_matrix(hw: Hardware) -> list[RunSpec]:
    """Every workload on one device (one_device) and on two (mirrored)."""
    specs = []
    for workload, batch, params in (("mlp", 256, {}), ("cnn", 64, {}),
                                    ("resnet50", 16, {"image_size": 32, "classes": 10})):
        common: dict[str, Any] = {**BENCHMARK_WINDOWS, "workload": workload, "batch": batch,
                                  "params": params, "max_seconds": 0.5, "warmup_steps": 3}
        specs.append(RunSpec(strategy="one_device", devices=1, **common))
        if _two_devices(hw) > 1:
            specs.append(RunSpec(strategy="mirrored", devices=_two_devices(hw), **common))
    return specs


def _mlp(strategy: str, devices: int) -> RunSpec:
    # The full-size MLP (steps of a few ms): the tiny one steps in ~0.4 ms, where
    # dispatch overhead blurs an injected slowdown.
    return RunSpec(workload="mlp", strategy=strategy, devices=devices, batch=128,
                   max_seconds=0.15, warmup_steps=5, **BENCHMARK_WINDOWS)


def tiny_matrix(hw: Hardware) -> list[RunSpec]:
    """One configuration (~10 s): what the test suite benchmarks."""
    return [_mlp("one_device", 1)]


def small_matrix(hw: Hardware) -> list[RunSpec]:
    """Two cheap configurations, one and two devices (scripts.noise_floor's default)."""
    two = _two_devices(hw)
    return [_mlp("one_device", 1)] + ([_mlp("mirrored", two)] if two > 1 else [])


BENCHMARK_MATRICES: Registry[Callable[[Hardware], list[RunSpec]]] = Registry(
    "benchmark matrix")
BENCHMARK_MATRICES.register("nightly", nightly_matrix)
BENCHMARK_MATRICES.register("small", small_matrix)
BENCHMARK_MATRICES.register("tiny", tiny_matrix)


def in_rounds(specs: Sequence[RunSpec], runs: int) -> list[tuple[RunSpec, int]]:
    """(spec, run number) pairs: every configuration once, then again, ``runs`` times, so
    that a slow drift of the machine touches every configuration alike."""
    return [(spec, r) for r in range(1, runs + 1) for spec in specs]


def block_rounds(rounds: int, builds: int) -> list[int]:
    """``rounds`` split into ``builds`` blocks as evenly as possible, the larger first,
    none below 2 rounds (a block's round orders pair a round with its reverse)."""
    blocks = max(1, min(builds, rounds // 2))
    return [rounds // blocks + (1 if b < rounds % blocks else 0) for b in range(blocks)]


def round_orders(arms: int, rounds: int, rng: random.Random) -> list[list[int]]:
    """The arms' order in each round: a random order, then its reverse, and again.

    Within each pair of rounds every arm holds mirrored positions, so a steady trend
    (the machine warming, a neighbour starting) adds the same to every arm's mean.
    """
    orders: list[list[int]] = []
    while len(orders) < rounds:
        order = rng.sample(range(arms), arms)
        orders.append(order)
        if len(orders) < rounds:
            orders.append(order[::-1])
    return orders
