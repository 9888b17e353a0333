"""Keras 3 on JAX beside tf.distribute: both lanes answer one place.

The backend is not a variant (bench.spec): data_parallel on JAX and mirrored on
TensorFlow train the same model, so one place compares them; each lane keeps its own
sessions (the sweep's units, bench.launch.groups). Stored results only.
"""

from __future__ import annotations

from pathlib import Path

from bench.launch.groups import answer_key
from bench.results.schema import RunResult
from bench.results.stats import FASTER, NOT_SETTLED
from reports.recommend import Recommendation
from reports.report import build_from_results
from tests.helpers import replicated, tiny_spec


def _answer(results: list[RunResult], tmp_path: Path) -> Recommendation:
    report = build_from_results(results, tmp_path)
    (workload,) = report.machines[0].workloads
    (rec,) = workload.recommendations
    return rec


def test_the_jax_lane_and_the_tf_lane_answer_one_place_with_an_interval(
        tmp_path: Path) -> None:
    jax = replicated("data_parallel", 2, 64, 30_000.0, runs=3, run_cv=0.02, backend="jax")
    tf = replicated("mirrored", 2, 64, 20_000.0, runs=3, run_cv=0.02)
    rec = _answer([*jax, *tf], tmp_path)
    assert {c.key for c in rec.ranking.ok_configs()} == {jax[0].key, tf[0].key}
    assert rec.kind == FASTER and rec.best is not None and rec.best.key == jax[0].key
    # mirrored (tf) against the answer: 2/3 of it, its interval well below 1.
    (s,) = rec.settlements.values()
    assert s.evidence == "runs" and s.high is not None and s.high < 0.8, s
    assert rec.best.choice == "data_parallel(jax) on 2 devices"


def test_lanes_within_the_noise_are_not_ranked(tmp_path: Path) -> None:
    jax = replicated("data_parallel", 2, 64, 20_400.0, runs=2, run_cv=0.2, backend="jax")
    tf = replicated("mirrored", 2, 64, 20_000.0, runs=2, run_cv=0.2)
    assert _answer([*jax, *tf], tmp_path).kind == NOT_SETTLED


def test_each_lane_keeps_its_own_sessions() -> None:
    jax = tiny_spec(strategy="data_parallel", devices=2, backend="jax")
    tf = tiny_spec(strategy="mirrored", devices=2)
    assert answer_key(jax) != answer_key(tf)
    assert answer_key(tf) == answer_key(tiny_spec(strategy="central_storage", devices=2))
