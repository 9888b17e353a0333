"""pytest configuration shared by tests/ (and later benchmarks/).

The pytest process itself never imports TensorFlow: a TF process cannot change
its devices once started, and strategies created one after another in one
process interfere (tests/tf_cases.py). TensorFlow checks run in child processes,
each with its own timeout, like the harness's own runs.
"""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# Child processes measure the peak FLOP/s once and cache it; tests keep that cache
# out of the user's home directory (one cache per test session, inherited by children).
if "STRATBENCH_CACHE_DIR" not in os.environ:
    import tempfile

    os.environ["STRATBENCH_CACHE_DIR"] = tempfile.mkdtemp(prefix="stratbench-test-cache-")

# pytest-benchmark fixtures (`stratbench_benchmark`: a RunSpec run in its own process,
# its measured windows replayed into pytest-benchmark) and the --stratbench-* options.
pytest_plugins = ["bench.regress.pytest_plugin"]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip GPU-marked tests, loudly, where no GPU is visible."""
    from bench.hardware import detect

    gpus = len(detect().gpus)
    for item in items:
        if "gpu" in item.keywords and gpus < 1:
            item.add_marker(pytest.mark.skip(reason="needs a GPU; none visible"))
        if "multi_gpu" in item.keywords and gpus < 2:
            item.add_marker(pytest.mark.skip(reason=f"needs 2+ GPUs; {gpus} visible"))
