"""pytest configuration shared by tests/ (and later benchmarks/).

The pytest process itself never imports TensorFlow: a TF process cannot change
its devices once started, and strategies created one after another in one
process interfere (tests/tf_cases.py). TensorFlow checks run in child processes,
each with its own timeout, like the harness's own runs.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

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

    # Under pytest-xdist every worker has its own session: the first worker to need the
    # sweep runs it into the directory all workers share, the others wait for it and
    # read the same sweep and the same command's outcome.
    shared = (shared_dir(tmp_path_factory) or tmp_path_factory.getbasetemp()) / "tiny-sweep"
    out, outcome = shared / "sweep", shared / "outcome.json"
    shared.mkdir(exist_ok=True)
    with open(shared / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not outcome.exists():
            proc = bench("run", *TINY_SWEEP_MATRIX, *TINY, "--out", str(out), timeout=600)
            outcome.write_text(json.dumps([proc.args, proc.returncode, proc.stdout,
                                           proc.stderr]))
    args, code, stdout, stderr = json.loads(outcome.read_text())
    return out, subprocess.CompletedProcess(args, code, stdout, stderr)


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


# `make test` runs the suite on two pytest-xdist workers (--dist loadfile), then the
# tests marked `alone` one at a time. Each file goes whole to one worker, so that its
# module fixtures (TensorFlow runs, often two lanes at once) are built once. The files
# go in collection order: the longest first (seconds under two workers), so that none
# of them starts last and runs on while the other worker idles, and a file that mostly
# waits (on Slurm's daemons, on deadlines) next to one that keeps the cores busy: the
# scheduler gives the first two files one to each worker, then each next one to
# whichever worker is free. The Slurm tests hold the namespace lock for their
# whole module: they go first, so that the other worker's namespace tests do not queue
# behind them late in the run.
LONGEST_FIRST = ("test_slurm.py", "test_user_models.py", "test_multiprocess.py",
                 "test_model_kinds.py", "test_gpu_sim.py", "test_training.py",
                 "test_multihost.py", "test_cli.py", "test_fit.py",
                 "test_jax_lane.py", "test_allreduce.py", "test_sequential.py",
                 "test_error_rates.py", "test_k8s_pods.py", "test_report_browser.py",
                 "test_preflight.py", "test_duet.py")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip, loudly, tests the visible hardware cannot run (gpu, multi_gpu, logical_cpu);
    under pytest-xdist, put the longest files first."""
    from bench.hardware import detect

    if os.environ.get("PYTEST_XDIST_WORKER"):
        rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
        items.sort(key=lambda item: rank.get(item.path.name, len(rank)))
    gpus = len(detect().gpus)
    for item in items:
        reason = hardware_skip_reason({m.name for m in item.iter_markers()}, gpus)
        if reason:
            item.add_marker(pytest.mark.skip(reason=reason))


def shared_dir(tmp_path_factory: pytest.TempPathFactory) -> Path | None:
    """The directory every pytest-xdist worker of this run sees (the parent of the
    workers' own temporary directories), or None outside pytest-xdist."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return None
    return tmp_path_factory.getbasetemp().parent


@pytest.fixture(autouse=True)
def _one_namespace_test_at_a_time(request: pytest.FixtureRequest,
                                  tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Tests that make network namespaces never run beside each other (two workers):
    a new Network removes every namespace whose creating process died, and a test of
    another file checks for exactly such leftovers right after killing their owner."""
    shared = shared_dir(tmp_path_factory)
    if shared is None or request.node.get_closest_marker("netns") is None:
        yield
        return
    with open(shared / "netns.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, at teardown
        yield
