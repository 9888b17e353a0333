"""What the parent side reads from a real GPU while it works: clocks, power, energy.

    python -m scripts.gpu_readings [--seconds 10] [--dtype float32|bfloat16] [--no-tf32]

Loads the first GPU with a matmul loop through PyTorch (where it is installed; the
GPU machines lent to this project have PyTorch and no TensorFlow), while the code a
run uses samples it exactly as around a run's windows: ``bench.hardware.GpuRun``
(nvidia-smi at both ends and every ``--every`` seconds between) and
``bench.energy.energy_meter`` (NVML's energy counter). Prints the detection, the
samples' summary, the throttle findings (the power cap alone must give none), the
energy and mean power, the matmul rate, and the datasheet peak next to the peak at
the sustained clock (``bench.results.mfu.at_sustained_clock``). Without PyTorch the
GPU idles through the same readings. Nothing is asserted; exit 0 unless no GPU.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import time
from typing import Any

from bench.child.probes.peak import gpu_theoretical
from bench.energy import energy_meter, window_energy
from bench.hardware import GpuRun, detect, sustained_clock, throttle_findings

N = 8192


def warm(dtype: str, tf32: bool) -> Any:
    """Operands on the GPU and a few matmuls done (a run's warm-up: the windows open on a
    busy GPU); None without torch."""
    try:
        torch: Any = importlib.import_module("torch")
    except ImportError:
        return None
    torch.backends.cuda.matmul.allow_tf32 = tf32
    kind = getattr(torch, dtype)
    a = torch.randn(N, N, device="cuda", dtype=kind)
    b = torch.randn(N, N, device="cuda", dtype=kind)
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < 2.0:
        a @ b
        torch.cuda.synchronize()
    return torch, a, b


def load(seconds: float, operands: Any) -> tuple[float, int] | None:
    """(TFLOP/s, matmuls) of an 8192^3 matmul loop for ``seconds``; None without torch."""
    if operands is None:
        time.sleep(seconds)
        return None
    torch, a, b = operands
    n = N
    count, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        for _ in range(10):
            a @ b
        count += 10
        torch.cuda.synchronize()
    return 2 * n**3 * count / (time.perf_counter() - t0) / 1e12, count


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m scripts.gpu_readings",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--every", type=float, default=0.5, help="sampling interval in s")
    p.add_argument("--dtype", choices=("float32", "bfloat16", "float16"), default="float32")
    p.add_argument("--no-tf32", dest="tf32", action="store_false")
    args = p.parse_args(argv)
    hw = detect()
    if not hw.gpus:
        print("gpu_readings: no GPU visible (nvidia-smi found none)", file=sys.stderr)
        return 2
    gpu = hw.gpus[0]
    print(f"detected: {gpu.name}, {gpu.memory_mib} MiB, driver {gpu.driver}, uuid {gpu.uuid}")
    meter = energy_meter()
    print(f"energy meter: {meter.source or 'none'} {meter.devices or ''} "
          f"{meter.reason or ''}".rstrip())
    run = GpuRun(every_s=args.every)
    run.begin()
    operands = warm(args.dtype, args.tf32)
    run.at_start()
    e0, t0 = meter.read(), time.perf_counter()
    rate = load(args.seconds, operands)
    e1, wall = meter.read(), time.perf_counter() - t0
    run.at_end()
    env = run.environment()
    state = env.get("gpu_state") or {}
    print("during the load:", json.dumps(state.get("during"), indent=None))
    findings = throttle_findings(state.get("start") or [], state.get("end") or [],
                                 state.get("during"))
    print(f"throttle findings: {findings or 'none'}")
    joules = window_energy(e0, e1)
    if joules is not None:
        print(f"energy: {joules:.1f} J over {wall:.2f} s, mean power {joules / wall:.0f} W")
    if rate is not None:
        print(f"matmul {args.dtype} (tf32 {'on' if args.tf32 else 'off'}): {rate[0]:.1f} "
              f"TFLOP/s over {rate[1]} matmuls")
        if joules:
            print(f"energy per TFLOP: {joules / (rate[0] * wall):.2f} J")
    clock = sustained_clock(state)
    maxima = [st.get("sm_clock_max_mhz") for st in state.get("start") or []]
    peak = gpu_theoretical(gpu.name, args.tf32).flops_per_s.get(args.dtype)
    if peak and clock and maxima and maxima[0]:
        print(f"theoretical {args.dtype} peak {peak / 1e12:.1f} TFLOP/s at {maxima[0]} MHz; "
              f"{peak * clock / maxima[0] / 1e12:.1f} TFLOP/s at the sustained "
              f"{clock:.0f} MHz")
    print("topology:", (env.get("gpu") or {}).get("topology"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
