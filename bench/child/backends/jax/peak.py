"""The achievable matmul peak of one JAX device: chained square matmuls in one
compiled loop, synchronised once per call (the TF lane's method, bench.child.backends.tf.peak,
in JAX), cached beside the TF lane's figures: measured once per machine, jax version,
device kind, usable cores and float32 matmul precision, then read (a few seconds less
in every run's process)."""

from __future__ import annotations

import math
import os
import time
from typing import Any

from bench.child.probes.peak import DtypePeak, cached_or_measured

SIZES = {"CPU": (512, 1024), "GPU": (4096, 8192)}
MIN_CALL_S = 0.2  # a timed call lasts at least this long: launch and fetch vanish
CALLS = 3  # best of
MAX_CHAIN = 4096
METHOD_VERSION = "jax-chained-matmul-1"


def method_text(device: str) -> str:
    """How ``achievable_peak`` measures, for the record."""
    kind = "GPU" if device.startswith("gpu") else "CPU"
    return (f"achievable: chained square matmuls (n = {', '.join(map(str, SIZES[kind]))}) "
            f"on {device}, each call one jitted lax.fori_loop of k dependent n x n matmuls "
            f"(k sized for >= {MIN_CALL_S:g} s per call), synchronised once; best of "
            f"{CALLS} calls per size, best size wins; 2 n^3 FLOPs per matmul")


def achievable_peak(jax: Any, device: Any, dtype: str) -> float:
    """Best FLOP/s of ``device`` in ``dtype`` over the sizes of its kind."""

    kind = "GPU" if device.platform != "cpu" else "CPU"

    @jax.jit
    def chain(a: Any, k: Any) -> Any:
        # Each product feeds the next, so XLA can neither skip nor overlap them.
        return jax.lax.fori_loop(0, k, lambda _, x: x @ a, a)[0, 0]

    best = 0.0
    for n in SIZES[kind]:
        key = jax.random.PRNGKey(n)
        a = jax.device_put((jax.random.normal(key, (n, n)) / math.sqrt(n)).astype(dtype),
                           device)
        chain(a, 1).block_until_ready()  # compile
        t = time.perf_counter()
        chain(a, 1).block_until_ready()
        single = max(time.perf_counter() - t, 1e-6)
        k = max(1, min(MAX_CHAIN, math.ceil(MIN_CALL_S / single)))
        for _ in range(CALLS):
            t = time.perf_counter()
            chain(a, k).block_until_ready()
            best = max(best, 2.0 * n**3 * k / (time.perf_counter() - t))
        del a  # nothing held between sizes
    return best


def cache_key(jax: Any, device: Any) -> str:
    """The cache entry of ``device``'s figures: what changes a matmul's best rate."""
    from bench.env import fingerprint

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    # A GPU's float32 rate with TF32 math is another figure: each precision its entry.
    precision = jax.config.jax_default_matmul_precision or "default"
    return (f"{fingerprint()['machine_id']}|jax{jax.__version__}|{device.platform}:"
            f"{device.device_kind}|cores{cores}|matmul-{precision}|{METHOD_VERSION}")


def cached_peak(jax: Any, device: Any, dtype: str, *, refresh: bool = False) -> float:
    """``achievable_peak`` from the TF lane's cache file, measured (and cached) when
    missing or on ``refresh`` (``bench.child.probes.peak.cached_or_measured``: one
    process at a time, a refresh keeps the higher figure)."""
    def measure() -> DtypePeak:
        return DtypePeak(achievable_peak(jax, device, dtype), {}, {}, time.time(), None)

    kind = "gpu" if device.platform != "cpu" else "cpu"
    return cached_or_measured(cache_key(jax, device), dtype, measure, device=str(device),
                              method=method_text(kind), refresh=refresh).flops_per_s
