"""TensorFlow test cases, each run in a fresh process (``run_case``).

Why a process per case: MirroredStrategy objects created one after another in
one process reuse collective instance keys, and the second one's all-reduce
aborts with "Shape mismatch in the collective instance ..." (tensorflow#62790),
after which the runtime is poisoned. The harness runs every configuration in
its own process for the same reason; the tests do the same.

    python -m tests.tf_cases CASE JSON_KWARGS   -> prints one RESULT line
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
MARK = "TF_CASE_RESULT "
DEVICES = 2


def run_case(case: str, timeout: float = 240, **kwargs: Any) -> Any:
    """Run ``case`` in a child process with 2 logical CPUs; return its result."""
    proc = subprocess.run([sys.executable, "-m", "tests.tf_cases", case, json.dumps(kwargs)],
                          cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    for line in proc.stdout.splitlines():
        if line.startswith(MARK):
            return json.loads(line[len(MARK):])
    raise AssertionError(f"case {case}({kwargs}) exited {proc.returncode} without a result:\n"
                         f"{proc.stderr[-4000:]}")


# -- cases (run inside the child) ------------------------------------------------
def _trainer(setup: Any, **over: Any) -> Any:
    from bench.child.build import build as build_strategy
    from bench.child.devices import DeviceSetup
    from bench.child.trainer import Trainer
    from tests.helpers import tiny_spec

    spec = tiny_spec(**over)
    names = setup.names[: spec.devices]
    strategy = build_strategy(spec, names)
    return Trainer(spec, strategy, DeviceSetup(setup.kind, names, setup.logical))


def _losses(trainer: Any, calls: int) -> list[float]:
    return [float(trainer.call().numpy()) for _ in range(calls)]


def case_train(setup: Any, steps: int, **over: Any) -> dict[str, Any]:
    t = _trainer(setup, **over)
    return {"losses": _losses(t, steps), "divergence": t.replica_divergence(),
            "replicas": t.replicas}


def case_curves(setup: Any, runs: list[dict[str, Any]], steps: int) -> list[list[float]]:
    """Loss curves of several configurations in one process (at most one Mirrored)."""
    return [_losses(_trainer(setup, **over), steps) for over in runs]


def case_measure(setup: Any, **over: Any) -> dict[str, Any]:
    from dataclasses import asdict

    t = _trainer(setup, **over)
    f = t.measure(launch_ts=0.0, phases={"import_tf_s": 1.0, "device_setup_s": 0.0,
                                         "build_s": 0.5})
    return {"figures": asdict(f), "spec": t.spec.to_dict()}


def case_stats(setup: Any, **over: Any) -> dict[str, Any]:
    from dataclasses import asdict

    return asdict(_trainer(setup, **over).stats)


CASES: dict[str, Callable[..., Any]] = {
    "train": case_train, "curves": case_curves, "measure": case_measure, "stats": case_stats,
}


def main() -> None:
    import tensorflow as tf

    from bench.child.devices import setup_devices

    case, kwargs = sys.argv[1], json.loads(sys.argv[2])
    setup = setup_devices(tf, DEVICES, force_cpu=True)
    result = CASES[case](setup, **kwargs)
    print(MARK + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
