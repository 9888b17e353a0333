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
    import atexit
    import shutil
    import tempfile

    os.environ["STRATBENCH_CACHE_DIR"] = tempfile.mkdtemp(prefix="stratbench-test-cache-")
    # Removed when the session ends: each session's left a directory in /tmp.
    atexit.register(shutil.rmtree, os.environ["STRATBENCH_CACHE_DIR"], ignore_errors=True)

# pytest-benchmark fixtures (`stratbench_benchmark`: a RunSpec run in its own process,
# its measured windows replayed into pytest-benchmark) and the --stratbench-* options.
pytest_plugins = ["bench.regress.pytest_plugin"]


@pytest.fixture(scope="session")
def tiny_sweep(tmp_path_factory: pytest.TempPathFactory) -> tuple[object, object]:
    """``(out_dir, completed_process)`` of one tiny sweep; tests must not modify it.

    Tests that only read a real sweep share it (bench run in a subprocess: twelve
    TensorFlow child processes, about 50 s): the report checks and the CLI's
    end-to-end checks.
    """
    from tests.helpers import TINY, TINY_SWEEP_MATRIX, bench

    out = tmp_path_factory.mktemp("shared") / "sweep"
    proc = bench("run", *TINY_SWEEP_MATRIX, *TINY, "--out", str(out), timeout=600)
    return out, proc


def hardware_skip_reason(markers: set[str], gpus: int) -> str | None:
    """Why a test with ``markers`` cannot run where ``gpus`` GPUs are visible, or None."""
    if "gpu" in markers and gpus < 1:
        return "needs a GPU; none visible"
    if "multi_gpu" in markers and gpus < 2:
        return f"needs 2+ GPUs; {gpus} visible"
    if "logical_cpu" in markers and gpus:
        # The child sets up logical CPU devices only where there is no GPU; with GPUs
        # the same run would use them, and assertions about CPU devices would fail.
        return f"needs logical CPU devices, which the harness uses only without GPUs; " \
               f"{gpus} GPU(s) visible (the gpu/multi_gpu tests cover this machine)"
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip, loudly, tests the visible hardware cannot run (gpu, multi_gpu, logical_cpu)."""
    from bench.hardware import detect

    gpus = len(detect().gpus)
    for item in items:
        reason = hardware_skip_reason({m.name for m in item.iter_markers()}, gpus)
        if reason:
            item.add_marker(pytest.mark.skip(reason=reason))
