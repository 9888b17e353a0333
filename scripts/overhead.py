"""Harness overhead: the harness's measured loop vs a minimal hand-written loop.

For each configuration (its own process, as in a sweep), the same strategy
object trains two copies of the model: one through bench.child.trainer.Trainer (what
every sweep measures) and one through the most minimal custom loop one would
write by hand (strategy.run in a tf.function on one fixed batch, no timing
inside, one sync at the end). Rounds alternate so that machine noise hits
both alike (ABBA order cancels a linear drift); the medians and their ratio
are printed.

    python scripts/overhead.py                        # the default set
    python scripts/overhead.py --one mlp,mirrored,2,256 --rounds 7 --seconds 3
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

DEFAULT_SET = ["mlp,one_device,1,256", "mlp,mirrored,2,256", "cnn,mirrored,2,128",
               "cnn,central_storage,2,128"]
MARK = "OVERHEAD_RESULT "


def hand_written_loop(tf: Any, keras: Any, strategy: Any, spec: Any, pool: int) -> Any:
    """The minimal loop over ``pool`` distinct batches: a function(seconds) -> examples/s.

    It trains on as many distinct batches as the harness does (cycling one cache-hot
    batch would be less work than the harness does, not less overhead).
    """
    from workloads import WORKLOADS

    workload = WORKLOADS.get(spec.workload)
    params = spec.workload_params()
    keras.utils.set_random_seed(spec.seed)
    with strategy.scope():
        model = workload.build(params)
        opt = keras.optimizers.Adam(spec.learning_rate)
        opt.build(model.trainable_variables)
    g = spec.global_batch
    x, y = workload.make_pool(params, pool * g, spec.seed)
    it = iter(strategy.experimental_distribute_dataset(
        tf.data.Dataset.from_tensor_slices((x, y)).batch(g)))
    batches = [next(it) for _ in range(pool)]

    def replica(xb: Any, yb: Any) -> Any:
        with tf.GradientTape() as tape:
            logits = model(xb, training=True)
            loss = tf.nn.compute_average_loss(
                keras.losses.sparse_categorical_crossentropy(yb, logits, from_logits=True),
                global_batch_size=g)
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        return loss

    @tf.function
    def step(xb: Any, yb: Any) -> Any:
        return strategy.reduce("SUM", strategy.run(replica, args=(xb, yb)), axis=None)

    for i in range(3):  # warm-up, tracing
        step(*batches[i % pool]).numpy()

    def measure(seconds: float) -> float:
        n, t0 = 0, time.perf_counter()
        while True:
            out = step(*batches[n % pool])
            n += 1
            if n % 10 == 0 and time.perf_counter() - t0 >= seconds:
                break
        out.numpy()  # one sync at the end
        return n * g / (time.perf_counter() - t0)

    return measure


def run_one(config: str, rounds: int, seconds: float) -> dict[str, Any]:
    """Inside the child: both loops, alternating rounds."""
    import keras
    import tensorflow as tf

    from bench.child.build import build as build_strategy
    from bench.child.devices import setup_devices
    from bench.child.trainer import Trainer
    from bench.spec import RunSpec

    workload, strategy_name, devices, batch = config.split(",")
    spec = RunSpec(workload=workload, strategy=strategy_name, devices=int(devices),
                   batch=int(batch), repeats=1, max_seconds=seconds, max_steps=10**9,
                   min_steps=10, warmup_steps=3)
    setup = setup_devices(tf, spec.devices)
    strategy = build_strategy(spec, setup.names)
    trainer = Trainer(spec, strategy, setup)
    hand = hand_written_loop(tf, keras, strategy, spec, trainer.pool)
    phases = {"import_tf_s": 0.0, "device_setup_s": 0.0, "build_s": 0.0}
    harness_rates, hand_rates = [], []

    def measure_harness() -> None:
        harness_rates.append(trainer.measure(time.time(), phases).global_throughput)

    def measure_hand() -> None:
        hand_rates.append(hand(seconds))

    # ABBA order (harness, hand, hand, harness, ...): a drift in machine state over the
    # run (load decaying, clocks, caches) hits both loops alike instead of the first.
    for r in range(rounds):
        first, second = (measure_harness, measure_hand) if r % 2 == 0 else \
            (measure_hand, measure_harness)
        first()
        second()
    return {"config": config, "harness": harness_rates, "hand": hand_rates}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--one", help="workload,strategy,devices,global_batch (internal)")
    parser.add_argument("--config", action="append",
                        help="workload,strategy,devices,global_batch (repeatable)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--timeout", type=float, default=600.0)
    args = parser.parse_args()
    if args.one:
        print(MARK + json.dumps(run_one(args.one, args.rounds, args.seconds)), flush=True)
        return 0
    print(f"{'configuration':32s} {'harness ex/s':>13s} {'hand ex/s':>11s} {'ratio':>7s}  "
          f"(medians of {args.rounds} ABBA rounds of {args.seconds:g} s; ratio = median of "
          f"the per-round harness/hand ratios)")
    worst = None
    for config in args.config or DEFAULT_SET:
        try:
            proc = subprocess.run([sys.executable, __file__, "--one", config, "--rounds",
                                   str(args.rounds), "--seconds", str(args.seconds)],
                                  capture_output=True, text=True, timeout=args.timeout)
        except subprocess.TimeoutExpired:
            print(f"{config:32s} timed out after {args.timeout:g} s")
            continue
        line = next((ln for ln in proc.stdout.splitlines() if ln.startswith(MARK)), None)
        if line is None:
            print(f"{config:32s} failed:\n{proc.stderr[-2000:]}")
            continue
        r = json.loads(line[len(MARK):])
        h, m = statistics.median(r["harness"]), statistics.median(r["hand"])
        # Each round pairs the two loops within seconds of each other: the median of the
        # per-round ratios is immune to the machine drifting over the whole run.
        ratio = statistics.median(a / b for a, b in zip(r["harness"], r["hand"], strict=True))
        worst = ratio if worst is None else min(worst, ratio)
        print(f"{config:32s} {h:13,.0f} {m:11,.0f} {ratio:7.3f}   harness rounds: "
              f"{', '.join(f'{v:,.0f}' for v in r['harness'])}; hand: "
              f"{', '.join(f'{v:,.0f}' for v in r['hand'])}")
    if worst is not None:
        print(f"worst ratio harness/hand-written: {worst:.3f} (>= 0.98 is the target)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
