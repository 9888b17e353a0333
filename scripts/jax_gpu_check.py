"""Does the JAX lane measure a GPU? One data_parallel MLP on the first card, both matmul
precisions, every figure the harness derives, in one output directory.

    python -m scripts.jax_gpu_check [--out DIR] [--batch N] [--max-seconds S]

For a GPU machine with JAX (the jax-cuda extra) and NVML (nvidia-ml-py), no TensorFlow
needed: this process never imports it (checked at the end: exit 1 if something did).
For each precision, float32 (TensorFloat-32 matmuls, JAX's and TensorFlow's default on
Ampere and newer) and mixed_bfloat16, it trains the MLP (a wide one on a GPU, so the
card is busy: 4096-8192x3-1000, batch 8192) through the harness's own path
(bench.child.backends.runner: the windows, NVML energy per window, the card's clocks,
power and throttling sampled at both ends, MFU against the measured chained-matmul
peak, the datasheet's and the datasheet's at the sustained SM clock, device memory,
XLA's FLOP count) and profiles a few steps of the first (jax.profiler).

It runs on one card of its own (``--gpu``, an nvidia-smi index or a GPU UUID; default
the first GPU this process may use), shown to it alone by CUDA_VISIBLE_DEVICES before
JAX is imported, as the launcher shows each child its cards: JAX preallocates 75% of
every card it sees, and the energy meter counts every card the process sees.

Writes DIR/figures.json (one entry per precision), DIR/fingerprint.json, DIR/profile/,
and prints one line per precision. Without a GPU it says so and runs the same path on
the CPU with the default MLP (exit 0): that is how its logic is tested without a card.
Budget: under 8 minutes on a GPU (two runs of 3 windows of 3 s, compiles, two peak
probes); about a minute on a 2-core CPU.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Container, MutableMapping
from pathlib import Path
from typing import Any

from bench.errors import UsageError
from bench.hardware import GpuInfo

PRECISIONS = ("float32", "mixed_bfloat16")
# A card is busy only with large matmuls: ~1 GFLOP per example, ~8.6 TFLOP a step.
GPU_MLP = {"input_dim": 4096, "widths": [8192, 8192, 8192], "classes": 1000}
GPU_BATCH, CPU_BATCH = 8192, 256


def log(msg: str) -> None:
    """A progress line on stderr."""
    print(f"[jax_gpu_check] {msg}", file=sys.stderr, flush=True)


def no_wait(at_start: Callable[[], None]) -> Callable[[], float | None]:
    """The windows' start hook of a lone process: sample the GPU state, then go."""
    def hook() -> float | None:
        at_start()
        return None
    return hook


def summary(report: Any) -> dict[str, Any]:
    """The figures a reader of this check wants, from one run's TaskReport."""
    f = report.figures
    if f is None:
        return {"status": report.status, "reason": report.reason}
    return {
        "status": report.status, "reason": report.reason,
        "examples_per_s": f.global_throughput, "step_median_s": f.step_time.median_s,
        "throughput_cv": f.throughput_cv,
        "train_flops_per_example": f.model.train_flops_per_example,
        "flops_method": f.model.flops_method, "achieved_flops_per_s": f.achieved_flops_per_s,
        "mfu": f.mfu, "peak_flops_per_s": f.peak_flops_per_s,
        "mfu_theoretical": f.mfu_theoretical,
        "theoretical_peak_flops_per_s": f.theoretical_peak_flops_per_s,
        "sustained_sm_clock_mhz": f.sustained_sm_clock_mhz, "mfu_at_clock": f.mfu_at_clock,
        "energy_j": f.energy_j, "joules_per_example": f.joules_per_example,
        "mean_power_w": f.mean_power_w, "energy_source": f.energy_source,
        "energy_reason": f.energy_reason,
        "device_peak_bytes": f.memory.device_peak_bytes,
        "device_peak_reason": f.memory.device_peak_reason,
        "host_peak_rss_bytes": f.memory.host_peak_rss_bytes,
        "loss_start": f.loss_start, "loss_end": f.loss_end,
        "gpu_state": (report.environment or {}).get("gpu_state"),
    }


def line(precision: str, s: dict[str, Any]) -> str:
    """One printed line per precision."""
    if s.get("examples_per_s") is None:
        return f"{precision}: {s['status']}: {s.get('reason')}"

    def pct(v: float | None) -> str:
        return "-" if v is None else f"{v:.1%}"
    mem = s["device_peak_bytes"] or s["device_peak_reason"]
    return (f"{precision}: {s['examples_per_s']:,.0f} examples/s, step "
            f"{s['step_median_s'] * 1e3:.2f} ms, {s['achieved_flops_per_s'] / 1e12:.3g} "
            f"TFLOP/s, MFU {pct(s['mfu'])} (theoretical {pct(s['mfu_theoretical'])}, at "
            f"the sustained clock {pct(s['mfu_at_clock'])}), "
            f"{s['joules_per_example'] or '-'} J/example, device memory {mem}")


def own_card(wanted: str | None, environ: MutableMapping[str, str] | None = None,
             imported: Container[str] | None = None) -> GpuInfo | None:
    """Show this process one card, as the launcher shows a child its own: ``wanted`` (an
    nvidia-smi index or a GPU UUID, whole or a unique prefix, as CUDA_VISIBLE_DEVICES
    takes them), else the first GPU the process may use. Sets CUDA_DEVICE_ORDER and
    CUDA_VISIBLE_DEVICES (the card's UUID) in ``environ`` (os.environ) and clears the
    hardware and energy caches, so that detection, the task and the meter see that card
    alone. Must come before JAX is imported (``imported``: sys.modules). Returns the
    card; None without a GPU (nothing changed)."""
    from bench import energy, hardware

    environ = os.environ if environ is None else environ
    imported = sys.modules if imported is None else imported
    gpus = hardware.detect().gpus
    if not gpus:
        if wanted is not None:
            raise UsageError(f"--gpu names a GPU, but nvidia-smi shows none. "
                             f"Received: --gpu {wanted}")
        return None
    found = hardware.visible(gpus, wanted) if wanted is not None else gpus[:1]
    if len(found) != 1:
        names = ", ".join(f"{g.index} ({g.cuda_id})" for g in gpus)
        raise UsageError(f"--gpu must name one of this process's GPUs by nvidia-smi index "
                         f"or UUID: {names}. Received: --gpu {wanted}")
    if "jax" in imported:
        raise UsageError("jax was imported before the check chose its card: "
                         "CUDA_VISIBLE_DEVICES cannot change now. Received: jax in sys.modules")
    (card,) = found
    environ.update({"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": card.cuda_id})
    hardware.detect.cache_clear()
    energy.energy_meter.cache_clear()
    return card


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m scripts.jax_gpu_check", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, default=None,
                   help="output directory (default results/jax-gpu-check-<time>)")
    p.add_argument("--batch", type=int, default=None,
                   help=f"global batch (default {GPU_BATCH} on a GPU, {CPU_BATCH} on a CPU)")
    p.add_argument("--max-seconds", type=float, default=3.0, help="window length bound")
    p.add_argument("--profile-steps", type=int, default=5,
                   help="steps profiled after the first precision's windows (0: none)")
    p.add_argument("--gpu", default=None,
                   help="the card to run on: an nvidia-smi index or a GPU UUID (default: "
                        "the first GPU this process may use); the only one it sees")
    args = p.parse_args(argv)
    try:
        card = own_card(args.gpu)
    except UsageError as exc:
        p.error(str(exc))
    if card is not None:
        log(f"on GPU {card.index} ({card.name}, CUDA_VISIBLE_DEVICES={card.cuda_id}) alone")

    from bench.child.backends.jax import JaxBackend
    from bench.child.backends.runner import run_backend
    from bench.hardware import detect
    from bench.spec import RunSpec
    from bench.strategies import own_gpus
    from bench.tasks import Task

    hw = detect()
    gpu = bool(hw.gpus)
    if not gpu:
        log("no GPU visible (nvidia-smi): running the CPU path (the default MLP) so the "
            "logic is exercised; no GPU figure comes from this")
    out = args.out or Path(f"results/jax-gpu-check-{time.strftime('%Y%m%d-%H%M%S')}")
    out.mkdir(parents=True, exist_ok=True)
    task = Task("single", 0, "train", main=True, local_devices=1, gpus=own_gpus(hw, 1))
    backend = JaxBackend()
    results: dict[str, Any] = {"gpu": hw.gpus[0].name if gpu else None, "runs": {}}
    environment: dict[str, Any] = {}
    for i, precision in enumerate(PRECISIONS):
        spec = RunSpec(workload="mlp", strategy="data_parallel", backend="jax", devices=1,
                       batch=args.batch or (GPU_BATCH if gpu else CPU_BATCH),
                       params=GPU_MLP if gpu else {}, precision=precision, repeats=3,
                       max_seconds=args.max_seconds, warmup_steps=5,
                       max_steps=10_000, profile_steps=args.profile_steps if i == 0 else 0)
        log(f"{spec.label()}")
        report = run_backend(backend, spec, task, launch_ts=time.time(),
                             mark_ready=lambda: None, before_windows=no_wait,
                             profile_dir=out / "profile" / precision, progress=log)
        results["runs"][precision] = summary(report)
        environment = report.environment or environment
        print(line(precision, results["runs"][precision]), flush=True)
    results["tensorflow_imported"] = "tensorflow" in sys.modules
    (out / "figures.json").write_text(json.dumps(results, indent=2, default=str) + "\n")
    (out / "fingerprint.json").write_text(json.dumps(environment, indent=2, default=str)
                                          + "\n")
    print(f"wrote {out}/figures.json, fingerprint.json and profile/", flush=True)
    if results["tensorflow_imported"]:
        log("TensorFlow was imported by this process: the JAX lane must not need it")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
