"""The measured loop of a ParameterServerStrategy run, on the coordinator (chief).

Keras ``fit`` does not work with ParameterServerStrategy in TF 2.21, so this is
the custom loop TensorFlow documents: ``create_per_worker_dataset``, then
``schedule`` steps and ``join``. Steps are asynchronous across workers, so the
coordinator times them: one call of the window loop (bench.child.windows, shared
with the in-process trainer) schedules a chunk of steps and joins (all done). A
step-time sample is the chunk's wall time x workers / steps in the chunk (each
worker's mean step time); chunk boundaries idle the workers for a moment, which
is counted.

What it measures, and what it refuses (``ParameterServer.validate``): one step is
one batch of ``batch`` examples on one worker, read from that worker's own
``tf.data`` iterator. ``data=synthetic`` is a pool of pre-built batches in the
worker's memory, handed out in turn (no batching work per step); ``data=tfdata``
batches on the fly with prefetching, as the in-process pipeline does. Gradient
accumulation and several steps per call are not implemented here and are refused
by the spec.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from bench.child.backends.base import pool_batches
from bench.child.backends.tf.build import build as build_strategy
from bench.child.backends.tf.flops import task_stats
from bench.child.backends.tf.task import TrainingTask, build_task, check_data
from bench.child.backends.tf.trainer import make_apply
from bench.child.windows import Loop, NoDeviceMemory, Rules, measure
from bench.errors import Unsupported
from bench.results.payload import TaskReport
from bench.results.schema import Figures
from bench.spec import RunSpec
from bench.strategies import STRATEGIES
from bench.tasks import Task, gpu_run
from workloads import Workload, find_workload
from workloads.synth import input_bytes

if TYPE_CHECKING:
    from bench.child.probes.hooks import AfterWindows

STEPS_PER_CHUNK_PER_WORKER = 4


def check_data_source(spec: RunSpec, gpus: int) -> None:
    """Refuse what the per-worker iterator cannot do on this hardware (raises Unsupported).

    ``data=synthetic`` promises batches already on the devices. On a CPU the cached
    pool is in the memory the workers compute from; on GPUs every batch would still
    be copied from the worker's host each step, which is not what the label says.
    """
    if spec.data == "synthetic" and gpus:
        raise Unsupported(
            "parameter_server workers read every batch through a per-worker tf.data "
            "iterator on their host, so on GPUs each batch is copied to the device every "
            "step; data=synthetic (a pool placed on the devices once) cannot be honoured. "
            "Use data=tfdata. Received: data='synthetic'")


def pool_size(spec: RunSpec) -> int:
    """Batches in a worker's pool: as many as the in-process trainer holds."""
    workload = find_workload(spec.workload)
    assert isinstance(workload, Workload)
    shape = workload.input_shape(spec.workload_params())
    return pool_batches(4 * math.prod(shape) * spec.per_replica_batch)  # float32 inputs


def task_dataset_fn(spec: RunSpec, task: TrainingTask) -> Callable[..., Any]:
    """Each worker's input pipeline for a model of the user's own or a token workload:
    its own ``dataset_fn`` under ``data=tfdata`` (per worker, through the strategy), else
    the teacher's pool (workloads.synth), made here on the coordinator and sent inside
    the traced pipeline as constants. The pool's byte budget (pool_batches: 256 MiB)
    keeps that under protobuf's 2 GB limit, which the built-in image workloads, whose
    pools are generated on the workers, would pass at 224x224 and large batches."""
    import tensorflow as tf

    b = spec.per_replica_batch
    if spec.data == "tfdata" and task.dataset_fn is not None:
        user = task.dataset_fn
        return lambda ctx: user(ctx, b)
    x1, _ = task.make_pool(1, spec.seed)
    pool = pool_batches(input_bytes(x1) * b)
    x, y = task.make_pool(pool * b, spec.seed)

    def dataset_fn() -> Any:
        ds = tf.data.Dataset.from_tensor_slices((x, y))
        if spec.data == "synthetic":  # pre-built batches, handed out in turn
            return ds.batch(b, drop_remainder=True).cache().repeat()
        return ds.repeat().batch(b, drop_remainder=True).prefetch(tf.data.AUTOTUNE)

    return dataset_fn


def worker_dataset_fn(spec: RunSpec) -> Callable[[], Any]:
    """The ``dataset_fn`` each worker builds its input pipeline from.

    ``create_per_worker_dataset`` traces it on the coordinator and sends the graph to
    every worker, so anything it closes over travels inside that graph: a numpy pool
    would be embedded as constants, past protobuf's 2 GB limit for ResNet50 at 224x224
    and large batches. The pool is therefore generated on the worker from the seed,
    with stateless random ops (same pool on every worker and in every run), labelled
    by the workload's kind of teacher (argmax of a fixed random linear map of the,
    possibly average-pooled, inputs; see ``Workload.make_pool``), so the task stays
    learnable. It is made as one element on the worker's first step (warm-up) and
    cached: later steps read the cache, as they read the prebuilt pool before.
    """
    import tensorflow as tf

    workload = find_workload(spec.workload)
    assert isinstance(workload, Workload)
    params = spec.workload_params()
    shape = tuple(workload.input_shape(params))
    classes = workload.num_classes(params)
    b = spec.per_replica_batch
    pool = pool_size(spec)
    n = pool * b
    seed = spec.seed

    def generate(_: Any) -> tuple[Any, Any]:
        x = tf.random.stateless_normal((n, *shape), seed=(seed, 0), dtype=tf.float32)
        feats = x
        if workload.teacher_pool and len(shape) == 3:
            h, w, c = shape
            p = max(1, min(workload.teacher_pool, h, w))
            hp, wp = h - h % p, w - w % p
            feats = tf.reduce_mean(tf.reshape(x[:, :hp, :wp, :],
                                              (n, p, hp // p, p, wp // p, c)), axis=(2, 4))
        feats = tf.reshape(feats, (n, -1))
        teacher = tf.random.stateless_normal((int(feats.shape[1]), classes),
                                             seed=(seed + 1, 0), dtype=tf.float32)
        return x, tf.cast(tf.argmax(tf.matmul(feats, teacher), axis=1), tf.int32)

    def dataset_fn() -> Any:
        whole = tf.data.Dataset.range(1).map(generate).cache()
        if spec.data == "synthetic":  # pre-built batches, handed out in turn
            return whole.flat_map(lambda x, y: tf.data.Dataset.from_tensor_slices(
                (tf.reshape(x, (pool, b, *shape)), tf.reshape(y, (pool, b))))).repeat()
        return (whole.flat_map(lambda x, y: tf.data.Dataset.from_tensor_slices((x, y)))
                .repeat().batch(b, drop_remainder=True).prefetch(tf.data.AUTOTUNE))

    return dataset_fn


# The coordinator's objects outlive its function: dropped as it returns, their teardown
# (the ClusterCoordinator's, its per-worker iterator's) held the process for 8.4 s before
# it wrote its payload in about one run of four (6 of 25 runs of an MLP, 13-14 s
# otherwise; 0 of 30 so kept). The process ends with os._exit after its payload, so
# they are never torn down at all.
_NEVER_TORN_DOWN: list[Any] = []


def run_coordinator(backend: Any, spec: RunSpec, task: Task, launch_ts: float,
                    mark_ready: Callable[[], None], log: Callable[[str], None]
                    ) -> TaskReport:
    """Build the PS strategy from TF_CONFIG, train through the coordinator, measure
    (``backend``: the lane's TfBackend, which imports TensorFlow)."""
    from bench.child.backends.runner import load_timed
    from bench.child.backends.tf.env import child_fingerprint
    from bench.hardware import detect

    machine_gpus = len(detect().gpus)
    check_data_source(spec, machine_gpus)
    phases = load_timed(backend, log)
    tf = backend.tf
    phases["device_setup_s"] = 0.0
    t = time.perf_counter()
    strategy = build_strategy(spec, [])
    coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
    mark_ready()
    # The workers' GPUs are remote to this process; nvidia-smi and NVML show this
    # host's GPUs (theirs on one machine), whatever this process's CUDA_VISIBLE_DEVICES
    # hides: the plan names the workers' cards (RUN_GPUS), the only ones read.
    gpu = gpu_run(task)
    gpu.begin()
    training = build_task(spec, strategy)
    check_data(training, spec)
    apply = make_apply(spec, training)
    stats = task_stats(tf, training, spec, progress=log)
    iterator = iter(coordinator.create_per_worker_dataset(
        _coordinator_dataset_fn(spec, training, strategy)))
    step = _step_fn(tf, strategy, apply)
    phases["build_s"] = time.perf_counter() - t
    workers = spec.devices
    # The coordinator holds no model state on devices; the workers' and parameter
    # servers' memory is sampled by the launcher (per task). One copy of the
    # variables, on the parameter servers: no divergence between replicas.
    figures = measure(_chunk_loop(spec, coordinator, step, iterator), Rules.of(spec),
                      stats=stats, launch_ts=launch_ts, phases=phases,
                      memory=NoDeviceMemory("per_task (see tasks)", reason=(
                          "the coordinator holds no model state; each task's memory is in "
                          "tasks")),
                      replica_divergence=lambda: 0.0, progress=log,
                      # Every worker has run a step before the windows open.
                      warm_target=max(spec.warmup_steps, workers),
                      before_windows=gpu.at_start)
    gpu.at_end()
    settled = _settle_mfu(tf, figures, spec, machine_gpus, log)
    problems = list(settled.problems)
    if spec.profile_steps:
        problems.append(f"not profiled: {STRATEGIES.get(spec.strategy).no_profile_reason}")
    env = child_fingerprint()
    env["threads"] = {"intra_op": tf.config.threading.get_intra_op_parallelism_threads(),
                      "inter_op": tf.config.threading.get_inter_op_parallelism_threads()}
    env["peak_flops"] = settled.peak_entry
    env.update(gpu.environment())
    _NEVER_TORN_DOWN.extend((strategy, coordinator, iterator, step))
    return TaskReport("ok", "; ".join(problems) or None, figures=figures, environment=env,
                      local_replicas=0)


def _coordinator_dataset_fn(spec: RunSpec, task: TrainingTask, strategy: Any) -> Any:
    """What ``create_per_worker_dataset`` builds each worker's input pipeline from."""
    workload = find_workload(spec.workload)
    if isinstance(workload, Workload) and workload.vocab is None:
        return worker_dataset_fn(spec)  # generated on the workers (see there)
    made = task_dataset_fn(spec, task)
    return made if not (spec.data == "tfdata" and task.dataset_fn) else \
        strategy.distribute_datasets_from_function(made)


def _step_fn(tf: Any, strategy: Any, apply: Callable[[list[tuple[Any, Any]]], Any]) -> Any:
    """One step on a worker, from its own iterator: the replicas' losses summed."""
    @tf.function
    def step(it: Any) -> Any:
        xb, yb = next(it)
        loss = strategy.run(lambda a, c: apply([(a, c)]), args=(xb, yb))
        return strategy.reduce(tf.distribute.ReduceOp.SUM, loss, axis=None)

    return step


def _chunk_loop(spec: RunSpec, coordinator: Any, step: Any, iterator: Any) -> Loop:
    """The window loop's call: schedule a chunk of steps over the workers and join."""
    workers = spec.devices
    chunk = STEPS_PER_CHUNK_PER_WORKER * workers

    def run_chunk(n: int) -> float:
        last = None
        for _ in range(n):
            last = coordinator.schedule(step, args=(iterator,))
        coordinator.join()  # every scheduled step done: the chunk is synchronised
        return float(last.fetch()) if last is not None else math.nan

    return Loop(call=lambda: run_chunk(chunk), fetch=float, sync=lambda _: None,
                steps_per_call=chunk, examples_per_step=spec.global_batch,
                replicas=workers, sample_scale=workers,
                first_call=lambda: run_chunk(1), first_call_steps=1)


def _settle_mfu(tf: Any, figures: Figures, spec: RunSpec, machine_gpus: int,
                log: Callable[[str], None]) -> AfterWindows:
    """MFU against the machine's peak: the coordinator runs with TensorFlow's default
    threads on every core, as the worker servers do, so its cached peak is theirs.
    On GPUs the workers train on cards the coordinator does not see: no peak here."""
    from bench.child.backends.tf.after import settle_run_mfu
    from bench.child.backends.tf.peak import first_device
    from bench.child.probes.hooks import AfterWindows

    device = first_device(tf)
    if machine_gpus and "cpu" in device:
        return AfterWindows({}, ["no MFU: parameter_server workers train on GPUs the "
                                 "coordinator cannot see, so it cannot measure their peak"])
    return settle_run_mfu(tf, figures, spec.precision, device,
                          1 if "cpu" in device else spec.devices, progress=log)
