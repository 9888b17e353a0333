"""Peak FLOP/s of one device per dtype, from a short matmul probe, cached per machine.

MFU needs "the hardware limit"; vendor sheets do not apply to a shared or throttled
machine, so the limit is measured: the best rate of a few large square matmuls
(2 n^3 FLOPs each) on the first device. The figures are cached in a JSON file keyed by
machine, TensorFlow version, device kind and intra-op threads, so a sweep measures
them once, not once per configuration ($STRATBENCH_CACHE_DIR, else
~/.cache/stratbench). The probe runs on one device; logical CPU devices share the
same cores, so a CPU's peak counts once however many logical devices a run uses.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

# Which dtype's peak bounds a run of each precision (the dtype of its matmuls).
PRECISION_DTYPE = {"float32": "float32", "mixed_bfloat16": "bfloat16",
                   "mixed_float16": "float16"}
DTYPES = ("float32", "bfloat16", "float16")
MATMUL_N = 2048
PROBE_SECONDS = 0.6  # per dtype, after one warm-up call


def cache_path() -> Path:
    root = os.environ.get("STRATBENCH_CACHE_DIR") or Path.home() / ".cache" / "stratbench"
    return Path(root) / "peak_flops.json"


def cache_key(tf: Any, device: str) -> str:
    from bench.env import fingerprint

    kind = "GPU" if "gpu" in device.lower() else "CPU"
    threads = tf.config.threading.get_intra_op_parallelism_threads()
    return (f"{fingerprint()['machine_id']}|tf{tf.__version__}|{kind}"
            f"|intra{threads}")


def measure_dtype(tf: Any, dtype: str, device: str, n: int = MATMUL_N,
                  seconds: float = PROBE_SECONDS) -> float:
    """Best observed FLOP/s of an n x n matmul in ``dtype`` on ``device``."""
    with tf.device(device):
        a = tf.random.uniform((n, n), dtype=tf.float32)
        a, b = tf.cast(a, dtype), tf.cast(tf.transpose(a), dtype)

        @tf.function
        def mm(x: Any, y: Any) -> Any:
            # One element of the product is returned: fetching it waits for the whole
            # matmul without copying n^2 values to the host.
            return tf.linalg.matmul(x, y)[0, 0]

        mm(a, b).numpy()  # trace + warm-up
        best = 0.0
        deadline = time.perf_counter() + seconds
        while True:
            t0 = time.perf_counter()
            mm(a, b).numpy()
            dt = time.perf_counter() - t0
            best = max(best, 2.0 * n**3 / dt)
            if time.perf_counter() >= deadline:
                return best


def peak_flops(tf: Any, device: str = "/cpu:0", refresh: bool = False) -> dict[str, float]:
    """FLOP/s per dtype for ``device`` (from the cache unless ``refresh``).

    A refresh keeps, per dtype, the higher of the new and the cached figure: a peak is
    the best the hardware showed, and a measurement on a busy machine only reads low.
    A dtype without a matmul kernel on this device is left out.
    """
    path, key = cache_path(), cache_key(tf, device)
    cache: dict[str, Any] = {}
    with contextlib.suppress(OSError, json.JSONDecodeError):
        cache = json.loads(path.read_text(encoding="utf-8"))
    entry = cache.get(key) if isinstance(cache, dict) else None
    if entry and not refresh:
        return {k: float(v) for k, v in entry["flops_per_s"].items()}
    table: dict[str, float] = {}
    for dtype in DTYPES:
        try:
            table[dtype] = measure_dtype(tf, dtype, device)
        except Exception:  # no kernel for this dtype here: no peak, hence no MFU
            continue
    if entry:
        for dtype, old in entry.get("flops_per_s", {}).items():
            table[dtype] = max(float(old), table.get(dtype, 0.0))
    cache[key] = {"flops_per_s": table, "measured_at": time.time(),
                  # A busy machine measures a low peak: the load says how busy it was.
                  "load_avg_1m": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
                  "method": f"best of repeated {MATMUL_N}x{MATMUL_N} matmuls "
                            f"over {PROBE_SECONDS} s on {device}"}
    _write_atomic(path, json.dumps(cache, indent=1))
    return table


def first_device(tf: Any) -> str:
    # Physical, not logical, devices: listing logical ones initialises the runtime, after
    # which MultiWorkerMirrored can no longer configure its collectives.
    return "/gpu:0" if tf.config.list_physical_devices("GPU") else "/cpu:0"


def fingerprint_entry(tf: Any, measure: bool = False) -> dict[str, Any]:
    """Peak FLOP/s per dtype of the first device, for the environment fingerprint.

    Without ``measure`` only the cache is read, so no op runs: the fingerprint is taken
    before strategies are built, and an op run then would break MultiWorkerMirrored
    ("Collective ops must be configured at program startup"). Training runs measure
    after their windows (bench.child.probes.hooks) and put the entry in their fingerprint.
    """
    device = first_device(tf)
    try:
        if measure:
            table = peak_flops(tf, device)
        else:
            cached = json.loads(cache_path().read_text(encoding="utf-8"))
            table = cached[cache_key(tf, device)]["flops_per_s"]
    except (OSError, json.JSONDecodeError, KeyError, TypeError):
        return {"device": device, "flops_per_s": None,
                "note": "not measured yet (a training run measures it after its windows)"}
    except Exception as exc:  # the fingerprint must never fail a run
        return {"device": device, "error": f"{type(exc).__name__}: {exc}"}
    entry: dict[str, Any] = {}
    with contextlib.suppress(OSError, json.JSONDecodeError, AttributeError, KeyError):
        entry = json.loads(cache_path().read_text(encoding="utf-8"))[cache_key(tf, device)]
    return {"device": device, "flops_per_s": table, "unit": "FLOP/s",
            "method": entry.get("method"), "measured_at": entry.get("measured_at"),
            "load_avg_1m": entry.get("load_avg_1m"), "cache": str(cache_path())}


def _write_atomic(path: Path, text: str) -> None:
    # Several children may measure at once: each replaces the file whole, never half.
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".peak.", dir=path.parent)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.replace(tmp, path)


def mfu(train_flops_per_example: float, global_throughput: float,
        peak_per_device: float | None, physical_devices: int) -> tuple[float | None,
                                                                        float | None]:
    """``(mfu, peak used)``: achieved / (per-device peak x physical devices)."""
    if not peak_per_device or peak_per_device <= 0 or physical_devices < 1:
        return None, None
    peak = peak_per_device * physical_devices
    return train_flops_per_example * global_throughput / peak, peak


def main(argv: list[str] | None = None) -> int:
    """``python -m bench.child.probes.peak [--refresh]``: print (or re-measure) the peaks."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m bench.child.probes.peak")
    parser.add_argument("--refresh", action="store_true",
                        help="measure again (keeps the higher figure per dtype)")
    args = parser.parse_args(argv)
    import tensorflow as tf

    device = first_device(tf)
    table = peak_flops(tf, device, refresh=args.refresh)
    print(json.dumps({"device": device, "flops_per_s": table, "cache": str(cache_path())},
                     indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
