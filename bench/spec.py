"""The run specification: one configuration of a sweep, validated at construction."""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import MISSING, asdict, dataclass, field, fields
from typing import Any, Literal

from bench.errors import SpecError
from bench.lanes import LANES
from bench.strategies import STRATEGIES
from workloads import UserWorkload, find_workload

BATCH_MODES = ("global", "per_replica")
PRECISIONS = ("float32", "mixed_bfloat16", "mixed_float16")
DATA_SOURCES = ("synthetic", "tfdata")
OPTIMIZERS = ("sgd", "adam")
# Copies an optimizer keeps of each weight besides the weight and its gradient (SGD's
# momentum; Adam's two moments): the memory a configuration holds, priced before it runs.
OPTIMIZER_SLOTS = {"sgd": 1, "adam": 2}
SIZES = ("default", "tiny")
COMMUNICATIONS = ("auto", "ring", "nccl")
PARTITIONERS = ("none", "fixed", "min_size")
# "train" measures training; "allreduce" runs the nccl-tests-style probe
# (bench.child.backends.tf.allreduce) through the strategy's cross-device path instead.
MODES = ("train", "allreduce")
# How training is driven: "custom" (the harness's own loop: strategy.run inside a
# tf.function, bench.child.backends.tf.trainer) or "fit" (Keras model.compile + model.fit,
# bench.child.backends.tf.fit), the way most users train.
LOOPS = ("custom", "fit")
# Keras major version the child trains with: 3 (the `keras` package) or 2 (tf_keras,
# selected with TF_USE_LEGACY_KERAS=1; the `keras2` extra installs it).
KERAS_VERSIONS = (3, 2)
# The framework a run trains with: one of the lanes (bench.lanes), "tf" (tf.distribute)
# the default. Each strategy names the backends that run it (StrategyFactory.backends).
BACKENDS = tuple(LANES.names())
# KERAS_BACKEND's values that name a lane: a side of `bench ab` that sets it trains on
# that lane (``on_lane``); Keras's other backends (torch, numpy) have none here.
KERAS_BACKEND_LANES = {lane.keras_backend: name for name, lane in LANES.items()}
ALLREDUCE_MIN_BYTES = 1024  # the probe's sizes: 1 KiB doubling up to allreduce_max_bytes

_ALWAYS_IN_KEY = ("workload", "strategy", "devices", "batch")


def strategy_knob_defaults() -> dict[str, Any]:
    """``STRATEGY_KNOBS`` with their RunSpec defaults."""
    return {f.name: f.default for f in declaration() if f.name in STRATEGY_KNOBS}


def _check_knobs_apply(spec: RunSpec, accepts: tuple[str, ...]) -> None:
    """Refuse a strategy knob away from its default that ``spec``'s strategy does not
    accept. Checked here rather than in the registry, which must not import the spec."""
    for name, default in strategy_knob_defaults().items():
        value = getattr(spec, name)
        if value != default and name not in accepts:
            users = [n for n, f in STRATEGIES.items() if name in f.accepts]
            raise SpecError(
                f"RunSpec.{name} does not apply to strategy {spec.strategy} (it is used by "
                f"{', '.join(users) or 'no strategy yet'}). Received: {name}={value!r}")


def _defaults(cls: type[RunSpec] | None = None) -> dict[str, Any]:
    return {f.name: f.default for f in declaration(cls) if f.default is not MISSING}


def _fail(field_name: str, value: Any, rule: str) -> SpecError:
    return SpecError(f"RunSpec.{field_name} {rule}. Received: {field_name}={value!r}")


def _positive_int(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise _fail(name, value, "must be a positive integer")


def _choice(name: str, value: Any, choices: tuple[Any, ...]) -> None:
    # True == 1: a bool is a choice only among bools.
    if value not in choices or (isinstance(value, bool)
                                and not all(isinstance(c, bool) for c in choices)):
        raise _fail(name, value, f"must be one of {', '.join(map(str, choices))}")


def _size_text(n: int) -> str:
    for name, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale}{name}"
    return f"{n}B"


# -- the declaration ---------------------------------------------------------------------
# Every RunSpec field is declared once, with its metadata (FieldInfo). The CLI options
# (bench/cli/common.py), the labels (RunSpec.label, strategy_label, the reports' Variant),
# the TensorBoard HParams, the matrix axes and their domains, and the choice checks are
# read from the declaration, so that a new field is one edit of RunSpec.

Cli = Literal["axis", "knob"]
# Which strategies take a value other than the default: every one ("all"), those that
# list the field in StrategyFactory.accepts ("accepts"), or each strategy its own
# choices, held in its factory attribute of the field's name ("own").
StrategyScope = Literal["all", "accepts", "own"]
_META = "stratbench.spec"


@dataclass(frozen=True)
class FieldInfo:
    """What is derived from one RunSpec field besides its type and default.

    The defaults suit a field that changes what a run measures: a sweep axis, an
    HParams column, part of the report's variant and of the key, but with no label
    token (a field declared without metadata reads as this).
    """

    # CLI help; "{choices}" stands for the choices, or for a registry's names.
    help: str = ""
    # The only values allowed, checked at construction (empty: checked elsewhere).
    choices: tuple[Any, ...] = ()
    # The field's token in every label, shown when the value differs from the default:
    # "{}" stands for the value ("accum={}" -> accum=2; "xla" -> xla); None: no token.
    label: str | None = None
    # "axis": a comma-separated CLI list that a sweep multiplies out; "knob": one CLI
    # value for the whole sweep; None: no generic CLI option.
    cli: Cli | None = "axis"
    flag: str = ""  # the CLI flag when it is not --<name-with-dashes>
    # A field that not every strategy takes shows its token in the strategy's
    # parentheses (``mirrored(hierarchical_copy)``), and the matrix drops its values
    # for the strategies that do not take them.
    strategies: StrategyScope = "all"
    hparam: bool = True  # a column of the TensorBoard HParams dashboard
    # Runs that differ in a variant field measure different things: the reports answer
    # each variant apart (bench.answers.runs.Variant).
    variant: bool = True
    # In RunSpec.key(). False for what changes how a run is supervised, not what is
    # measured, so that e.g. raising a timeout resumes a sweep.
    identity: bool = True


def spec_field(default: Any = MISSING, *, default_factory: Callable[[], Any] | None = None,
               **info: Any) -> Any:
    """A RunSpec field declared with its metadata (the keywords of ``FieldInfo``)."""
    metadata = {_META: FieldInfo(**info)}
    if default_factory is not None:
        return field(default_factory=default_factory, metadata=metadata)
    return field(default=default, metadata=metadata)


@dataclass(frozen=True, eq=False)
class SpecField:
    """One declared field, resolved: its name, default, value type and metadata."""

    name: str
    default: Any  # MISSING for the fields every spec names (workload, strategy)
    type: Any  # the annotation without None: int for ``int | None``
    info: FieldInfo

    @property
    def flag(self) -> str:
        return self.info.flag or "--" + self.name.replace("_", "-")

    def token(self, value: Any) -> str | None:
        """The label token of ``value``; None at the default or for an unlabelled field."""
        if self.info.label is None or value == self.default:
            return None
        return self.info.label.format(value)


def declaration(cls: type[RunSpec] | None = None) -> tuple[SpecField, ...]:
    """The fields of ``cls`` (RunSpec, or a subclass that adds fields), in order."""
    cls = cls or RunSpec
    if cls not in _DECLARATIONS:
        hints = typing.get_type_hints(cls)
        _DECLARATIONS[cls] = tuple(
            SpecField(f.name, f.default_factory() if f.default_factory is not MISSING
                      else f.default, _value_type(hints[f.name]),
                      f.metadata.get(_META, FieldInfo()))
            for f in fields(cls))
    return _DECLARATIONS[cls]


_DECLARATIONS: dict[type, tuple[SpecField, ...]] = {}


def declared(name: str, cls: type[RunSpec] | None = None) -> SpecField:
    """The declared field ``name`` of ``cls`` (RunSpec by default)."""
    for f in declaration(cls):
        if f.name == name:
            return f
    raise SpecError(f"RunSpec has no field {name}. Received: {name!r}")


def _value_type(hint: Any) -> Any:
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if typing.get_origin(hint) in (typing.Union, types.UnionType) and len(args) == 1:
        return args[0]
    return hint


def label_tokens(holder: Any, among: Iterable[SpecField]) -> list[str]:
    """The label tokens of ``holder``'s fields among ``among`` that are away from their
    defaults. ``holder`` is a spec or a report's Variant; one that lacks a field (written
    before the field existed) reads as its default."""
    tokens = (f.token(getattr(holder, f.name, f.default)) for f in among)
    return [t for t in tokens if t is not None]


def workload_label(workload: str, size: str) -> str:
    """``mlp``, or ``mlp[tiny]`` for a variant other than the default; a model of the
    user's own without its file's directories (``two_input.py:build``)."""
    from workloads.user import looks_like_user_model, parse_ref

    if looks_like_user_model(workload):
        with contextlib.suppress(SpecError):
            workload = parse_ref(workload).display
    return workload if size == "default" else f"{workload}[{size}]"


def workload_slug(workload: str) -> str:
    """The workload's name in result keys (filename-safe): a built-in name, or a user
    model's file stem and function (``two_input.build``)."""
    from workloads.user import looks_like_user_model, parse_ref

    return parse_ref(workload).slug if looks_like_user_model(workload) else workload


# Fields every strategy takes whose token still belongs in the strategy's name: the
# backend is not a variant (one place holds both lanes), so the configuration's own
# name says which lane trains it: ``data_parallel(jax)``.
STRATEGY_TOKENS = ("backend",)


def strategy_label(spec: RunSpec) -> str:
    """``mirrored``, ``mirrored(hierarchical_copy)``, ``multi_worker_mirrored(workers=2)``,
    ``data_parallel(jax)``: the strategy with the tokens of the fields that not every
    strategy takes, and of ``STRATEGY_TOKENS``."""
    tokens = label_tokens(spec, [f for f in declaration(type(spec))
                                 if f.info.strategies != "all" or f.name in STRATEGY_TOKENS])
    return f"{spec.strategy}({','.join(tokens)})" if tokens else spec.strategy


@dataclass(frozen=True)
class RunSpec:
    """One configuration: workload x strategy x devices x batch x knobs.

    ``batch`` is interpreted according to ``batch_mode``; the resolved
    ``global_batch`` and ``per_replica_batch`` are both stored with results.
    One *step* is one optimizer update; with ``grad_accum = A`` a step
    processes ``A * global_batch`` examples. Each field is declared with its metadata
    (``spec_field``, ``FieldInfo``): the CLI, labels, HParams, report variants and
    matrix axes are derived from it.
    """

    workload: str = spec_field(help="{choices}, or a model of your own: package.module:"
                                    "function, path/to/file.py:function, model.keras")
    strategy: str = spec_field(help="{choices}", variant=False)
    devices: int = spec_field(1, help="device counts, e.g. 1,2,4", variant=False)
    batch: int = spec_field(64, help="batch sizes (see --batch-mode)", hparam=False,
                            variant=False)
    batch_mode: str = spec_field("global", choices=BATCH_MODES, cli="knob", variant=False)
    size: str = spec_field("default", choices=SIZES, help="workload variant: {choices}")
    # Shown apart (the reports' variant keeps them as JSON, HParams as param.<name>).
    params: Mapping[str, Any] = spec_field(default_factory=dict, cli=None, hparam=False,
                                           variant=False)
    # A user's model: sha256 of the file that defines it (the .py file, the module's
    # source or the .keras file), set when the spec is made (bench.spec.RunSpec
    # __post_init__), so that two versions of a model are never compared as one: it is
    # part of the key and of the reports' variant. Empty for the built-in workloads.
    workload_digest: str = spec_field("", cli=None, label="code={:.8}")
    cross_device_ops: str = spec_field(
        "default", help="mirrored all-reduce: default, hierarchical_copy, "
                        "reduction_to_one_device, nccl",
        label="{}", strategies="own", variant=False)
    precision: str = spec_field("float32", choices=PRECISIONS, help="{choices}", label="{}")
    xla: bool = spec_field(False, help="off,on: compile the per-replica step", label="xla")
    # TensorFlow runs float32 matmuls and convolutions as TensorFloat-32 on Ampere and
    # newer GPUs unless told not to: another math, and a 7x higher peak on an H100.
    tf32: bool = spec_field(True, help="on,off: float32 matmuls and convolutions as "
                                       "TensorFloat-32 on Ampere and newer GPUs "
                                       "(TensorFlow's default: on; no effect on a CPU)",
                            label="tf32=off")
    grad_accum: int = spec_field(1, label="accum={}")
    steps_per_call: int = spec_field(1, label="spc={}")
    data: str = spec_field("synthetic", choices=DATA_SOURCES,
                           help="synthetic (on device), tfdata", label="data={}")
    # Adam at 1e-3 trains all three workloads from scratch within the few dozen steps
    # a benchmark takes (SGD+momentum at 0.01 made ResNet50's loss rise at first).
    optimizer: str = spec_field("adam", choices=OPTIMIZERS, cli="knob", label="opt={}")
    # How long and how often a run looks, not what it looks at: knobs of the whole sweep,
    # outside the variant and the HParams.
    learning_rate: float = spec_field(1e-3, cli="knob", flag="--lr", hparam=False,
                                      variant=False)
    warmup_steps: int = spec_field(3, cli="knob", hparam=False, variant=False)
    min_steps: int = spec_field(5, cli="knob", hparam=False, variant=False)
    max_steps: int = spec_field(200, cli="knob", hparam=False, variant=False)
    max_seconds: float = spec_field(5.0, cli="knob", help="window length bound in seconds",
                                    hparam=False, variant=False)
    repeats: int = spec_field(3, cli="knob", help="measured windows per configuration",
                              hparam=False, variant=False)
    seed: int = spec_field(0, cli="knob", hparam=False, variant=False)
    timeout_s: float = spec_field(600.0, cli="knob", flag="--timeout",
                                  help="hard limit per configuration, seconds",
                                  hparam=False, variant=False, identity=False)
    gpu_memory_limit_mb: int | None = spec_field(None, cli="knob", hparam=False,
                                                 variant=False)
    # The allreduce subcommand sets the mode and the probe's largest size.
    mode: str = spec_field("train", choices=MODES, cli=None, label="{}")
    # profile_steps > 0 captures a profile of that many steps after
    # the throughput windows (never inside them) and derives the communication split.
    profile_steps: int = spec_field(
        0, cli="knob", help="profile this many steps after the windows (communication "
                            "split; open with the printed tensorboard command)",
        label="profile={}", variant=False)
    allreduce_max_bytes: int = spec_field(256 * 2**20, cli=None, hparam=False, variant=False)
    # Multi-process strategies (see bench/strategies/ for how each uses
    # them). Worker processes: 0 = one per device (the natural layout); in-process
    # strategies always run one process. ``devices`` stays the run's total.
    workers: int = spec_field(0, help="multi_worker_mirrored: worker processes "
                                      "(0 = one per device)",
                              label="workers={}", strategies="accepts", variant=False)
    # Parameter-server tasks (parameter_server only): 0 = one.
    ps_tasks: int = spec_field(0, help="parameter_server: parameter-server tasks (0 = one)",
                               label="ps={}", strategies="accepts", variant=False)
    # Worker processes sharing one device (GPU: each gets a memory slice; CPU: the
    # processes share that device's cores).
    workers_per_device: int = spec_field(
        1, help="multi_worker_mirrored, independent: processes sharing a device",
        label="per_device={}", strategies="accepts", variant=False)
    # MultiWorkerMirrored collective implementation.
    communication: str = spec_field(
        "auto", choices=COMMUNICATIONS, help="multi_worker_mirrored collectives: {choices}",
        label="comm={}", strategies="accepts", variant=False)
    # ParameterServer variable partitioning.
    partitioner: str = spec_field(
        "none", choices=PARTITIONERS,
        help="parameter_server variable partitioning: {choices}",
        label="partition={}", strategies="accepts", variant=False)
    # The training loop (LOOPS) and the Keras major version (KERAS_VERSIONS). Which
    # strategies train with which: each strategy's ``loop_limits`` (bench/strategies/).
    loop: str = spec_field("custom", choices=LOOPS,
                           help="custom (the harness's loop), fit (Keras)", label="loop={}")
    keras: int = spec_field(3, choices=KERAS_VERSIONS, help="3, 2 (tf_keras: the keras2 extra)",
                            label="keras{}")
    # Not a variant: the lanes are two ways to train the same model, and a place holds
    # both ("data_parallel(jax) on 2 devices" against "mirrored on 2 devices"). The
    # other lane's configuration joins the place's session in a process of its own,
    # taking turns window by window (bench.launch.groups, bench.launch.session).
    backend: str = spec_field("tf", choices=BACKENDS,
                              help="{choices}: tf.distribute, or Keras 3 on JAX "
                                   "(keras.distribution: data_parallel, model_parallel; "
                                   "the jax extra)", label="{}", variant=False)

    def __post_init__(self) -> None:
        workload = find_workload(self.workload)
        strategy = STRATEGIES.get(self.strategy)
        if isinstance(workload, UserWorkload):
            self._bind_user_model(workload)
        elif self.workload_digest:
            raise _fail("workload_digest", self.workload_digest,
                        f"is only for a model of your own, not the built-in {self.workload}")
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
        for f in declaration(type(self)):
            if f.info.choices:
                _choice(f.name, getattr(self, f.name), f.info.choices)
        for name in ("xla", "tf32"):
            if not isinstance(getattr(self, name), bool):
                raise _fail(name, getattr(self, name), "must be true or false")
        if self.gpu_memory_limit_mb is not None:
            _positive_int("gpu_memory_limit_mb", self.gpu_memory_limit_mb)
        if not isinstance(self.seed, int) or isinstance(self.seed, bool):
            raise _fail("seed", self.seed, "must be an integer")
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

    def _bind_user_model(self, workload: Any) -> None:
        """A fresh spec of a user's model (no digest yet) finds its file, checks the
        parameters against the function's and records the file's digest, with a file's
        path made absolute (the child may start elsewhere). A spec loaded from a stored
        result has its digest and is left alone: its file may be gone."""
        if self.workload_digest:
            return
        from workloads.user import bind

        workload.resolve(self.size, self.params)  # one size: refuse tiny before the files
        bound = bind(workload.ref, self.params)
        object.__setattr__(self, "workload", bound.text)
        object.__setattr__(self, "workload_digest", bound.digest)

    # -- derived -------------------------------------------------------------
    @property
    def replicas(self) -> int:
        return STRATEGIES.get(self.strategy).replicas(self)

    @property
    def global_batch(self) -> int:
        """Examples in one synchronous step across all replicas (see strategies)."""
        return STRATEGIES.get(self.strategy).global_batch(self)

    @property
    def per_replica_batch(self) -> int:
        return STRATEGIES.get(self.strategy).per_replica_batch(self)

    @property
    def examples_per_step(self) -> int:
        return self.global_batch * self.grad_accum

    def workload_params(self) -> dict[str, Any]:
        """The built-in workload's resolved parameters, or a user model's keyword arguments."""
        return find_workload(self.workload).resolve(self.size, self.params)

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
        if changes.get("workload", self.workload) != self.workload \
                and "workload_digest" not in changes:
            d["workload_digest"] = ""  # another model: its own file's digest
        d.update(changes)
        return type(self).from_dict(d)

    def label(self) -> str:
        """Short human label, e.g. ``mlp mirrored n=2 b=256``, then the declared label
        token of every field away from its default (``mlp[tiny] mirrored(nccl) n=2
        b=64 mixed_bfloat16 accum=2``)."""
        parts = [workload_label(self.workload, self.size), strategy_label(self),
                 f"n={self.devices}", f"b={self.global_batch}" if self.mode == "train"
                 else f"up to {_size_text(self.allreduce_max_bytes)}"]
        parts += label_tokens(self, [f for f in declaration(type(self))
                                     if f.info.strategies == "all"
                                     and f.name not in STRATEGY_TOKENS])
        return " ".join(parts)

    def key(self) -> str:
        """Stable, filename-safe identity: readable prefix + hash of every identity field."""
        # Fields at their default are left out, so that adding a knob in a later
        # version (with a default that keeps the old behaviour) keeps every existing
        # key, and old sweeps still resume.
        defaults = _defaults(type(self))
        outside = {f.name for f in declaration(type(self)) if not f.info.identity}
        ident = {k: v for k, v in self.to_dict().items()
                 if k not in outside and (k in _ALWAYS_IN_KEY or v != defaults.get(k))}
        digest = hashlib.sha1(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:10]
        cdo = "" if self.cross_device_ops == "default" else f"-{self.cross_device_ops}"
        mode = "" if self.mode == "train" else f"{self.mode}."
        # Loop and Keras lane in the readable part only away from their defaults, so
        # that every key written before they existed stays the same.
        lane = ("" if self.loop == "custom" else f".{self.loop}") + \
            ("" if self.keras == 3 else f".keras{self.keras}") + \
            ("" if self.backend == "tf" else f".{self.backend}")
        return (f"{mode}{workload_slug(self.workload)}-{self.size}.{self.strategy}{cdo}"
                f".n{self.devices}"
                f".b{self.global_batch}.{self.precision}{lane}.{digest}")


# Knobs only some strategies use (each strategy lists the ones it accepts); every
# other strategy must leave them at their RunSpec default.
STRATEGY_KNOBS = tuple(f.name for f in declaration() if f.info.strategies == "accepts")


def cli_args(spec: RunSpec) -> list[str]:
    """The command-line options that name ``spec`` (``bench run``, ``bench ab``): the
    inverse of bench/cli/common.py's reading of the declaration. Workload, strategy,
    devices and batch always; every other option away from its default; each workload
    parameter as ``--param KEY=<JSON>``."""
    out: list[str] = []
    for f in declaration(type(spec)):
        value = getattr(spec, f.name)
        if f.info.cli is None or value is None or (value == f.default
                                                   and f.name not in _ALWAYS_IN_KEY):
            continue
        out += [f.flag, ("on" if value else "off") if isinstance(value, bool) else str(value)]
    for key, value in sorted(spec.params.items()):
        out += ["--param", f"{key}={json.dumps(value, separators=(',', ':'))}"]
    return out


def lane_of(env: Mapping[str, str]) -> str | None:
    """The lane (``BACKENDS``) an environment's KERAS_BACKEND names, None where it sets
    none; SpecError for a Keras backend no lane trains with."""
    if "KERAS_BACKEND" not in env:
        return None
    value = env["KERAS_BACKEND"]
    if value not in KERAS_BACKEND_LANES:
        raise SpecError(f"KERAS_BACKEND={value} names no lane of stratbench: "
                        f"{', '.join(KERAS_BACKEND_LANES)} "
                        f"({', '.join(lane.label for _, lane in LANES.items())}). "
                        f"Received: KERAS_BACKEND={value!r}")
    return KERAS_BACKEND_LANES[value]


def on_lane(spec: RunSpec, backend: str) -> RunSpec:
    """``spec`` trained on ``backend``'s lane with its strategy's counterpart there
    (mirrored on 2 devices -> data_parallel(jax) on 2 devices), the strategy's own knobs
    back at their defaults; SpecError where the strategy has none."""
    if backend == spec.backend:
        return spec
    other = STRATEGIES.get(spec.strategy).counterpart(backend)
    if other is None:
        raise SpecError(f"strategy {spec.strategy} has no counterpart on the {backend} lane "
                        f"(those with one: " + ", ".join(
                            n for n in STRATEGIES.names()
                            if STRATEGIES.get(n).counterpart(backend)) +
                        f"). Received: strategy={spec.strategy}, backend={backend}")
    knobs = {f.name: f.default for f in declaration() if f.info.strategies in ("own", "accepts")}
    return spec.replace(backend=backend, strategy=other, **knobs)

