"""The JAX lane's compiled step and what is measured around it (child side).

Keras 3's stateless API makes one pure function of the whole optimizer step:
``model.stateless_call`` for the forward pass, ``jax.value_and_grad`` for the
gradients, ``optimizer.stateless_apply`` for the update. It is lowered and compiled
once, ahead of time, with the variables laid out by the spec's ``keras.distribution``
and the batch sharded along the mesh's ``batch`` axis; XLA inserts the collectives
(the gradient all-reduce of data parallelism, the activations' of model parallelism).
The state is donated to each call and pinned to its layout (``out_shardings``), so
no step copies or re-lays it. The loss and the optimizer are the task's (model.py): for
a model of the user's own, what bench.child.description read from it, as the TF lane
trains it (the loss of each head, its compile()'s or the default, summed; its own
optimizer where its compile() gave one). A user's model whose step Keras on JAX cannot
trace is ``unsupported`` before any step runs.

Data is a pool of synthetic batches placed on the devices once, as in the TF lane's
custom loop. A call's loss is fetched with ``float()`` (it blocks until the step is
done); the window edges block on the whole state (``jax.block_until_ready``).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np

from bench.child.backends.base import pool_batches
from bench.child.backends.jax.distribution import DISTRIBUTIONS
from bench.child.backends.jax.model import build_task
from bench.child.description import last_line
from bench.child.windows import Loop
from bench.errors import Unsupported
from bench.spec import RunSpec
from workloads.flops import model_stats
from workloads.synth import input_bytes

FLOPS_METHOD = ("XLA: cost_analysis() of the lowered step (before partitioning: the "
                "whole global batch; every op XLA costs, elementwise included, where the "
                "TF lane counts matrix and convolution ops only); per example")


def cost_flops(lowered: Any) -> float | None:
    """``flops`` of a lowered or compiled JAX computation's cost analysis (a dict, or a
    list of one dict per program in older jax), None where XLA gives none."""
    cost = lowered.cost_analysis()
    if isinstance(cost, (list, tuple)):
        cost = cost[0] if cost else None
    value = (cost or {}).get("flops")
    return float(value) if value and value > 0 else None


def seed_without_tensorflow(seed: int) -> None:
    """``keras.utils.set_random_seed`` less its TensorFlow seed: Keras 3.15 imports
    TensorFlow there whenever it is installed (to seed tf.data), which would load it into
    every JAX-lane process and hide a user's model that calls it."""
    import random

    try:
        from keras.src.backend.common import global_state
        from keras.src.random import seed_generator
        from keras.src.utils.rng_utils import GLOBAL_RANDOM_SEED
    except ImportError:  # another Keras layout: its own function, TensorFlow and all
        import keras

        keras.utils.set_random_seed(seed)
        return
    global_state.set_global_attribute(GLOBAL_RANDOM_SEED, seed)
    global_state.set_global_attribute(seed_generator.GLOBAL_SEED_GENERATOR, None)
    random.seed(seed)
    np.random.seed(seed)


class JaxDeviceMemory:
    """Peak bytes per device from ``Device.memory_stats()``. JAX cannot reset a peak,
    so the figure is the process's peak so far (``scope``); its CPU client keeps no
    statistics at all, and ``reason`` then says so."""

    scope = "per_device_lifetime"

    def __init__(self, devices: list[Any]) -> None:
        self.devices = devices
        self.reason: str | None = None

    def reset(self) -> None:
        return None  # nothing to reset in JAX's allocator statistics

    def peaks(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for d in self.devices:
            stats = d.memory_stats()
            if not stats or "peak_bytes_in_use" not in stats:
                self.reason = (f"JAX's {d.platform} client keeps no allocator statistics "
                               f"(Device.memory_stats() of {d} returned "
                               f"{'nothing' if not stats else sorted(stats)[:4]})")
                continue
            out[f"{d.platform}:{d.id}"] = int(stats["peak_bytes_in_use"])
        return out


class JaxTrainer:
    """One run of the JAX lane: distribution, model, optimizer, pool, compiled step."""

    def __init__(self, spec: RunSpec, devices: list[Any]) -> None:
        import jax
        import keras

        self.jax, self.spec = jax, spec
        placement = DISTRIBUTIONS.get(spec.strategy)(spec, devices)
        self.replicas = self.local_replicas = placement.replicas
        if self.replicas != spec.replicas:
            raise RuntimeError(f"the mesh made {self.replicas} replicas, the spec expects "
                               f"{spec.replicas}")
        keras.mixed_precision.set_global_policy(spec.precision)
        seed_without_tensorflow(spec.seed)  # the same initial weights in every run
        with placement.distribution.scope():
            task = build_task(spec)  # Unsupported: what this lane cannot train, and why
            model, optimizer = task.model, task.optimizer
            optimizer.build(model.trainable_variables)
        stats = model_stats(model)
        self.memory = JaxDeviceMemory(devices)
        g = spec.global_batch
        x1, _ = task.pool(1, spec.seed)
        self.pool = pool_batches(input_bytes(x1) * g)
        x, y = task.pool(self.pool * g, spec.seed)
        rows = placement.data_sharding

        def batch(j: int) -> tuple[Any, Any]:
            cut = slice(j * g, (j + 1) * g)
            xj = {k: v[cut] for k, v in x.items()} if isinstance(x, dict) else x[cut]
            return jax.device_put(xj, rows), jax.device_put(y[cut], rows)

        self._batches = [batch(j) for j in range(self.pool)]
        self.state = ([v.value for v in model.trainable_variables],
                      [v.value for v in model.non_trainable_variables],
                      [v.value for v in optimizer.variables])
        per_example_loss = task.per_example_loss
        # As Keras' own JAX trainer: ``training`` only to a call() that takes it (a
        # subclassed model's may not).
        mode = {"training": True} if getattr(model, "_call_has_training_arg", True) else {}

        def loss_of(trainable: Any, non_trainable: Any, xb: Any, yb: Any) -> Any:
            out, non_trainable = model.stateless_call(trainable, non_trainable, xb, **mode)
            return keras.ops.mean(per_example_loss(yb, out)), non_trainable

        grad = jax.value_and_grad(loss_of, has_aux=True)

        def step(state: Any, xb: Any, yb: Any) -> Any:
            trainable, non_trainable, opt_vars = state
            (loss, non_trainable), grads = grad(trainable, non_trainable, xb, yb)
            trainable, opt_vars = optimizer.stateless_apply(opt_vars, grads, trainable)
            return loss, (trainable, non_trainable, opt_vars)

        def forward(state: Any, xb: Any) -> Any:
            return model.stateless_call(state[0], state[1], xb, **mode)[0]

        layout = jax.tree.map(lambda a: a.sharding, self.state)
        scalar = jax.sharding.NamedSharding(placement.mesh, jax.sharding.PartitionSpec())
        x0, y0 = self._batches[0]
        try:
            lowered = jax.jit(step, donate_argnums=0,
                              out_shardings=(scalar, layout)).lower(self.state, x0, y0)
            self._step = lowered.compile()  # ahead of time: the first call only runs
        except Exception as exc:
            if not task.user:
                raise
            # Before any step ran: a model of the user's own that Keras on JAX cannot
            # trace is this lane's limit, said as such, never a run that failed.
            raise Unsupported(f"Keras on JAX cannot trace the training step of "
                              f"{spec.workload}: {last_line(exc)}. Received: "
                              f"workload={spec.workload!r}, backend='jax'") from None
        train = cost_flops(lowered)
        fwd = cost_flops(jax.jit(forward).lower(self.state, x0))
        self.stats = dataclasses.replace(
            stats, forward_flops_per_example=(fwd / g) if fwd else
            stats.forward_flops_per_example,
            train_flops_per_example=(train / g) if train else stats.train_flops_per_example,
            flops_method=FLOPS_METHOD if train else
            f"{stats.flops_method} (XLA's cost_analysis gave no flops)", **task.record)
        self._i = 0

    def call(self) -> Any:
        """One optimizer step on the next pooled batch; returns its loss (not waited)."""
        x, y = self._batches[self._i % self.pool]
        self._i += 1
        loss, self.state = self._step(self.state, x, y)
        return loss

    def sync(self, _: Any) -> None:
        """Wait until every device has finished the queued steps."""
        self.jax.block_until_ready(self.state)

    def loop(self) -> Loop:
        """This trainer as the window loop drives it (bench.child.windows)."""
        return Loop(call=self.call, fetch=lambda out: float(out), sync=self.sync,
                    steps_per_call=1, examples_per_step=self.spec.examples_per_step,
                    replicas=self.replicas)

    def weights_checksum(self) -> float:
        """Sum of every trainable weight."""
        return float(sum(float(np.asarray(a, dtype=np.float64).sum()) for a in self.state[0]))

    def replica_divergence(self) -> float:
        """Largest difference between the device copies of a weight that is replicated
        (or partly so): XLA keeps them equal, this checks it."""
        worst = 0.0
        for a in self.state[0]:
            shards: dict[Any, Any] = {}
            for s in a.addressable_shards:
                shards.setdefault(str(s.index), []).append(np.asarray(s.data, np.float64))
            for copies in shards.values():
                worst = max([worst, *(float(np.max(np.abs(c - copies[0])))
                                      for c in copies[1:])])
        return worst

    def profile(self, steps: int, directory: Path) -> str:
        """``steps`` steps under ``jax.profiler``, each a step annotation."""
        directory.mkdir(parents=True, exist_ok=True)
        with self.jax.profiler.trace(str(directory)):
            for i in range(steps):
                with self.jax.profiler.StepTraceAnnotation("train", step_num=i):
                    float(self.call())
        return (f"profile of {steps} steps written to {directory} (jax.profiler; the "
                f"JAX lane does not derive a step breakdown from it yet)")


