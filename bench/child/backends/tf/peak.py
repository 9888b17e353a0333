"""The achievable peak measured with TensorFlow: chained square matmuls inside one
``tf.function`` (the method and the cache are ``bench.child.probes.peak``'s, shared with
the JAX lane), its cache key (machine, TensorFlow version, device kind, threads, cores,
math mode, oneDNN), and both peaks for the fingerprint.

    python -m bench.child.backends.tf.peak [--refresh] [--dtype D]
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from typing import Any

from bench.child.probes import peak as probe
from bench.hardware import (
    QUIET_OTHERS_SHARE,
    QUIET_STEAL_SHARE,
    Activity,
    CpuTimes,
    activity,
    cpu_budget,
    cpu_times,
)


def method_of(device: str) -> str:
    """The probe's method on ``device``, for the record."""
    return probe.method_text(device, probe.SIZES[probe.device_kind(device)])


def device_theoretical(tf: Any, device: str) -> probe.Theoretical:
    """``theoretical_for`` this process's ``device`` as it runs now: a GPU's model from
    nvidia-smi and its float32 math mode from TensorFlow."""
    gpu = probe.device_kind(device) == "GPU"
    return probe.theoretical_for(device, probe.gpu_name() if gpu else None,
                                 tf32_enabled(tf, device))


def tf32_enabled(tf: Any, device: str) -> bool:
    """Whether float32 matmuls run as TensorFloat-32 here (GPUs only: a CPU has none)."""
    if probe.device_kind(device) != "GPU":
        return False
    return bool(tf.config.experimental.tensor_float_32_execution_enabled())


def cache_key(tf: Any, device: str) -> str:
    from bench.env import fingerprint

    threads = tf.config.threading.get_intra_op_parallelism_threads()
    # A process under a CPU quota (an emulated host of bench lab) reaches a fraction
    # of the cores' peak: it keeps its own entry.
    budget = cpu_budget()
    quota = f"|cpu{budget:g}" if budget is not None else ""
    # A GPU's float32 peak with TF32 on is another figure (390 against 52 TFLOP/s on
    # an H100): each math mode keeps its own entry.
    math_mode = "|tf32" if tf32_enabled(tf, device) else ""
    # oneDNN's matmul kernels (_MklMatMul) and Eigen's reach other peaks on one CPU:
    # TF_ENABLE_ONEDNN_OPTS=0 and =1 each keep their entry (unset: the machine's default).
    onednn = f"|onednn-{os.environ.get('TF_ENABLE_ONEDNN_OPTS', 'default')}"
    return (f"{fingerprint()['machine_id']}|tf{tf.__version__}|{probe.device_kind(device)}"
            f"|intra{threads}|cores{len(probe.usable_cpus())}{quota}{math_mode}{onednn}"
            f"|{probe.METHOD_VERSION}")


def measure_size(tf: Any, dtype: str, device: str, n: int) -> tuple[float, int, float]:
    """(best FLOP/s, matmuls per call, seconds of one matmul) of chained n x n matmuls."""
    with tf.device(device):
        # Entries of variance 1/n keep the chain's values of unit scale (no overflow
        # to inf in float16, no denormals), whatever its length.
        bound = math.sqrt(3.0 / n)
        x = tf.cast(tf.random.uniform((n, n), -1.0, 1.0), dtype)
        w = tf.cast(tf.random.uniform((n, n), -bound, bound), dtype)

        @tf.function
        def chain(x: Any, w: Any, k: Any) -> Any:
            for _ in tf.range(k):
                x = tf.linalg.matmul(x, w)
            # One element: fetching it waits for the whole chain without copying n^2
            # values to the host.
            return x[0, 0]

        def timed(k: int) -> float:
            t0 = time.perf_counter()
            chain(x, w, tf.constant(k)).numpy()
            return time.perf_counter() - t0

        timed(1)  # trace + warm-up
        single = timed(2) / 2
        k = probe.chain_length(2.0 * n**3 / single, n)
        best = max(k * 2.0 * n**3 / timed(k) for _ in range(probe.CALLS_PER_SIZE))
        return best, k, single


def measure_dtype(tf: Any, dtype: str, device: str, *, remote: bool = False) -> float:
    """The achievable FLOP/s of ``dtype`` on ``device``, measured now (not cached).

    ``remote``: the device is another task's, reached through the cluster (a parameter
    server's workers). This host's /proc/stat says nothing of that one's quiet, and on
    one machine it counts the probe's own matmuls there as others' load: every
    measurement read "not quiet" and was taken ``MAX_MEASUREMENTS`` times (20 s of a
    three-host run). Unchecked, the best of ``QUIET_MEASUREMENTS`` stands."""
    if remote:
        return measure_peak(tf, dtype, device, watch=lambda: None,
                            pause=lambda _: None).flops_per_s
    return measure_peak(tf, dtype, device).flops_per_s


def _measure_sizes(tf: Any, dtype: str, device: str) -> tuple[dict[str, float], dict[str, int]]:
    """One measurement: the best rate and chain length of each size."""
    by_size: dict[str, float] = {}
    chain: dict[str, int] = {}
    for n in probe.SIZES[probe.device_kind(device)]:
        rate, k, single = measure_size(tf, dtype, device, n)
        by_size[str(n)], chain[str(n)] = rate, k
        if single > probe.SLOW_SINGLE_S:  # e.g. float16 emulated on a CPU: stop growing
            break
    return by_size, chain


@dataclass(frozen=True)
class _Measurement:
    by_size: dict[str, float]
    chain: dict[str, int]
    quiet: bool | None  # None: not checked
    noise: str  # what made it not quiet

    @property
    def best(self) -> float:
        return max(self.by_size.values())


def _gflops(values: Iterable[float]) -> str:
    return ", ".join(f"{v / 1e9:,.1f}" for v in values) + " GFLOP/s"


def _conditions(runs: list[_Measurement], kept: list[_Measurement]) -> str:
    """How quiet the measurements were, in words."""
    if all(r.quiet is None for r in runs):
        return (f"{len(runs)} measurement(s), quiet not checked (/proc/stat unreadable): "
                f"{_gflops(r.best for r in runs)}, best kept")
    limits = (f"others <= {QUIET_OTHERS_SHARE:.0%} of the cores and steal <= "
              f"{QUIET_STEAL_SHARE:.0%}, before and during")
    busy = [r for r in runs if r.quiet is False]
    text = (f"{len(runs)} measurement(s), {len(runs) - len(busy)} quiet ({limits}); "
            + (f"best of the quiet kept: {_gflops(r.best for r in kept)}" if kept else
               "none was quiet: the best kept, and it may read low"))
    if busy:
        text += "; not quiet: " + "; ".join(f"{r.best / 1e9:,.1f} GFLOP/s ({r.noise})"
                                           for r in busy)
    return text


def measure_peak(tf: Any, dtype: str, device: str,
                 watch: Callable[[], CpuTimes | None] = cpu_times,
                 pause: Callable[[float], None] = time.sleep) -> probe.DtypePeak:
    """Measure the achievable peak of ``dtype`` on ``device`` (raises without a kernel).

    Before each measurement the machine is watched idle for ``QUIET_SAMPLE_S``, and
    again over the measurement (``watch``: /proc/stat's times, ``pause``: the idle
    wait); a measurement that others or the hypervisor disturbed is taken again, until
    ``QUIET_MEASUREMENTS`` were quiet or ``MAX_MEASUREMENTS`` were taken. The best of the
    quiet ones is kept (of all of them, when none was quiet or none could be checked).
    """
    runs: list[_Measurement] = []
    first_load = None
    while len(runs) < probe.MAX_MEASUREMENTS:
        t0 = watch()
        pause(probe.QUIET_SAMPLE_S)
        t1 = watch()
        by_size, chain = _measure_sizes(tf, dtype, device)
        t2 = watch()
        seen: dict[str, Activity] = {}
        for when, a, b in (("before", t0, t1), ("during", t1, t2)):
            if a is not None and b is not None:
                seen[when] = activity(a, b)
        first_load = first_load if first_load is not None else (t0.load_1m if t0 else None)
        quiet = all(x.quiet for x in seen.values()) if seen else None
        noise = "; ".join(f"{when}: {x.text()}" for when, x in seen.items() if not x.quiet)
        runs.append(_Measurement(by_size, chain, quiet, noise))
        if sum(r.quiet is not False for r in runs) >= probe.QUIET_MEASUREMENTS:
            break
    kept = [r for r in runs if r.quiet is not False]
    best = max(kept or runs, key=lambda r: r.best)
    return probe.DtypePeak(best.best, dict(best.by_size), dict(best.chain), time.time(), first_load,
                     measurements=[r.best for r in runs], quiet=[r.quiet for r in runs],
                     conditions=_conditions(runs, kept))


def cached_peak(tf: Any, device: str, dtype: str) -> probe.DtypePeak | None:
    """The cached achievable peak of ``dtype``, or None (never measures)."""
    return probe.cached(cache_key(tf, device), dtype)


def achievable_peak(tf: Any, device: str, dtype: str, refresh: bool = False,
                    ceiling: float | None = None) -> probe.DtypePeak:
    """The achievable peak of ``dtype`` on ``device``: cached, else measured with
    TensorFlow (``measure_peak``) and cached (``cached_or_measured``)."""
    return probe.cached_or_measured(cache_key(tf, device), dtype,
                              lambda: measure_peak(tf, dtype, device), device=device,
                              method=method_of(device),
                              refresh=refresh, ceiling=ceiling)


def first_device(tf: Any) -> str:
    # Physical, not logical, devices: listing logical ones initialises the runtime, after
    # which MultiWorkerMirrored can no longer configure its collectives.
    return "/gpu:0" if tf.config.list_physical_devices("GPU") else "/cpu:0"


def fingerprint_entry(tf: Any, device: str | None = None,
                      dtypes: Iterable[str] = probe.DTYPES) -> dict[str, Any]:
    """Both peaks of the first device, their methods and figures, for the fingerprint.

    Only the cache is read for the achievable peak, so no op runs: the fingerprint may
    be taken before strategies are built, and an op run then would break
    MultiWorkerMirrored ("Collective ops must be configured at program startup").
    Training runs measure after their windows (after.py).
    """
    device = device or first_device(tf)
    try:
        achievable = {d: asdict(found) for d in dtypes
                      if (found := cached_peak(tf, device, d)) is not None}
        theo = device_theoretical(tf, device)
    except Exception as exc:  # the fingerprint must never fail a run
        return {"device": device, "error": f"{type(exc).__name__}: {exc}"}
    figures = {d: e["flops_per_s"] for d, e in achievable.items()}
    errors = probe.probe_errors(figures, theo)
    notes = {}
    for d, value in figures.items():
        t = theo.flops_per_s.get(d)
        if t is not None and t < value and not theo.bound:
            clock = theo.inputs.get("clock_source")
            notes[d] = (f"theoretical {t:.4g} FLOP/s reads below the measured "
                        f"{value:.4g}: its clock ({clock}) is below what the cores reach; "
                        f"not used for MFU")
    return {"device": device, "unit": "FLOP/s", "cache": str(probe.cache_path()),
            "achievable": {"flops_per_s": figures,
                           "method": method_of(device),
                           "quiet": {d: e.get("conditions", "") for d, e in achievable.items()},
                           "probe_errors": errors, "detail": achievable},
            "theoretical": {"flops_per_s": theo.flops_per_s, "method": theo.source,
                            "bound": theo.bound, "inputs": theo.inputs, "not_used": notes},
            "mfu_uses": "mfu: achievable; mfu_theoretical: theoretical"}


def main(argv: list[str] | None = None) -> int:
    """``python -m bench.child.backends.tf.peak [--refresh] [--dtype D]``: print both peaks."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m bench.child.backends.tf.peak")
    parser.add_argument("--refresh", action="store_true",
                        help="measure again (keeps the higher figure per dtype)")
    parser.add_argument("--dtype", action="append", choices=probe.DTYPES,
                        help="dtype(s) to measure (default: float32 and bfloat16)")
    args = parser.parse_args(argv)
    import tensorflow as tf

    device = first_device(tf)
    dtypes = args.dtype or ["float32", "bfloat16"]
    theo = device_theoretical(tf, device)
    for d in dtypes:
        achievable_peak(tf, device, d, refresh=args.refresh, ceiling=probe.bound_of(theo, d))
    print(json.dumps(fingerprint_entry(tf, device, dtypes), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
