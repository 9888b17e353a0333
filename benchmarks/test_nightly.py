"""The nightly matrix as pytest-benchmark tests (``pytest benchmarks/ --benchmark-only``).

Each configuration runs in its own process, as in a sweep; pytest-benchmark
records the step time of each measured window (see bench/regress/pytest_plugin.py).
``--stratbench-matrix`` picks the matrix: ``nightly`` (default, a few minutes on
2 cores) or ``tiny`` (one configuration, ~10 s, used by the test suite).

The windows are the samples of `compare`'s statistical test: with 6 windows a
side, Mann-Whitney U can reach p = 0.002 (0.1 with 3), so a real shift is
detectable in one night; windows are kept short so the matrix stays cheap.
"""

from __future__ import annotations

from typing import Any

import pytest

from bench.hardware import detect
from bench.registry import Registry
from bench.results.schema import RunResult
from bench.spec import RunSpec

WINDOWS = {"repeats": 6, "min_steps": 3, "max_steps": 100_000, "timeout_s": 300.0}


def nightly_matrix() -> list[RunSpec]:
    """Every workload on one device (one_device) and on two (mirrored)."""
    # Logical CPU devices share the cores: two of them measure strategy overhead.
    two = 2 if not detect().gpus else min(2, len(detect().gpus))
    specs = []
    for workload, batch, params in (("mlp", 256, {}), ("cnn", 64, {}),
                                    ("resnet50", 16, {"image_size": 32, "classes": 10})):
        common = {**WINDOWS, "workload": workload, "batch": batch, "params": params,
                  "max_seconds": 0.5, "warmup_steps": 3}
        specs.append(RunSpec(strategy="one_device", devices=1, **common))
        if two > 1:
            specs.append(RunSpec(strategy="mirrored", devices=two, **common))
    return specs


def tiny_matrix() -> list[RunSpec]:
    # The full-size MLP (steps of a few ms): the tiny one steps in ~0.4 ms, where
    # dispatch overhead blurs an injected slowdown.
    return [RunSpec(workload="mlp", strategy="one_device", devices=1, batch=128,
                    max_seconds=0.15, warmup_steps=5, **WINDOWS)]


MATRICES: Registry[Any] = Registry("benchmark matrix")
MATRICES.register("nightly", nightly_matrix)
MATRICES.register("tiny", tiny_matrix)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "spec" in metafunc.fixturenames:
        specs = MATRICES.get(metafunc.config.getoption("stratbench_matrix"))()
        metafunc.parametrize("spec", specs, ids=[s.label().replace(" ", "-") for s in specs])


def test_training_throughput(stratbench_benchmark: Any, spec: RunSpec) -> None:
    """Benchmark one configuration (a failed, OOM or timed-out run fails the test).

    Whether the model learns is not asserted here: a dozen steps of ResNet50 with
    BatchNorm can raise the loss, and training correctness is tests/'s job. The
    losses go to extra_info.
    """
    result: RunResult = stratbench_benchmark(spec)
    assert result.status == "ok" and result.figures is not None and result.figures.windows
