"""Expand axes (lists of values) into validated RunSpecs, and the named presets."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from bench.errors import SpecError
from bench.hardware import Hardware
from bench.spec import (
    COMMUNICATIONS,
    PARTITIONERS,
    STRATEGY_KNOBS,
    RunSpec,
    strategy_knob_defaults,
)
from bench.strategies import STRATEGIES, StrategyFactory

# Axes a sweep may vary; everything else in RunSpec is a fixed knob.
AXES = ("workload", "size", "strategy", "cross_device_ops", "devices", "batch", "precision",
        "xla", "grad_accum", "steps_per_call", "data", *STRATEGY_KNOBS)

# Axes only some strategies take; a value that none of a sweep's strategies takes is an
# error (a typo must never quietly measure the default), one that only some take is
# dropped for the others with a note.
STRATEGY_SPECIFIC = ("cross_device_ops", *STRATEGY_KNOBS)


def _domain(axis: str) -> tuple[str, ...] | None:
    """Values a strategy-specific axis can have at all, whatever the strategy (None: an
    integer knob, which RunSpec checks)."""
    if axis == "cross_device_ops":
        return tuple(dict.fromkeys(c for _, f in STRATEGIES.items() for c in f.cross_device_ops))
    return {"communication": COMMUNICATIONS, "partitioner": PARTITIONERS}.get(axis)


def _default_of(axis: str) -> Any:
    return "default" if axis == "cross_device_ops" else strategy_knob_defaults()[axis]


def takes(factory: StrategyFactory, axis: str, value: Any) -> bool:
    """Whether ``factory`` runs with ``axis=value`` (every strategy takes the default)."""
    if axis == "cross_device_ops":
        return value in factory.cross_device_ops
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

    ``cross_device_ops`` and the multi-process knobs (spec.STRATEGY_KNOBS) only vary
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
# (workload, two global batch sizes, parameters) of the CPU preset. ResNet50 at
# 32x32 with 10 classes: 224x224 would take minutes per configuration here.
CPU_WORKLOADS: list[tuple[str, list[int], dict[str, Any]]] = [
    ("mlp", [256, 1024], {}),
    ("cnn", [64, 256], {}),
    ("resnet50", [16, 32], {"image_size": 32, "classes": 10}),
]


def preset_default(hw: Hardware) -> list[RunSpec]:
    """What `make bench` runs: a matrix that fits the hardware found.

    CPU (logical devices sharing the cores): all three workloads, the four
    in-process strategies, 1/2/4 devices, two global batch sizes each, then the
    multi-process strategies at one batch size; short windows so the sweep ends
    within ~15 minutes on 2 cores. ResNet50 uses a
    32x32 input and 10 classes there (224x224 would take minutes per configuration;
    its first step alone takes ~40 s at 4 logical devices).
    GPU: 1..N GPUs, ResNet50 at 224x224 with fixed per-replica batches.
    """
    if hw.gpus:
        n = len(hw.gpus)
        fixed = {"batch_mode": "per_replica", "repeats": 3, "max_seconds": 10.0,
                 "warmup_steps": 10, "timeout_s": 900.0}
        return expand({"workload": ["resnet50"],
                       "strategy": [*IN_PROCESS, "multi_worker_mirrored", "independent"],
                       "devices": list(range(1, n + 1)), "batch": [64, 128]}, fixed)
    fixed = {"repeats": 3, "max_seconds": 1.5, "min_steps": 5, "max_steps": 400,
             "warmup_steps": 3, "timeout_s": 300.0}
    specs: list[RunSpec] = []
    for workload, batches, params in CPU_WORKLOADS:
        specs += expand({"workload": [workload], "strategy": IN_PROCESS,
                         "devices": [1, 2, 4], "batch": batches},
                        {**fixed, "params": params})
    # Multi-process strategies at the first batch size: the same replica counts as
    # mirrored (so the report can compare them), the independent-copies baseline,
    # and two processes sharing one device (what several workers on a GPU cost).
    for workload, batches, params in CPU_WORKLOADS:
        devices = [2] if workload == "resnet50" else [2, 4]
        strategies = ["multi_worker_mirrored", "independent"] + (
            [] if workload == "resnet50" else ["parameter_server"])
        specs += expand({"workload": [workload], "strategy": strategies, "devices": devices,
                         "batch": batches[:1]}, {**fixed, "params": params})
        specs += expand({"workload": [workload], "strategy": ["independent"], "devices": [1],
                         "batch": batches[:1]},
                        {**fixed, "params": params, "workers_per_device": 2})
    return [s for s in specs if _runs_on(s, hw)]


def _runs_on(spec: RunSpec, hw: Hardware) -> bool:
    # The default preset leaves out what is unsupported by construction (one_device
    # at 4 devices is not a finding); `bench run` with explicit axes keeps them.
    return STRATEGIES.get(spec.strategy).unsupported_reason(spec, hw) is None


def preset_smoke(hw: Hardware) -> list[RunSpec]:
    """A tiny end-to-end sweep: tiny MLP and CNN, three strategies, 1-2 devices."""
    fixed = {"size": "tiny", "repeats": 2, "max_seconds": 0.5, "min_steps": 3,
             "max_steps": 50, "warmup_steps": 2, "timeout_s": 120.0}
    specs = expand({"workload": ["mlp", "cnn"], "strategy": ["one_device", "mirrored",
                                                             "central_storage"],
                    "devices": [1, 2], "batch": [32]}, fixed)
    return [s for s in specs if _runs_on(s, hw)]


PRESETS = {"default": preset_default, "smoke": preset_smoke}
