"""Known causes for the step breakdown, each profiled in a fresh process with and without it.

Each case builds a tiny training step twice, once with a knob that adds time to exactly
one part of the step, profiles both through the harness's own capture
(``bench.child.probes.profile``) and returns both breakdowns:

- input: a ``tf.data`` map that runs a chain of matmuls per element (its ops run on
  the pipeline's threads: the step can only wait for them);
- compute: a chain of matmuls inside the step;
- communication: all-reducing 16 MiB more per step under MirroredStrategy on two
  logical devices (a cross-device copy between logical CPU devices is no copy at all,
  so it cannot add time: the all-reduce is the cross-device traffic that can);
- host: Python in the step, as a ``tf.py_function`` in the custom loop and as a Keras
  callback in ``fit`` (the harness's ``FitTrainer`` driving the profiled steps).

Like tests/probe_cases.py, one process per case (one MirroredStrategy per process).

    python -m tests.attribution_cases CASE DEVICES JSON_KWARGS   -> prints one RESULT line
"""

from __future__ import annotations

import contextlib
import math
import os
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from tests.probe_cases import serve, spec_of
from tests.tf_cases import run_case

STEPS = 5  # profiled steps, as a sweep's evidence takes
WIDTH = 64  # the tiny model's layer width
BATCH = 32
# What a knob adds per step. Its work is sized on the machine the case runs on (the same
# matmuls take 10-20 ms on one CPU of this kind and 4 ms on another with oneDNN's AMX or
# AVX-512 kernels), so that it stands well above the test's 5 ms effect everywhere.
KNOB_S = 0.015
CHAIN = 12  # matmuls of SIDE x SIDE per knob before sizing
MAX_CHAIN = 96
SIDE = 384
# All-reduced per step before sizing: 16 MiB a replica (only one element of the result
# is read, since summing it would be compute).
ALL_REDUCE_FLOATS = 4 * 2**20
MAX_ALL_REDUCE_FLOATS = 16 * 2**20
PYTHON_S = KNOB_S  # Python busy time per step


def run_attribution_case(case: str, timeout: float = 120, **kwargs: Any) -> Any:
    """Run ``case`` in a child process with 2 logical CPUs; return its result."""
    return run_case(case, timeout, module="tests.attribution_cases", args=("2",),
                    env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"), **kwargs)


def _chain(tf: Any, m: Any, links: int = CHAIN) -> Any:
    for _ in range(links):
        m = tf.linalg.matmul(m, m) * (1.0 / SIDE)  # scaled so the values stay finite
    return m


def _sized(call: Callable[[], object], size: int, most: int) -> int:
    """``size`` scaled so that ``call`` (work in proportion to it) takes ``KNOB_S``:
    the best of 5 timed calls after 2 warm ones, never below ``size`` or above ``most``."""
    for _ in range(2):
        call()
    best = float("inf")
    for _ in range(5):
        t = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - t)
    return max(size, min(most, math.ceil(size * KNOB_S / best)))


def _chain_links(tf: Any) -> int:
    """Matmuls a knob's chain needs on this machine to take ``KNOB_S``."""
    m = tf.random.uniform((SIDE, SIDE))
    chain = tf.function(lambda: tf.reduce_sum(_chain(tf, m)))
    return _sized(lambda: float(chain()), CHAIN, MAX_CHAIN)


def _busy(seconds: float) -> None:
    """Python holding the interpreter for ``seconds`` (not sleeping: a callback that works)."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def _tiny_step(tf: Any, strategy: Any, extra: Callable[[Any], Any] | None = None) -> Any:
    """A tf.function training a Dense model one step on ``x`` (under ``strategy``);
    ``extra(loss)`` adds the knob inside the replica's step, its result joining the loss."""
    import keras

    with strategy.scope():
        model = keras.Sequential([keras.layers.Input((WIDTH,)), keras.layers.Dense(WIDTH),
                                  keras.layers.Dense(10)])
        opt = keras.optimizers.SGD(0.01)
        opt.build(model.trainable_variables)

    def replica_step(x: Any) -> Any:
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(model(x, training=True)))
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        # A tiny weight keeps the knob in the graph (0 x could be simplified away).
        return loss if extra is None else loss + 1e-12 * extra(loss)

    @tf.function
    def step(x: Any) -> Any:
        return strategy.reduce(tf.distribute.ReduceOp.SUM,
                               strategy.run(replica_step, args=(x,)), axis=None)

    return step


def _profile(tf: Any, call: Callable[[], object], where: Path) -> dict[str, Any]:
    from bench.child.probes.profile import call_steps, capture

    for _ in range(3):  # traced and warm before the profile
        call()
    breakdown, _ = capture(tf, call_steps(call), STEPS, where)
    return asdict(breakdown)


def _pair(tf: Any, tmp: str, base: Callable[[], object],
          knob: Callable[[], object]) -> dict[str, Any]:
    return {"base": _profile(tf, base, Path(tmp) / "base"),
            "knob": _profile(tf, knob, Path(tmp) / "knob")}


def case_input(setup: Any, tmp: str) -> dict[str, Any]:
    import tensorflow as tf

    strategy = tf.distribute.get_strategy()
    x = tf.random.uniform((BATCH, WIDTH))
    links = _chain_links(tf)

    def slow(v: Any) -> Any:  # the element's own matmul chain, on the pipeline's threads
        return v + 1e-12 * tf.reduce_sum(_chain(tf, tf.random.uniform((SIDE, SIDE)), links))

    def pipeline(heavy: bool) -> Any:
        ds = tf.data.Dataset.from_tensors(x).repeat()
        return iter((ds.map(slow) if heavy else ds).prefetch(1))

    step = _tiny_step(tf, strategy)
    light, heavy = pipeline(False), pipeline(True)
    return _pair(tf, tmp, lambda: float(step(next(light))),
                 lambda: float(step(next(heavy))))


def case_compute(setup: Any, tmp: str) -> dict[str, Any]:
    import tensorflow as tf

    strategy = tf.distribute.get_strategy()
    x = tf.random.uniform((BATCH, WIDTH))
    base = _tiny_step(tf, strategy)
    links = _chain_links(tf)
    # Made in the step: a captured constant's chain would be folded when the graph is built.
    knob = _tiny_step(tf, strategy, lambda _: tf.reduce_sum(
        _chain(tf, tf.random.uniform((SIDE, SIDE)), links)))
    return _pair(tf, tmp, lambda: float(base(x)), lambda: float(knob(x)))


def case_communication(setup: Any, tmp: str) -> dict[str, Any]:
    import tensorflow as tf

    strategy = tf.distribute.MirroredStrategy(setup.names[:2])
    x = tf.random.uniform((BATCH, WIDTH))
    # Each replica's own copy: a tensor captured from outside the replicas is the same
    # value everywhere, and MirroredStrategy "reduces" it by multiplying, with no traffic.
    def variable(floats: int) -> Any:
        with strategy.scope():
            return tf.Variable(tf.random.uniform((floats,)))

    def reducer(v: Any) -> Callable[[Any], Any]:
        def all_reduce(_: Any) -> Any:
            ctx = tf.distribute.get_replica_context()
            return ctx.all_reduce(tf.distribute.ReduceOp.SUM, v.read_value())[0]
        return all_reduce

    probe = variable(ALL_REDUCE_FLOATS)
    alone = tf.function(lambda: strategy.run(reducer(probe), args=(0.0,)))
    big = variable(_sized(lambda: [float(t) for t in strategy.experimental_local_results(
        alone())], ALL_REDUCE_FLOATS, MAX_ALL_REDUCE_FLOATS))
    all_reduce = reducer(big)

    base = _tiny_step(tf, strategy)
    knob = _tiny_step(tf, strategy, all_reduce)
    return _pair(tf, tmp, lambda: float(base(x)), lambda: float(knob(x)))


def case_host(setup: Any, tmp: str) -> dict[str, Any]:
    """Python in the custom loop's step (tf.py_function) and in fit (a Keras callback,
    through the harness's FitTrainer)."""
    import keras
    import tensorflow as tf

    from bench.child.backends.base import DeviceSetup
    from bench.child.backends.tf.build import build as build_strategy
    from bench.child.backends.tf.fit import FitTrainer
    from bench.child.probes.profile import capture

    strategy = tf.distribute.get_strategy()
    x = tf.random.uniform((BATCH, WIDTH))

    def work() -> float:
        _busy(PYTHON_S)
        return 0.0

    def python(loss: Any) -> Any:
        return tf.py_function(work, [], tf.float32)

    base = _tiny_step(tf, strategy)
    knob = _tiny_step(tf, strategy, python)
    out = {"custom": _pair(tf, tmp, lambda: float(base(x)), lambda: float(knob(x)))}

    spec = spec_of(strategy="one_device", devices=1, loop="fit")
    names = setup.names[:1]
    trainer = FitTrainer(spec, build_strategy(spec, names),
                         DeviceSetup(setup.kind, names, setup.logical))

    class Busy(keras.callbacks.Callback):
        def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
            _busy(PYTHON_S)

    def driver(callbacks: list[Any]) -> Any:
        return lambda n, annotate: trainer.profile_steps(n, annotate, callbacks)

    trainer.profile_steps(1, lambda _: contextlib.nullcontext())  # traced and warm

    fit: dict[str, Any] = {}
    for name, callbacks in (("base", []), ("knob", [Busy()])):
        breakdown, _ = capture(tf, driver(callbacks), STEPS, Path(tmp) / f"fit-{name}",
                               loop="fit")
        fit[name] = asdict(breakdown)
    out["fit"] = fit
    return out


CASES: dict[str, Callable[..., Any]] = {
    "input": case_input, "compute": case_compute, "communication": case_communication,
    "host": case_host,
}


def main() -> None:
    serve(CASES)


if __name__ == "__main__":
    main()
