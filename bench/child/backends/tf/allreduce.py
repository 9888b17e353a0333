"""All-reduce in isolation, measured the way nccl-tests measures it.

The buffers go through the strategy's own cross-device path: inside ``strategy.run``
each replica calls ``get_replica_context().all_reduce(SUM, tensors)``, which is the
call Keras' optimizer makes for gradients. So the probe exercises the ops training
uses (CollectiveReduceV2 for Mirrored's default and MultiWorkerMirrored, AddN and
copies for HierarchicalCopy / ReductionToOneDevice, the parameter device for
CentralStorage) and runs inside any strategy object it is given.

Per point: ``warmup`` untimed all-reduces (tracing, collective set-up), then a fixed
number of timed ones, each bracketed by device synchronisation (every replica's result
fetched). The number is decided before timing, from the warm-up: enough to fill about
``max_seconds``, clamped to ``[min_iters, max_iters]``. The result of the first
all-reduce is checked (sum of known values), as nccl-tests checks its buffers.

Multi-worker strategies: every worker must issue the same collectives in the same
order, or they pair up wrongly ("Shape mismatch in the collective instance"). So every
worker calls ``run_points`` with the same points, and the iteration count is agreed
across workers (the mean of their warm-up estimates, by one all-reduce) instead of
each stopping on its own clock. The main task's figures are the result.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from bench.results.payload import TaskReport
from bench.results.schema import AllReduceFigures, AllReducePoint
from bench.spec import ALLREDUCE_MIN_BYTES, RunSpec
from bench.tasks import Task, gpu_run


@dataclass(frozen=True)
class Buffers:
    """What one point all-reduces: a list of tensor shapes of one dtype."""

    label: str
    shapes: tuple[tuple[int, ...], ...]
    dtype: str = "float32"

    @property
    def elements(self) -> int:
        return sum(math.prod(s) for s in self.shapes)

    @property
    def bytes(self) -> int:
        return self.elements * np.dtype(self.dtype).itemsize


def sizes(max_bytes: int, min_bytes: int = ALLREDUCE_MIN_BYTES) -> list[int]:
    """``min_bytes`` doubling up to ``max_bytes`` (inclusive), as nccl-tests ``-f 2``."""
    if min_bytes < 1 or max_bytes < min_bytes:
        raise ValueError(f"sizes needs 1 <= min_bytes <= max_bytes. Received: "
                         f"min_bytes={min_bytes}, max_bytes={max_bytes}")
    out, b = [], min_bytes
    while b <= max_bytes:
        out.append(b)
        b *= 2
    return out


def human_bytes(n: int) -> str:
    for unit_name, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale} {unit_name}"
    return f"{n} B"


def size_buffers(n_bytes: int, dtype: str = "float32") -> Buffers:
    itemsize = np.dtype(dtype).itemsize
    if n_bytes % itemsize:
        raise ValueError(f"buffer bytes must be a multiple of the {dtype} item size "
                         f"{itemsize}. Received: n_bytes={n_bytes}")
    return Buffers(human_bytes(n_bytes), ((n_bytes // itemsize,),), dtype)


def algbw(n_bytes: int, seconds: float) -> float:
    """Algorithm bandwidth: bytes each replica contributes / time (bytes/s)."""
    return n_bytes / seconds


def busbw(alg_bw: float, replicas: int) -> float:
    """Bus bandwidth, nccl-tests' all-reduce factor: algbw x 2(n-1)/n.

    A ring all-reduce moves 2(n-1)/n of the buffer over each link, so busbw is
    comparable with the link's bandwidth whatever n; it is 0 for one replica.
    """
    return alg_bw * 2.0 * (replicas - 1) / replicas


def implementation(strategy: Any) -> str:
    """Name of the cross-device path a strategy all-reduces with."""
    ext = strategy.extended
    name = type(strategy).__name__
    cdo = getattr(ext, "_cross_device_ops", None) or getattr(ext, "_get_cross_device_ops",
                                                             lambda *_: None)(None)
    if cdo is not None:
        name += f"/{type(cdo).__name__}"
    # The communication implementation (RING, NCCL, AUTO) only applies to collectives;
    # Mirrored carries the option even when HierarchicalCopy ignores it.
    options = getattr(ext, "_communication_options", None)
    impl = getattr(options, "implementation", None)
    if impl is not None and (cdo is None or "Collective" in type(cdo).__name__):
        name += f"/{getattr(impl, 'name', impl)}"
    return name


class AllReduceProbe:
    """Times all-reduces of given buffers through ``strategy`` (imports TensorFlow)."""

    def __init__(self, strategy: Any) -> None:
        import tensorflow as tf

        self.tf = tf
        self.strategy = strategy
        self.replicas = int(strategy.num_replicas_in_sync)

    def _inputs(self, buf: Buffers) -> list[Any]:
        tf = self.tf

        def value(shape: tuple[int, ...]) -> Any:
            # Replica r contributes r + 1 everywhere: the sum is known exactly.
            return self.strategy.experimental_distribute_values_from_function(
                lambda ctx: tf.fill(shape, tf.cast(ctx.replica_id_in_sync_group + 1,
                                                   buf.dtype)))

        return [value(s) for s in buf.shapes]

    def _function(self) -> Callable[..., Any]:
        tf, strategy = self.tf, self.strategy

        def replica_fn(*tensors: Any) -> Any:
            ctx = tf.distribute.get_replica_context()
            # Function arguments carry no device; the all-reduce takes its destination
            # from its inputs' device, so re-create them (no copy) under the replica's
            # device scope. Without it MultiWorkerMirrored fails: "destinations can not
            # be empty". Gradients in training are likewise produced inside the replica.
            placed = [tf.identity(t) for t in tensors]
            reduced = ctx.all_reduce(tf.distribute.ReduceOp.SUM, placed)
            # One element of every result: fetching it waits for the whole all-reduce
            # without copying the buffers to the host.
            return tf.add_n([tf.cast(tf.reshape(r, [-1])[0], tf.float32) for r in reduced])

        @tf.function
        def all_reduce(*tensors: Any) -> Any:
            return strategy.run(replica_fn, args=tensors)

        return all_reduce

    def _agree(self, value: float) -> float:
        """The mean of ``value`` over all workers (itself within one process)."""
        if getattr(self.strategy.extended, "_num_workers", 1) <= 1:
            return value
        tf = self.tf
        per_replica = self.strategy.experimental_distribute_values_from_function(
            lambda _: tf.constant(value, tf.float64))
        total = self.strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)
        return float(total.numpy()) / self.replicas

    def _sync(self, out: Any) -> list[float]:
        return [float(v.numpy()) for v in self.strategy.experimental_local_results(out)]

    def run(self, buf: Buffers, warmup: int, min_iters: int, max_iters: int,
            max_seconds: float) -> AllReducePoint:
        """Warm up, check the sum, then time all-reduces of ``buf``."""
        inputs = self._inputs(buf)
        fn = self._function()
        expected = len(buf.shapes) * self.replicas * (self.replicas + 1) / 2
        got = self._sync(fn(*inputs))
        if any(not math.isclose(g, expected, rel_tol=1e-6) for g in got):
            raise ArithmeticError(f"all-reduce of {buf.label} returned {got} on the replicas, "
                                  f"expected {expected} each")
        warm: list[float] = []
        for _ in range(max(1, warmup - 1)):
            t0 = time.perf_counter()
            self._sync(fn(*inputs))
            warm.append(time.perf_counter() - t0)
        estimate = self._agree(float(np.median(warm)))
        iters = int(min(max_iters, max(min_iters, max_seconds // max(estimate, 1e-9))))
        times: list[float] = []
        for _ in range(iters):
            t0 = time.perf_counter()
            self._sync(fn(*inputs))
            times.append(time.perf_counter() - t0)
        median, p90 = (float(x) for x in np.percentile(times, [50, 90]))
        bw = algbw(buf.bytes, median)
        return AllReducePoint(label=buf.label, bytes=buf.bytes, tensors=len(buf.shapes),
                              time_median_s=median, time_p90_s=p90, algbw=bw,
                              busbw=busbw(bw, self.replicas), iterations=len(times))


def gradient_buffers(spec: RunSpec) -> Buffers:
    """The exact gradient shapes of the spec's workload (one tensor per variable)."""
    import tensorflow as tf

    from bench.child.backends.tf.task import build_task
    from bench.spec import workload_label
    from workloads import Workload, find_workload

    workload = find_workload(spec.workload)
    if isinstance(workload, Workload):
        model = workload.build(spec.workload_params())
    else:  # a model of the user's own, built as a run builds it: only shapes are read
        model = build_task(spec, tf.distribute.get_strategy()).model
    shapes = tuple(tuple(int(d) for d in v.shape) for v in model.trainable_variables)
    return Buffers(f"gradients:{workload_label(spec.workload, 'default')}", shapes, "float32")


def plan(spec: RunSpec) -> list[Buffers]:
    """The points of an all-reduce run: every size, then the workload's gradients."""
    return [*(size_buffers(b) for b in sizes(spec.allreduce_max_bytes)),
            gradient_buffers(spec)]


def run_strategy_probe(backend: Any, spec: RunSpec, task: Task,
                       mark_ready: Callable[[], None],
                       progress: Callable[[str], None]) -> TaskReport:
    """The probe as a run's task: TensorFlow and the devices set up as for training,
    the spec's strategy built, then every point of ``plan`` (``backend``: the lane's
    TfBackend)."""
    from bench.child.backends.runner import environment, load_timed
    from bench.child.backends.tf.build import build as build_strategy

    load_timed(backend, progress)
    devices = backend.setup_devices(task, spec)
    progress(f"devices set up: {', '.join(devices.names)}")
    env = environment(backend, devices, task)
    gpu = gpu_run(task)  # the run's cards as the probe starts
    gpu.begin()
    env.update(gpu.environment())
    strategy = build_strategy(spec, devices.names)
    progress(f"strategy {spec.strategy} built")
    if not task.barrier:
        mark_ready()
    # Each point said as it ends: a heartbeat, so a collective that hangs is caught
    # by the silence after it rather than by the probe's whole timeout.
    probe = run_points(spec, strategy, plan(spec), progress=progress)
    return TaskReport("ok", allreduce=probe, environment=env)


def run_points(spec: RunSpec, strategy: Any, points: Sequence[Buffers],
               progress: Callable[[str], None] = lambda _: None) -> AllReduceFigures:
    """Measure every point with the iteration bounds of ``spec`` (warmup_steps,
    min_steps, max_steps, max_seconds are read as all-reduce iterations and seconds)."""
    probe = AllReduceProbe(strategy)
    out = AllReduceFigures(implementation=implementation(strategy), replicas=probe.replicas,
                           dtype="float32", warmup_iterations=max(2, spec.warmup_steps))
    for buf in points:
        point = probe.run(buf, spec.warmup_steps, spec.min_steps, spec.max_steps,
                          spec.max_seconds)
        out.points.append(point)
        progress(f"{point.label:>20s}: {point.time_median_s * 1e3:9.3f} ms median, "
                 f"busbw {point.busbw / 1e9:7.3f} GB/s ({point.iterations} iterations)")
    return out
