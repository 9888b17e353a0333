"""What fetching every call's loss costs the measured windows (bench.child.windows).

The window loop used to fetch each call's loss before starting the next call: on an
asynchronous device that serialises host and device every call. It now fetches the
loss of the call ``FETCH_LAG`` calls back. This script measures the difference on the
machine at hand: for each configuration it builds one Trainer and alternates windows
of the three ways in one process (rotating the order each round, so that a drift hits
every way alike):

- ``per-call``: fetch_lag=0, each call's own loss before the next call (the old way);
- ``lagged``: fetch_lag=FETCH_LAG (what the windows do now);
- ``at-close``: no fetch inside the window, every loss after the closing sync.

It prints each way's median throughput and, per way, the median of the per-round
ratios to ``per-call`` with their range and the geometric standard deviation.
Timings never fail the command.

    python -m scripts.loss_fetch                               # MLP and CNN, 1 device
    python -m scripts.loss_fetch --config cnn,mirrored,2,64 --rounds 9 --seconds 1
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
from typing import Any

DEFAULT_SET = ["mlp,default,1,256", "cnn,default,1,128"]
WAYS = ("per-call", "lagged", "at-close")


def fetch_lags(lag: int) -> dict[str, int]:
    """Each way's fetch_lag (``lag``: the windows' FETCH_LAG; at-close: never inside)."""
    return {"per-call": 0, "lagged": lag, "at-close": 10**9}


def ratio_summary(ratios: list[float]) -> str:
    """Median, range and geometric SD of per-round ratios, as one phrase."""
    logs = [math.log(r) for r in ratios]
    gsd = math.exp(statistics.stdev(logs)) if len(logs) > 1 else 1.0
    return (f"{statistics.median(ratios):.3f}x (range {min(ratios):.3f}-{max(ratios):.3f}, "
            f"geometric SD {gsd:.3f}, n={len(ratios)})")


def run_config(config: str, rounds: int, seconds: float, devices: Any
               ) -> dict[str, list[float]]:
    """Windows of every way for ``config`` (``workload,strategy,devices,batch``), alternated;
    examples/s per way in round order. ``devices``: the process's DeviceSetup."""
    from bench.child.backends.base import DeviceSetup
    from bench.child.backends.tf.build import build as build_strategy
    from bench.child.backends.tf.trainer import Trainer
    from bench.child.windows import FETCH_LAG, NoDeviceMemory, Rules, run_window, warm_up
    from bench.spec import RunSpec

    workload, strategy_name, count, batch = config.split(",")
    spec = RunSpec(workload=workload, strategy=strategy_name, devices=int(count),
                   batch=int(batch), repeats=1, max_seconds=seconds, max_steps=10**9,
                   min_steps=10, warmup_steps=5)
    names = devices.names[:spec.devices]
    setup = DeviceSetup(devices.kind, names, devices.logical)
    trainer = Trainer(spec, build_strategy(spec, names), setup)
    loop, rules = trainer.loop(), Rules.of(spec)
    phases = {"import_framework_s": 0.0, "device_setup_s": 0.0, "build_s": 0.0}
    out = warm_up(loop, rules, launch_ts=time.time(), phases=phases).out
    lags = fetch_lags(FETCH_LAG)
    rates: dict[str, list[float]] = {w: [] for w in WAYS}
    for r in range(rounds):
        order = WAYS[r % len(WAYS):] + WAYS[:r % len(WAYS)]
        for way in order if r % 2 == 0 else order[::-1]:
            run = run_window(loop, rules, r, out, memory=NoDeviceMemory("process"),
                             host_memory=False, fetch_lag=lags[way])
            if not math.isfinite(run.window.loss_last):
                raise FloatingPointError(f"{config}: loss {run.window.loss_last} ({way})")
            rates[way].append(run.window.global_throughput)
            out = run.out
    return rates


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scripts.loss_fetch",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", action="append", default=None,
                        help="workload,strategy,devices,batch (repeatable; default: "
                             + " ".join(DEFAULT_SET) + ")")
    parser.add_argument("--rounds", type=int, default=9, help="rounds (each: every way once)")
    parser.add_argument("--seconds", type=float, default=1.0, help="seconds a window")
    args = parser.parse_args(argv)
    if args.rounds < 2:
        parser.error(f"--rounds must be 2 or more. Received: {args.rounds}")
    configs = args.config or DEFAULT_SET
    import tensorflow as tf

    from bench.child.backends.tf.devices import setup_devices

    devices = setup_devices(tf, max(int(c.split(",")[2]) for c in configs))
    for config in configs:
        rates = run_config(config, args.rounds, args.seconds, devices)
        print(f"{config}: median examples/s " + ", ".join(
            f"{w} {statistics.median(rates[w]):,.0f}" for w in WAYS))
        for way in WAYS[1:]:
            ratios = [a / b for a, b in zip(rates[way], rates["per-call"], strict=True)]
            print(f"  {way} / per-call: {ratio_summary(ratios)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
