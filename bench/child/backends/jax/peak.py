"""The achievable matmul peak of one JAX device: chained square matmuls in one
compiled loop, synchronised once per call (the TF lane's method, bench.child.probes.peak,
in JAX)."""

from __future__ import annotations

import math
import time
from typing import Any

SIZES = {"CPU": (512, 1024), "GPU": (4096, 8192)}
MIN_CALL_S = 0.2  # a timed call lasts at least this long: launch and fetch vanish
CALLS = 3  # best of
MAX_CHAIN = 4096


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
