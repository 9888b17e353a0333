"""TensorFlow cases of the probe tests, each run in a fresh process (``run_probe_case``).

Like tests/tf_cases.py (one MirroredStrategy per process, tensorflow#62790), but the
number of logical CPU devices is a parameter: the all-reduce probe is checked on 2
and 4 devices. Each case checks several things in one process, because starting a
TensorFlow process costs ~3 s of a shared 2-core machine.

    python -m tests.probe_cases CASE DEVICES JSON_KWARGS   -> prints one RESULT line
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from tests.tf_cases import MARK, run_case

ROOT = Path(__file__).resolve().parent.parent
# Short runs of the tiny MLP unless a case overrides (RunSpec built here, not through
# tests.helpers, so that these cases import only what they exercise).
BASE_SPEC: dict[str, Any] = {"workload": "mlp", "strategy": "mirrored", "devices": 2,
                             "batch": 32, "size": "tiny", "repeats": 2, "max_seconds": 0.3,
                             "min_steps": 3, "max_steps": 20, "warmup_steps": 2,
                             "learning_rate": 0.01}


def spec_of(**over: Any) -> Any:
    from bench.spec import RunSpec

    return RunSpec(**{**BASE_SPEC, **over})


def run_probe_case(case: str, devices: int, timeout: float = 240, **kwargs: Any) -> Any:
    """Run ``case`` in a child process with ``devices`` logical CPUs; return its result."""
    return run_case(case, timeout, module="tests.probe_cases", args=(str(devices),),
                    env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"), **kwargs)


# -- cases (run inside the child) ------------------------------------------------------
def case_allreduce(setup: Any, configs: list[dict[str, str]], sizes: list[int],
                   workload: str = "mlp") -> dict[str, Any]:
    """Probe the sizes and the workload's gradients under each (strategy,
    cross_device_ops) config in turn (at most one collective-based Mirrored)."""
    from bench.child.backends.tf.allreduce import gradient_buffers, run_points, size_buffers
    from bench.child.backends.tf.build import build as build_strategy
    from workloads import WORKLOADS
    from workloads.flops import model_stats

    n = len(setup.names)
    out: list[dict[str, Any]] = []
    for config in configs:
        spec = spec_of(workload=workload, devices=n, batch=16 * n, mode="allreduce",
                       warmup_steps=3, min_steps=15, max_steps=60, max_seconds=0.25,
                       **config)
        built = build_strategy(spec, setup.names)
        points = [*(size_buffers(b) for b in sizes), gradient_buffers(spec)]
        out.append(asdict(run_points(spec, built, points)))
    model = WORKLOADS.get(workload).build(spec_of(workload=workload).workload_params())
    return {"figures": out, "grad_bytes_per_step": model_stats(model).grad_bytes_per_step,
            "trainable_variables": len(model.trainable_variables)}


def case_profile(setup: Any, runs: list[dict[str, Any]], tmp: str) -> list[dict[str, Any]]:
    """Measure then profile each run (at most one Mirrored) with the harness's hooks."""
    from bench.child.backends.base import DeviceSetup
    from bench.child.backends.tf.after import after_windows
    from bench.child.backends.tf.build import build as build_strategy
    from bench.child.backends.tf.trainer import Trainer

    out = []
    for i, over in enumerate(runs):
        spec = spec_of(**over)
        names = setup.names[: spec.devices]
        strategy = build_strategy(spec, names)
        trainer = Trainer(spec, strategy, DeviceSetup(setup.kind, names, setup.logical))
        figures = trainer.measure(0.0, {"import_framework_s": 0.0, "device_setup_s": 0.0,
                                        "build_s": 0.0})
        after_windows(trainer, figures, Path(tmp) / f"run{i}")
        out.append(asdict(figures))
    return out


def case_trace(setup: Any, tmp: str, steps: int) -> dict[str, Any]:
    """Capture a tiny profile of known ops and parse it back."""
    import tensorflow as tf

    from bench.child.probes.profile import call_steps, capture
    from bench.child.probes.trace import find_xspace, parse_op_name, read_xspace

    a = tf.random.uniform((256, 256))

    @tf.function
    def step() -> Any:
        with tf.name_scope("adam"):  # packing type outside the model: counted
            packed = tf.concat([tf.reshape(a, [-1]), tf.reshape(a, [-1])], axis=0)
        with tf.name_scope("gradient_tape"):  # same type inside the backward pass: not
            # (other inputs, or graph optimisation would merge the two concats)
            inner = tf.concat([tf.reshape(a * 2.0, [-1]), tf.reshape(a * 3.0, [-1])], axis=0)
        return tf.reduce_sum(tf.linalg.matmul(a, a)) + tf.reduce_sum(packed + inner)

    step()
    breakdown, comm = capture(tf, call_steps(lambda: float(step().numpy())), steps, Path(tmp))
    events, spans = read_xspace(find_xspace(Path(tmp)))
    return {"communication": asdict(comm), "breakdown": asdict(breakdown),
            "steps": [s.step for s in spans], "step_lines": [s.line for s in spans],
            "ops": sorted({e.text for e in events if parse_op_name(e.text)}),
            "span_seconds": [s.seconds for s in spans]}


CASES: dict[str, Callable[..., Any]] = {
    "allreduce": case_allreduce, "profile": case_profile, "trace": case_trace,
}


def serve(cases: dict[str, Callable[..., Any]]) -> None:
    """Run the case ``CASE DEVICES JSON_KWARGS`` of ``sys.argv`` among ``cases`` on that
    many logical CPU devices, print its result after MARK and exit."""
    import tensorflow as tf

    from bench.child.backends.tf.devices import setup_devices

    case, devices, kwargs = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3])
    setup = setup_devices(tf, devices, force_cpu=True)
    result = cases[case](setup, **kwargs)
    print(MARK + json.dumps(result), flush=True)
    sys.stdout.flush()
    os._exit(0)  # TensorFlow's thread pools can stall interpreter teardown


def main() -> None:
    serve(CASES)


if __name__ == "__main__":
    main()
