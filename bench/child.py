"""Entry point of the isolated process that runs one configuration.

    python -m bench.child --spec SPEC.json --out PAYLOAD.json --launch-ts T

It always tries to leave a payload (status, reason, figures, environment) at
``--out``; the parent turns that, or the absence of it, into a RunResult.
Exit code 0 means a payload was written, whatever its status.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from dataclasses import asdict
from pathlib import Path
from typing import Any

from bench.errors import Unsupported
from bench.results import write_new
from bench.spec import RunSpec

# Exceptions whose class name means "ran out of memory" (TensorFlow's class is
# matched by name so that this module does not import TensorFlow at load time).
_OOM_NAMES = ("ResourceExhaustedError", "MemoryError")


# Errors that mean "this software stack cannot run this combination", recognised by
# message so that a fixed TensorFlow/Keras simply runs instead. Pattern -> explanation.
KNOWN_INCOMPATIBLE = {
    "You must specify an aggregation method to update a AggregatingVariable": (
        "CentralStorageStrategy with 2+ replicas cannot update variables created without an "
        "aggregation method in replica context; Keras 3 BatchNormalization's moving "
        "statistics are such variables (seen with TF 2.21 / Keras 3.15)"),
    "No OpKernel was registered to support Op 'NcclAllReduce'": (
        "NCCL all-reduce has no kernel on this device type (needs GPUs)"),
}


def _log(msg: str) -> None:
    print(f"[child {os.getpid()}] {msg}", file=sys.stderr, flush=True)


def run(spec: RunSpec, launch_ts: float) -> dict[str, Any]:
    """Set up devices and strategy, train, and return the payload dict."""
    phases: dict[str, float] = {}
    t = time.perf_counter()
    import tensorflow as tf

    phases["import_tf_s"] = time.perf_counter() - t
    from bench.devices import setup_devices
    from bench.env import fingerprint
    from bench.strategies import STRATEGIES
    from bench.trainer import Trainer

    t = time.perf_counter()
    devices = setup_devices(tf, spec.devices, spec.gpu_memory_limit_mb)
    phases["device_setup_s"] = time.perf_counter() - t
    env = fingerprint(with_tf=True)
    env["devices"] = {"kind": devices.kind, "names": devices.names, "logical": devices.logical}
    env["threads"] = {"intra_op": tf.config.threading.get_intra_op_parallelism_threads(),
                      "inter_op": tf.config.threading.get_inter_op_parallelism_threads()}
    t = time.perf_counter()
    strategy = STRATEGIES.get(spec.strategy).build(spec, devices.names)
    trainer = Trainer(spec, strategy, devices)
    phases["build_s"] = time.perf_counter() - t
    _log(f"built {spec.label()} in {phases['build_s']:.2f}s "
         f"({trainer.stats.params:,} params, pool of {trainer.pool} batches)")
    figures = trainer.measure(launch_ts, phases, progress=_log)
    return {"status": "ok", "reason": None, "figures": asdict(figures), "environment": env}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.child")
    parser.add_argument("--spec", required=True, type=Path)
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--launch-ts", type=float, default=time.time())
    args = parser.parse_args(argv)
    spec = RunSpec.from_dict(json.loads(args.spec.read_text(encoding="utf-8")))
    try:
        payload = run(spec, args.launch_ts)
    except Unsupported as exc:
        payload = {"status": "unsupported", "reason": str(exc)}
    except BaseException as exc:  # anything else becomes a recorded failure
        known = next((why for pattern, why in KNOWN_INCOMPATIBLE.items()
                      if pattern in str(exc)), None)
        is_oom = any(c.__name__ in _OOM_NAMES for c in type(exc).__mro__)
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        status = "unsupported" if known else "oom" if is_oom else "failed"
        payload = {"status": status, "reason": known or f"{type(exc).__name__}: {first}"[:2000]}
        traceback.print_exc()
    write_new(args.out, json.dumps(payload) + "\n")
    _log(f"payload written: {payload['status']}")
    sys.stdout.flush()
    sys.stderr.flush()
    # Skip interpreter teardown: TensorFlow's thread pools can stall exit for seconds.
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
