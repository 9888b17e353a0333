"""The history store, its CLI and the nightly report, on hand-built results (no TensorFlow)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from bench.cli.main import main
from bench.exits import Exit
from bench.launch.launcher import make_result
from bench.regress.history import STORE_VERSION, History, HistoryError, Selection
from bench.regress.nightly import report_nightly
from bench.results.schema import RunResult
from bench.results.store import SweepStore, save
from tests.helpers import fake_figures, tiny_spec


def env(commit: str = "c0ffee11", tf: str = "2.21.0", machine: str = "box-a") -> dict[str, Any]:
    return {"machine_id": machine, "host": "h", "cpu_model": "Test CPU", "cpu_cores": 2,
            "tensorflow": tf, "git": {"commit": commit, "dirty": False}, "env_vars": {}}


def result(throughputs: tuple[float, ...], *, started: str = "2026-11-20T01:00:00+00:00",
           environment: dict[str, Any] | None = None, status: str = "ok",
           **spec_over: Any) -> RunResult:
    spec = tiny_spec(repeats=len(throughputs), **spec_over)
    figures = fake_figures(throughputs, replicas=spec.replicas, batch=spec.global_batch) \
        if status == "ok" else None
    r = make_result(spec, status, None if status == "ok" else "broke for a test",
                    figures=figures, environment=environment or env())
    r.started_at = started
    return r


def sweep(root: Path, name: str, results: list[RunResult]) -> Path:
    d = root / name
    for r in results:
        save(r, SweepStore(d).paths(r.spec).result)
    return d


STEADY = (1000.0, 1010.0, 990.0, 1005.0, 995.0, 1002.0)
SLOW = tuple(t * 0.8 for t in STEADY)


def test_ingest_is_idempotent_and_indexes_every_axis(tmp_path: Path) -> None:
    a = sweep(tmp_path, "a", [result(STEADY, devices=1), result(STEADY, devices=2)])
    b = sweep(tmp_path, "b", [result(STEADY, devices=2, started="2026-11-21T01:00:00+00:00",
                                     environment=env(commit="deadbeef", tf="2.22.0"))])
    with History(tmp_path / "h.sqlite") as h:
        first = h.ingest(a, tag="nightly")
        again = h.ingest(a, tag="nightly")
        h.ingest(b)
        assert (first.added, first.already, first.skipped) == (2, 0, [])
        assert (again.added, again.already) == (0, 2)
        assert len(h.rows()) == 3
        assert len(h.rows(Selection.parse("commit=dead"))) == 1
        assert len(h.rows(Selection.parse("tf=2.21.0"))) == 2
        assert len(h.rows(Selection.parse("machine=box-a,tag=nightly"))) == 2
        assert len(h.rows(Selection.parse("since=2026-11-21"))) == 1
        key = result(STEADY, devices=2).spec.key()
        assert {r.spec_key for r in h.rows(Selection.parse(f"key={key}"))} == {key}
        assert [s.path for s in h.sweeps()] == [str(a.resolve()), str(b.resolve())]
        assert h.rows(Selection.parse("sweep=latest"))[0].git_commit == "deadbeef"
        assert len(h.rows(Selection.parse("sweep=previous"))) == 2
        loaded, warnings = h.results(Selection.parse("sweep=latest"))
        assert not warnings and loaded[0].figures is not None
        assert [w.global_throughput for w in loaded[0].figures.windows] == list(STEADY)
    # The store survives a reopen and still refuses duplicates.
    with History(tmp_path / "h.sqlite") as h:
        assert h.ingest(b).already == 1 and len(h.rows()) == 3


def test_corrupt_result_files_are_named_and_skipped(tmp_path: Path) -> None:
    d = sweep(tmp_path, "s", [result(STEADY)])
    (d / "results" / "truncated.json").write_text('{"schema_version": 1, "key": ', "utf-8")
    doc = json.loads(next((d / "results").glob("mlp*.json")).read_text("utf-8"))
    doc["schema_version"] = 99
    (d / "results" / "future.json").write_text(json.dumps(doc), "utf-8")
    with History(tmp_path / "h.sqlite") as h:
        rep = h.ingest(d)
    assert rep.added == 1
    assert len(rep.skipped) == 2
    assert any("truncated.json" in s and "unreadable" in s for s in rep.skipped)
    assert any("future.json" in s and "schema_version 99" in s for s in rep.skipped)
    code = main(["history", "ingest", str(d), "--history", str(tmp_path / "h2.sqlite")])
    assert code == 0


def test_store_version_and_bad_files_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite"
    History(path).close()
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == STORE_VERSION
        db.execute(f"PRAGMA user_version = {STORE_VERSION + 1}")
    with pytest.raises(HistoryError, match=f"version {STORE_VERSION + 1} is not supported"):
        History(path)
    junk = tmp_path / "junk.sqlite"
    junk.write_text("this is not a database, just text " * 100, "utf-8")
    with pytest.raises(HistoryError, match="not a stratbench history store"):
        History(junk)


@pytest.mark.parametrize(("text", "needle"), [
    ("colour=red", "unknown selection key 'colour'"),
    ("commit", "KEY=VALUE"),
])
def test_bad_selections_name_the_problem(text: str, needle: str) -> None:
    with pytest.raises(HistoryError, match=needle):
        Selection.parse(text)


def test_history_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = sweep(tmp_path, "s", [result(STEADY)])
    store = str(tmp_path / "h.sqlite")
    assert main(["history", "ingest", str(d), "--tag", "nightly", "--history", store]) == 0
    assert "1 added" in capsys.readouterr().out
    assert main(["history", "list", "tag=nightly", "--history", store, "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["tag"] for r in rows] == ["nightly"] and rows[0]["git_commit"] == "c0ffee11"
    assert main(["history", "sweeps", "--history", store]) == 0
    assert "1 sweep(s)" in capsys.readouterr().out
    assert main(["history", "list", "colour=red", "--history", store]) == 2
    assert "unknown selection key" in capsys.readouterr().err
    assert main(["history", "list", "sweep=previous", "--history", store]) == 2
    assert main(["history", "ingest", str(tmp_path / "nope"), "--history", store]) == 2


def test_compare_reads_history_selections(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    old = sweep(tmp_path, "old", [result(STEADY)])
    new = sweep(tmp_path, "new", [result(SLOW, started="2026-11-21T01:00:00+00:00")])
    store = str(tmp_path / "h.sqlite")
    assert main(["history", "ingest", str(old), str(new), "--history", store]) == 0
    code = main(["compare", "sweep=previous", "sweep=latest", "--history", store])
    out = capsys.readouterr().out
    assert code == Exit.REGRESSION and "REGRESSED" in out and "history:sweep=previous" in out
    assert main(["compare", "sweep=latest", str(new), "--history", store]) == 0


def test_nightly_report_compares_with_the_previous_nightly_of_the_same_machine(
        tmp_path: Path) -> None:
    store = tmp_path / "h.sqlite"
    n1 = sweep(tmp_path, "n1", [result(STEADY, started="2026-11-19T01:00:00+00:00")])
    other = sweep(tmp_path, "other-machine",
                  [result(SLOW, started="2026-11-20T01:00:00+00:00",
                          environment=env(machine="box-b"))])
    n2 = sweep(tmp_path, "n2", [result(STEADY, started="2026-11-21T01:00:00+00:00")])
    n3 = sweep(tmp_path, "n3", [result(SLOW, started="2026-11-22T01:00:00+00:00",
                                       environment=env(tf="2.22.0"))])
    first = report_nightly(n1, history_path=store)
    assert first.baseline is None and first.exit_code == 0
    assert "this run is the baseline" in first.markdown.read_text("utf-8")
    # Another machine's nightly is never the baseline: its figures are not comparable.
    assert report_nightly(other, history_path=store).baseline is None
    second = report_nightly(n2, history_path=store)
    assert second.baseline is not None and second.baseline.path == str(n1.resolve())
    assert second.exit_code == 0 and second.report is not None
    assert [c.verdict for c in second.report.configs] == ["unchanged"]
    third = report_nightly(n3, history_path=store)
    assert third.baseline is not None and third.baseline.path == str(n2.resolve())
    assert third.exit_code == Exit.REGRESSION
    md = third.markdown.read_text("utf-8")
    assert "REGRESSED" in md and "tensorflow: 2.21.0 -> 2.22.0" in md
    assert third.plot is not None and third.plot.stat().st_size > 1000
    assert "trend.png" in md
    # Re-reporting the same nightly is idempotent: nothing new is stored.
    assert report_nightly(n3, history_path=store).ingest.added == 0


def test_nightly_can_pool_several_previous_nightlies(tmp_path: Path) -> None:
    store = tmp_path / "h.sqlite"
    for day, tput in ((19, STEADY), (20, tuple(t * 1.02 for t in STEADY))):
        report_nightly(sweep(tmp_path, f"n{day}", [result(tput, started=f"2026-11-{day}T01:00"
                                                           f":00+00:00")]), history_path=store)
    last = report_nightly(sweep(tmp_path, "n21", [result(SLOW, started="2026-11-21T01:00"
                                                         ":00+00:00")]),
                          history_path=store, baseline_runs=2)
    assert last.report is not None and last.exit_code == Exit.REGRESSION
    (config,) = last.report.configs
    assert config.baseline_runs == 2 and "2 nightlies" in last.report.baseline
    assert main(["nightly", "--report-only", "--out", str(tmp_path / "n21"),
                 "--history", str(store), "--baseline-runs", "0"]) == 2


def test_readers_never_create_a_store(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "typo.sqlite"
    assert main(["history", "list", "--history", str(missing)]) == 2
    assert main(["compare", "sweep=1", "sweep=2", "--history", str(missing)]) == 2
    assert "no history store at" in capsys.readouterr().err
    assert not missing.exists()
