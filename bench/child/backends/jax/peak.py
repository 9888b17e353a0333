"""The achievable matmul peak of one JAX device: chained square matmuls in one
compiled loop, synchronised once per call (the TF lane's method, bench.child.probes.peak,
in JAX), cached beside the TF lane's figures: measured once per machine, jax version,
device kind, usable cores and float32 matmul precision, then read (a few seconds less
in every run's process)."""

from __future__ import annotations

import json
import math
import os
import time
from typing import Any

from bench.child.probes.peak import cache_path, measuring, read_cache, write_atomic

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
    """``achievable_peak`` from the cache, measured (and cached) when missing or on
    ``refresh``; a refresh keeps the higher figure (a busy machine only reads low)."""
    key = cache_key(jax, device)

    def cached() -> dict[str, Any]:
        return ((read_cache().get(key) or {}).get("achievable") or {}).get(dtype) or {}

    old = cached()
    if old.get("flops_per_s") and not refresh:
        return float(old["flops_per_s"])
    with measuring():  # one process of the machine at a time (the TF lane's lock)
        if not refresh and (found := cached()).get("flops_per_s"):
            return float(found["flops_per_s"])  # another process measured meanwhile
        return _measure_and_cache(jax, device, dtype, key, old)


def _measure_and_cache(jax: Any, device: Any, dtype: str, key: str,
                       old: dict[str, Any]) -> float:
    best = max(achievable_peak(jax, device, dtype), float(old.get("flops_per_s") or 0.0))
    cache = read_cache()  # re-read: another process may have added an entry meanwhile
    entry = cache.setdefault(key, {})
    entry["device"] = str(device)
    entry["method"] = method_text("gpu" if device.platform != "cpu" else "cpu")
    entry.setdefault("achievable", {})[dtype] = {
        "flops_per_s": best, "measured_at": time.time(),
        "remeasured": int(old.get("remeasured", -1)) + 1}
    write_atomic(cache_path(), json.dumps(cache, indent=1))
    return best

