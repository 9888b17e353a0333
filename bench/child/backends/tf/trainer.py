"""The measured training loop (runs inside the child process, imports TensorFlow).

Custom loop: ``strategy.run`` inside one ``tf.function`` that performs
``steps_per_call`` optimizer steps. Data is a fixed pool of synthetic batches
placed on the devices once, so the input pipeline is not what is measured
(``data=tfdata`` swaps in a prefetching tf.data pipeline instead).

Timing protocol: the window loop of bench.child.windows, shared with the
ParameterServer coordinator (definitions stored with results: bench.results.schema).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from bench.child.backends.base import DeviceSetup, pool_batches
from bench.child.backends.tf.flops import task_stats
from bench.child.backends.tf.keras_lane import variable_handle
from bench.child.backends.tf.memory import DeviceMemory
from bench.child.backends.tf.task import TrainingTask, build_task, check_data
from bench.child.probes.profile import Annotate, call_steps
from bench.child.windows import Loop, Rules, measure
from bench.results.schema import Figures
from bench.spec import RunSpec
from workloads.synth import first_input, input_bytes, map_inputs


def shard_rows(a: Any, pool: int, shards: int, index: int) -> Any:
    """Rows of shard ``index`` (of ``shards`` equal parts) of every global batch.

    ``a`` holds ``pool`` global batches in order. Input pipeline w of W (one per
    worker process) gets shard w of each global batch, replica r of R gets shard r;
    concatenating the shards of batch j gives back global batch j whatever the
    topology, which is what makes loss parity across strategies testable. ``a`` may be
    a dict of such arrays (a model's several inputs).
    """
    if isinstance(a, dict):  # several inputs: every one sharded alike
        return {k: shard_rows(v, pool, shards, index) for k, v in a.items()}
    per = a.shape[0] // (pool * shards)
    return a.reshape(pool, shards, per, *a.shape[1:])[:, index].reshape(pool * per,
                                                                         *a.shape[1:])


def build_model(spec: RunSpec, strategy: Any) -> tuple[Any, Any]:
    """Model and optimizer (slots created) under ``strategy``, seeded by ``spec.seed``."""
    task = build_task(spec, strategy)
    return task.model, task.optimizer


def _accumulate(a: Any, g: Any) -> Any:
    """Two micro-batches' gradients of one variable added; an embedding's sparse ones
    (IndexedSlices, which have no ``+``) stay sparse: their rows are concatenated."""
    import tensorflow as tf

    if isinstance(a, tf.IndexedSlices) and isinstance(g, tf.IndexedSlices):
        return tf.IndexedSlices(tf.concat([a.values, g.values], 0),
                                tf.concat([a.indices, g.indices], 0), a.dense_shape)
    return tf.convert_to_tensor(a) + tf.convert_to_tensor(g)


def weights_checksum(strategy: Any, variables: list[Any]) -> float:
    """Sum of all ``variables`` (first local copy each), to compare across workers."""
    return float(sum(
        float(np.sum(strategy.experimental_local_results(variable_handle(v))[0].numpy(),
                     dtype=np.float64)) for v in variables))


def replica_divergence(strategy: Any, variables: list[Any]) -> float:
    """Largest |w_r - w_0| over ``variables`` and their replicas (0 with one copy)."""
    worst = 0.0
    for v in variables:
        copies = [c.numpy() for c in strategy.experimental_local_results(variable_handle(v))]
        for c in copies[1:]:
            worst = max(worst, float(np.max(np.abs(c - copies[0]))))
    return worst


def make_apply(spec: RunSpec, task: TrainingTask) -> Callable[[list[tuple[Any, Any]]], Any]:
    """The per-replica step: gradients over micro-batches, then one optimizer update.

    Returns a function of the micro-batches (``grad_accum`` (x, y) pairs) that
    returns this replica's share of the mean loss (summed over replicas by the caller).
    """
    import tensorflow as tf

    model, opt, loss_of = task.model, task.optimizer, task.per_example_loss
    variables = model.trainable_variables
    scale = spec.precision == "mixed_float16"
    denom = spec.global_batch * spec.grad_accum

    def grads_of(x: Any, y: Any) -> tuple[Any, list[Any]]:
        with tf.GradientTape() as tape:
            per_example = loss_of(y, model(x, training=True))
            loss = tf.nn.compute_average_loss(per_example, global_batch_size=denom)
            target = opt.scale_loss(loss) if scale else loss
        return loss, tape.gradient(target, variables)

    if spec.xla:  # per-replica step compiled; whole-step XLA fails with 2+ replicas
        grads_of = tf.function(grads_of, jit_compile=True)

    def apply(micro_batches: list[tuple[Any, Any]]) -> Any:
        total: Any = None
        acc: list[Any] = []
        for x, y in micro_batches:
            loss, grads = grads_of(x, y)
            total = loss if total is None else total + loss
            acc = list(grads) if not acc else [_accumulate(a, g)
                                               for a, g in zip(acc, grads, strict=True)]
        opt.apply_gradients(zip(acc, variables, strict=True))
        return total

    return apply


def _on_replica_device(tf: Any, local_devices: list[str], ctx: Any,
                       make: Callable[[], tuple[Any, Any]]) -> tuple[Any, Any]:
    """``make()`` on the device of ``ctx``'s replica: experimental_distribute_values_
    from_function groups what it is given but does not move it."""
    # Global replica ids of a worker's replicas are consecutive (worker w holds
    # w * L .. w * L + L - 1), so the local index is the id modulo L.
    with tf.device(local_devices[ctx.replica_id_in_sync_group % len(local_devices)]):
        return make()


def strategy_replicas(strategy: Any, spec: RunSpec) -> tuple[int, int]:
    """The strategy's replicas, all of them and this process's (all of them except under
    multi-worker strategies); a count other than the spec's is an error."""
    replicas = int(strategy.num_replicas_in_sync)
    try:
        local = len(strategy.extended.worker_devices) or replicas
    except (AttributeError, RuntimeError):  # the default strategy raises RuntimeError
        local = replicas
    if replicas != spec.replicas:
        raise RuntimeError(f"strategy made {replicas} replicas, spec expects {spec.replicas}")
    return replicas, local


class Trainer:
    """Builds model, optimizer and data under a strategy and measures training."""

    def __init__(self, spec: RunSpec, strategy: Any, devices: DeviceSetup) -> None:
        import tensorflow as tf

        self.tf = tf
        self.spec = spec
        self.strategy = strategy
        self.devices = devices
        self.replicas, self.local_replicas = strategy_replicas(strategy, spec)
        self.task = build_task(spec, strategy)
        check_data(self.task, spec)
        self.model, self.optimizer = self.task.model, self.task.optimizer
        self.stats = task_stats(tf, self.task, spec, progress=lambda _: None)
        self.variables = self.model.trainable_variables
        # Smallest variable: reading every replica's copy of it forces every device
        # to finish its queued updates (the window synchronisation).
        self._probe_var = variable_handle(
            min(self.variables, key=lambda v: int(np.prod(v.shape))))
        self._batches: list[tuple[Any, ...]] = []
        self._args: tuple[Any, ...] = ()
        self._feed(devices)
        self._step = 0
        self._fn: Any = self._make_train_fn()
        self._concrete: Any = None

    # -- the step's input -----------------------------------------------------------
    def _feed(self, devices: DeviceSetup) -> None:
        """The step's input: ``self._batches`` or ``self._args``, and ``self.pool``.

        Three ways to feed the step, all with the same examples in global batch j:
         - steps_per_call == 1: P per-replica batches placed on the devices once and
           picked in Python, so the compiled step is exactly a hand-written one;
         - steps_per_call > 1: each replica's share of the whole pool on its device,
           sliced in the graph (the loop inside the function indexes it by a tensor);
         - data == "tfdata": a prefetching tf.data pipeline (input cost included).
        Replica r of R takes shard r of every global batch (shard_rows); an input
        pipeline w of W (one per worker process) takes shard w, which holds the same
        rows as its replicas' shards: whatever the topology, concatenating the shards
        of batch j gives back global batch j, so loss parity across strategies holds.
        The synthetic pool is placed with experimental_distribute_values_from_function,
        never through a distributed dataset: one distributed iterator under
        OneDeviceStrategy or MirroredStrategy (a MultiDeviceIterator) left every later
        step of the process about 20% slower here, even once deleted, a cost that is
        not the strategy's and that a user feeding tensors never pays.
        """
        spec, strategy = self.spec, self.strategy
        b = spec.per_replica_batch
        if spec.data == "tfdata" and self.task.dataset_fn is not None:
            self.pool = 1  # the user's own pipeline: no pool is made
            user = self.task.dataset_fn
            self._args = (iter(strategy.distribute_datasets_from_function(
                lambda ctx: user(ctx, b))),)
            return
        x, y = self._pool_arrays()
        if spec.data == "tfdata":
            self._args = (iter(strategy.distribute_datasets_from_function(
                lambda ctx: self._pipeline(ctx, x, y))),)
        elif spec.steps_per_call == 1:
            self._batches = self._placed_batches(x, y, devices)
        else:
            self._args = self._placed_pool(x, y, devices)

    def _pool_arrays(self) -> tuple[Any, Any]:
        """The synthetic pool's inputs and labels: ``self.pool`` global batches, as many
        as ``POOL_BYTES_BUDGET`` holds."""
        spec, g = self.spec, self.spec.global_batch
        x1, _ = self.task.make_pool(1, spec.seed)
        self.pool = pool_batches(input_bytes(x1) * g)
        return self.task.make_pool(self.pool * g, spec.seed)

    def _pipeline(self, ctx: Any, x: Any, y: Any) -> Any:
        """Input pipeline ``ctx.input_pipeline_id``'s prefetching tf.data dataset."""
        tf, b = self.tf, self.spec.per_replica_batch
        rows = [shard_rows(a, self.pool, ctx.num_input_pipelines,
                           ctx.input_pipeline_id) for a in (x, y)]
        ds = tf.data.Dataset.from_tensor_slices(tuple(rows))
        return ds.repeat().batch(b, drop_remainder=True).prefetch(tf.data.AUTOTUNE)

    def _replica_rows(self, ctx: Any, x: Any, y: Any) -> tuple[np.ndarray, np.ndarray]:
        """Replica ``ctx``'s shard of every global batch of the pool."""
        r, n = ctx.replica_id_in_sync_group, self.replicas
        return shard_rows(x, self.pool, n, r), shard_rows(y, self.pool, n, r)

    def _local_devices(self) -> list[str]:
        """The devices of this process's replicas, in their order."""
        try:
            return list(self.strategy.extended.worker_devices)
        except (AttributeError, RuntimeError):  # the default strategy raises RuntimeError
            return [self.devices.names[0]]

    def _placed_batches(self, x: Any, y: Any, devices: DeviceSetup
                        ) -> list[tuple[Any, ...]]:
        """steps_per_call == 1: the pool's batches placed once, grouped by call."""
        tf, strategy, b = self.tf, self.strategy, self.spec.per_replica_batch
        local_devices = self._local_devices()

        def batch_of(j: int) -> Any:
            def rows(ctx: Any) -> tuple[Any, Any]:
                px, py = self._replica_rows(ctx, x, y)
                return _on_replica_device(tf, local_devices, ctx, lambda: (
                    map_inputs(lambda a: tf.constant(a[j * b:(j + 1) * b]), px),
                    tf.constant(py[j * b:(j + 1) * b])))
            return self._on_device(
                strategy.experimental_distribute_values_from_function(rows), devices)

        batches = [batch_of(j) for j in range(self.pool)]
        # One call consumes grad_accum micro-batches; cycle through the pool.
        per_call = self.spec.grad_accum
        return [tuple(batches[(i * per_call + a) % self.pool] for a in range(per_call))
                for i in range(self.pool)]

    def _placed_pool(self, x: Any, y: Any, devices: DeviceSetup) -> tuple[Any, Any]:
        """steps_per_call > 1: each replica's share of the whole pool on its device."""
        tf = self.tf
        local_devices = self._local_devices()

        def replica_pool(ctx: Any) -> tuple[Any, Any]:
            px, py = self._replica_rows(ctx, x, y)
            return _on_replica_device(tf, local_devices, ctx, lambda: (
                map_inputs(tf.constant, px), tf.constant(py)))

        pool_xy = self.strategy.experimental_distribute_values_from_function(replica_pool)
        return self._on_device(pool_xy, devices)

    def _on_device(self, xy: Any, devices: DeviceSetup) -> tuple[Any, Any]:
        """Single-replica strategies hand back host tensors: pin them to the device."""
        x, y = xy
        if hasattr(first_input(x), "values"):  # PerReplica: already placed by the strategy
            return x, y
        with self.tf.device(devices.names[0]):
            return map_inputs(self.tf.identity, x), self.tf.identity(y)

    # -- graph construction -------------------------------------------------------
    def _make_train_fn(self) -> Callable[..., Any]:
        tf, spec, strategy = self.tf, self.spec, self.strategy
        accum, k = spec.grad_accum, spec.steps_per_call
        b, pool = spec.per_replica_batch, self.pool
        apply = make_apply(spec, self.task)

        if spec.data == "tfdata":
            def one_step(args: tuple[Any, ...], step: Any) -> Any:
                batches = [next(args[0]) for _ in range(accum)]
                return strategy.run(lambda *bs: apply(list(bs)), args=tuple(batches))
        elif k == 1:
            @tf.function
            def train_batches(micro: tuple[Any, ...]) -> Any:
                last = strategy.run(lambda *bs: apply(list(bs)), args=micro)
                return strategy.reduce(tf.distribute.ReduceOp.SUM, last, axis=None)

            return train_batches
        else:
            def replica_step(px: Any, py: Any, step: Any) -> Any:
                micro = []
                for a in range(accum):
                    j = tf.math.floormod(step * accum + a, pool) * b
                    def rows(t: Any, j: Any = j) -> Any:
                        return t[j:j + b]
                    micro.append((map_inputs(rows, px), py[j:j + b]))
                return apply(micro)

            def one_step(args: tuple[Any, ...], step: Any) -> Any:
                return strategy.run(replica_step, args=(args[0], args[1], step))

        @tf.function
        def train_call(args: tuple[Any, ...], start: Any) -> Any:
            if k > 1:
                for i in tf.range(k - 1):
                    one_step(args, start + tf.cast(i, tf.int64))
            last = one_step(args, start + (k - 1))
            return strategy.reduce(tf.distribute.ReduceOp.SUM, last, axis=None)

        return train_call

    # -- execution ----------------------------------------------------------------
    def call(self) -> Any:
        """Run ``steps_per_call`` steps; returns the last step's global mean loss."""
        if self._batches:
            batch = self._batches[self._step % len(self._batches)]
            # The traced graph, called directly: tf.function's dispatch (matching the
            # per-replica arguments against its traces) cost 5-8% of an 8 ms MLP step
            # here (make overhead: 0.950x and 0.920x of the minimal loop, then 1.02x
            # and 0.96x). Every batch of the pool has the first one's signature.
            if self._concrete is None:
                self._concrete = self._fn.get_concrete_function(batch)
            out = self._concrete(batch)
        else:
            out = self._fn(self._args, self.tf.constant(self._step, self.tf.int64))
        self._step += self.spec.steps_per_call
        return out

    def profile_steps(self, steps: int, annotate: Annotate) -> list[float]:
        """Run ``steps`` more calls for the profiler, each inside ``annotate(i)`` and
        finished (its loss fetched) before it closes (``probes.profile.StepDriver``)."""
        return call_steps(lambda: float(self.call().numpy()))(steps, annotate)

    def sync(self, loss: Any) -> None:
        """Block until every device has finished its queued work (``loss``: a call's)."""
        loss.numpy()
        for local in self.strategy.experimental_local_results(self._probe_var):
            local.numpy()

    def agreed_window_steps(self, step_s: float) -> int:
        """Steps per window that every worker of a multi-worker run will take.

        This worker's proposal (``max_seconds`` worth of steps at ``step_s`` each,
        within ``[min_steps, max_steps]``, a multiple of ``steps_per_call``) is
        averaged over all replicas by one all-reduce, so every worker gets the
        same number back.
        """
        tf, spec, k = self.tf, self.spec, self.spec.steps_per_call
        own = min(spec.max_steps, max(spec.min_steps, math.ceil(spec.max_seconds / step_s)))
        proposals = self.strategy.run(lambda: tf.constant(float(own)))
        mean = float(self.strategy.reduce(tf.distribute.ReduceOp.MEAN, proposals, axis=None))
        return max(k, math.ceil(mean / k) * k)

    def weights_checksum(self) -> float:
        """Sum of all trainable weights (first local copy), to compare across workers."""
        return weights_checksum(self.strategy, self.variables)

    def replica_divergence(self) -> float:
        """Largest |w_r - w_0| over all variables and replicas (0 with one copy)."""
        return replica_divergence(self.strategy, self.variables)

    def loop(self) -> Loop:
        """This trainer as the window loop drives it (bench.child.windows)."""
        return Loop(call=self.call, fetch=lambda out: float(out.numpy()), sync=self.sync,
                    steps_per_call=self.spec.steps_per_call,
                    examples_per_step=self.spec.examples_per_step, replicas=self.replicas)

    def measure(self, launch_ts: float, phases: dict[str, float],
                progress: Callable[[str], None] = lambda _: None,
                before_windows: Callable[[], float | None] = lambda: None) -> Figures:
        """Warm up, then measure ``repeats`` windows; returns the figures.

        ``launch_ts`` is the wall-clock time the parent launched this process;
        ``phases`` holds the seconds spent importing TensorFlow, setting up
        devices and building (keys ``import_framework_s``, ``device_setup_s``, ``build_s``).
        ``before_windows`` runs between warm-up and the first window (e.g. a
        start barrier shared by independent processes).
        """
        spec, k = self.spec, self.spec.steps_per_call
        # Several worker processes must stop their windows after the same step: a
        # worker that stops on its own clock leaves its peers' next all-reduce without
        # a partner ("Socket closed"). They time a few warm-up calls to size the
        # windows, then agree on one step count.
        multi_worker = self.local_replicas < self.replicas
        return measure(
            self.loop(), Rules.of(spec), stats=self.stats, launch_ts=launch_ts,
            phases=phases,
            memory=DeviceMemory(self.tf, self.devices.kind, len(self.devices.names)),
            replica_divergence=self.replica_divergence, progress=progress,
            before_windows=before_windows,
            warm_target=max(spec.warmup_steps, 3 * k) if multi_worker else None,
            agree=self.agreed_window_steps if multi_worker else None)
