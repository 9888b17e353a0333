"""scripts.measured: docs/measured.md's rows come from a sweep's own files, none typed.

A tiny sweep is built by hand: a journal of an all-reduce probe and two starts of a
run (a budget's sessions), each with its environment, and results whose windows add
up to a known number of seconds. Its row says the day, the machine, the commit, the
subcommands the journal shows, the wall time from the first start to the last end,
the windows' share of it and how many places are settled; what a sweep does not hold
is a dash.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from bench.results.store import SweepStore, save
from scripts.measured import HEADERS, main, sweep_row
from tests.helpers import fake_environment, replicated

ENV = fake_environment("measured-box")


def _start(at: str, mode: str, env: dict[str, Any], workload: str = "mlp") -> dict[str, Any]:
    return {"event": "start", "at": at, "configurations": 1,
            "specs": [{"workload": workload, "strategy": "default", "mode": mode}],
            "environment": env}


def _sweep(root: Path, journal: bool = True, env: dict[str, Any] = ENV
           ) -> tuple[Path, float]:
    """A sweep of one place (mlp, batch 8: mirrored 1.5x one_device, 1% noise: settled),
    and the seconds of its results' windows."""
    sweep = root / "bench-tiny"
    store = SweepStore(sweep)
    results = [r for strategy, devices, level in (("one_device", 1, 1000.0),
                                                  ("mirrored", 2, 1500.0))
               for r in replicated(strategy, devices, 8, level, env=env, run_cv=0.01,
                                   cv=0.01)]
    for r in results:
        r.started_at, r.finished_at = "2026-01-02T23:59:00+00:00", "2026-01-03T00:00:40+00:00"
        save(r, store.paths(r.spec, r.replicate).result)
    if journal:
        for event in (_start("2026-01-02T23:58:00+00:00", "allreduce", env),
                      {"event": "finished", "at": "2026-01-02T23:58:20+00:00"},
                      _start("2026-01-02T23:58:21+00:00", "train", env),
                      {"event": "finished", "at": "2026-01-02T23:59:30+00:00"},
                      _start("2026-01-02T23:59:31+00:00", "train", env, workload="cnn"),
                      {"event": "finished", "at": "2026-01-03T00:01:20+00:00"}):
            store.journal(event)
    windows = sum(w.wall_s for r in results if r.figures for w in r.figures.windows)
    return sweep, windows


def test_a_sweeps_row_is_read_from_its_journal_and_results(tmp_path: Path) -> None:
    sweep, windows = _sweep(tmp_path)
    row = sweep_row(sweep)
    assert len(row.cells) == len(HEADERS)
    assert row.sweep == f"{tmp_path.name}/bench-tiny"
    assert row.date == "2026-01-02"  # the first start's day, UTC
    assert row.machine == "Test CPU @ 2.0GHz, 2 cores"
    assert row.commit == "0123456"
    assert row.command == "`stratbench allreduce`, then `stratbench run` (cnn, mlp)"
    assert row.wall == "200"  # 23:58:00 to 00:01:20
    assert row.measured == f"{windows / 200:.1%}"
    assert row.settled == "1 of 1"


def test_without_a_journal_the_results_give_what_they_hold(tmp_path: Path) -> None:
    sweep, windows = _sweep(tmp_path, journal=False)
    row = sweep_row(sweep)
    assert (row.date, row.machine, row.commit) == ("2026-01-02", "Test CPU @ 2.0GHz, 2 cores",
                                                   "0123456")
    assert row.command == "-"  # no journal: no invocation to name
    assert row.wall == "100" and row.measured == f"{windows / 100:.1%}"


def test_a_dirty_tree_gpus_and_an_empty_sweep(tmp_path: Path) -> None:
    env = copy.deepcopy(fake_environment("gpu-box", gpus=2))
    env["git"]["dirty"] = True
    sweep, _ = _sweep(tmp_path, env=env)
    row = sweep_row(sweep)
    assert row.machine == "Test CPU @ 2.0GHz, 2 cores, 2 x Test GPU"
    assert row.commit == "0123456 dirty"
    empty = tmp_path / "empty"
    empty.mkdir()
    assert sweep_row(empty).cells[1:] == ("-",) * (len(HEADERS) - 1)


def test_the_page_has_a_row_per_sweep_in_order(tmp_path: Path, capsys: Any) -> None:
    first, _ = _sweep(tmp_path / "one")
    second, _ = _sweep(tmp_path / "two", journal=False)
    out = tmp_path / "measured.md"
    assert main([str(first), str(second), "--out", str(out)]) == 0
    text = out.read_text(encoding="utf-8")
    assert text.startswith("# Measured history\n")
    table = [line for line in text.splitlines() if line.startswith("| ")]
    assert table[0] == "| " + " | ".join(HEADERS) + " |"
    assert [line.split(" | ")[0] for line in table[2:]] == ["| one/bench-tiny",
                                                           "| two/bench-tiny"]
    assert main([str(first), str(second)]) == 0
    assert capsys.readouterr().out == text  # printed, the same page
    assert main([str(tmp_path / "nowhere")]) == 2
    assert "not a sweep directory" in capsys.readouterr().err
