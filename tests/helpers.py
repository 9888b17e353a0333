"""Builders shared by tests (no TensorFlow)."""

from __future__ import annotations

from typing import Any

from bench.launcher import make_result
from bench.results import (
    Figures,
    Memory,
    ModelInfo,
    RunResult,
    Startup,
    StepTimes,
    Warmup,
    Window,
)
from bench.spec import RunSpec


def tiny_spec(**over: Any) -> RunSpec:
    base: dict[str, Any] = {"workload": "mlp", "strategy": "mirrored", "devices": 2,
                            "batch": 32, "size": "tiny", "repeats": 2, "max_seconds": 0.3,
                            "min_steps": 3, "max_steps": 20, "warmup_steps": 2,
                            "timeout_s": 120.0, "optimizer": "adam",
                            "learning_rate": 0.01}
    base.update(over)
    return RunSpec(**base)


def fake_figures(throughputs: tuple[float, ...] = (1000.0, 1100.0), replicas: int = 2,
                 batch: int = 32) -> Figures:
    st = StepTimes(median_s=batch / throughputs[0], p90_s=0.04, p99_s=0.05, mean_s=0.031,
                   std_s=0.002, min_s=0.02, max_s=0.06, samples=10)
    windows = [Window(index=i, steps=10, examples=10 * batch, wall_s=10 * batch / t,
                      global_throughput=t, per_replica_throughput=t / replicas, step_time=st,
                      loss_first=1.5, loss_last=1.0, device_peak_bytes={"CPU:0": 2**20},
                      host_peak_rss_bytes=600 * 2**20) for i, t in enumerate(throughputs)]
    med = sorted(throughputs)[len(throughputs) // 2]
    return Figures(
        global_throughput=med, per_replica_throughput=med / replicas, step_time=st,
        windows=windows, warmup=Warmup(first_call_s=0.5, steps=2, total_s=0.6),
        startup=Startup(import_tf_s=2.0, device_setup_s=0.01, build_s=0.4,
                        launch_to_first_step_s=3.1),
        memory=Memory(device_peak_bytes={"CPU:0": 2**20}, device_scope="process",
                      host_peak_rss_bytes=600 * 2**20, host_scope="window"),
        model=ModelInfo(params=100, trainable_params=100, grad_bytes_per_step=400,
                        forward_flops_per_example=200.0, train_flops_per_example=600.0,
                        flops_method="analytic"),
        achieved_flops_per_s=600.0 * med, loss_start=1.6, loss_end=1.0, learned=True,
        replica_divergence=0.0, throughput_cv=0.05)


def fake_result(status: str = "ok", **spec_over: Any) -> RunResult:
    spec = tiny_spec(**spec_over)
    figures = fake_figures(replicas=spec.replicas, batch=spec.global_batch) \
        if status == "ok" else None
    return make_result(spec, status, None if status == "ok" else f"{status} for a test",
                       figures=figures, environment={"machine_id": "test"})
