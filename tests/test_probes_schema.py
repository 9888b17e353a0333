"""Probe figures in the schema and the spec, the peak cache, MFU and the oom note
(no TensorFlow)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench.child.probes import peak
from bench.errors import SpecError
from bench.launch.memory_fit import note_largest_fit
from bench.results.schema import (
    AllReduceFigures,
    AllReducePoint,
    Communication,
    RunResult,
    units_table,
)
from bench.spec import RunSpec

BASE: dict[str, Any] = {"workload": "mlp", "strategy": "mirrored", "devices": 2,
                        "batch": 32, "size": "tiny"}


def spec(**over: Any) -> RunSpec:
    return RunSpec(**{**BASE, **over})


def result(status: str = "ok", **over: Any) -> RunResult:
    s = spec(**over)
    reason = None if status == "ok" else f"{status} for a test"
    return RunResult(key=s.key(), spec=s, status=status, reason=reason, replicas=s.replicas,
                     global_batch=s.global_batch, per_replica_batch=s.per_replica_batch)


def test_spec_modes_and_profile_steps_are_validated_with_the_received_value() -> None:
    assert spec().mode == "train" and spec().profile_steps == 0
    assert spec(mode="allreduce").label().endswith("allreduce")
    assert spec(mode="allreduce").key() != spec().key()
    with pytest.raises(SpecError, match=r"Received: mode='ring'"):
        spec(mode="ring")
    with pytest.raises(SpecError, match=r"Received: profile_steps=-1"):
        spec(profile_steps=-1)
    with pytest.raises(SpecError, match=r"Received: profile_steps=3"):
        spec(mode="allreduce", profile_steps=3)
    with pytest.raises(SpecError, match=r"Received: allreduce_max_bytes=100"):
        spec(allreduce_max_bytes=100)
    with pytest.raises(SpecError, match=r"independent copies never communicate\. "
                                        r"Received: mode='allreduce'"):
        spec(strategy="independent", mode="allreduce")


def test_probe_figures_round_trip_with_units(tmp_path: Path) -> None:
    r = result(mode="allreduce")
    r.allreduce = AllReduceFigures(
        implementation="MirroredStrategy/CollectiveAllReduce", replicas=2, dtype="float32",
        warmup_iterations=3, points=[AllReducePoint("1 KiB", 1024, 1, 1e-3, 2e-3, 1.024e6,
                                                    1.024e6, 20)])
    back = RunResult.from_dict(json.loads(json.dumps(r.to_dict())))
    assert back.allreduce == r.allreduce
    units = r.to_dict()["units"]
    assert units["allreduce.points.busbw"] == "bytes/s"
    assert units["allreduce.points.time_median_s"] == "s"
    assert "busbw = algbw x 2(n-1)/n" in r.to_dict()["definitions"]["allreduce"]
    table = units_table(Communication)
    assert table["collective_s"] == "s" and table["comm_fraction"].startswith("ratio")


def test_a_result_written_before_the_probe_fields_still_loads() -> None:
    doc = result().to_dict()
    for name in ("allreduce",):
        doc.pop(name)
    for name in ("mode", "profile_steps", "allreduce_max_bytes"):
        doc["spec"].pop(name)
    back = RunResult.from_dict(doc)
    assert back.allreduce is None and back.spec.mode == "train"


class FakeTF:
    """Just what the cache key needs; it has no matmul, so measuring would fail."""

    __version__ = "0.0-test"

    class config:  # mirrors tf.config.threading
        class threading:
            @staticmethod
            def get_intra_op_parallelism_threads() -> int:
                return 0


def test_peak_flops_come_from_the_cache_without_measuring(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STRATBENCH_CACHE_DIR", str(tmp_path))
    key = peak.cache_key(FakeTF, "/cpu:0")
    peak.cache_path().write_text(json.dumps({key: {"flops_per_s": {"float32": 4.0e11}}}))

    def no_measuring(*_: Any, **__: Any) -> float:
        raise AssertionError("measured although the cache has the figure")

    monkeypatch.setattr(peak, "measure_dtype", no_measuring)
    assert peak.peak_flops(FakeTF, "/cpu:0") == {"float32": 4.0e11}
    assert peak.cache_key(FakeTF, "/gpu:0") != key  # another device kind, another entry


def test_a_refresh_keeps_the_higher_peak_per_dtype(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STRATBENCH_CACHE_DIR", str(tmp_path))
    key = peak.cache_key(FakeTF, "/cpu:0")
    peak.cache_path().write_text(json.dumps(
        {key: {"flops_per_s": {"float32": 4.0e11, "bfloat16": 1.0e11}}}))
    measured = {"float32": 1.0e11, "bfloat16": 8.0e11, "float16": 2.0e11}
    monkeypatch.setattr(peak, "measure_dtype", lambda _tf, dtype, _dev: measured[dtype])
    # A busy machine reads float32 low: the cached 4e11 stays; bfloat16 improves.
    expected = {"float32": 4.0e11, "bfloat16": 8.0e11, "float16": 2.0e11}
    assert peak.peak_flops(FakeTF, "/cpu:0", refresh=True) == expected
    assert peak.peak_flops(FakeTF, "/cpu:0") == expected  # and it is what the cache holds


def test_mfu_is_achieved_over_peak_times_physical_devices() -> None:
    # 1e9 FLOP/example x 100 examples/s = 1e11 FLOP/s; 2 GPUs of 2.5e11 -> 0.2.
    assert peak.mfu(1e9, 100.0, 2.5e11, 2) == (pytest.approx(0.2), 5e11)
    assert peak.mfu(1e9, 100.0, None, 1) == (None, None)


def test_oom_result_names_the_largest_batch_that_fit() -> None:
    ran = [result(batch=32), result(batch=64), result("oom", batch=256),
           result(batch=128, devices=4),  # another configuration: not a sibling
           result(batch=96, precision="mixed_bfloat16")]
    oom = result("oom", batch=128)
    oom.reason = "ResourceExhaustedError: OOM when allocating"
    note_largest_fit(oom, ran)
    assert oom.reason is not None
    assert oom.reason.startswith("largest batch of this configuration that fit in this "
                                 "sweep: global batch 64 (32 per replica)")
    assert oom.reason.endswith("OOM when allocating")
    lonely = note_largest_fit(result("oom", batch=64, devices=4), ran[:1])
    assert "no smaller batch" in (lonely.reason or "")
    ok = result(batch=32)
    assert note_largest_fit(ok, ran).reason is None  # only oom results are touched


def test_a_failing_profile_costs_its_figures_not_the_run(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from types import SimpleNamespace

    from bench.child.probes import hooks
    from tests.helpers import fake_figures

    def broken_capture(*_: Any, **__: Any) -> Any:
        raise RuntimeError("another profiler session is active")

    monkeypatch.setattr(hooks, "fingerprint_entry", lambda *_, **__: {"device": "/cpu:0"})
    monkeypatch.setattr(hooks, "peak_flops", lambda *_: {"float32": 1e12})
    monkeypatch.setattr(hooks, "capture", broken_capture)
    trainer = SimpleNamespace(
        spec=spec(profile_steps=3), tf=None, optimizer=SimpleNamespace(name="adam"),
        devices=SimpleNamespace(kind="CPU", names=["/cpu:0", "/cpu:1"]))
    figures = fake_figures()
    out = hooks.after_windows(trainer, figures, tmp_path / "p")
    assert figures.communication is None
    assert figures.mfu == pytest.approx(600.0 * figures.global_throughput / 1e12)
    assert out.reason is not None and "another profiler session is active" in out.reason
