"""Result schema: round trip, units, versions, atomic never-overwrite files."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import pytest

from bench.errors import SchemaError
from bench.results.samples import coefficient_of_variation, step_time_stats
from bench.results.schema import SCHEMA_VERSION, STATUSES, RunResult, migrate, units_table
from bench.results.store import load, save
from tests.helpers import STORED_SWEEPS, fake_result


@pytest.mark.parametrize("status", STATUSES)
def test_round_trip_every_status(tmp_path: Path, status: str) -> None:
    r = fake_result(status)
    path = tmp_path / f"{r.key}.json"
    save(r, path)
    back = load(path)
    assert back == r
    doc = json.loads(path.read_text())
    assert doc["schema_version"] == SCHEMA_VERSION
    assert doc["spec"]["workload"] == "mlp"
    assert "throughput" in doc["definitions"]


def test_units_cover_figures() -> None:
    units = units_table(RunResult)
    assert units["figures.global_throughput"] == "examples/s"
    assert units["figures.per_replica_throughput"] == "examples/s per replica"
    assert units["figures.windows.step_time.p99_s"] == "s"
    assert units["figures.memory.device_peak_bytes"] == "bytes"
    assert units["figures.startup.launch_to_first_step_s"] == "s"


def test_never_overwrites(tmp_path: Path) -> None:
    r = fake_result()
    path = tmp_path / "r.json"
    save(r, path)
    before = path.read_text()
    with pytest.raises(FileExistsError):
        save(fake_result("failed"), path)
    assert path.read_text() == before
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]  # no temp file left


@pytest.mark.parametrize("version", [0, SCHEMA_VERSION + 1, None])
def test_other_schema_versions_refused(tmp_path: Path, version: object) -> None:
    doc = fake_result().to_dict()
    doc["schema_version"] = version
    path = tmp_path / "old.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(SchemaError, match=r"old\.json.*schema_version"):
        load(path)


def schema_1(doc: dict) -> dict:
    """``doc`` as schema 1 wrote it: the framework's import was ``import_tf_s``."""
    startup = doc["figures"]["startup"]
    startup["import_tf_s"] = startup.pop("import_framework_s")
    doc["units"]["figures.startup.import_tf_s"] = doc["units"].pop(
        "figures.startup.import_framework_s")
    return {**doc, "schema_version": 1}


def test_schema_1_import_tf_s_loads_as_the_framework_import(tmp_path: Path) -> None:
    r = fake_result()
    doc = schema_1(r.to_dict())
    path = tmp_path / "v1.json"
    path.write_text(json.dumps(doc))
    back = load(path)
    assert back == r
    assert back.figures is not None
    assert back.figures.startup.import_framework_s == r.figures.startup.import_framework_s
    assert "import_tf_s" in doc["figures"]["startup"]  # the caller's document unchanged
    assert migrate(doc)["schema_version"] == SCHEMA_VERSION


def test_stored_schema_1_results_load() -> None:
    """Every result of the stored sweeps (schema 1) loads, its import time kept."""
    seen = 0
    with tarfile.open(STORED_SWEEPS) as tar:
        for member in tar.getmembers():
            if not (member.isfile() and "/results/" in member.name
                    and member.name.endswith(".json")):
                continue
            fh = tar.extractfile(member)
            assert fh is not None
            doc = json.load(fh)
            result = RunResult.from_dict(doc)
            seen += 1
            startup = (doc.get("figures") or {}).get("startup")
            if startup is not None and result.figures is not None:
                assert doc["schema_version"] == 1
                assert result.figures.startup.import_framework_s == startup["import_tf_s"]
    assert seen > 100


def test_corrupt_files_named(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(SchemaError, match="bad.json"):
        load(bad)
    doc = fake_result().to_dict()
    doc["figures"]["surprise"] = 1
    odd = tmp_path / "odd.json"
    odd.write_text(json.dumps(doc))
    with pytest.raises(SchemaError, match="odd.json.*surprise"):
        load(odd)


def test_bad_status_rejected() -> None:
    with pytest.raises(SchemaError, match="Received: status='great'"):
        fake_result().__class__(**{**fake_result().__dict__, "status": "great"})


@pytest.mark.parametrize("reason", [None, "", "  "])
def test_non_ok_status_needs_a_reason(reason: str | None) -> None:
    with pytest.raises(SchemaError, match="reason must explain a 'failed' status"):
        fake_result().__class__(**{**fake_result("failed").__dict__, "reason": reason})


def test_step_time_stats_known_values() -> None:
    st = step_time_stats([float(i) for i in range(1, 101)])
    assert st.median_s == pytest.approx(50.5)
    assert st.p90_s == pytest.approx(90.1)
    assert st.p99_s == pytest.approx(99.01)
    assert st.mean_s == pytest.approx(50.5)
    assert (st.min_s, st.max_s, st.samples) == (1.0, 100.0, 100)
    with pytest.raises(ValueError):
        step_time_stats([])
    assert coefficient_of_variation([10.0, 10.0]) == 0.0
    assert coefficient_of_variation([9.0, 11.0]) == pytest.approx(0.1414, rel=1e-3)


def test_failure_reasons_say_what_went_wrong() -> None:
    from bench.child.main import failure_report
    from bench.results.payload import TaskReport

    tf_style = AttributeError("in user code:\n\n    File x.py, line 3\n\n"
                              "    AttributeError: 'Thing' object has no attribute 'h'\n")
    assert failure_report(tf_style) == TaskReport(
        "failed", "AttributeError: AttributeError: 'Thing' object has no attribute 'h'")
    assert failure_report(ValueError("bad batch\nmore")).reason == "ValueError: bad batch"
    assert failure_report(MemoryError()).status == "oom"
    sharded = AttributeError("in user code:\n 'ShardedVariable' object has no attribute 'handle'")
    known = failure_report(sharded)
    assert known.status == "unsupported" and "partitioner" in (known.reason or "")
