"""The nightly matrix as pytest-benchmark tests (``pytest benchmarks/ --benchmark-only``).

Each configuration runs in its own process, as in a sweep; pytest-benchmark
records the step time of each measured window (see bench/regress/pytest_plugin.py).
``--stratbench-matrix`` picks the matrix: ``nightly`` (default, a few minutes on
2 cores), ``small`` (two cheap MLP configurations: scripts/noise_floor.py) or
``tiny`` (one configuration, ~10 s, used by the test suite).

``--stratbench-runs N`` measures every configuration in N separate processes, in
rounds (every configuration once, then again), so that slow drift of the machine
touches every configuration alike. The run is the unit `compare` judges: windows
only say how precisely their own run was measured, so they are kept short.
"""

from __future__ import annotations

from typing import Any

import pytest

from bench.hardware import detect
from bench.registry import Registry
from bench.results.schema import RunResult
from bench.spec import RunSpec

WINDOWS: dict[str, Any] = {"repeats": 6, "min_steps": 3, "max_steps": 100_000, "timeout_s": 300.0}


def nightly_matrix() -> list[RunSpec]:
    """Every workload on one device (one_device) and on two (mirrored)."""
    # Logical CPU devices share the cores: two of them measure strategy overhead.
    two = 2 if not detect().gpus else min(2, len(detect().gpus))
    specs = []
    for workload, batch, params in (("mlp", 256, {}), ("cnn", 64, {}),
                                    ("resnet50", 16, {"image_size": 32, "classes": 10})):
        common: dict[str, Any] = {**WINDOWS, "workload": workload, "batch": batch, "params": params,
                  "max_seconds": 0.5, "warmup_steps": 3}
        specs.append(RunSpec(strategy="one_device", devices=1, **common))
        if two > 1:
            specs.append(RunSpec(strategy="mirrored", devices=two, **common))
    return specs


def _mlp(strategy: str, devices: int) -> RunSpec:
    # The full-size MLP (steps of a few ms): the tiny one steps in ~0.4 ms, where
    # dispatch overhead blurs an injected slowdown.
    return RunSpec(workload="mlp", strategy=strategy, devices=devices, batch=128,
                   max_seconds=0.15, warmup_steps=5, **WINDOWS)


def tiny_matrix() -> list[RunSpec]:
    return [_mlp("one_device", 1)]


def small_matrix() -> list[RunSpec]:
    """Two cheap configurations, one and two devices (noise_floor.py's default)."""
    two = 2 if not detect().gpus else min(2, len(detect().gpus))
    return [_mlp("one_device", 1)] + ([_mlp("mirrored", two)] if two > 1 else [])


MATRICES: Registry[Any] = Registry("benchmark matrix")
MATRICES.register("nightly", nightly_matrix)
MATRICES.register("small", small_matrix)
MATRICES.register("tiny", tiny_matrix)


def in_rounds(specs: list[RunSpec], runs: int) -> list[tuple[RunSpec, int]]:
    """(spec, run number) pairs: every configuration once, then again, ``runs`` times."""
    return [(spec, r) for r in range(1, runs + 1) for spec in specs]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "spec" in metafunc.fixturenames:
        runs = metafunc.config.getoption("stratbench_runs")
        if runs < 1:
            raise pytest.UsageError(f"--stratbench-runs must be >= 1. Received: {runs}")
        specs = MATRICES.get(metafunc.config.getoption("stratbench_matrix"))()
        pairs = in_rounds(specs, runs)
        ids = [s.label().replace(" ", "-") + (f"-run{r}" if runs > 1 else "")
               for s, r in pairs]
        metafunc.parametrize(("spec", "replicate"), pairs, ids=ids)


def test_training_throughput(stratbench_benchmark: Any, spec: RunSpec, replicate: int) -> None:
    """Benchmark one run of one configuration (a failed, OOM or timed-out run fails).

    Whether the model learns is not asserted here: a dozen steps of ResNet50 with
    BatchNorm can raise the loss, and training correctness is tests/'s job. The
    losses go to extra_info.
    """
    result: RunResult = stratbench_benchmark(spec, replicate)
    assert result.status == "ok" and result.figures is not None and result.figures.windows
    assert result.replicate == replicate
