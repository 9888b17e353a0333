"""The benchmark matrices as pytest-benchmark tests (``pytest benchmarks/ --benchmark-only``).

Each configuration runs in its own process, as in a sweep; pytest-benchmark
records the step time of each measured window (see bench/regress/pytest_plugin.py).
``--stratbench-matrix`` picks the matrix (``bench.matrix.BENCHMARK_MATRICES``):
``nightly`` (default, a few minutes on 2 cores), ``small`` (two cheap MLP
configurations: ``python -m scripts.noise_floor``) or ``tiny`` (one configuration,
~10 s, used by the test suite).

``--stratbench-runs N`` measures every configuration in N separate processes, in
rounds (every configuration once, then again), so that slow drift of the machine
touches every configuration alike. The run is the unit `compare` judges: windows
only say how precisely their own run was measured, so they are kept short.
"""

from __future__ import annotations

from typing import Any

import pytest

from bench.hardware import detect
from bench.matrix import BENCHMARK_MATRICES, in_rounds
from bench.results.schema import RunResult
from bench.spec import RunSpec


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "spec" in metafunc.fixturenames:
        runs = metafunc.config.getoption("stratbench_runs")
        if runs < 1:
            raise pytest.UsageError(f"--stratbench-runs must be >= 1. Received: {runs}")
        specs = BENCHMARK_MATRICES.get(metafunc.config.getoption("stratbench_matrix"))(
            detect())
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
