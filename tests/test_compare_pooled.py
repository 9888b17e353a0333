"""bench compare's pooled run-to-run noise and Welch's t, on constructed sweeps whose
noise is known (seeded, no TensorFlow).

Two runs a side measure a configuration's noise with 2 degrees of freedom; pooled over
its family (and its stored sweeps) the same runs decide. Every run has one window, so
the window floor is out of the way and the run-level noise is all there is.
"""

from __future__ import annotations

import math
import shlex
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy.stats import ttest_ind

from bench.cli.common import specs_from_args
from bench.cli.compare import run_compare
from bench.cli.main import build_parser, main
from bench.exits import Exit
from bench.launch.launcher import make_result
from bench.regress.compare import CANNOT_TELL, MeasureComparison, Report, compare
from bench.regress.history import History
from bench.regress.options import POOLINGS
from bench.regress.render import as_markdown, as_table
from bench.results.schema import RunResult
from bench.results.stats.comparison import STUDENT, WELCH
from bench.results.stats.distributions import welch_satterthwaite
from bench.results.stats.spread import LogSpread, noise_differs_p
from bench.results.store import SweepStore, save
from tests.helpers import fake_figures, tiny_spec

ALPHA = 0.05
FAMILY = [(d, b) for d in (1, 2) for b in (32, 64, 128, 256)]  # 8 configurations, one family
OWN, FAMILY_ONLY = POOLINGS.get("own"), POOLINGS.get("family")


def margin(p: float, n: int) -> float:
    """Four binomial standard deviations: a fixed sample this far off is a broken method."""
    return 4.0 * math.sqrt(p * (1.0 - p) / n)


def run(spec_over: dict[str, Any], figure: float, replicate: int,
        env_vars: dict[str, str] | None = None) -> RunResult:
    spec = tiny_spec(repeats=1, **spec_over)
    r = make_result(spec, "ok", None, figures=fake_figures(
        (figure,), replicas=spec.replicas, batch=spec.global_batch),
        environment={"machine_id": "m", "env_vars": env_vars or {}})
    r.replicate = replicate
    return r


def sweep(rng: np.random.Generator, run_sd: float, *, factor: float = 1.0, runs: int = 2,
          configs: list[tuple[int, int]] = FAMILY, sd_of: dict[int, float] | None = None,
          **over: Any) -> list[RunResult]:
    """``runs`` runs of each configuration, log-normal run noise ``run_sd`` (``sd_of``:
    another one for the configurations of that batch), throughput scaled by ``factor``."""
    return [run({"devices": d, "batch": b}, 40.0 * b * factor * math.exp(
                rng.normal(0.0, (sd_of or {}).get(b, run_sd))), i + 1, **over)
            for d, b in configs for i in range(runs)]


def times(report: Report) -> list[MeasureComparison]:
    """The time measure (global_throughput) of every configuration."""
    found = [c.measure("global_throughput") for c in report.configs]
    assert all(m is not None for m in found)
    return [m for m in found if m is not None]


# -- what the guard can vouch for ---------------------------------------------------------------
def test_two_runs_a_side_borrow_nothing_until_the_guard_can_judge_them(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """0.8% run noise, 2 runs a configuration and no stored sweeps: each configuration's
    own evidence has 1 or 2 df, too few for the F test to catch one 3x noisier than its
    family (power below 0.8), so none borrows the family's noise and each says why (a
    plain F test at 0.01 pooled a 3x noisier one 62% of the time, and its true -3%
    change was called REGRESSED 7.4% of the time). With 5 stored sweeps of each, its
    evidence is judged, and the family's pool decides."""
    rng = np.random.default_rng(0)
    a, b = sweep(rng, 0.008), sweep(rng, 0.008)
    for other, df in ((a, 1.0), (b, 2.0)):  # a run on both sides counts once
        report = compare(a, other)
        assert {m.noise_df for m in times(report)} == {df}
        assert all("too few degrees of freedom" in m.noise_from for m in times(report))
    store, none = tmp_path / "history.sqlite", tmp_path / "none.sqlite"
    with History(store) as h:
        for k in range(5):
            h.ingest(stored(tmp_path, f"night{k}", sweep(rng, 0.008)))
    path_a, path_b = stored(tmp_path, "a", a), stored(tmp_path, "b", b)
    report, _ = run_compare(str(path_a), str(path_b), history_path=store)
    pooled = [m for m in times(report) if "configuration(s) of" in m.noise_from]
    alone = [m for m in times(report) if m not in pooled]
    # Pooled: 7 df a configuration (2 + 5) over those the guard kept; a configuration
    # whose own evidence is the noisier, or that differs, keeps its own 7 df.
    assert len(pooled) >= 3 and len({m.noise_df for m in pooled}) == 1, times(report)
    assert pooled[0].noise_df >= 5 * 7.0 and pooled[0].noise_df % 7 == 0
    assert all(m.noise_df == 7.0 for m in alone)
    assert {m.verdict for m in times(report)} == {"ok"} and not report.regressed

    # The command line says the same, with its exit codes.
    assert main(["compare", str(path_a), str(path_a), "--history", str(none)]) \
        == Exit.CANNOT_TELL
    assert "bench ab would decide" in capsys.readouterr().out
    assert main(["compare", str(path_a), str(path_b), "--history", str(store)]) == Exit.OK
    out = capsys.readouterr().out
    assert "no regression in 8 configuration(s)" in out
    assert f"(t, df {pooled[0].noise_df:.0f})" in out
    with pytest.raises(SystemExit) as usage:
        main(["compare", str(path_a), str(path_a), "--pool", "everything"])
    assert usage.value.code == Exit.USAGE


def test_a_real_slowdown_is_caught_and_an_unchanged_sweep_is_not_called_regressed() -> None:
    """5% run noise, 4 runs a side (6 df a configuration: enough for the guard), 8
    configurations a sweep, 6 seeded sweeps: a true 30% slowdown is caught in every
    configuration, pooled or alone, and unchanged code is called regressed at most at
    alpha's rate; the pool lends its df where it may."""
    caught = {"all": 0, "own": 0}
    false_alarms = configs = lent = 0
    for seed in range(6):
        rng = np.random.default_rng(100 + seed)
        base = sweep(rng, 0.05, runs=4)
        slow, same = sweep(rng, 0.05, factor=0.7, runs=4), sweep(rng, 0.05, runs=4)
        for name in caught:
            caught[name] += sum(m.verdict == "regressed" for m in times(
                compare(base, slow, pooling=POOLINGS.get(name))))
        unchanged = times(compare(base, same))
        false_alarms += sum(m.verdict == "regressed" for m in unchanged)
        lent += sum(m.noise_df > 6 for m in unchanged)
        configs += len(unchanged)
    assert caught["all"] >= 0.97 * configs and caught["own"] >= 0.97 * configs, caught
    assert false_alarms / configs <= ALPHA + margin(ALPHA, configs), false_alarms
    assert lent >= configs / 4, lent


# -- Welch where the sides differ ---------------------------------------------------------------
def one_config(figures: list[float], env_vars: dict[str, str] | None = None
               ) -> list[RunResult]:
    return [run({"devices": 1, "batch": 32}, f, i + 1, env_vars) for i, f in enumerate(figures)]


def test_welch_where_the_sides_differ_in_count_or_noise() -> None:
    rng = np.random.default_rng(5)
    base6, cur2 = 1000 * np.exp(rng.normal(0, 0.03, 6)), 950 * np.exp(rng.normal(0, 0.03, 2))
    (m,) = times(compare(one_config(list(base6)), one_config(list(cur2)), pooling=OWN))
    ref = ttest_ind(np.log(cur2), np.log(base6), equal_var=False)
    assert m.test == WELCH and m.p_value == pytest.approx(ref.pvalue, rel=1e-9)
    assert m.noise_df == pytest.approx(ref.df, rel=1e-9) and m.noise_df < 6

    # Equal counts, like noise: Student's t on the common noise, as scipy computes it.
    b4, c4 = 1000 * np.exp(rng.normal(0, 0.03, 4)), 1000 * np.exp(rng.normal(0, 0.03, 4))
    (m,) = times(compare(one_config(list(b4)), one_config(list(c4)), pooling=OWN))
    ref = ttest_ind(np.log(c4), np.log(b4), equal_var=True)
    assert (m.test, m.noise_df) == (STUDENT, 6.0)
    assert m.p_value == pytest.approx(ref.pvalue, rel=1e-9)

    # Equal counts, noise 1% against 20%: the F test sends it to Welch.
    quiet, loud = 1000 * np.exp(rng.normal(0, 0.01, 6)), 1000 * np.exp(rng.normal(0, 0.2, 6))
    (m,) = times(compare(one_config(list(quiet)), one_config(list(loud)), pooling=OWN))
    assert m.test == WELCH and m.noise_df < 10

    # Pooled over the family, Welch keeps each side's own pooled noise: more df than
    # alone where the pool lends (8 df of its own a configuration: judged by the guard).
    base, cur = sweep(rng, 0.03, runs=6), sweep(rng, 0.03, runs=4)
    pooled, alone = times(compare(base, cur)), times(compare(base, cur, pooling=OWN))
    assert {m.test for m in pooled} == {m.test for m in alone} == {WELCH}
    assert max(m.noise_df for m in pooled) > 2 * max(m.noise_df for m in alone)


def test_the_spreads_and_tests_the_pooling_is_made_of() -> None:
    logs, groups = [0.0, 0.2, 1.0, 1.4, 5.0], ["a", "a", "b", "b", "c"]
    s = LogSpread.of(logs, groups)  # each group around its own mean; a single run adds 0 df
    assert (s.df, s.ss) == (2, pytest.approx(0.02 + 0.08))
    assert (s + LogSpread(0.3, 1)).var == pytest.approx(0.4 / 3)
    assert LogSpread().var is None and noise_differs_p(s, LogSpread()) is None
    assert noise_differs_p(LogSpread(0.0, 3), LogSpread(0.0, 5)) == 1.0  # deterministic
    assert noise_differs_p(LogSpread(0.0, 3), LogSpread(0.1, 5)) == 0.0
    assert noise_differs_p(LogSpread(1.0, 4), LogSpread(1.0, 4)) == pytest.approx(1.0)
    assert noise_differs_p(LogSpread(40.0, 4), LogSpread(1.0, 4)) < 0.01
    # Welch-Satterthwaite of one part is that part's df; of two equal parts, their sum.
    assert welch_satterthwaite([(0.3, 7)]) == pytest.approx(7.0)
    assert welch_satterthwaite([(0.3, 5), (0.3, 5)]) == pytest.approx(10.0)


# -- what joins a pool, and what does not ------------------------------------------------------
def test_a_configuration_whose_noise_differs_keeps_its_own() -> None:
    rng = np.random.default_rng(9)
    loud = {256: 0.4}  # the two b=256 configurations: 40% run noise among 1% ones
    base, cur = sweep(rng, 0.01, sd_of=loud, runs=4), sweep(rng, 0.01, sd_of=loud, runs=4)
    report = compare(base, cur)
    quiet_dfs = []
    for c, m in zip(report.configs, times(report), strict=True):
        if c.label.endswith("b=256"):
            assert "not pooled" in m.noise_from and m.noise_df == 6.0, m
        else:  # 6 quiet configurations of 6 df: pooled, or alone where their own is noisier
            pooled = "6 configuration(s) of" in m.noise_from
            assert (m.noise_df == 36.0) if pooled else (m.noise_df <= 6.0), m
            assert m.verdict == "ok", m
            quiet_dfs.append(m.noise_df)
    assert quiet_dfs.count(36.0) >= 2, quiet_dfs
    assert not report.regressed


def stored(root: Path, name: str, results: list[RunResult]) -> Path:
    for r in results:
        save(r, SweepStore(root / name).paths(r.spec, r.replicate).result)
    return root / name


def test_stored_sweeps_of_the_configuration_join_once(tmp_path: Path) -> None:
    rng = np.random.default_rng(4)
    only = [(1, 32)]  # one configuration: no family to pool with
    a = stored(tmp_path, "a", sweep(rng, 0.01, configs=only))
    b = stored(tmp_path, "b", sweep(rng, 0.01, configs=only))
    store = tmp_path / "history.sqlite"
    with History(store) as h:
        for k in range(5):
            h.ingest(stored(tmp_path, f"night{k}", sweep(rng, 0.01, configs=only)))
        h.ingest(a)  # on a side and stored: counted once
        h.ingest(stored(tmp_path, "other", sweep(rng, 0.01, configs=[(2, 32)])))  # not it
    alone, _ = run_compare(str(a), str(b), history_path=store, pooling=FAMILY_ONLY)
    pooled, _ = run_compare(str(a), str(b), history_path=store)
    (m_alone,), (m,) = times(alone), times(pooled)
    assert m_alone.noise_df == 2.0 and m_alone.noise_from == "df 2: its own runs"
    assert m.noise_df == 2.0 + 5 and "5 stored sweep(s)" in m.noise_from
    assert m.verdict == "ok" and pooled.history_configs == 1

    # Stored sweeps far noisier than these runs are left out, and say so.
    with History(store) as h:
        for k in range(5):
            h.ingest(stored(tmp_path, f"loud{k}", sweep(rng, 0.5, configs=only)))
    (m,) = times(run_compare(str(a), str(b), history_path=store)[0])
    assert m.noise_df == 2.0 and "stored sweep(s) left out" in m.noise_from


# -- cannot tell: what would decide it ------------------------------------------------------------
def test_cannot_tell_names_the_bench_ab_command_that_decides_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = stored(tmp_path, "base", one_config([1000.0, 1100.0]))
    cur = stored(tmp_path, "cur", one_config([1050.0, 950.0], {"TF_ENABLE_ONEDNN_OPTS": "0"}))
    report, _ = run_compare(str(base), str(cur), history_path=tmp_path / "none.sqlite")
    (config,) = report.configs
    assert config.verdict == CANNOT_TELL and report.exit_code == Exit.CANNOT_TELL
    argv = shlex.split(config.ab_command)
    assert argv[:4] == ["python", "-m", "bench", "ab"]
    args = build_parser().parse_args(argv[3:])  # what `bench ab` reads from it
    (spec,) = specs_from_args(args)
    assert spec.key() == config.key
    assert (args.baseline_env, args.candidate_env) == ([], [("TF_ENABLE_ONEDNN_OPTS", "0")])
    assert f"{config.label}: {config.ab_command}" in as_table(report)
    assert f"{config.label}: `{config.ab_command}`" in as_markdown(report)
    assert main(["compare", str(base), str(cur), "--history",
                 str(tmp_path / "none.sqlite")]) == Exit.CANNOT_TELL
    out = capsys.readouterr().out
    assert "bench ab would decide" in out and config.ab_command in out
