"""The fit mode: train with Keras ``model.compile`` + ``model.fit``, measured like the custom loop.

Most users train with ``fit``; this mode gives the number for that code. The work is
the custom loop's (bench.child.backends.tf.trainer): the same model and optimizer from
``build_task`` (seed, precision policy, loss scaling), the same loss (the task's:
sparse categorical cross-entropy on float32 logits for the built-in workloads, a
user's model's own compile() loss or the harness default, averaged over the global
batch; a model of several heads compiles a loss per head with its weights, and its
packed labels are unpacked into the model's output structure in the pipeline), the
same examples in the same order (global batch j of the same synthetic pool, each
replica and input pipeline taking its shard with ``shard_rows``), so loss parity
with the custom loop can be tested. XLA is pinned from the spec (``jit_compile`` is
``spec.xla``: Keras 3 would otherwise compile outside a strategy scope and not inside
one) and ``steps_per_execution`` is ``spec.steps_per_call``. ``fit`` reads its
batches through a tf.data iterator (it takes no tensors already on the devices): with
``data=synthetic`` the pipeline's elements are the pool's whole batches, in memory.

Timing: the definitions of bench.results.schema, as the window loop of
bench.child.windows applies them to the custom loop, here driven by a callback
(``fit`` owns the loop, verbose off, no progress bar):

- the first call (tracing) and the warm-up calls are timed apart, never in a window;
- a window opens and closes with every device synchronised (a read of each local
  copy of the smallest variable); Keras fetches each call's logs itself as soon as a
  callback has a batch-end hook, which is the per-call synchronisation: one
  step-time sample per call (``on_train_batch_begin`` to ``on_train_batch_end``);
- windows end by ``Rules`` (or the step count a multi-worker run agreed on), device
  memory is reset before each; after the last window the callback stops ``fit``.

The loss of a call: Keras reports the running mean since its last metric reset, so
a call's own mean loss is recovered from two consecutive running means (the metrics
are reset where each window opens, outside the timing, to keep the sums short). With
``steps_per_call = 1`` it is the step's loss, as in the custom loop; with more it is
the mean over the call's steps (the custom loop reports the last step's).
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from bench.child import preimport
from bench.child.backends.base import DeviceSetup, pool_batches
from bench.child.backends.tf.flops import task_stats
from bench.child.backends.tf.keras_lane import variable_handle
from bench.child.backends.tf.memory import DeviceMemory
from bench.child.backends.tf.task import build_task, check_data
from bench.child.backends.tf.trainer import (
    Trainer,
    replica_divergence,
    shard_rows,
    strategy_replicas,
    weights_checksum,
)
from bench.child.memory import host_peak_rss_bytes, reset_host_peak
from bench.child.probes.profile import Annotate
from bench.child.windows import DeviceMemoryProbe, Rules, summarize
from bench.energy import energy_meter, window_energy
from bench.env import INJECT_SLOWDOWN_VAR, injected_slowdown, stall_until
from bench.registry import Registry
from bench.results.samples import step_time_stats
from bench.results.schema import Figures, Startup, Warmup, Window
from bench.spec import RunSpec
from workloads.flops import ModelStats
from workloads.synth import input_bytes, map_inputs

# Upper bound on the steps of one ``fit`` call: the callback stops it after the last
# window; reaching the bound means the windows never ended (a bug, raised).
_STEP_BOUND_FACTOR = 4


@dataclass
class CallLoss:
    """A call's mean loss from Keras' running mean (since the last metric reset)."""

    steps: int = 0
    mean: float = 0.0

    def reset(self) -> None:
        self.steps, self.mean = 0, 0.0

    def update(self, running_mean: float, steps: int) -> float:
        """The mean loss of the ``steps`` steps that moved the running mean to ``running_mean``."""
        total = self.steps + steps
        loss = (running_mean * total - self.mean * self.steps) / steps
        self.steps, self.mean = total, running_mean
        return loss


@dataclass
class FitClock:
    """The window protocol as callback events (no Keras or TensorFlow in here).

    ``begin``/``end`` are called around every training call ``fit`` makes, with the
    step indices Keras passes and the running-mean loss of its logs; ``sync`` waits
    for every device; ``reset_loss`` resets Keras' metrics. ``end`` returns True once
    the last window closed (then ``fit`` must stop).
    """

    rules: Rules
    sync: Callable[[], None]
    reset_loss: Callable[[], None]
    memory: DeviceMemoryProbe
    examples_per_step: int
    replicas: int
    launch_ts: float
    phases: Mapping[str, float]
    progress: Callable[[str], None] = lambda _: None
    before_windows: Callable[[], float | None] = lambda: None
    warm_target: int | None = None
    agree: Callable[[float], int] | None = None
    clock: Callable[[], float] = time.perf_counter

    windows: list[Window] = field(default_factory=list)
    step_times: list[float] = field(default_factory=list)
    warmup: Warmup | None = None
    startup: Startup | None = None
    loss_start: float = math.nan
    host_scope: str = "window"
    _loss: CallLoss = field(default_factory=CallLoss)
    _t_start: float = 0.0
    _t_warm: float = 0.0
    _first_s: float = 0.0
    _tc: float = 0.0
    _t0: float = 0.0
    _e0: float | None = None  # the energy counter as the window opened (bench.energy)
    _steps: int = 0  # steps so far in the current phase (warm-up or window)
    _warm_steps: int = 0
    _first_steps: int = 0
    _fixed: int | None = None
    _times: list[float] = field(default_factory=list)
    _first_loss: float = math.nan
    _phase: str = "first"  # first, warmup, window, done
    _epoch: float = 0.0
    _slowdown: float = 0.0

    def start(self) -> None:
        """``on_train_begin``: the first call's clock starts (fit's own set-up included)."""
        self._t_start = self.clock()
        self._epoch = time.time() - time.perf_counter()

    def begin(self) -> None:
        """``on_train_batch_begin``."""
        self._tc = self.clock()

    def end(self, first_step: int, last_step: int, running_loss: float) -> bool:
        """``on_train_batch_end``: steps ``first_step..last_step`` done, their loss
        folded into ``running_loss``. True when every window is measured."""
        steps = last_step - first_step + 1
        loss = self._loss.update(running_loss, steps)
        if self._phase == "first":
            self.sync()
            first_call_s = self.clock() - self._t_start
            self.loss_start = loss
            self.startup = Startup(
                import_framework_s=self.phases["import_framework_s"],
                device_setup_s=self.phases["device_setup_s"],
                build_s=self.phases["build_s"],
                launch_to_first_step_s=time.time() - self.launch_ts,
                preimported_s=preimport.PREIMPORTED_S)
            self.progress(f"first call {first_call_s:.2f}s, loss {loss:.4f}")
            self._first_s, self._warm_steps = first_call_s, steps
            self._first_steps = steps
            self._phase, self._t_warm = "warmup", self.clock()
            return self._maybe_end_warmup()
        if self._phase == "warmup":
            self._warm_steps += steps
            return self._maybe_end_warmup()
        tn = self.clock()
        if self._slowdown:  # testing hook, as in bench.child.windows
            tn = stall_until(tn + (tn - self._tc) * self._slowdown)
        self._times.append((tn - self._tc) / steps)
        if not self._steps:
            self._first_loss = loss
        self._steps += steps
        ends = self.rules.window_done(self._steps, tn - self._t0, self._fixed,
                                      index=len(self.windows), now_ts=self._epoch + tn)
        # On a common schedule a window ends on the clock, not a step count; fit's epoch
        # (step_bound) holds this many steps per window, so a window never outruns it.
        if not ends and self._steps < _STEP_BOUND_FACTOR * self.rules.max_steps:
            return False
        return self._close_window(loss)

    def _maybe_end_warmup(self) -> bool:
        target = max(self.rules.warmup_steps, self.warm_target or 0)
        if self._warm_steps < target:
            return False
        self.sync()
        now = self.clock()
        timed = self._warm_steps - self._first_steps
        if self.agree is not None and timed:
            self._fixed = self.agree((now - self._t_warm) / timed)
        self.warmup = Warmup(first_call_s=self._first_s, steps=self._warm_steps,
                             total_s=now - self._t_start)
        self.rules = self.rules.on_schedule(self.before_windows())
        self._slowdown = injected_slowdown()
        if self._slowdown:
            self.progress(f"testing hook {INJECT_SLOWDOWN_VAR}={self._slowdown:g}: every "
                          f"timed call is made {self._slowdown:.0%} longer")
        self._open_window()
        return False

    def _open_window(self) -> None:
        self.memory.reset()
        if not reset_host_peak():
            self.host_scope = "lifetime"
        self.reset_loss()
        self._loss.reset()
        self.sync()
        self._phase, self._steps, self._times = "window", 0, []
        self._e0 = energy_meter().read()
        self._t0 = self.clock()

    def _close_window(self, loss: float) -> bool:
        self.sync()
        t1 = self.clock()
        energy = window_energy(self._e0, energy_meter().read())
        wall = t1 - self._t0
        examples = self._steps * self.examples_per_step
        r = len(self.windows)
        self.windows.append(Window(
            index=r, steps=self._steps, examples=examples, wall_s=wall,
            global_throughput=examples / wall,
            per_replica_throughput=examples / wall / self.replicas,
            step_time=step_time_stats(self._times), loss_first=self._first_loss,
            loss_last=loss, device_peak_bytes=self.memory.peaks(),
            host_peak_rss_bytes=host_peak_rss_bytes(), start_ts=self._epoch + self._t0,
            end_ts=self._epoch + t1, energy_j=energy,
            joules_per_example=energy / examples if energy is not None else None))
        self.step_times.extend(self._times)
        self.progress(f"window {r + 1}/{self.rules.repeats}: {examples / wall:,.1f} "
                      f"examples/s, loss {loss:.4f}")
        if len(self.windows) >= self.rules.repeats:
            self._phase = "done"
            return True
        self._open_window()
        return False

    @property
    def done(self) -> bool:
        return self._phase == "done"

    def step_bound(self, steps_per_call: int) -> int:
        """Steps for ``fit``'s epoch: more than warm-up and every window can take."""
        warm = max(self.rules.warmup_steps, self.warm_target or 0) + steps_per_call
        per_window = self.rules.max_steps + steps_per_call
        bound = _STEP_BOUND_FACTOR * (warm + self.rules.repeats * per_window)
        return math.ceil(bound / steps_per_call) * steps_per_call


def agreed_window_steps(tf: Any, strategy: Any, spec: RunSpec, step_s: float) -> int:
    """Steps per window every worker of a multi-worker run takes (mean of the proposals).

    The rule of ``Trainer.agreed_window_steps``: ``max_seconds`` worth of steps at
    ``step_s`` each, within ``[min_steps, max_steps]``, averaged over all replicas by
    one all-reduce, rounded up to a multiple of ``steps_per_call``.
    """
    k = spec.steps_per_call
    own = min(spec.max_steps, max(spec.min_steps, math.ceil(spec.max_seconds / step_s)))
    proposals = strategy.run(lambda: tf.constant(float(own)))
    mean = float(strategy.reduce(tf.distribute.ReduceOp.MEAN, proposals, axis=None))
    return max(k, math.ceil(mean / k) * k)


class FitTrainer:
    """Builds the custom loop's model, optimizer and data under a strategy; trains with fit.

    Offers what the child reads from a trainer (``spec``, ``tf``, ``devices``,
    ``replicas``, ``local_replicas``, ``optimizer``, ``stats``, ``pool``,
    ``measure``, ``replica_divergence``, ``weights_checksum``).
    """

    def __init__(self, spec: RunSpec, strategy: Any, devices: DeviceSetup) -> None:
        import tensorflow as tf

        self.tf, self.spec, self.strategy, self.devices = tf, spec, strategy, devices
        self.replicas, self.local_replicas = strategy_replicas(strategy, spec)
        self.task = build_task(spec, strategy)
        check_data(self.task, spec)
        self.model, self.optimizer = self.task.model, self.task.optimizer
        self.stats: ModelStats = task_stats(tf, self.task, spec)
        self.variables = self.model.trainable_variables
        self._probe = variable_handle(
            min(self.variables, key=lambda v: int(np.prod(v.shape))))
        with strategy.scope():
            self.model.compile(optimizer=self.optimizer, loss=self.task.keras_loss,
                               loss_weights=self.task.loss_weights,
                               jit_compile=spec.xla, steps_per_execution=spec.steps_per_call)

        g, b = spec.global_batch, spec.per_replica_batch
        user = self.task.dataset_fn if spec.data == "tfdata" else None
        if user is not None:  # the user's own pipeline
            self.pool = 1
            self.dataset = strategy.distribute_datasets_from_function(lambda ctx: user(ctx, b))
            return
        x1, _ = self.task.make_pool(1, spec.seed)
        self.pool = pool_batches(input_bytes(x1) * g)
        x, y = self.task.make_pool(self.pool * g, spec.seed)

        def pipeline(ctx: Any) -> Any:
            # The custom loop's pipeline (Trainer): shard w of every global batch for
            # input pipeline w, batches of the per-replica size, in pool order.
            rows = [shard_rows(a, self.pool, ctx.num_input_pipelines, ctx.input_pipeline_id)
                    for a in (x, y)]
            if spec.data == "tfdata":
                ds = tf.data.Dataset.from_tensor_slices(tuple(rows))
                ds = ds.repeat().batch(b, drop_remainder=True)
            else:  # whole batches as elements: nothing to assemble per step
                ds = tf.data.Dataset.from_tensor_slices(tuple(
                    map_inputs(lambda a: a.reshape(-1, b, *a.shape[1:]), r)
                    for r in rows)).repeat()
            unpack = self.task.unpack_labels
            if unpack is not None:  # several heads: their packed labels as fit matches them
                ds = ds.map(lambda xb, yb: (xb, unpack(yb)))
            return ds.prefetch(tf.data.AUTOTUNE)

        self.dataset = strategy.distribute_datasets_from_function(pipeline)

    # -- synchronisation and checks (as Trainer) ----------------------------------
    def sync(self) -> None:
        """Block until every device has finished its queued updates."""
        for local in self.strategy.experimental_local_results(self._probe):
            local.numpy()

    def replica_divergence(self) -> float:
        """Largest |w_r - w_0| over all variables and replicas (0 with one copy)."""
        return replica_divergence(self.strategy, self.variables)

    def weights_checksum(self) -> float:
        """Sum of all trainable weights (first local copy), to compare across workers."""
        return weights_checksum(self.strategy, self.variables)

    # -- measurement -----------------------------------------------------------------
    def profile_steps(self, steps: int, annotate: Annotate,
                      callbacks: Sequence[Any] = ()) -> list[float]:
        """Run ``steps`` more training calls through ``fit`` for the profiler, each
        inside ``annotate(i)`` (``probes.profile.StepDriver``).

        A fit step runs from one batch's begin callback to the next's, so the
        annotation holds what ``fit`` does per step besides the compiled call (its
        callbacks, logs and loop). The first call of this new ``fit`` starts a new
        iterator (a cold prefetch buffer) and is left out, as is the last, which only
        closes the previous annotation. ``callbacks`` run after the harness's own, as a
        user's would (what they cost shows as host time).
        """
        import keras

        k = self.spec.steps_per_call
        times: list[float] = []
        held = contextlib.ExitStack()  # the open step's annotation
        opened: list[float] = []  # when it opened

        def close() -> None:
            if opened:
                held.close()
                times.append(time.perf_counter() - opened.pop())

        class Marks(keras.callbacks.Callback):
            def on_train_batch_begin(self, batch: int, logs: Any = None) -> None:
                close()  # the previous step ends where this one begins
                i = batch // k - 1  # this call's index among the profiled ones
                if 0 <= i < steps:
                    held.enter_context(annotate(i))
                    opened.append(time.perf_counter())

            def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
                float(logs["loss"])  # the call finished on every device

        try:
            self.model.fit(self.dataset, epochs=1, steps_per_epoch=(steps + 2) * k,
                           verbose=0, shuffle=False, callbacks=[Marks(), *callbacks])
        finally:
            close()
        return times

    def measure(self, launch_ts: float, phases: dict[str, float],
                progress: Callable[[str], None] = lambda _: None,
                before_windows: Callable[[], float | None] = lambda: None) -> Figures:
        """Warm up, then measure ``repeats`` windows inside one ``fit``; the figures.

        Arguments as ``Trainer.measure``. Workers of a multi-worker run agree on the
        window length after the warm-up (they must stop ``fit`` on the same step).
        """
        import keras

        spec, k = self.spec, self.spec.steps_per_call
        multi_worker = self.local_replicas < self.replicas
        clock = FitClock(
            rules=Rules.of(spec), sync=self.sync, reset_loss=self.model.reset_metrics,
            memory=DeviceMemory(self.tf, self.devices.kind, len(self.devices.names)),
            examples_per_step=spec.examples_per_step, replicas=self.replicas,
            launch_ts=launch_ts, phases=phases, progress=progress,
            before_windows=before_windows,
            warm_target=max(spec.warmup_steps, 3 * k) if multi_worker else None,
            agree=(lambda s: agreed_window_steps(self.tf, self.strategy, spec, s))
            if multi_worker else None)

        class Timer(keras.callbacks.Callback):
            def on_train_begin(self, logs: Any = None) -> None:
                clock.start()

            def on_train_batch_begin(self, batch: int, logs: Any = None) -> None:
                self._first = batch
                clock.begin()

            def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
                if clock.end(self._first, batch, float(logs["loss"])):
                    self.model.stop_training = True

        self.model.fit(self.dataset, epochs=1, steps_per_epoch=clock.step_bound(k),
                       verbose=0, shuffle=False, callbacks=[Timer()])
        if not clock.done or clock.warmup is None or clock.startup is None:
            raise RuntimeError(f"fit ended after {len(clock.windows)} of {spec.repeats} "
                               f"windows (step bound reached)")
        return summarize(clock.windows, clock.step_times, clock.warmup, clock.startup,
                         self.stats, clock.loss_start, replicas=self.replicas,
                         device_scope=clock.memory.scope, host_scope=clock.host_scope,
                         device_reason=clock.memory.reason,
                         replica_divergence=self.replica_divergence())


# The training loop of a run, by ``RunSpec.loop``: what the child builds and measures.
TRAINERS: Registry[Callable[[RunSpec, Any, DeviceSetup], Any]] = Registry("loop")
TRAINERS.register("custom", Trainer)
TRAINERS.register("fit", FitTrainer)
