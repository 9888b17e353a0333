"""pytest-benchmark integration: benchmark a RunSpec run in its own process.

Loaded by the root ``conftest.py``. A test asks for the ``stratbench_benchmark``
fixture and calls it with a RunSpec::

    def test_mlp(stratbench_benchmark):
        result = stratbench_benchmark(RunSpec("mlp", "mirrored", devices=2, repeats=6))

The configuration runs in a fresh child process exactly as in a sweep
(``bench.launch.sweep.run_replicate``, hard timeout). ``--stratbench-runs N``
measures every configuration in N processes (``benchmarks/`` parametrizes each
test by its run number, in rounds), because the run, not the window, is the unit of
replication: run r is saved as ``SweepStore.paths(spec, r)`` with ``replicate=r``.
pytest-benchmark cannot time a process that measures itself, so its timer is
replaced (through the documented ``@pytest.mark.benchmark(timer=...)`` option)
by ``REPLAY_TIMER``, a clock that moves only when told: each ``pedantic`` round
replays one measured window by advancing it by that window's step time.
pytest-benchmark's statistics, storage, ``--benchmark-compare`` and
``--benchmark-compare-fail`` then work on the real per-window step times.
Every figure of the result schema (``bench.results.figures``: the names the CSV,
``bench show``, TensorBoard and ``bench compare`` use, with their units) and the
fingerprint go to ``extra_info``.

One round = one measured window; its time = window wall time / steps in it, so
pytest-benchmark's figures are the reciprocal of the window throughputs times the
examples per step, and a median check on them is a throughput check.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pytest

from bench.launch.sweep import run_replicate
from bench.results.figures import FIGURES
from bench.results.schema import RunResult
from bench.results.store import SweepStore
from bench.spec import RunSpec

FIXTURE = "stratbench_benchmark"


class ReplayTimer:
    """A clock that only moves when told (pytest-benchmark reads it around each round)."""

    # pytest-benchmark records the timer's name in every saved benchmark.
    __name__ = "stratbench_replayed_window_step_time"

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


# One clock is enough: tests run one at a time and pytest-benchmark only uses differences.
REPLAY_TIMER = ReplayTimer()


def window_step_times(result: RunResult) -> list[float]:
    """Seconds per step of each measured window (wall time / steps)."""
    assert result.figures is not None
    return [w.wall_s / w.steps for w in result.figures.windows]


def extra_info(result: RunResult, result_file: Path | None) -> dict[str, Any]:
    """What pytest-benchmark stores beside the times: every figure of the catalogue
    under its one name (None where the run did not measure it, e.g. without a
    profile) and, where the schema says why one is empty, that reason (``<name>_reason``),
    the values of each window for the figures windows carry, the units, and the
    fingerprint."""
    f = result.figures
    assert f is not None
    return {
        "stratbench_key": result.key,
        "configuration": result.spec.label(),
        "spec": result.spec.to_dict(),
        "replicas": result.replicas,
        "global_batch": result.global_batch,
        "round_definition": "one round = one measured window; time = window wall time / "
                            "steps (s per optimizer step)",
        **{fig.name: fig.value(f) for fig in FIGURES},
        # Why a figure is empty, where the schema says (None where it has a value).
        **{fig.reason_name: fig.absence(f) for fig in FIGURES if fig.reason_name},
        "windows": {fig.name: [fig.in_window(w) for w in f.windows]
                    for fig in FIGURES if fig.window},
        "units": {fig.name: fig.unit for fig in FIGURES},
        # Whether memory_device_peak_bytes is per device or process-wide (CPU).
        "memory_device_scope": f.memory.device_scope,
        "fingerprint": result.environment,
        "result_file": str(result_file) if result_file else None,
    }


def run_benchmark(benchmark: Any, spec: RunSpec, out_dir: Path | None,
                  timer: ReplayTimer = REPLAY_TIMER, replicate: int = 1) -> RunResult:
    """Run ``spec`` isolated (as its run ``replicate``), save its result, and replay its
    windows into ``benchmark``.

    A failed, OOM or timed-out run fails the test (after its result is saved);
    a configuration this machine cannot run is skipped with the reason.
    """
    with tempfile.TemporaryDirectory(prefix="stratbench-bench-") as tmp:
        store = SweepStore(out_dir or Path(tmp))  # without --stratbench-out: thrown away
        paths = store.paths(spec, replicate)
        if out_dir is not None and paths.result.exists():
            pytest.fail(f"{paths.result} already exists (results are never overwritten); "
                        f"give --stratbench-out a new directory")
        result = run_replicate(store, spec, replicate)
        if result.status == "unsupported":
            pytest.skip(f"{spec.label()}: unsupported here: {result.reason}")
        if result.status != "ok" or result.figures is None:
            # The failure is the test's outcome; without this pytest-benchmark would add
            # a misleading "fixture was not used at all" warning to it.
            benchmark.skipped = True
            pytest.fail(f"{spec.label()}: {result.status}: {result.reason}", pytrace=False)
        times = iter(window_step_times(result))
        benchmark.extra_info.update(extra_info(result, paths.result if out_dir else None))
        benchmark.extra_info["replicate"] = replicate
        benchmark.pedantic(lambda: timer.advance(next(times)),
                           rounds=len(result.figures.windows), iterations=1, warmup_rounds=0)
        return result


# -- pytest hooks and fixtures (this module is a plugin loaded by conftest.py) --------------
def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("stratbench")
    group.addoption("--stratbench-out", type=Path, default=None,
                    help="also save each benchmarked configuration's result in this sweep "
                         "directory (for `python -m bench history ingest`)")
    group.addoption("--stratbench-matrix", default="nightly",
                    help="which configurations benchmarks/ runs (default: nightly)")
    group.addoption("--stratbench-runs", type=int, default=1,
                    help="measure every configuration in this many separate processes, in "
                         "rounds (default 1; `bench nightly` uses 2 or more)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Give every test using the fixture the replay timer (merged with its own marker)."""
    for item in items:
        if FIXTURE not in getattr(item, "fixturenames", ()):
            continue
        own = item.get_closest_marker("benchmark")
        kwargs = {**(own.kwargs if own else {}), "timer": REPLAY_TIMER}
        # Prepended: pytest-benchmark reads the closest `benchmark` marker only.
        item.add_marker(pytest.mark.benchmark(**kwargs), append=False)


def pytest_benchmark_update_machine_info(config: pytest.Config,
                                         machine_info: dict[str, Any]) -> None:
    """Stable hardware identity (no timestamps: pytest-benchmark compares machine_info)."""
    from bench.env import fingerprint

    env = fingerprint()
    machine_info["stratbench"] = {k: env.get(k) for k in (
        "machine_id", "cpu_model", "cpu_cores", "memory_bytes", "gpus")}


@pytest.fixture
def stratbench_benchmark(request: pytest.FixtureRequest, benchmark: Any) -> Any:
    """Callable ``(spec, replicate=1) -> RunResult``: run the spec isolated (as its run
    number ``replicate``) and benchmark its windows."""
    out: Path | None = request.config.getoption("stratbench_out")

    def run(spec: RunSpec, replicate: int = 1) -> RunResult:
        return run_benchmark(benchmark, spec, out, replicate=replicate)

    return run

