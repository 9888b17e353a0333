"""Keras 3 on JAX beside tf.distribute: both lanes answer one place.

The backend is not a variant (bench.spec): data_parallel on JAX and mirrored on
TensorFlow train the same model, so one place compares them (stored results here);
the other lane's configuration joins the place's session in a process of its own
(bench.launch.groups), and `bench ab` measures a side's KERAS_BACKEND as a duet.
"""

from __future__ import annotations

import importlib.util
import itertools
from pathlib import Path

import pytest

from bench.answers.recommend import Recommendation
from bench.errors import SpecError
from bench.launch.arms import shareable_reason
from bench.launch.duet import run_duet
from bench.launch.groups import answer_key, sweep_units
from bench.launch.session import run_session
from bench.regress.interleave import Side
from bench.regress.window_pairs import pair_mode
from bench.results.schema import RunResult
from bench.results.stats.settlement import FASTER, NOT_SETTLED
from bench.spec import lane_of, on_lane
from reports.report import build_from_results
from tests.gpu_fakes import cards, detected
from tests.helpers import bench, replicated, tiny_spec

needs_jax = pytest.mark.skipif(importlib.util.find_spec("jax") is None,
                               reason="jax is not installed (the jax extra)")


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


JAX = tiny_spec(strategy="data_parallel", devices=2, backend="jax")
TF = tiny_spec(strategy="mirrored", devices=2)


def test_the_other_lane_joins_the_places_session_in_a_process_of_its_own(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert answer_key(JAX) == answer_key(TF)
    assert sweep_units([TF, JAX]) == [(TF, JAX)]
    assert shareable_reason(JAX) is not None  # never an arm of TensorFlow's process
    assert shareable_reason(JAX, member=True) is None
    assert shareable_reason(JAX, alone=True) is None  # a duet's side
    # A strategy asked on the other lane (unsupported there) joins no session.
    wrong = [TF.replace(backend="jax"), JAX.replace(backend="tf")]
    assert sweep_units([TF, JAX, *wrong]) == [(TF, JAX), (wrong[0],), (wrong[1],)]
    # Without a TensorFlow arm there is no session to join: each runs alone.
    one = JAX.replace(devices=1)
    assert sweep_units([JAX, one]) == [(JAX,), (one,)]
    # Another place (batch) keeps its own unit.
    other = JAX.replace(batch=64)
    assert sweep_units([TF, JAX, other]) == [(TF, JAX), (other,)]
    # On GPUs a process waiting for its turn would keep its memory: alone there.
    with detected(cards(2), tmp_path / "bin", monkeypatch):
        assert sweep_units([TF, JAX]) == [(TF,), (JAX,)]
        assert "keeps its GPU memory" in (shareable_reason(JAX, member=True) or "")


def test_keras_backend_on_a_side_moves_it_to_that_lane() -> None:
    assert lane_of({}) is None and lane_of({"TF_CPP_MIN_LOG_LEVEL": "2"}) is None
    assert lane_of({"KERAS_BACKEND": "jax"}) == "jax"
    assert lane_of({"KERAS_BACKEND": "tensorflow"}) == "tf"
    with pytest.raises(SpecError, match="KERAS_BACKEND='torch'"):
        lane_of({"KERAS_BACKEND": "torch"})
    # mirrored <-> data_parallel(jax); one_device -> data_parallel on its one device
    assert on_lane(TF, "jax") == JAX
    assert on_lane(JAX, "tf") == TF
    assert on_lane(TF, "tf") is TF
    assert on_lane(tiny_spec(strategy="one_device", devices=1), "jax") == JAX.replace(devices=1)
    # The strategy's own knobs go back to their defaults on the other lane.
    hier = TF.replace(cross_device_ops="hierarchical_copy")
    assert on_lane(hier, "jax") == JAX
    with pytest.raises(SpecError, match="strategy central_storage has no counterpart"):
        on_lane(tiny_spec(strategy="central_storage", devices=2), "jax")
    side = Side("candidate", {"KERAS_BACKEND": "jax"}, {"widths": [48, 48]})
    assert side.spec(TF) == JAX.replace(params={"widths": [48, 48]})
    assert Side("baseline").spec(TF) is TF


def test_a_lane_change_is_measured_as_a_duet() -> None:
    baseline, candidate = Side("baseline"), Side("candidate", {"KERAS_BACKEND": "jax"})
    mode, why = pair_mode("auto", TF, baseline, candidate)
    assert mode == "duet", why
    # Back to TensorFlow on both sides: the same process can hold both.
    same = Side("candidate", {"KERAS_BACKEND": "tensorflow"})
    assert pair_mode("auto", TF, baseline, same)[0] == "duet"  # its env differs
    assert pair_mode("auto", TF, baseline, Side("candidate"))[0] == "windows"


def test_a_lane_without_a_counterpart_is_a_usage_error() -> None:
    out = bench("ab", "--workload", "mlp", "--strategy", "central_storage", "--devices", "2",
                "--batch", "32", "--candidate-env", "KERAS_BACKEND=jax", "--budget", "10s")
    assert out.returncode == 2, out.stderr[-2000:]
    assert "central_storage has no counterpart" in out.stderr
    assert "Traceback" not in out.stderr


@needs_jax
@pytest.mark.logical_cpu
def test_mirrored_and_data_parallel_jax_take_turns(tmp_path: Path) -> None:
    # A duet (bench ab's lane change) and a session with the JAX lane as its member
    # (bench run's place holding both lanes), each measured for real.
    a, b = run_duet([TF, JAX], [tmp_path / "a.log", tmp_path / "b.log"], rounds=3, seed=5)
    c, d = run_session([TF, JAX], tmp_path / "s.log", rounds=3, seed=5)
    for tf_result, jax_result in ((a, b), (c, d)):
        assert tf_result.status == jax_result.status == "ok", (
            tf_result.reason, jax_result.reason)
        ti, ji = tf_result.interleaved, jax_result.interleaved
        assert ti is not None and ji is not None and ti.session == ji.session
        assert tf_result.figures is not None and jax_result.figures is not None
        assert len(tf_result.figures.windows) == len(jax_result.figures.windows) == 3
        assert jax_result.environment["backend"] == "jax"
        assert jax_result.environment["frameworks_loaded"] == ["jax"]
        # Turns: no window of one lane overlaps a window of the other.
        spans = sorted((w.start_ts, w.end_ts) for r in (tf_result, jax_result)
                       for w in r.figures.windows)
        assert all(end <= start for (_, end), (start, _) in itertools.pairwise(spans))
