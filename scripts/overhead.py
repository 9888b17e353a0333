"""Harness overhead: the harness's measured loop vs its minimal peer, and its fit.

For each configuration (its own process, as in a sweep), the same strategy object
trains two copies of the model: one through bench.child.backends.tf.trainer.Trainer (what every
sweep measures) and one through its minimal peer, the simplest loop a user would write
(``minimal_loop``: strategy.run of the step in one tf.function on one fixed batch per
replica placed on the devices once, nothing else per step, synchronised at the window
ends only). Rounds alternate so that machine noise hits both alike (ABBA order cancels a
linear drift); the medians, the ratio harness/minimal (median of the per-round ratios,
with their range) and a verdict line per configuration are printed: "ok" at 0.95x or
better, "HARNESS SLOWER" below. The default set has a row for every in-process strategy
(default, one_device, mirrored, central_storage) on the MLP at batch 256 with its natural
device count, and the CNN under the two multi-device ones.

Then the same for Keras fit (``fit_comparison``): the harness's fit mode
(bench.child.backends.tf.fit) vs a plain hand-written ``model.fit`` vs tf_keras' benchmark helper
(``measure_performance``, Keras 2 lane and one device only), rotating order each round,
each timed in its steady state (see ``hand_written_fit`` and ``keras_helper_fit``).

Timings never fail the command by themselves, "HARNESS SLOWER" included: the exit
status is 0, or 3 when a run failed or timed out (its row then says so).

    python -m scripts.overhead                        # the default set (make overhead)
    python -m scripts.overhead --config mlp,mirrored,2,256 --rounds 7 --seconds 3
    python -m scripts.overhead --config none --fit-config mlp,one_device,1,256   # fit only
    python -m scripts.overhead --fit-config none --rounds 2 --seconds 1  # custom loop, quick
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
import time
from typing import Any

from bench.env import REPO_ROOT
from bench.exits import Exit

DEFAULT_SET = ["mlp,default,1,256", "mlp,one_device,1,256", "mlp,mirrored,2,256",
               "mlp,central_storage,2,256", "cnn,mirrored,2,128", "cnn,central_storage,2,128"]
# The harness at this fraction of its minimal peer's throughput or better is "ok": below
# it, the harness's path costs what a user's simplest loop does not.
PEER_FLOOR = 0.95
MARK = "OVERHEAD_RESULT "


def minimal_loop(tf: Any, keras: Any, strategy: Any, spec: Any, devices: list[str]) -> Any:
    """The simplest loop a user would write under ``strategy``: a function(seconds) ->
    examples/s, the harness's minimal peer.

    The workload's model and Adam (as the harness trains it) built in the strategy's scope;
    ONE fixed batch per replica, placed on the replica's device once (values from
    ``experimental_distribute_values_from_function``, created under ``tf.device`` as TF's
    documentation shows: the strategies leave the values where the function made them); the
    train step ``strategy.run`` inside one ``tf.function``. No input pipeline and no
    distributed dataset: one distributed iterator under OneDevice or Mirrored leaves every
    later step of the process slower (see bench.child.backends.tf.trainer), a cost this peer
    must not carry. A measurement is a fixed number of calls with nothing else per step, then one
    synchronisation; it starts synchronised (the previous measurement, the harness's or this
    one's, ended so). Its call count is sized from the previous measurement to last about
    ``seconds``.

    The step captures its batch (a user with one batch calls ``step()``); the harness
    passes each call its batch as arguments, as it cycles a pool of up to 8, and calls the
    traced graph directly (bench.child.backends.tf.trainer: tf.function's dispatch of per-replica
    arguments cost it 5-8% of an 8 ms MLP step). The peer is the loop a user writes, not
    an equal-work twin, so what the harness's way of feeding costs shows in the ratio.
    """
    from workloads import WORKLOADS

    workload, params = WORKLOADS.get(spec.workload), spec.workload_params()
    keras.utils.set_random_seed(spec.seed)
    with strategy.scope():
        model = workload.build(params)
        opt = keras.optimizers.Adam(spec.learning_rate)
        opt.build(model.trainable_variables)
    g, b = spec.global_batch, spec.per_replica_batch
    x, y = workload.make_pool(params, g, spec.seed)  # one global batch

    def replica_batch(ctx: Any) -> tuple[Any, Any]:
        r = ctx.replica_id_in_sync_group
        with tf.device(devices[r]):
            return tf.constant(x[r * b:(r + 1) * b]), tf.constant(y[r * b:(r + 1) * b])

    xb, yb = strategy.experimental_distribute_values_from_function(replica_batch)

    def replica_step(xr: Any, yr: Any) -> Any:
        with tf.GradientTape() as tape:
            logits = model(xr, training=True)
            loss = tf.nn.compute_average_loss(
                keras.losses.sparse_categorical_crossentropy(yr, logits, from_logits=True),
                global_batch_size=g)
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        return loss

    @tf.function
    def step() -> Any:
        return strategy.reduce("SUM", strategy.run(replica_step, args=(xb, yb)), axis=None)

    calls = [3]

    def measure(seconds: float) -> float:
        n = calls[0]
        t0 = time.perf_counter()
        for _ in range(n):
            out = step()
        out.numpy()  # the one synchronisation: a call's outputs come once its updates ran
        rate = n * g / (time.perf_counter() - t0)
        calls[0] = max(10, int(seconds * rate / g))
        return rate

    measure(1.0)  # warm-up: traces the step, sizes the first measured call count
    return measure


def run_one(config: str, rounds: int, seconds: float) -> dict[str, Any]:
    """Inside the child: the harness and its minimal peer, alternating rounds."""
    import keras
    import tensorflow as tf

    from bench.child.backends.tf.build import build as build_strategy
    from bench.child.backends.tf.devices import setup_devices
    from bench.child.backends.tf.trainer import Trainer
    from bench.spec import RunSpec

    workload, strategy_name, devices, batch = config.split(",")
    spec = RunSpec(workload=workload, strategy=strategy_name, devices=int(devices),
                   batch=int(batch), repeats=1, max_seconds=seconds, max_steps=10**9,
                   min_steps=10, warmup_steps=3)
    setup = setup_devices(tf, spec.devices)
    strategy = build_strategy(spec, setup.names)
    trainer = Trainer(spec, strategy, setup)
    minimal = minimal_loop(tf, keras, strategy, spec, setup.names)
    phases = {"import_framework_s": 0.0, "device_setup_s": 0.0, "build_s": 0.0}
    rates: dict[str, list[float]] = {"harness": [], "minimal": []}
    measures = {
        "harness": lambda: trainer.measure(time.time(), phases).global_throughput,
        "minimal": lambda: minimal(seconds),
    }
    # ABBA order (harness, minimal, minimal, harness, ...): a drift in machine state over
    # the run (load decaying, clocks, caches) hits both loops alike instead of the first.
    for r in range(rounds):
        for name in ("harness", "minimal") if r % 2 == 0 else ("minimal", "harness"):
            rates[name].append(measures[name]())
    return {"config": config, **rates}


# -- fit: the harness's fit mode vs a hand-written model.fit vs the Keras helper ----------
FIT_SET = ["mlp,one_device,1,256", "mlp,mirrored,2,256"]


def hand_written_fit(keras: Any, strategy: Any, spec: Any, dataset: Any) -> Any:
    """A plain ``model.fit`` (compile, fit, verbose off) on ``dataset``, timed in its
    steady state: a function(seconds) -> examples/s.

    Each measurement is one ``fit`` call of two epochs of ``k`` steps with a callback
    that only stamps epoch ends (Keras fetches the epoch's logs first, so each stamp
    follows a synchronisation). The first epoch absorbs the call's set-up (iterator,
    callbacks, first steps); the rate is the second epoch's ``k`` steps over the time
    between the two stamps, which is what the harness's windows measure. Timing whole
    calls instead charges each measurement the call's fixed set-up cost (about 0.08 s
    here), which a ``fit`` that runs for an epoch of minutes never notices. No batch
    hook: Keras then handles per-step logs off the main thread, as in a user's ``fit``.

    ``dataset`` is the harness's own (the same distributed batches): the difference is
    then the harness's measurement, not the input pipeline. (A first version built the
    usual ``Dataset.from_tensor_slices((x, y)).batch(g).repeat()``: without prefetching
    and, under Mirrored, split per replica at every step, it ran at 0.33-0.83x the
    harness's fit here: it measured that pipeline.)"""
    from workloads import WORKLOADS

    workload, params = WORKLOADS.get(spec.workload), spec.workload_params()
    keras.utils.set_random_seed(spec.seed)
    with strategy.scope():
        model = workload.build(params)
        # jit_compile pinned off, as the harness's fit at xla=False (Keras 3 would pick
        # XLA outside a strategy scope): the same computation on both sides.
        model.compile(optimizer=keras.optimizers.Adam(spec.learning_rate), jit_compile=False,
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    g, ds = spec.global_batch, dataset

    class EpochEnds(keras.callbacks.Callback):
        def __init__(self) -> None:
            super().__init__()
            self.stamps: list[float] = []

        def on_epoch_end(self, epoch: int, logs: Any = None) -> None:
            self.stamps.append(time.perf_counter())

    model.fit(ds, epochs=1, steps_per_epoch=3, verbose=0)  # warm-up, tracing
    steps = [10]

    def measure(seconds: float) -> float:
        ends = EpochEnds()
        model.fit(ds, epochs=2, steps_per_epoch=steps[0], verbose=0, callbacks=[ends])
        rate = steps[0] * g / (ends.stamps[1] - ends.stamps[0])
        steps[0] = max(10, int(seconds * rate / g))
        return rate

    measure(1.0)  # sizes the first measured call
    return measure


def keras_helper_fit(spec: Any, pool: int) -> Any:
    """tf_keras' benchmark helper (``measure_performance``) on the same model and
    examples: a function(seconds) -> (examples/s as the helper reports it, examples/s
    of its mean epoch), or None where it cannot run (it needs tf_keras, and builds its
    own strategy: one device only, here).

    The helper's own figure divides the examples of a whole timed ``fit`` call by its
    wall time, so it includes the call's set-up (numpy adapter, iterator, callbacks);
    its mean epoch time (``avg_epoch_time``, from its own epoch callback) leaves that
    out and is the like-for-like figure for the harness's windows. Both are printed."""
    if spec.keras != 2 or spec.replicas != 1:
        return None
    import keras  # tf_keras in the Keras 2 lane
    import numpy as np
    from tf_keras.src.benchmarks.benchmark_util import measure_performance

    from workloads import WORKLOADS

    workload, params = WORKLOADS.get(spec.workload), spec.workload_params()
    g = spec.global_batch
    x, y = workload.make_pool(params, pool * g, spec.seed)
    # The same examples, tiled to 64+ batches an epoch: the helper feeds numpy arrays
    # and pays fit's per-epoch cost, which 8 batches an epoch would mostly measure.
    tiles = max(1, -(-64 // pool))
    x, y = np.concatenate([x] * tiles), np.concatenate([y] * tiles)
    epochs = [2]

    def measure(seconds: float) -> tuple[float, float]:
        t0 = time.perf_counter()
        metrics, _, _ = measure_performance(
            lambda: workload.build(params), x=x, y=y, epochs=epochs[0], batch_size=g,
            run_iters=1, optimizer=keras.optimizers.Adam(spec.learning_rate),
            loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            distribution_strategy="one_device")
        values = {m["name"]: float(m["value"]) for m in metrics}
        # Size the next call's epochs from this one (warm-up epoch and build included).
        per_epoch = (time.perf_counter() - t0) / (epochs[0] + 1)
        epochs[0] = max(2, int(seconds / per_epoch))
        return values["exp_per_sec"], len(x) / values["avg_epoch_time"]

    measure(1.0)  # sizes the first measured call
    return measure


def run_fit_one(config: str, keras_version: int, rounds: int, seconds: float
                ) -> dict[str, Any]:
    """Inside the child: harness fit, hand-written fit and the helper, rotating order."""
    from bench.child.backends.tf.keras_lane import select_keras

    select_keras(keras_version)  # before TensorFlow
    import keras
    import tensorflow as tf

    from bench.child.backends.tf.build import build as build_strategy
    from bench.child.backends.tf.devices import setup_devices
    from bench.child.backends.tf.fit import FitTrainer
    from bench.spec import RunSpec

    workload, strategy_name, devices, batch = config.split(",")
    spec = RunSpec(workload=workload, strategy=strategy_name, devices=int(devices),
                   batch=int(batch), repeats=1, max_seconds=seconds, max_steps=10**9,
                   min_steps=10, warmup_steps=3, loop="fit", keras=keras_version)
    setup = setup_devices(tf, spec.devices)
    strategy = build_strategy(spec, setup.names)
    trainer = FitTrainer(spec, strategy, setup)
    phases = {"import_framework_s": 0.0, "device_setup_s": 0.0, "build_s": 0.0}
    measures = {
        "harness": lambda s: trainer.measure(time.time(), phases).global_throughput,
        "hand": hand_written_fit(keras, strategy, spec, trainer.dataset),
    }
    helper = keras_helper_fit(spec, trainer.pool)
    rates: dict[str, list[float]] = {name: [] for name in measures}
    if helper is not None:
        rates["helper"], rates["helper_epoch"] = [], []

        def measure_helper(seconds: float) -> float:
            own, epoch = helper(seconds)
            rates["helper_epoch"].append(epoch)
            return own

        measures["helper"] = measure_helper
    names = list(measures)
    for r in range(rounds):  # each round starts with the next one: no fixed first place
        for name in names[r % len(names):] + names[:r % len(names)]:
            rates[name].append(measures[name](seconds))
    return {"config": config, "keras": keras_version, **rates}


def run_child(args: list[str], timeout: float, label: str) -> dict[str, Any] | None:
    """Run this module with ``args`` in its own process (its own devices, as in a sweep)
    and return the result it prints after ``MARK``; None after printing why there is
    none (a timeout, or the child's stderr)."""
    try:
        proc = subprocess.run([sys.executable, "-m", "scripts.overhead", *args],
                              capture_output=True, text=True, timeout=timeout, cwd=REPO_ROOT)
    except subprocess.TimeoutExpired:
        print(f"{label} timed out after {timeout:g} s")
        return None
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith(MARK)), None)
    if line is None:
        print(f"{label} failed:\n{proc.stderr[-2000:]}")
        return None
    result: dict[str, Any] = json.loads(line[len(MARK):])
    return result


def _per_round(ours: list[float], other: list[float]) -> list[float]:
    """The per-round ratios ours/other: each round pairs the two within seconds of each
    other, so their median is immune to the machine drifting over the whole run."""
    return [a / b for a, b in zip(ours, other, strict=True)]


def _ratios(ours: list[float], other: list[float]) -> str:
    """Median of the per-round ratios and their range: ``0.98 [0.91-1.04]``."""
    per_round = _per_round(ours, other)
    return f"{statistics.median(per_round):.3f} [{min(per_round):.2f}-{max(per_round):.2f}]"


def loop_comparison(configs: list[str], rounds: int, seconds: float, timeout: float) -> int:
    """Print the harness vs its minimal peer per configuration, then a verdict line per
    configuration; returns how many configurations produced no figures."""
    if not configs:  # --config none
        return 0
    print(f"custom loop, examples/s: the harness vs its minimal peer (the simplest loop a "
          f"user writes: strategy.run in one tf.function on one fixed batch per replica, "
          f"synchronised at the window ends only). Medians of {rounds} ABBA rounds of "
          f"{seconds:g} s; harness/minimal: median of the per-round ratios [range].")
    print(f"{'configuration':28s} {'harness ex/s':>13s} {'minimal ex/s':>13s} "
          f"{'harness/minimal':>19s}")
    verdicts, failed = [], 0
    for config in configs:
        r = run_child(["--one", config, "--rounds", str(rounds), "--seconds", str(seconds)],
                      timeout, f"{config:28s}")
        if r is None:
            failed += 1
            verdicts.append(f"{config:28s} no figures (the run failed)")
            continue
        print(f"{config:28s} {statistics.median(r['harness']):13,.0f} "
              f"{statistics.median(r['minimal']):13,.0f} "
              f"{_ratios(r['harness'], r['minimal']):>19s}")
        ratio = statistics.median(_per_round(r["harness"], r["minimal"]))
        verdicts.append(f"{config:28s} " + (
            f"ok: the harness at {ratio:.3f}x of the minimal loop" if ratio >= PEER_FLOOR else
            f"HARNESS SLOWER: at {ratio:.3f}x of the minimal loop, below {PEER_FLOOR:g}x"))
    print(f"verdict (the harness at {PEER_FLOOR:g}x of its minimal peer or better, at the "
          f"median; printed only, the exit status ignores it):")
    for line in verdicts:
        print(f"  {line}")
    return failed


def fit_comparison(configs: list[str], lanes: list[int], rounds: int, seconds: float,
                   timeout: float) -> int:
    """Print harness fit vs hand-written fit (vs the Keras helper) per configuration;
    returns how many runs produced no figures."""
    failed = 0
    if not configs:  # --fit-config none
        return failed
    print(f"\nfit, examples/s (medians of {rounds} rounds of {seconds:g} s, the order rotating "
          f"each round), all in the steady state: the harness's windows; the hand-written "
          f"fit's second epoch; the helper's mean epoch. 'helper call' is the helper's own "
          f"figure (a whole fit call, set-up included). Ratios: median of the per-round "
          f"ratios [range].")
    print(f"fit: {'configuration':26s} {'keras':>5s} {'harness':>8s} {'hand':>8s} "
          f"{'helper':>8s} {'helper call':>11s}  {'harness/hand':>19s}  "
          f"{'harness/helper':>19s}")
    for config in configs:
        for lane in lanes:
            r = run_child(["--fit-one", config, "--keras", str(lane), "--rounds", str(rounds),
                           "--seconds", str(seconds)], timeout, f"fit: {config:26s} {lane:5d}")
            if r is None:
                failed += 1
                continue
            helper, epoch = r.get("helper"), r.get("helper_epoch")
            print(f"fit: {config:26s} {lane:5d} {statistics.median(r['harness']):8,.0f} "
                  f"{statistics.median(r['hand']):8,.0f} "
                  f"{statistics.median(epoch) if epoch else math.nan:8,.0f} "
                  f"{statistics.median(helper) if helper else math.nan:11,.0f}  "
                  f"{_ratios(r['harness'], r['hand']):>19s}  "
                  + (f"{_ratios(r['harness'], epoch):>19s}" if epoch else
                     f"{'-':>19s}  (the helper: tf_keras' one-device fit, Keras 2 lane only)"))
    return failed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--one", help="workload,strategy,devices,global_batch (internal)")
    parser.add_argument("--config", action="append",
                        help="workload,strategy,devices,global_batch (repeatable; default "
                        f"{', '.join(DEFAULT_SET)}; 'none' skips the custom-loop table)")
    parser.add_argument("--rounds", type=int, default=5,
                        help="rounds per configuration, each timing every loop once (default 5)")
    parser.add_argument("--seconds", type=float, default=3.0,
                        help="seconds per timed window (default 3)")
    parser.add_argument("--timeout", type=float, default=600.0,
                        help="seconds before a configuration's process is abandoned (default "
                        "600; it then counts as failed)")
    parser.add_argument("--fit-config", action="append", help="fit comparison configurations "
                        f"(repeatable; default {', '.join(FIT_SET)}; 'none' skips it)")
    parser.add_argument("--fit-keras", default="3,2", help="Keras lanes of the fit comparison")
    parser.add_argument("--fit-one", help="workload,strategy,devices,global_batch (internal)")
    parser.add_argument("--keras", type=int, default=3, help="(internal, with --fit-one)")
    args = parser.parse_args()
    if args.fit_one:
        result = run_fit_one(args.fit_one, args.keras, args.rounds, args.seconds)
        print(MARK + json.dumps(result), flush=True)
        return 0
    if args.one:
        print(MARK + json.dumps(run_one(args.one, args.rounds, args.seconds)), flush=True)
        return 0
    failed = loop_comparison([c for c in (args.config or DEFAULT_SET) if c != "none"],
                             args.rounds, args.seconds, args.timeout)
    fit_configs = [c for c in (args.fit_config or FIT_SET) if c != "none"]
    failed += fit_comparison(fit_configs, [int(k) for k in args.fit_keras.split(",")],
                             args.rounds, args.seconds, args.timeout)
    # Timings alone never fail the command (a loaded machine would fail it at random):
    # a verdict is printed, the exit status only says whether every run produced figures.
    return Exit.RUNS_FAILED if failed else Exit.OK


if __name__ == "__main__":
    sys.exit(main())
