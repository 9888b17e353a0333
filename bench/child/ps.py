"""The measured loop of a ParameterServerStrategy run, on the coordinator (chief).

Keras ``fit`` does not work with ParameterServerStrategy in TF 2.21, so this is
the custom loop TensorFlow documents: ``create_per_worker_dataset``, then
``schedule`` steps and ``join``. Steps are asynchronous across workers, so a
window is timed by the coordinator: schedule a chunk of steps, ``join`` (all
done), repeat until the window's step or time bound. The per-step time samples
are chunk wall time x workers / steps in the chunk (each worker's mean step
time); chunk boundaries idle the workers for a moment, which is counted.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from bench.child.build import build as build_strategy
from bench.child.memory import host_peak_rss_bytes, reset_host_peak
from bench.child.trainer import build_model, make_apply, summarize
from bench.results.schema import Startup, Warmup, Window
from bench.results.stats import step_time_stats
from bench.spec import RunSpec
from workloads import WORKLOADS
from workloads.flops import model_stats

STEPS_PER_CHUNK_PER_WORKER = 4


def run_coordinator(spec: RunSpec, launch_ts: float, mark_ready: Callable[[], None],
                    log: Callable[[str], None]) -> dict[str, Any]:
    """Build the PS strategy from TF_CONFIG, train through the coordinator, measure."""
    phases: dict[str, float] = {}
    t = time.perf_counter()
    import tensorflow as tf

    from bench.child.env import child_fingerprint

    phases["import_tf_s"] = time.perf_counter() - t
    phases["device_setup_s"] = 0.0
    t = time.perf_counter()
    strategy = build_strategy(spec, [])
    coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
    mark_ready()
    model, opt = build_model(spec, strategy)
    apply = make_apply(spec, model, opt)
    stats = model_stats(model)
    workload = WORKLOADS.get(spec.workload)
    x, y = workload.make_pool(spec.workload_params(), 8 * spec.global_batch, spec.seed)
    b = spec.per_replica_batch

    def dataset_fn() -> Any:
        return (tf.data.Dataset.from_tensor_slices((x, y)).repeat()
                .batch(b, drop_remainder=True).prefetch(tf.data.AUTOTUNE))

    iterator = iter(coordinator.create_per_worker_dataset(dataset_fn))

    @tf.function
    def step(it: Any) -> Any:
        xb, yb = next(it)
        loss = strategy.run(lambda a, c: apply([(a, c)]), args=(xb, yb))
        return strategy.reduce(tf.distribute.ReduceOp.SUM, loss, axis=None)

    phases["build_s"] = time.perf_counter() - t
    workers = spec.devices
    chunk = STEPS_PER_CHUNK_PER_WORKER * workers

    def run_chunk(n: int) -> float:
        last = None
        for _ in range(n):
            last = coordinator.schedule(step, args=(iterator,))
        coordinator.join()
        return float(last.fetch()) if last is not None else math.nan

    t = time.perf_counter()
    loss_start = run_chunk(1)
    first_call_s = time.perf_counter() - t
    startup = Startup(launch_to_first_step_s=time.time() - launch_ts, **phases)
    log(f"first step {first_call_s:.2f}s, loss {loss_start:.4f}")
    run_chunk(max(spec.warmup_steps, workers))
    warmup = Warmup(first_call_s=first_call_s, steps=1 + max(spec.warmup_steps, workers),
                    total_s=time.perf_counter() - t)

    windows: list[Window] = []
    all_times: list[float] = []
    host_scope = "window" if reset_host_peak() else "lifetime"
    for r in range(spec.repeats):
        reset_host_peak()
        t0 = time.perf_counter()
        steps, times, first_loss, loss = 0, [], math.nan, math.nan
        while True:
            tc = time.perf_counter()
            loss = run_chunk(chunk)
            tn = time.perf_counter()
            first_loss = loss if steps == 0 else first_loss
            times.append((tn - tc) * workers / chunk)
            steps += chunk
            if steps >= spec.max_steps or (tn - t0 >= spec.max_seconds
                                           and steps >= spec.min_steps):
                break
        wall = time.perf_counter() - t0
        examples = steps * spec.global_batch
        windows.append(Window(
            index=r, steps=steps, examples=examples, wall_s=wall,
            global_throughput=examples / wall,
            per_replica_throughput=examples / wall / workers,
            step_time=step_time_stats(times), loss_first=first_loss, loss_last=loss,
            device_peak_bytes={}, host_peak_rss_bytes=host_peak_rss_bytes()))
        all_times.extend(times)
        log(f"window {r + 1}/{spec.repeats}: {examples / wall:,.1f} examples/s, loss {loss:.4f}")
    # The coordinator holds no model state on devices; the workers' and parameter
    # servers' memory is sampled by the launcher (per task). One copy of the
    # variables, on the parameter servers: no divergence between replicas.
    figures = summarize(windows, all_times, warmup, startup, stats, loss_start,
                        replicas=workers, device_scope="per_task (see tasks)",
                        host_scope=host_scope, replica_divergence=0.0)
    median = figures.global_throughput
    # MFU against the machine's peak: the coordinator runs with TensorFlow's default
    # threads on every core, as the worker servers do, so its cached peak is theirs.
    reason = None
    try:
        from bench.child.probes.peak import PRECISION_DTYPE, first_device, mfu, peak_flops

        device = first_device(tf)
        table = peak_flops(tf, device)
        physical = 1 if "cpu" in device else workers
        figures.mfu, figures.peak_flops_per_s = mfu(
            stats.train_flops_per_example, median, table.get(PRECISION_DTYPE[spec.precision]),
            physical)
    except OSError as exc:
        reason = f"no MFU: peak FLOP/s probe failed ({exc})"
    if spec.profile_steps:
        reason = "; ".join(filter(None, [reason, (
            "not profiled: parameter_server steps run on remote worker servers, which the "
            "coordinator's profiler does not see")]))
    env = child_fingerprint()
    env["threads"] = {"intra_op": tf.config.threading.get_intra_op_parallelism_threads(),
                      "inter_op": tf.config.threading.get_inter_op_parallelism_threads()}
    return {"status": "ok", "reason": reason, "figures": asdict(figures), "environment": env,
            "local_replicas": 0}
