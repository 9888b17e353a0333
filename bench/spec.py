"""The run specification: one configuration of a sweep, validated at construction."""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import MISSING, asdict, dataclass, field, fields
from typing import Any

from bench.errors import SpecError

BATCH_MODES = ("global", "per_replica")
PRECISIONS = ("float32", "mixed_bfloat16", "mixed_float16")
DATA_SOURCES = ("synthetic", "tfdata")
OPTIMIZERS = ("sgd", "adam")
SIZES = ("default", "tiny")
COMMUNICATIONS = ("auto", "ring", "nccl")
PARTITIONERS = ("none", "fixed", "min_size")
# "train" measures training; "allreduce" runs the nccl-tests-style probe
# (bench.child.probes.allreduce) through the strategy's cross-device path instead.
MODES = ("train", "allreduce")
# How training is driven: "custom" (the harness's own loop: strategy.run inside a
# tf.function, bench.child.trainer) or "fit" (Keras model.compile + model.fit,
# bench.child.fit), the way most users train.
LOOPS = ("custom", "fit")
# Keras major version the child trains with: 3 (the `keras` package) or 2 (tf_keras,
# selected with TF_USE_LEGACY_KERAS=1; the `keras2` extra installs it).
KERAS_VERSIONS = (3, 2)
ALLREDUCE_MIN_BYTES = 1024  # the probe's sizes: 1 KiB doubling up to allreduce_max_bytes

# Fields that change how a run is supervised but not what is measured; they are
# left out of the identity key so that e.g. raising a timeout resumes a sweep.
_NOT_IDENTITY = ("timeout_s",)
_ALWAYS_IN_KEY = ("workload", "strategy", "devices", "batch")


# Knobs only some strategies use (each strategy lists the ones it accepts); every
# other strategy must leave them at their RunSpec default.
STRATEGY_KNOBS = ("workers", "ps_tasks", "workers_per_device", "communication", "partitioner")


def strategy_knob_defaults() -> dict[str, Any]:
    """``STRATEGY_KNOBS`` with their RunSpec defaults."""
    defaults = _defaults()
    return {k: defaults[k] for k in STRATEGY_KNOBS}


def _check_knobs_apply(spec: RunSpec, accepts: tuple[str, ...]) -> None:
    """Refuse a strategy knob away from its default that ``spec``'s strategy does not
    accept. Checked here rather than in the registry, which must not import the spec."""
    from bench.strategies import STRATEGIES

    for name, default in strategy_knob_defaults().items():
        value = getattr(spec, name)
        if value != default and name not in accepts:
            users = [n for n, f in STRATEGIES.items() if name in f.accepts]
            raise SpecError(
                f"RunSpec.{name} does not apply to strategy {spec.strategy} (it is used by "
                f"{', '.join(users) or 'no strategy yet'}). Received: {name}={value!r}")


def _defaults() -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in fields(RunSpec):
        if f.default is not MISSING:
            out[f.name] = f.default
        elif f.default_factory is not MISSING:
            out[f.name] = f.default_factory()
    return out


def _fail(field_name: str, value: Any, rule: str) -> SpecError:
    return SpecError(f"RunSpec.{field_name} {rule}. Received: {field_name}={value!r}")


def _positive_int(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise _fail(name, value, "must be a positive integer")


def _choice(name: str, value: Any, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise _fail(name, value, f"must be one of {', '.join(choices)}")


def _size_text(n: int) -> str:
    for name, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale}{name}"
    return f"{n}B"


def knob_labels(knobs: Any) -> list[str]:
    """Labels of the training knobs that differ from their defaults.

    Shared by every label of a configuration (``RunSpec.label``, the report's
    variants), so that a knob reads the same everywhere.
    """
    parts = []
    if knobs.precision != "float32":
        parts.append(knobs.precision)
    if knobs.xla:
        parts.append("xla")
    if knobs.grad_accum > 1:
        parts.append(f"accum={knobs.grad_accum}")
    if knobs.steps_per_call > 1:
        parts.append(f"spc={knobs.steps_per_call}")
    if knobs.data != "synthetic":
        parts.append(f"data={knobs.data}")
    # Read with defaults: label holders written before these knobs existed lack them.
    if getattr(knobs, "loop", "custom") != "custom":
        parts.append(f"loop={knobs.loop}")
    if getattr(knobs, "keras", 3) != 3:
        parts.append(f"keras{knobs.keras}")
    return parts


@dataclass(frozen=True)
class RunSpec:
    """One configuration: workload x strategy x devices x batch x knobs.

    ``batch`` is interpreted according to ``batch_mode``; the resolved
    ``global_batch`` and ``per_replica_batch`` are both stored with results.
    One *step* is one optimizer update; with ``grad_accum = A`` a step
    processes ``A * global_batch`` examples.
    """

    workload: str
    strategy: str
    devices: int = 1
    batch: int = 64
    batch_mode: str = "global"
    size: str = "default"
    params: Mapping[str, Any] = field(default_factory=dict)
    cross_device_ops: str = "default"
    precision: str = "float32"
    xla: bool = False
    grad_accum: int = 1
    steps_per_call: int = 1
    data: str = "synthetic"
    # Adam at 1e-3 trains all three workloads from scratch within the few dozen steps
    # a benchmark takes (SGD+momentum at 0.01 made ResNet50's loss rise at first).
    optimizer: str = "adam"
    learning_rate: float = 1e-3
    warmup_steps: int = 3
    min_steps: int = 5
    max_steps: int = 200
    max_seconds: float = 5.0
    repeats: int = 3
    seed: int = 0
    timeout_s: float = 600.0
    gpu_memory_limit_mb: int | None = None
    # profile_steps > 0 captures a profile of that many steps after
    # the throughput windows (never inside them) and derives the communication split.
    mode: str = "train"
    profile_steps: int = 0
    allreduce_max_bytes: int = 256 * 2**20
    # Multi-process strategies (see bench/strategies.py for how each uses
    # them). Worker processes: 0 = one per device (the natural layout); in-process
    # strategies always run one process. ``devices`` stays the run's total.
    workers: int = 0
    # Parameter-server tasks (parameter_server only): 0 = one.
    ps_tasks: int = 0
    # Worker processes sharing one device (GPU: each gets a memory slice; CPU: the
    # processes share that device's cores).
    workers_per_device: int = 1
    # MultiWorkerMirrored collective implementation.
    communication: str = "auto"
    # ParameterServer variable partitioning.
    partitioner: str = "none"
    # The training loop (LOOPS) and the Keras major version (KERAS_VERSIONS). Which
    # strategies train with which: each strategy's ``loop_limits`` (bench/strategies.py).
    loop: str = "custom"
    keras: int = 3

    def __post_init__(self) -> None:
        # Imported here: both registries import this module for type hints.
        from bench.strategies import STRATEGIES
        from workloads import WORKLOADS

        workload = WORKLOADS.get(self.workload)
        strategy = STRATEGIES.get(self.strategy)
        for name in ("devices", "batch", "grad_accum", "steps_per_call", "min_steps",
                     "max_steps", "repeats", "workers_per_device"):
            _positive_int(name, getattr(self, name))
        for name in ("workers", "ps_tasks"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise _fail(name, value, "must be an integer >= 0 (0 = automatic)")
        if isinstance(self.warmup_steps, bool) or not isinstance(self.warmup_steps, int) \
                or self.warmup_steps < 0:
            raise _fail("warmup_steps", self.warmup_steps, "must be an integer >= 0")
        if self.max_steps < self.min_steps:
            raise _fail("max_steps", self.max_steps,
                        f"must be >= min_steps ({self.min_steps})")
        for name in ("max_seconds", "timeout_s", "learning_rate"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) \
                    or not math.isfinite(value) or value <= 0:
                raise _fail(name, value, "must be a positive number")
        _choice("batch_mode", self.batch_mode, BATCH_MODES)
        _choice("precision", self.precision, PRECISIONS)
        _choice("data", self.data, DATA_SOURCES)
        _choice("optimizer", self.optimizer, OPTIMIZERS)
        _choice("size", self.size, SIZES)
        _choice("communication", self.communication, COMMUNICATIONS)
        _choice("partitioner", self.partitioner, PARTITIONERS)
        _choice("loop", self.loop, LOOPS)
        if isinstance(self.keras, bool) or self.keras not in KERAS_VERSIONS:
            raise _fail("keras", self.keras,
                        f"must be one of {', '.join(map(str, KERAS_VERSIONS))}")
        if not isinstance(self.xla, bool):
            raise _fail("xla", self.xla, "must be true or false")
        if self.gpu_memory_limit_mb is not None:
            _positive_int("gpu_memory_limit_mb", self.gpu_memory_limit_mb)
        if not isinstance(self.seed, int) or isinstance(self.seed, bool):
            raise _fail("seed", self.seed, "must be an integer")
        _choice("mode", self.mode, MODES)
        if self.mode == "allreduce" and strategy.no_allreduce_reason:
            raise _fail("mode", self.mode, f"cannot be used with strategy {self.strategy}: "
                                           f"{strategy.no_allreduce_reason}")
        if isinstance(self.profile_steps, bool) or not isinstance(self.profile_steps, int) \
                or self.profile_steps < 0:
            raise _fail("profile_steps", self.profile_steps, "must be an integer >= 0")
        if self.mode != "train" and self.profile_steps:
            raise _fail("profile_steps", self.profile_steps,
                        f"must be 0 in mode {self.mode!r} (only training runs are profiled)")
        _positive_int("allreduce_max_bytes", self.allreduce_max_bytes)
        if self.allreduce_max_bytes < ALLREDUCE_MIN_BYTES:
            raise _fail("allreduce_max_bytes", self.allreduce_max_bytes,
                        f"must be >= {ALLREDUCE_MIN_BYTES} (the smallest probe size)")
        strategy.validate(self)
        _check_knobs_apply(self, strategy.accepts)
        workload.resolve(self.size, self.params)  # raises on unknown or bad parameters
        if self.batch_mode == "global" and self.batch % STRATEGIES.get(
                self.strategy).batch_divisor(self):
            raise _fail(
                "batch", self.batch,
                f"(global) must be divisible by the {self.replicas} replicas of "
                f"{self.strategy} on {self.devices} devices; use e.g. "
                f"{self.replicas * max(1, self.batch // self.replicas)} or batch_mode=per_replica",
            )

    # -- derived -------------------------------------------------------------
    @property
    def replicas(self) -> int:
        from bench.strategies import STRATEGIES

        return STRATEGIES.get(self.strategy).replicas(self)

    @property
    def global_batch(self) -> int:
        """Examples in one synchronous step across all replicas (see strategies)."""
        from bench.strategies import STRATEGIES

        return STRATEGIES.get(self.strategy).global_batch(self)

    @property
    def per_replica_batch(self) -> int:
        from bench.strategies import STRATEGIES

        return STRATEGIES.get(self.strategy).per_replica_batch(self)

    @property
    def examples_per_step(self) -> int:
        return self.global_batch * self.grad_accum

    def workload_params(self) -> dict[str, Any]:
        from workloads import WORKLOADS

        return WORKLOADS.get(self.workload).resolve(self.size, self.params)

    # -- identity and serialisation -----------------------------------------
    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["params"] = dict(self.params)
        return d

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunSpec:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise SpecError(f"RunSpec has no field(s) {', '.join(unknown)}. "
                            f"Received: {dict((k, data[k]) for k in unknown)!r}")
        return cls(**dict(data))

    def replace(self, **changes: Any) -> RunSpec:
        d = self.to_dict()
        d.update(changes)
        return RunSpec.from_dict(d)

    def label(self) -> str:
        """Short human label, e.g. ``mlp mirrored n=2 b=256``."""
        parts = [self.workload if self.size == "default" else f"{self.workload}[{self.size}]",
                 self.strategy if self.cross_device_ops == "default"
                 else f"{self.strategy}({self.cross_device_ops})",
                 f"n={self.devices}", f"b={self.global_batch}" if self.mode == "train"
                 else f"up to {_size_text(self.allreduce_max_bytes)}"]
        parts += knob_labels(self)
        if self.workers:
            parts.append(f"workers={self.workers}")
        if self.ps_tasks:
            parts.append(f"ps={self.ps_tasks}")
        if self.workers_per_device > 1:
            parts.append(f"per_device={self.workers_per_device}")
        if self.communication != "auto":
            parts.append(self.communication)
        if self.partitioner != "none":
            parts.append(f"partition={self.partitioner}")
        if self.mode != "train":
            parts.append(self.mode)
        if self.profile_steps:
            parts.append(f"profile={self.profile_steps}")
        return " ".join(parts)

    def key(self) -> str:
        """Stable, filename-safe identity: readable prefix + hash of every identity field."""
        # Fields at their default are left out, so that adding a knob in a later
        # version (with a default that keeps the old behaviour) keeps every existing
        # key, and old sweeps still resume.
        defaults = _defaults()
        ident = {k: v for k, v in self.to_dict().items()
                 if k not in _NOT_IDENTITY and (k in _ALWAYS_IN_KEY or v != defaults.get(k))}
        digest = hashlib.sha1(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:10]
        cdo = "" if self.cross_device_ops == "default" else f"-{self.cross_device_ops}"
        mode = "" if self.mode == "train" else f"{self.mode}."
        # Loop and Keras lane in the readable part only away from their defaults, so
        # that every key written before they existed stays the same.
        lane = ("" if self.loop == "custom" else f".{self.loop}") + \
            ("" if self.keras == 3 else f".keras{self.keras}")
        return (f"{mode}{self.workload}-{self.size}.{self.strategy}{cdo}.n{self.devices}"
                f".b{self.global_batch}.{self.precision}{lane}.{digest}")
