"""The history store, its CLI and the nightly report, on hand-built results (no TensorFlow)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from bench.cli.main import main
from bench.env import machine_id
from bench.exits import Exit
from bench.launch.launcher import make_result
from bench.regress.history import STORE_VERSION, History, HistoryError, Selection
from bench.regress.nightly import report_nightly
from bench.regress.render import as_table
from bench.results.schema import RunResult
from bench.results.store import SweepStore, save
from tests.helpers import fake_figures, tiny_spec


def env(commit: str = "c0ffee11", tf: str = "2.21.0", machine: str = "box-a") -> dict[str, Any]:
    # No hardware fields: the stored machine_id is the identity (see hardware() below).
    return {"machine_id": machine, "host": "h",
            "tensorflow": tf, "git": {"commit": commit, "dirty": False}, "env_vars": {}}


def result(throughputs: tuple[float, ...], *, started: str = "2026-11-20T01:00:00+00:00",
           environment: dict[str, Any] | None = None, status: str = "ok", replicate: int = 1,
           **spec_over: Any) -> RunResult:
    spec = tiny_spec(repeats=len(throughputs), **spec_over)
    figures = fake_figures(throughputs, replicas=spec.replicas, batch=spec.global_batch) \
        if status == "ok" else None
    r = make_result(spec, status, None if status == "ok" else "broke for a test",
                    figures=figures, environment=environment or env())
    r.started_at = started
    r.replicate = replicate
    return r


def sweep(root: Path, name: str, results: list[RunResult]) -> Path:
    d = root / name
    for r in results:
        save(r, SweepStore(d).paths(r.spec, r.replicate).result)
    return d


STEADY = (1000.0, 1010.0, 990.0, 1005.0, 995.0, 1002.0)
SLOW = tuple(t * 0.8 for t in STEADY)


def nightly(root: Path, name: str, windows: tuple[float, ...], day: int,
            environment: dict[str, Any] | None = None) -> Path:
    """A nightly sweep: one configuration measured in two processes, 0.2% apart."""
    return sweep(root, name, [
        result(tuple(w * f for w in windows), started=f"2026-11-{day:02d}T01:0{i}:00+00:00",
               environment=environment, replicate=i + 1)
        for i, f in enumerate((1.0, 1.002))])


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
    old = nightly(tmp_path, "old", STEADY, 20)
    new = nightly(tmp_path, "new", SLOW, 21)
    store = str(tmp_path / "h.sqlite")
    assert main(["history", "ingest", str(old), str(new), "--history", store]) == 0
    code = main(["compare", "sweep=previous", "sweep=latest", "--history", store])
    out = capsys.readouterr().out
    assert code == Exit.REGRESSION and "REGRESSED" in out and "history:sweep=previous" in out
    assert main(["compare", "sweep=latest", str(new), "--history", store]) == Exit.OK


def hardware(driver: str = "550", tf: str = "2.21.0") -> dict[str, Any]:
    """A full fingerprint: the machine id is recomputed from it (bench.env)."""
    return {**env(tf=tf, machine="stored-before-the-split"), "cpu_model": "Test CPU",
            "cpu_cores": 8, "memory_bytes": 64 * 2**30, "python": "3.11.7",
            "gpus": [{"name": "A100", "memory_mib": 40960, "driver": driver}]}


def test_nightly_report_compares_with_the_last_nightlies_of_the_same_hardware(
        tmp_path: Path) -> None:
    store = tmp_path / "h.sqlite"
    n1 = nightly(tmp_path, "n1", STEADY, 19)
    other = nightly(tmp_path, "other-machine", SLOW, 20, environment=env(machine="box-b"))
    n2 = nightly(tmp_path, "n2", STEADY, 21)
    n3 = nightly(tmp_path, "n3", SLOW, 22, environment=env(tf="2.22.0"))
    first = report_nightly(n1, history_path=store)
    # Nothing to compare with: said, and not passed off as "no regression".
    assert first.baseline == [] and first.exit_code == Exit.CANNOT_TELL
    assert first.markdown is not None
    assert "This run is the baseline" in first.markdown.read_text("utf-8")
    # Another machine's nightly is never the baseline: its figures are not comparable.
    assert report_nightly(other, history_path=store).baseline == []
    second = report_nightly(n2, history_path=store)
    assert [s.path for s in second.baseline] == [str(n1.resolve())]
    assert second.report is not None
    assert second.exit_code == Exit.OK, as_table(second.report)
    assert [c.verdict for c in second.report.configs] == ["ok"]
    third = report_nightly(n3, history_path=store)
    assert [s.path for s in third.baseline] == [str(n1.resolve()), str(n2.resolve())]
    assert third.exit_code == Exit.REGRESSION and third.report is not None
    (config,) = third.report.configs
    assert config.baseline_runs == 4 and "2 nightlies" in third.report.baseline
    assert third.markdown is not None
    md = third.markdown.read_text("utf-8")
    assert "REGRESSED" in md and "tensorflow: 2.21.0 -> 2.22.0" in md
    assert md.index("tensorflow: 2.21.0 -> 2.22.0") < md.index("| configuration")
    assert third.plot is not None and third.plot.stat().st_size > 1000
    assert "trend.png" in md
    # Re-reporting the same nightly is idempotent: nothing new is stored.
    assert report_nightly(n3, history_path=store).ingest.added == 0


def test_a_driver_upgrade_keeps_the_baseline_and_is_named(tmp_path: Path) -> None:
    store = tmp_path / "h.sqlite"
    report_nightly(nightly(tmp_path, "n1", STEADY, 19, environment=hardware()),
                   history_path=store, plot=False)
    after = report_nightly(nightly(tmp_path, "n2", SLOW, 20,
                                   environment=hardware(driver="560")),
                           history_path=store, plot=False)
    assert len(after.baseline) == 1 and after.report is not None
    assert after.exit_code == Exit.REGRESSION
    assert [(d.kind, d.field) for d in after.report.warnings] == [("software", "gpu_driver")]
    assert after.markdown is not None and "gpu_driver" in after.markdown.read_text("utf-8")


def test_nightly_pools_a_chosen_number_of_nightlies(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "h.sqlite"
    for day in (17, 18, 19, 20):
        report_nightly(nightly(tmp_path, f"n{day}", STEADY, day), history_path=store,
                       plot=False)
    last = report_nightly(nightly(tmp_path, "n21", SLOW, 21), history_path=store,
                          baseline_nightlies=2, plot=False)
    assert last.report is not None and last.exit_code == Exit.REGRESSION
    assert [s.path for s in last.baseline] == [str((tmp_path / n).resolve())
                                               for n in ("n19", "n20")]
    (config,) = last.report.configs
    assert config.baseline_runs == 4
    for flag in ("--baseline-nightlies", "--baseline-runs", "--runs"):
        assert main(["nightly", "--report-only", "--out", str(tmp_path / "n21"),
                     "--history", str(store), flag, "0"]) == Exit.USAGE
        assert "Received" in capsys.readouterr().err
    assert main(["nightly", "--report-only", "--out", str(tmp_path / "n21"),
                 "--history", str(store), "--baseline-nightlies", "2"]) == Exit.REGRESSION
    out = capsys.readouterr().out
    assert "REGRESSED" in out and "exit code 4 (regression)" in out


def test_a_version_1_store_is_migrated(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite"
    d = nightly(tmp_path, "n1", STEADY, 19, environment=hardware())
    with History(path) as h:
        h.ingest(d, tag="nightly")
    with sqlite3.connect(path) as db:  # back to how version 1 stored it
        db.execute("DROP INDEX results_software")
        db.execute("ALTER TABLE results DROP COLUMN software_id")
        db.execute("UPDATE results SET machine_id = 'hashed-with-the-driver'")
        db.execute("PRAGMA user_version = 1")
    with History(path) as h:
        rows = h.rows()
        assert {r.machine_id for r in rows} == {machine_id(hardware())}
        assert all(r.software_id for r in rows)
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == STORE_VERSION


def test_readers_never_create_a_store(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "typo.sqlite"
    assert main(["history", "list", "--history", str(missing)]) == 2
    assert main(["compare", "sweep=1", "sweep=2", "--history", str(missing)]) == 2
    assert "no history store at" in capsys.readouterr().err
    assert not missing.exists()


def test_a_simulated_servers_results_never_enter_the_history(tmp_path: Path) -> None:
    """A simulated GPU server's figures are its model's (bench.sim): ingest skips them,
    saying why, and keeps the real ones beside them."""
    real = result(STEADY, devices=1)
    simulated = result(STEADY, devices=2, environment={**env(), "simulated": "8xH100"})
    d = sweep(tmp_path, "mixed", [real, simulated])
    with History(tmp_path / "h.sqlite") as h:
        report = h.ingest(d)
        assert report.added == 1 and len(h.rows()) == 1
        assert len(report.skipped) == 1 and "simulated server 8xH100" in report.skipped[0]
