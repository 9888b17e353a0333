"""The ParameterServer input pipeline ships a small graph, whatever the pool's size.

``create_per_worker_dataset`` traces ``dataset_fn`` on the coordinator and sends the
graph to each worker; a pool the function closes over would travel inside it (past
protobuf's 2 GB limit for ResNet50 at 224x224 and large batches). The cases run in a
fresh TensorFlow process (as in tests/tf_cases.py); run them under the TF lock.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
MARK = "PS_INPUT_RESULT "
# What the coordinator may send per worker: generator ops and small constants.
MAX_GRAPH_BYTES = 64 * 1024


def _graph_bytes(tf: Any, dataset_fn: Any) -> tuple[int, int]:
    """Serialized size of the traced ``dataset_fn`` (what crosses the wire), and its
    largest constant, in bytes."""
    graph_def = tf.function(dataset_fn).get_concrete_function().graph.as_graph_def()
    nodes = [*graph_def.node, *(n for f in graph_def.library.function for n in f.node_def)]
    biggest = max((len(n.attr["value"].tensor.tensor_content) for n in nodes
                   if n.op == "Const"), default=0)
    return graph_def.ByteSize(), biggest


def case() -> dict[str, Any]:
    """Run inside the child: graph sizes for a large pool, the pool's contents for small
    ones."""
    import numpy as np
    import tensorflow as tf

    from bench.child.backends.tf.ps import pool_size, worker_dataset_fn
    from tests.helpers import tiny_spec

    out: dict[str, Any] = {}
    # ResNet50 at 224x224, batch 1024: a 617 MB pool.
    big = tiny_spec(workload="resnet50", size="default", strategy="parameter_server",
                    batch=1024, data="tfdata")
    out["big_pool_bytes"] = pool_size(big) * big.per_replica_batch * 224 * 224 * 3 * 4
    for data in ("tfdata", "synthetic"):
        out[f"big_{data}"] = _graph_bytes(
            tf, worker_dataset_fn(tiny_spec(**{**big.to_dict(), "data": data})))
    # The measure sees an embedded pool (what the coordinator used to send).
    pool = np.zeros((1024, 1024), np.float32)
    out["embedded"] = _graph_bytes(tf, lambda: tf.data.Dataset.from_tensor_slices(pool))

    for workload in ("mlp", "cnn"):  # raw features; average-pooled images
        spec = tiny_spec(workload=workload, strategy="parameter_server", data="synthetic")
        n = pool_size(spec)
        fn = worker_dataset_fn(spec)
        first = [(x.numpy(), y.numpy()) for x, y in fn().take(2 * n)]
        again = [(x.numpy(), y.numpy()) for x, y in fn().take(n)]
        flat = [(x.numpy(), y.numpy()) for x, y in worker_dataset_fn(
            tiny_spec(**{**spec.to_dict(), "data": "tfdata"}))().take(n)]
        x0, y0 = first[0]
        out[workload] = {
            "pool": n, "x_shape": list(x0.shape), "x_dtype": str(x0.dtype),
            "y_shape": list(y0.shape), "y_dtype": str(y0.dtype),
            "classes": sorted({int(c) for _, y in first for c in y}),
            "cycles": all(np.array_equal(first[i][0], first[i + n][0]) and
                          np.array_equal(first[i][1], first[i + n][1]) for i in range(n)),
            "same_each_time": all(np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])
                                  for a, b in zip(first, again, strict=False)),
            "tfdata_same_batches": all(np.array_equal(a[0], b[0]) and
                                       np.array_equal(a[1], b[1])
                                       for a, b in zip(first, flat, strict=False)),
            "x_std": float(np.std(np.concatenate([x for x, _ in first[:n]])))}
    return out


def _run_case(timeout: float = 240) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, "-c",
                           "import json; from tests.test_ps_input import MARK, case; "
                           "print(MARK + json.dumps(case()))"],
                          cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    for line in proc.stdout.splitlines():
        if line.startswith(MARK):
            result: dict[str, Any] = json.loads(line[len(MARK):])
            return result
    raise AssertionError(f"case exited {proc.returncode} without a result:\n"
                         f"{proc.stderr[-4000:]}")


def test_parameter_server_pool_is_made_on_the_worker_not_shipped() -> None:
    r = _run_case()
    assert r["big_pool_bytes"] > 500 * 2**20  # the pool the graph must not carry
    for data in ("tfdata", "synthetic"):
        size, biggest = r[f"big_{data}"]
        assert size < MAX_GRAPH_BYTES, (data, size)
        assert biggest < 1024, (data, biggest)
    embedded_size, embedded_const = r["embedded"]  # the measure would catch a pool
    assert embedded_size > 4 * 2**20 and embedded_const >= 4 * 2**20
    for workload, features in (("mlp", [32, 32]), ("cnn", [32, 8, 8, 3])):
        got = r[workload]
        assert got["x_shape"] == features and got["x_dtype"] == "float32"
        assert got["y_shape"] == [32] and got["y_dtype"] == "int32"
        # Labels from the teacher: several of the 4 classes, a standard normal input.
        assert len(got["classes"]) >= 2 and set(got["classes"]) <= {0, 1, 2, 3}
        assert 0.9 < got["x_std"] < 1.1
        # A fixed pool, handed out in turn, the same for every worker and pipeline.
        assert got["cycles"] and got["same_each_time"] and got["tfdata_same_batches"]
