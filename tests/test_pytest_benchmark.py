"""The pytest-benchmark path: `pytest benchmarks/ --benchmark-only` on the tiny matrix.

One subprocess chain checks several things (each TensorFlow process costs seconds):
the saved JSON holds one round per measured window with exactly the replayed step
times, extra_info carries figures and fingerprint, `pytest-benchmark compare` reads
the autosaved file, and `--benchmark-compare-fail=median:5%` fails a slowed re-run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.env import INJECT_SLOWDOWN_VAR
from bench.results.figures import FIGURES
from bench.results.store import SweepStore, load_sweep

ROOT = Path(__file__).resolve().parent.parent


def pytest_env() -> dict[str, str]:
    """This process's environment for a nested pytest: no injected slowdown, none of
    pytest-xdist's worker variables (with which pytest-benchmark disables itself), and
    none of this run's own options (PYTEST_ADDOPTS: ``-v`` changes what it prints)."""
    return {k: v for k, v in os.environ.items()
            if k not in (INJECT_SLOWDOWN_VAR, "PYTEST_ADDOPTS")
            and not k.startswith("PYTEST_XDIST_")}


def run_pytest(args: list[str], env_extra: dict[str, str] | None = None
               ) -> subprocess.CompletedProcess[str]:
    env = pytest_env()
    env.update(env_extra or {})
    return subprocess.run([sys.executable, "-m", "pytest", "benchmarks/", "--benchmark-only",
                           "--stratbench-matrix", "tiny", "-p", "no:cacheprovider", *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=300, env=env)


def info_file(bench: dict[str, object]) -> Path:
    info = bench["extra_info"]
    assert isinstance(info, dict)
    return Path(str(info["result_file"]))


def test_runs_are_parametrized_in_rounds() -> None:
    """--stratbench-runs N: every configuration once, then again (collection only, no TF)."""
    proc = subprocess.run([sys.executable, "-m", "pytest", "benchmarks/", "--benchmark-only",
                           "--stratbench-matrix", "small", "--stratbench-runs", "2",
                           "--collect-only", "-q", "-p", "no:cacheprovider"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env=pytest_env())
    ids = [line.split("[", 1)[1].rstrip("]") for line in proc.stdout.splitlines()
           if "::test_training_throughput[" in line]
    assert [i.rsplit("-", 1)[1] for i in ids] == ["run1"] * (len(ids) // 2) + \
        ["run2"] * (len(ids) // 2) and len(ids) >= 2, proc.stdout + proc.stderr
    bad = subprocess.run([sys.executable, "-m", "pytest", "benchmarks/", "--benchmark-only",
                          "--stratbench-runs", "0", "--collect-only", "-q",
                          "-p", "no:cacheprovider"],
                         cwd=ROOT, capture_output=True, text=True, timeout=120,
                         env=pytest_env())
    assert bad.returncode != 0 and "--stratbench-runs must be >= 1" in bad.stdout + bad.stderr


@pytest.mark.alone  # a 1.5x slowdown against a first run: neither may share the cores
def test_benchmark_json_compare_and_compare_fail(tmp_path: Path) -> None:
    storage = f"file://{tmp_path / 'store'}"
    first_json = tmp_path / "first.json"
    first = run_pytest(["--stratbench-out", str(tmp_path / "sweep"),
                        "--benchmark-storage", storage, "--benchmark-autosave",
                        "--benchmark-json", str(first_json)])
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]

    doc = json.loads(first_json.read_text("utf-8"))
    (bench,) = doc["benchmarks"]
    (result,) = load_sweep(tmp_path / "sweep").results  # the same run, saved as a result
    assert result.status == "ok" and result.figures is not None and result.replicate == 1
    assert info_file(bench) == SweepStore(tmp_path / "sweep").paths(result.spec, 1).result
    windows = result.figures.windows
    assert bench["stats"]["rounds"] == len(windows) == result.spec.repeats
    assert bench["stats"]["data"] == pytest.approx([w.wall_s / w.steps for w in windows],
                                                   rel=1e-12)
    assert bench["options"]["timer"] == "stratbench_replayed_window_step_time"
    info = bench["extra_info"]
    assert info["stratbench_key"] == result.key
    assert info["global_throughput"] == pytest.approx(result.figures.global_throughput)
    # Every figure of the catalogue under its one name, with its unit.
    assert {f.name for f in FIGURES} <= set(info) and set(info["units"]) == {
        f.name for f in FIGURES}
    assert info["windows"]["global_throughput"] == [w.global_throughput for w in windows]
    assert info["units"]["global_throughput"] == "examples/s"
    assert info["fingerprint"]["tensorflow"] and info["fingerprint"]["machine_id"]
    assert info["memory_host_peak_rss_bytes"] > 0
    assert doc["machine_info"]["stratbench"]["machine_id"] == info["fingerprint"]["machine_id"]

    # pytest-benchmark's own CLI reads what was autosaved.
    saved = list((tmp_path / "store").rglob("0001_*.json"))
    assert len(saved) == 1
    tool = Path(sys.executable).with_name("pytest-benchmark")  # the console script users run
    cli = subprocess.run([str(tool), "--storage", storage, "compare", "0001",
                          "--columns", "min,median,max"],
                         cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert cli.returncode == 0, cli.stderr
    assert "test_training_throughput" in cli.stdout and "Median" in cli.stdout

    # A slowed re-run compared with the saved one fails the median check. 50%, not the
    # 20% of test_compare: this is pytest-benchmark's bare threshold (no statistics), and
    # its two runs are seconds apart on a machine other processes may be loading.
    slow = run_pytest(["--benchmark-storage", storage, "--benchmark-compare=0001",
                       "--benchmark-compare-fail=median:5%"], {INJECT_SLOWDOWN_VAR: "0.5"})
    assert slow.returncode != 0, slow.stdout[-3000:]
    assert "Performance has regressed" in slow.stdout + slow.stderr
