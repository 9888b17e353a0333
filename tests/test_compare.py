"""The regression comparison: its statistics, its rules, its CLI and exit codes, and a
real check on tiny sweeps (an injected 20% slowdown is flagged, a re-run is not)."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from bench.cli.main import main
from bench.env import INJECT_SLOWDOWN_VAR
from bench.exits import Exit
from bench.launch.launcher import make_result
from bench.launch.sweep import run_sweep
from bench.regress.compare import CompareError, Thresholds, compare
from bench.regress.significance import bootstrap_ratio_interval, mann_whitney, min_p_value
from bench.results.schema import RunResult
from bench.results.store import load_sweep
from bench.spec import RunSpec
from tests.helpers import fake_figures, tiny_spec

ROOT = Path(__file__).resolve().parent.parent


# -- statistics -----------------------------------------------------------------------
def brute_force_p(a: list[float], b: list[float]) -> float:
    """Two-sided permutation p-value of U by enumerating every relabelling."""
    both, m = a + b, len(a)

    def u(idx: tuple[int, ...]) -> float:
        first = [both[i] for i in idx]
        rest = [both[i] for i in range(len(both)) if i not in idx]
        return sum((x > y) + 0.5 * (x == y) for x in first for y in rest)

    observed = u(tuple(range(m)))
    null = [u(c) for c in itertools.combinations(range(len(both)), m)]
    lower = sum(v <= observed for v in null) / len(null)
    upper = sum(v >= observed for v in null) / len(null)
    return min(1.0, 2 * min(lower, upper))


@pytest.mark.parametrize(("m", "n", "shift"), [(3, 3, 0.0), (4, 5, 1.0), (6, 6, 0.5),
                                               (5, 2, 2.0)])
def test_exact_mann_whitney_matches_enumeration(m: int, n: int, shift: float) -> None:
    rng = np.random.default_rng(m * 10 + n)
    for _ in range(3):
        a = list(rng.normal(size=m))
        b = list(rng.normal(size=n) + shift)
        assert mann_whitney(a, b) == pytest.approx(brute_force_p(a, b), abs=1e-12)


def test_mann_whitney_limits() -> None:
    assert min_p_value(3, 3) == pytest.approx(0.1)  # why 3 windows a side are not enough
    assert mann_whitney(list(range(6)), list(range(10, 16))) == pytest.approx(
        min_p_value(6, 6))
    assert mann_whitney([5.0] * 4, [5.0] * 4) == 1.0  # identical: no evidence at all
    assert mann_whitney([1.0] * 6, [2.0] * 6) < 0.01  # ties, but fully separated
    lo, hi = bootstrap_ratio_interval([100, 101, 99, 100, 102], [80, 81, 79, 80, 82])
    assert lo <= 0.8 <= hi and hi < 1.0


# -- comparison rules -----------------------------------------------------------------
BASE = (1000.0, 1010.0, 990.0, 1005.0, 995.0, 1002.0)


def res(throughputs: tuple[float, ...], status: str = "ok",
        environment: dict[str, Any] | None = None, **over: Any) -> RunResult:
    spec = tiny_spec(repeats=len(throughputs), **over)
    figures = fake_figures(throughputs, replicas=spec.replicas, batch=spec.global_batch) \
        if status == "ok" else None
    return make_result(spec, status, None if status == "ok" else "child died",
                       figures=figures,
                       environment=environment or {"machine_id": "m", "tensorflow": "2.21.0"})


def throughput_verdict(base: tuple[float, ...], cur: tuple[float, ...], **kw: Any) -> str:
    report = compare([res(base)], [res(cur)], **kw)
    (config,) = report.configs
    return next(m.verdict for m in config.metrics if m.metric == "throughput")


def test_a_regression_needs_significance_and_size() -> None:
    assert throughput_verdict(BASE, tuple(t * 0.8 for t in BASE)) == "regressed"
    assert throughput_verdict(BASE, tuple(t * 1.2 for t in BASE)) == "improved"
    # Significant (windows fully separated) but only 2% slower: within the threshold.
    assert throughput_verdict(BASE, tuple(t * 0.98 for t in BASE)) == "unchanged"
    # ... unless the threshold for this metric is lower.
    low = Thresholds.parse(["throughput=1%"])
    assert throughput_verdict(BASE, tuple(t * 0.98 for t in BASE), thresholds=low) \
        == "regressed"
    # 8% slower in the median, but the windows overlap heavily: noise, not evidence.
    noisy_b = (1000.0, 700.0, 1300.0, 900.0, 1100.0, 1000.0)
    noisy_c = (920.0, 650.0, 1250.0, 880.0, 1020.0, 900.0)
    assert throughput_verdict(noisy_b, noisy_c) == "unchanged"
    # Three windows a side can never reach p < 0.05: said, not guessed.
    assert throughput_verdict(BASE[:3], tuple(t * 0.5 for t in BASE[:3])) == "inconclusive"
    assert throughput_verdict(BASE, tuple(t * 0.8 for t in BASE), method="bootstrap") \
        == "regressed"


def test_status_changes_and_unmatched_configurations() -> None:
    report = compare([res(BASE), res(BASE, devices=1)],
                     [res(BASE, status="failed"), res(BASE, batch=64)])
    (config,) = report.configs
    assert config.verdict == "broken" and report.regressed == [config]
    assert "child died" in config.note
    assert report.only_baseline == [res(BASE, devices=1).spec.label()]
    assert report.only_current == [res(BASE, batch=64).spec.label()]
    assert compare([res(BASE, status="failed")], [res(BASE)]).configs[0].verdict == "fixed"


def test_fingerprint_differences_are_named() -> None:
    base_env = {"machine_id": "m", "tensorflow": "2.21.0", "git": {"commit": "aaa"},
                "env_vars": {"TF_NUM_INTEROP_THREADS": "1"}}
    cur_env = {"machine_id": "m", "tensorflow": "2.22.0", "git": {"commit": "bbb"},
               "env_vars": {}}
    report = compare([res(BASE, environment=base_env)], [res(BASE, environment=cur_env)])
    warn = {d.field: (d.baseline, d.current) for d in report.warnings}
    assert warn == {"tensorflow": (["2.21.0"], ["2.22.0"]),
                    "env_vars.TF_NUM_INTEROP_THREADS": (["1"], ["(unset)"])}
    info = [d.field for d in report.fingerprint if d.severity == "info"]
    assert info == ["git.commit"]


@pytest.mark.parametrize(("items", "needle"), [
    (["fast"], "--threshold must be a fraction like 5% or 0.05. Received: 'fast'"),
    (["latency=5%"], "unknown metric 'latency'"),
    (["-3%"], "Received: '-3%'"),
])
def test_bad_thresholds_are_refused(items: list[str], needle: str) -> None:
    with pytest.raises((CompareError, ValueError), match=needle):
        Thresholds.parse(items)


def test_memory_threshold_applies_to_both_memories() -> None:
    t = Thresholds.parse(["2%", "memory=10%"])
    assert (t.of("throughput"), t.of("device_memory"), t.of("host_memory")) == \
        (0.02, 0.10, 0.10)


# -- the CLI and its exit codes -----------------------------------------------------------
def write_sweep(root: Path, name: str, results: list[RunResult]) -> Path:
    from bench.results.store import SweepStore, save

    for r in results:
        save(r, SweepStore(root / name).paths(r.spec).result)
    return root / name


def test_compare_cli_exit_codes_and_outputs(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    a = write_sweep(tmp_path, "a", [res(BASE)])
    same = write_sweep(tmp_path, "same", [res(tuple(t + 1 for t in BASE))])
    slow = write_sweep(tmp_path, "slow", [res(tuple(t * 0.8 for t in BASE))])
    assert main(["compare", str(a), str(same)]) == 0
    assert "no regression in 1 configuration" in capsys.readouterr().out
    md, js = tmp_path / "out.md", tmp_path / "out.json"
    code = main(["compare", str(a), str(slow), "--markdown", str(md), "--json", str(js)])
    assert code == Exit.REGRESSION
    assert "REGRESSED" in capsys.readouterr().out
    assert "**REGRESSED**" in md.read_text("utf-8")
    doc = json.loads(js.read_text("utf-8"))
    assert len(doc["regressed"]) == 1
    assert doc["configs"][0]["noise_floor_cv"]["baseline"] == pytest.approx(
        float(np.std(BASE, ddof=1) / np.mean(BASE)))
    assert main(["compare", str(a), str(slow), "--threshold", "throughput=30%",
                 "--threshold", "step_time=30%"]) == 0
    capsys.readouterr()
    for bad in (["compare", str(a), str(tmp_path / "missing")],
                ["compare", str(a), str(slow), "--threshold", "lots"],
                ["compare", str(a), str(slow), "--alpha", "2"],
                ["compare", str(a), "colour=red", "--history", str(tmp_path / "h.sqlite")]):
        assert main(bad) == 2, bad
        assert "Received:" in capsys.readouterr().err
    # A real process, as CI runs it: the exit code is the process's.
    proc = subprocess.run([sys.executable, "-m", "bench", "compare", str(a), str(slow),
                           "--format", "json"], cwd=ROOT, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == Exit.REGRESSION and json.loads(proc.stdout)["regressed"]
    bad = subprocess.run([sys.executable, "-m", "bench", "compare", str(a), str(slow),
                          "--method", "vibes"], cwd=ROOT, capture_output=True, text=True,
                         timeout=60)
    assert bad.returncode == 2 and "vibes" in bad.stderr


# -- real tiny sweeps -----------------------------------------------------------------
def real_spec() -> RunSpec:
    # The full-size MLP at batch 128 steps in a few ms on 2 shared cores: long enough
    # that the injected delay is not swallowed by dispatch overhead, cheap enough to
    # run three times. 10 windows a side: Mann-Whitney can reach p ~ 1e-5, so a real
    # shift is found even when other processes add noise.
    return RunSpec(workload="mlp", strategy="one_device", devices=1, batch=128, repeats=10,
                   max_seconds=0.15, min_steps=3, max_steps=100_000, warmup_steps=5,
                   timeout_s=180.0)


def test_injected_slowdown_is_flagged_and_a_rerun_is_not(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Runs in the order base, same, slow, base: the baseline brackets the other two.

    Its two runs are pooled (a history selection, tag=base), so the baseline sample
    holds the machine's drift over the test, as a nightly's baseline of several runs
    would. Run one after another on a quiet machine, as in CI; other heavy processes
    starting or stopping mid-test can still move a single run by more than 5%.
    """
    spec = real_spec()
    store = str(tmp_path / "history.sqlite")
    for name, slowdown in (("base1", None), ("same", None), ("slow", "0.2"),
                           ("base2", None)):
        if slowdown:
            monkeypatch.setenv(INJECT_SLOWDOWN_VAR, slowdown)
        else:
            monkeypatch.delenv(INJECT_SLOWDOWN_VAR, raising=False)
        assert not run_sweep([spec], tmp_path / name, echo=lambda _: None).problems
        tag = name.rstrip("12")
        assert main(["history", "ingest", str(tmp_path / name), "--tag", tag,
                     "--history", store]) == 0
    capsys.readouterr()
    slowed = load_sweep(tmp_path / "slow").results[0]
    assert slowed.environment["env_vars"][INJECT_SLOWDOWN_VAR] == "0.2"  # recorded

    # When this fails, look at the runs' window throughputs first: other processes that
    # start or stop during the test move whole runs, and the tool reports that truly.
    runs = {n: [round(w.global_throughput) for w in load_sweep(tmp_path / n).results[0]
                .figures.windows] for n in ("base1", "same", "slow", "base2")}
    code = main(["compare", "tag=base", "tag=same", "--history", store])
    same = capsys.readouterr().out
    assert code == 0, f"{same}\nwindow throughputs (examples/s): {runs}"
    assert "REGRESSED" not in same and "DIFFERENT ENVIRONMENTS" not in same
    assert "20/10" in same  # two pooled baseline runs of 10 windows vs one run

    assert main(["compare", "tag=base", "tag=slow", "--history", store,
                 "--format", "json"]) == Exit.REGRESSION, f"window throughputs (examples/s): {runs}"
    report = json.loads(capsys.readouterr().out)
    (config,) = report["configs"]
    verdicts = {m["metric"]: m["verdict"] for m in config["metrics"]}
    assert verdicts["throughput"] == "regressed" and verdicts["step_time"] == "regressed"
    tput = next(m for m in config["metrics"] if m["metric"] == "throughput")
    assert tput["change"] < -0.05
    assert any(d["field"] == f"env_vars.{INJECT_SLOWDOWN_VAR}" and d["severity"] == "warning"
               for d in report["fingerprint"])


def test_json_output_is_strict_when_a_change_is_undefined() -> None:
    base, cur = res(BASE), res(BASE)
    for r in (base, cur):
        assert r.figures is not None
        for w in r.figures.windows:
            w.device_peak_bytes = {"CPU:0": 0}  # a change from 0 bytes has no ratio

    def refuse(constant: str) -> None:
        raise AssertionError(f"non-standard JSON constant {constant}")

    doc = json.loads(compare([base], [cur]).to_json(), parse_constant=refuse)
    memory = next(m for m in doc["configs"][0]["metrics"] if m["metric"] == "device_memory")
    assert memory["change"] is None and memory["verdict"] == "unchanged"


def test_run_to_run_spread_of_a_pooled_baseline_raises_the_threshold() -> None:
    slow = res(tuple(t * 0.85 for t in BASE))
    steady = compare([res(BASE), res(tuple(t * 1.01 for t in BASE))], [slow])
    tput = next(m for m in steady.configs[0].metrics if m.metric == "throughput")
    assert tput.verdict == "regressed" and tput.threshold == pytest.approx(0.05)
    # Two baseline runs 30% apart: another run of the same code may land anywhere near.
    drifting = compare([res(BASE), res(tuple(t * 1.3 for t in BASE))], [slow])
    tput = next(m for m in drifting.configs[0].metrics if m.metric == "throughput")
    assert tput.run_to_run_cv is not None and tput.threshold == pytest.approx(
        2 * tput.run_to_run_cv)
    assert tput.verdict == "unchanged" and "run-to-run CV" in tput.note


def test_a_regression_measured_in_noisy_windows_says_so() -> None:
    report = compare([res(BASE)], [res((700.0, 500.0, 900.0, 600.0, 800.0, 700.0))])
    tput = next(m for m in report.configs[0].metrics if m.metric == "throughput")
    assert tput.verdict == "regressed" and tput.note.startswith("noisy: window CV up to")
