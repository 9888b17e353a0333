"""The lanes a run can train on (``RunSpec.backend``), one entry each.

A lane is a framework behind the child's backend seam (``bench.child.backends.<name>``).
Its entry says what the parent side knows of it without importing it: how messages
and ``KERAS_BACKEND`` name it, which fields of the environment fingerprint are its
software (``bench.env.software_stack``), the pip extras that install it, the spec
fields it runs at some values only (its limits: an ``unsupported`` reason naming the
field), the strategies of the other lanes that train as one of its own does (what
``on_lane`` swaps in), and the harness's set-ups it takes part in. The spec's backend
choices, the fingerprint's software fields and the lanes' limits derive from here;
its strategies are ``bench.strategies``' of its ``backends``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bench.registry import Registry


@dataclass(frozen=True)
class LaneLimit:
    """A spec field a lane runs at ``allowed`` values only, and why (the run's
    ``unsupported`` reason): what the harness does not build there yet, or what means
    nothing on that framework."""

    field: str
    allowed: tuple[Any, ...]
    why: str


@dataclass(frozen=True)
class Lane:
    """One lane: see the module docstring."""

    name: str  # RunSpec.backend, --backend
    framework: str  # the framework, as messages name it ("the JAX backend")
    label: str  # what it trains with, as a list of the lanes names it
    keras_backend: str  # the KERAS_BACKEND value that names this lane (bench ab)
    software: tuple[str, ...]  # its fingerprint fields that are software (bench.env)
    extras: tuple[str, ...]  # pyproject.toml's extras that install it
    limits: tuple[LaneLimit, ...] = ()
    # (strategy of another lane, this lane's strategy that trains the same way)
    counterparts: tuple[tuple[str, str], ...] = ()
    # Keras versions whose runs the pre-imported starter serves (bench.launch.prestart).
    prestarted_keras: tuple[int, ...] = ()
    # Whether a model of the user's own is built once before any run (a usage error
    # then, not a failed run each: bench.launch.usermodel).
    preflights_user_models: bool = False

    def counterpart_of(self, strategy: str) -> str | None:
        """This lane's strategy that trains as ``strategy`` (another lane's) does."""
        return dict(self.counterparts).get(strategy)

    def limit_reason(self, spec: Any) -> str | None:
        """The first limit ``spec`` breaks, as a reason naming the field (None: none)."""
        for limit in self.limits:
            value = getattr(spec, limit.field)
            if value not in limit.allowed:
                return (f"{limit.field}={value!r} does not run on the {self.framework} "
                        f"backend: {limit.why}. Received: {limit.field}={value!r}")
        return None


# Fingerprint fields that are software whatever the lane.
COMMON_SOFTWARE = ("python", "platform")

LANES: Registry[Lane] = Registry("backend")
LANES.register("tf", Lane(
    name="tf", framework="TensorFlow", label="tf.distribute", keras_backend="tensorflow",
    software=("tensorflow", "keras", "numpy", "tf_build"),
    extras=("cpu", "gpu", "tf", "keras2"),
    counterparts=(("data_parallel", "mirrored"),),
    prestarted_keras=(3,), preflights_user_models=True))
LANES.register("jax", Lane(
    name="jax", framework="JAX", label="Keras 3 on JAX", keras_backend="jax",
    # Another framework, another stack, whatever else two runs share: the lane's name
    # ("backend", which only this lane's fingerprint records) counts too.
    software=("backend", "jax", "jaxlib", "keras", "numpy", "xla_flags"),
    extras=("jax", "jax-cuda"),
    limits=(
        LaneLimit("loop", ("custom",), "the JAX lane drives its own compiled step (Keras "
                                       "fit on JAX is not measured yet)"),
        LaneLimit("keras", (3,), "keras.distribution is Keras 3 only"),
        LaneLimit("precision", ("float32", "mixed_bfloat16"),
                  "mixed_float16 needs loss scaling, which the JAX step does not build yet"),
        LaneLimit("xla", (False,), "JAX compiles every step with XLA: the xla knob is the "
                                   "TensorFlow lane's"),
        LaneLimit("data", ("synthetic",), "tf.data belongs to the TensorFlow lane"),
        LaneLimit("steps_per_call", (1,), "the JAX step is one optimizer step per call"),
        LaneLimit("grad_accum", (1,), "gradient accumulation is not built in the JAX step "
                                      "yet"),
    ),
    counterparts=(("default", "data_parallel"), ("one_device", "data_parallel"),
                  ("mirrored", "data_parallel"))))


def software_fields() -> tuple[str, ...]:
    """Every fingerprint field that is software: the common ones, then each lane's."""
    out = list(COMMON_SOFTWARE)
    for _, lane in LANES.items():
        out += [f for f in lane.software if f not in out]
    return tuple(out)
