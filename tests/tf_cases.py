"""TensorFlow test cases, run in child processes (``run_case``, ``run_cases``).

The pytest process never imports TensorFlow (a process cannot change its devices once
TensorFlow is up). A child costs ~3 s of a 2-core machine to import TensorFlow, so one
child runs many cases (``run_cases``: case ``many``), each reported on its own.
Several MirroredStrategy objects may live in one child: bench.child.backends.tf.build gives each
its own range of collective keys (without it the second one's all-reduce aborted with
"Shape mismatch in the collective instance ...", tensorflow#62790), as the harness's
arms rely on. ``Lanes`` runs a test module's children (or harness runs) two at a time:
importing and tracing are single-threaded, so two children share 2 cores well.

    python -m tests.tf_cases CASE JSON_KWARGS   -> prints one MARK line (the result)
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import traceback
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
MARK = "TF_CASE_RESULT "
DEVICES = 2


def run_case(case: str, timeout: float = 240, module: str = "tests.tf_cases",
             args: Sequence[str] = (), env: Mapping[str, str] | None = None,
             **kwargs: Any) -> Any:
    """Run ``case`` in a child process (2 logical CPUs unless ``args`` say); return its result.

    ``module`` holds the case: run as ``python -m MODULE CASE *ARGS JSON_KWARGS``, its
    ``main`` prints the result on one line after ``MARK`` (tests.test_fit's cases
    choose the Keras lane before TensorFlow is imported; tests.probe_cases take the
    device count as an argument).
    """
    proc = subprocess.run([sys.executable, "-m", module, case, *args, json.dumps(kwargs)],
                          cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                          env=None if env is None else dict(env))
    for line in proc.stdout.splitlines():
        if line.startswith(MARK):
            return json.loads(line[len(MARK):])
    raise AssertionError(f"case {case}{list(args)}({kwargs}) exited {proc.returncode} "
                         f"without a result:\n{proc.stderr[-4000:]}")


class Outcomes(dict[str, Any]):
    """Results of ``run_cases`` by name; a case that raised in the child raises here,
    with the child's traceback, in the test that reads it (the others still pass)."""

    def __getitem__(self, name: str) -> Any:
        outcome = super().__getitem__(name)
        if "error" in outcome:
            raise AssertionError(f"case {name} raised in the child:\n{outcome['error']}")
        return outcome["result"]


def run_cases(cases: Mapping[str, tuple[str, dict[str, Any]]], timeout: float = 600,
              env: Mapping[str, str] | None = None) -> Outcomes:
    """Run ``cases`` (name -> (case, kwargs)) in order in one child process."""
    return Outcomes(run_case("many", timeout=timeout, env=env,
                             cases=[[name, case, kwargs] for name, (case, kwargs)
                                    in cases.items()]))


class Lanes:
    """Named jobs on a thread per lane: each lane runs its jobs in order, the lanes at
    the same time. ``lanes[name]`` waits for that job and returns its value, or raises
    what it raised (in the test that asks, not in the module's fixture).

    For jobs that mostly wait on child processes (``run_case``, a harness run): two
    lanes keep both cores of the test machine busy. Never for a job whose assertions
    need a quiet machine (timings, a measured peak), nor for two multi-process runs at
    once (each picks free ports, which the other could take before they are bound).
    """

    def __init__(self, *lanes: Sequence[tuple[str, Callable[[], Any]]]) -> None:
        self._futures: dict[str, Future[Any]] = {}
        self._threads = []
        for lane in lanes:
            jobs = [(self._futures.setdefault(name, Future()), job) for name, job in lane]
            thread = threading.Thread(target=self._run, args=(jobs,), daemon=True)
            thread.start()
            self._threads.append(thread)

    @staticmethod
    def _run(jobs: list[tuple[Future[Any], Callable[[], Any]]]) -> None:
        for future, job in jobs:
            try:
                future.set_result(job())
            except BaseException as e:  # handed to the test that asks for it
                future.set_exception(e)

    def __getitem__(self, name: str) -> Any:
        return self._futures[name].result()

    def join(self) -> None:
        """Wait for every lane (a fixture's teardown: no job outlives its module)."""
        for thread in self._threads:
            thread.join()


# -- cases (run inside the child) ------------------------------------------------
def _trainer(setup: Any, **over: Any) -> Any:
    from bench.child.backends.base import DeviceSetup
    from bench.child.backends.tf.build import build as build_strategy
    from bench.child.backends.tf.trainer import Trainer
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
    """Loss curves of several configurations in one process."""
    return [_losses(_trainer(setup, **over), steps) for over in runs]


def case_batch_devices(setup: Any, **over: Any) -> dict[str, Any]:
    """Where each replica's synthetic batch lives, beside the strategy's replica devices."""
    t = _trainer(setup, **over)
    first = t._batches[0][0][0] if t._batches else t._args[0]
    return {"batches": [v.device for v in getattr(first, "values", (first,))],
            "replicas": list(t.strategy.extended.worker_devices)}


def case_memory_probe(setup: Any) -> dict[str, Any]:
    """The device memory probe after one matmul, with this process's allocator."""
    import tensorflow as tf

    from bench.child.backends.tf.memory import DeviceMemory

    probe = DeviceMemory(tf, setup.kind, len(setup.names))
    probe.reset()
    x = tf.random.normal((256, 256))
    float(tf.reduce_sum(tf.matmul(x, x)))
    return {"peaks": probe.peaks(), "reason": probe.reason}


def case_measure(setup: Any, **over: Any) -> dict[str, Any]:
    from dataclasses import asdict

    t = _trainer(setup, **over)
    f = t.measure(launch_ts=0.0, phases={"import_framework_s": 1.0, "device_setup_s": 0.0,
                                         "build_s": 0.5})
    return {"figures": asdict(f), "spec": t.spec.to_dict()}


def case_stats(setup: Any, **over: Any) -> dict[str, Any]:
    from dataclasses import asdict

    return asdict(_trainer(setup, **over).stats)


def _matmul_flops(op: Any) -> float:
    a, b = (t.shape for t in op.inputs[:2])
    if op.type == "MatMul":
        ta, tb = op.get_attr("transpose_a"), op.get_attr("transpose_b")
        m, k = (a[1], a[0]) if ta else (a[0], a[1])
        n = b[0] if tb else b[1]
        return 2.0 * m * k * n
    raise AssertionError(f"unexpected op {op.type}")


def _conv_flops(op: Any) -> float:
    """2 x output positions x filter size, from the shapes of the op as built by TF."""
    if op.type == "Conv2D":
        out, filt = op.outputs[0].shape, op.inputs[1].shape
    elif op.type == "Conv2DBackpropInput":  # (input_sizes, filter, out_backprop)
        out, filt = op.inputs[2].shape, op.inputs[1].shape
    else:  # Conv2DBackpropFilter: (input, filter_sizes, out_backprop) -> filter
        out, filt = op.inputs[2].shape, op.outputs[0].shape
    return 2.0 * out[0] * out[1] * out[2] * filt[0] * filt[1] * filt[2] * filt[3]


def case_executed_flops(setup: Any, models: list[dict[str, Any]],
                        batch: int) -> list[dict[str, Any]]:
    """FLOPs of the matmuls and convolutions one training step's graph executes, for
    each ``{"workload": ..., "params": ...}`` (tiny variant plus ``params``).

    The step is traced as TensorFlow builds it (forward, then the tape's gradients with
    respect to the trainable variables); only ops the gradients depend on are counted,
    each from its own shapes, so the count does not reuse the harness's formula.
    """
    import tensorflow as tf

    from bench.child.backends.tf.flops import executed_ops
    from workloads import WORKLOADS
    from workloads.flops import model_stats

    out = []
    for m in models:
        w = WORKLOADS.get(m["workload"])
        params = w.resolve("tiny", m.get("params", {}))
        model = w.build(params)
        x, y = w.make_pool(params, batch, 0)

        @tf.function
        def step(xb: Any, yb: Any, model: Any = model) -> Any:
            with tf.GradientTape() as tape:
                logits = model(xb, training=True)
                loss = tf.reduce_mean(tf.keras.losses.sparse_categorical_crossentropy(
                    yb, logits, from_logits=True))
            return tape.gradient(loss, model.trainable_variables)

        graph = step.get_concrete_function(tf.constant(x), tf.constant(y)).graph
        needed = executed_ops(graph)  # every op the gradients depend on
        counted: dict[str, float] = {}
        for op in graph.get_operations():
            if op.name not in needed:
                continue
            if op.type == "MatMul":
                counted[op.type] = counted.get(op.type, 0.0) + _matmul_flops(op)
            elif op.type.startswith("Conv2D"):
                counted[op.type] = counted.get(op.type, 0.0) + _conv_flops(op)
            elif "MatMul" in op.type or "Conv" in op.type:
                raise AssertionError(f"op type the count does not know: {op.type}")
        stats = model_stats(model)
        out.append({"by_type": {k: v / batch for k, v in counted.items()},
                    "executed_per_example": sum(counted.values()) / batch,
                    "train_flops_per_example": stats.train_flops_per_example,
                    "forward_flops_per_example": stats.forward_flops_per_example})
    return out


def case_many(setup: Any, cases: list[list[Any]]) -> dict[str, Any]:
    """``[name, case, kwargs]`` each, in order: ``{"result": ...}`` or, for a case that
    raised, ``{"error": traceback}`` under its name; the next cases still run."""
    import keras

    out: dict[str, Any] = {}
    for name, case, kwargs in cases:
        # Cases that build a model without the harness's task (executed_flops) must not
        # inherit the mixed precision policy a previous case's task set.
        keras.mixed_precision.set_global_policy("float32")
        try:
            out[name] = {"result": CASES[case](setup, **kwargs)}
        except Exception:
            out[name] = {"error": traceback.format_exc()}
    return out


CASES: dict[str, Callable[..., Any]] = {
    "train": case_train, "curves": case_curves, "measure": case_measure, "stats": case_stats,
    "memory_probe": case_memory_probe, "batch_devices": case_batch_devices,
    "executed_flops": case_executed_flops, "many": case_many,
}


def main() -> None:
    import tensorflow as tf

    from bench.child.backends.tf.devices import setup_devices

    case, kwargs = sys.argv[1], json.loads(sys.argv[2])
    setup = setup_devices(tf, DEVICES, force_cpu=True)
    result = CASES[case](setup, **kwargs)
    print(MARK + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
