"""Sweeps measure each configuration in several processes: order, resume, sequential runs.

The launcher is replaced by a fake that returns a result at once, so these tests
check the sweep's bookkeeping (no TensorFlow, no timing).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bench.launch import sweep
from bench.launch.sweep import Replication, measured_line, needs_another_run, run_sweep
from bench.results.schema import RunResult
from bench.results.store import SweepStore, load, load_sweep
from bench.spec import RunSpec
from tests.helpers import fake_figures, fake_result, tiny_spec


class FakeLauncher:
    """Stands in for run_isolated: records the order, returns canned throughputs."""

    def __init__(self, throughputs: dict[tuple[int, int], float] | None = None,
                 status: dict[int, str] | None = None) -> None:
        self.calls: list[tuple[int, Path]] = []
        self.throughputs = throughputs or {}
        self.status = status or {}

    def __call__(self, spec: RunSpec, log: Path, **_: Any) -> RunResult:
        self.calls.append((spec.batch, log))
        run = sum(1 for b, _ in self.calls if b == spec.batch)
        status = self.status.get(spec.batch, "ok")
        result = fake_result(status, batch=spec.batch)
        if status == "ok":
            t = self.throughputs.get((spec.batch, run), 1000.0)
            result.figures = fake_figures((t, t), replicas=spec.replicas,
                                          batch=spec.global_batch)
        return result


@pytest.fixture
def specs() -> list[RunSpec]:
    return [tiny_spec(batch=b) for b in (8, 16, 32)]


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeLauncher]:
    launcher = FakeLauncher()
    monkeypatch.setattr(sweep, "run_isolated", launcher)
    yield launcher


def test_passes_alternate_order_and_store_every_run(tmp_path: Path, specs: list[RunSpec],
                                                    fake: FakeLauncher) -> None:
    out = run_sweep(specs, tmp_path, echo=lambda _: None, replication=Replication(runs=2))
    assert [b for b, _ in fake.calls] == [8, 16, 32, 32, 16, 8]
    assert len(out.ran) == 6 and not out.problems
    loaded = load_sweep(tmp_path)
    assert sorted((r.spec.batch, r.replicate) for r in loaded.results) == \
        sorted((b, r) for b in (8, 16, 32) for r in (1, 2))
    store = SweepStore(tmp_path)
    # Each run has its own log and result file; the first keeps the historical name.
    assert store.paths(specs[0], 1).result.name == f"{specs[0].key()}.json"
    assert load(store.paths(specs[0], 2).result).replicate == 2
    assert {log.name for _, log in fake.calls} == \
        {store.paths(s, r).log.name for s in specs for r in (1, 2)}


def test_resume_runs_only_the_missing_runs(tmp_path: Path, specs: list[RunSpec],
                                           fake: FakeLauncher) -> None:
    run_sweep(specs[:2], tmp_path, echo=lambda _: None, replication=Replication(runs=1))
    fake.calls.clear()
    lines: list[str] = []
    out = run_sweep(specs, tmp_path, echo=lines.append, replication=Replication(runs=2))
    # Pass 1 only needs batch 32; pass 2 (reverse order) needs every second run.
    assert [b for b, _ in fake.calls] == [32, 32, 16, 8]
    assert out.skipped == []
    assert "2 run(s) of these 3 configuration(s) already stored, 4 to run" in lines[0]


def test_failed_or_unsupported_first_runs_are_not_repeated(
        tmp_path: Path, specs: list[RunSpec], monkeypatch: pytest.MonkeyPatch) -> None:
    launcher = FakeLauncher(status={8: "unsupported", 16: "failed"})
    monkeypatch.setattr(sweep, "run_isolated", launcher)
    out = run_sweep(specs, tmp_path, echo=lambda _: None, replication=Replication(runs=2))
    assert [b for b, _ in launcher.calls] == [8, 16, 32, 32]
    assert [r.status for r in out.problems] == ["failed"]


def test_sequential_runs_only_for_configurations_whose_runs_disagree(
        tmp_path: Path, specs: list[RunSpec], monkeypatch: pytest.MonkeyPatch) -> None:
    # Batch 16's two runs differ by 30%; the others agree within 2%.
    launcher = FakeLauncher(throughputs={(8, 2): 1010.0, (16, 2): 1300.0, (32, 2): 990.0})
    monkeypatch.setattr(sweep, "run_isolated", launcher)
    lines: list[str] = []
    run_sweep(specs, tmp_path, echo=lines.append,
              replication=Replication(runs=2, max_runs=4, spread=0.1))
    calls = [b for b, _ in launcher.calls]
    assert calls[:6] == [8, 16, 32, 32, 16, 8]
    # Runs 3 and 4 of batch 16 only: its spread stays above 10% after run 3 (1000,
    # 1300, 1000 -> range 30% of the median).
    assert calls[6:] == [16, 16]
    assert any("(run 3)" in line for line in lines)


def test_needs_another_run_is_the_relative_range_of_run_medians() -> None:
    def runs(*tputs: float) -> list[RunResult]:
        out = []
        for t in tputs:
            r = fake_result()
            r.figures = dataclasses.replace(fake_figures((t,)), global_throughput=t)
            out.append(r)
        return out

    assert not needs_another_run(runs(1000.0), 0.1)  # one run: nothing to compare yet
    assert not needs_another_run(runs(1000.0, 1090.0), 0.1)
    assert needs_another_run(runs(1000.0, 1110.0), 0.1)
    assert not needs_another_run(runs(1000.0, 1110.0), 0.2)


def test_a_later_pass_alone_leaves_the_numbers_before_it(
        tmp_path: Path, specs: list[RunSpec], fake: FakeLauncher) -> None:
    # A budget's session at run 4: batch 8 sat runs 2 and 3 out, batch 16 did not.
    run_sweep(specs[:2], tmp_path, echo=lambda _: None, replication=Replication(runs=1))
    run_sweep(specs[1:2], tmp_path, echo=lambda _: None, replication=Replication(runs=3))
    fake.calls.clear()
    lines: list[str] = []
    out = run_sweep(specs[:2], tmp_path, echo=lines.append,
                    replication=Replication(runs=4, first=4))
    assert [b for b, _ in fake.calls] == [16, 8]  # pass 4 runs in reverse order
    # The next pass is no resume: the earlier passes' runs are not "already stored" ones.
    assert not any(line.startswith("resuming") for line in lines), lines
    store = SweepStore(tmp_path)
    assert store.replicates_done(specs[0], 10) == [1, 4]
    assert store.replicates_done(specs[1], 10) == [1, 2, 3, 4]
    lines.clear()
    assert run_sweep(specs[:2], tmp_path, echo=lines.append,
                     replication=Replication(runs=4, first=4)).skipped == specs[:2]
    assert "2 run(s) of these 2 configuration(s) already stored, 0 to run" in lines[0]
    assert len(out.ran) == 2


@pytest.mark.parametrize("kwargs", [{"runs": 0}, {"runs": 2, "max_runs": 1},
                                    {"runs": 1, "spread": 0.0}, {"runs": True},
                                    {"runs": 2, "first": 3}, {"runs": 2, "first": 0}])
def test_replication_rejects_nonsense(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="Received"):
        Replication(**kwargs)


def test_time_left_counts_the_runs_of_later_passes(tmp_path: Path, specs: list[RunSpec],
                                                   fake: FakeLauncher,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[int] = []

    def eta(self: sweep.Progress, remaining: list[RunSpec]) -> None:
        seen.append(len(remaining))

    monkeypatch.setattr(sweep.Progress, "eta", eta)
    run_sweep(specs, tmp_path, echo=lambda _: None, replication=Replication(runs=2))
    assert seen == [6, 5, 4, 3, 2, 1]


def test_run_replicate_saves_the_run_where_the_store_names_it(tmp_path: Path,
                                                              fake: FakeLauncher) -> None:
    spec = tiny_spec(batch=8)
    store = SweepStore(tmp_path)
    noted = sweep.run_replicate(store, spec, 3,
                                finish=lambda r: dataclasses.replace(r, reason="noted"))
    assert fake.calls == [(8, store.paths(spec, 3).log)]
    stored = load(store.paths(spec, 3).result)
    assert (stored.replicate, stored.reason) == (3, "noted") == (noted.replicate, noted.reason)
    assert store.replicates_done(spec, 3) == [3]
    with pytest.raises(FileExistsError):  # a stored run is never overwritten
        sweep.run_replicate(store, spec, 3)


def test_the_measured_share_is_printed_without_rounding_up_to_a_target() -> None:
    # Windows of 27.3 s (273 windows of 0.1 s) in a 54.8 s sweep: 49.8%, not "50%".
    result = fake_result("ok")
    result.figures = fake_figures((1000.0,) * 273)
    for w in result.figures.windows:
        w.wall_s = 0.1
    assert measured_line([result], 54.8) == (
        "measured: 27 s of the sweep's 55 s in windows (49.8%), the rest start-ups, "
        "builds, warm-ups and profiles")
    assert measured_line([result], 0.0) is None
    assert measured_line([fake_result("failed")], 54.8) is None


# -- what a run found unsupported at one batch is not built at the others ------------------
CS_BN = ("CentralStorageStrategy with 2+ replicas cannot update variables created without "
         "an aggregation method in replica context")


def test_a_configuration_found_unsupported_at_one_batch_is_not_run_at_another(
        tmp_path: Path, fake: FakeLauncher) -> None:
    store = SweepStore(tmp_path)
    seen = fake_result("unsupported", strategy="central_storage", batch=256)
    seen.reason, seen.replicate = CS_BN, 1
    sweep.save(seen, store.paths(seen.spec, 1).result)
    lines: list[str] = []
    cs64 = tiny_spec(strategy="central_storage", batch=64)
    others = [tiny_spec(strategy="mirrored", batch=64),            # another strategy
              tiny_spec(strategy="central_storage", devices=4, batch=64),  # other devices
              tiny_spec(strategy="central_storage", batch=64, precision="mixed_bfloat16")]
    run_sweep([cs64, *others], tmp_path, echo=lines.append)
    # The three others ran; the one that differs only in its batch did not, and says why.
    assert len(fake.calls) == 3
    assert all(load(store.paths(s, 1).result).status == "ok" for s in others)
    stored = load(store.paths(cs64, 1).result)
    assert stored.status == "unsupported" and stored.reason is not None
    assert stored.reason.startswith(CS_BN) and "found by its run at batch 256" in stored.reason
    assert any("not run: found unsupported at batch 256" in ln for ln in lines)


@pytest.mark.parametrize("status", ["failed", "oom"])
def test_a_failure_at_one_batch_teaches_nothing_about_another(
        tmp_path: Path, fake: FakeLauncher, status: str) -> None:
    # A failure or an OOM may be the batch's own: the other batch runs.
    store = SweepStore(tmp_path)
    seen = fake_result(status, strategy="central_storage", batch=256)
    seen.replicate = 1
    sweep.save(seen, store.paths(seen.spec, 1).result)
    target = tiny_spec(strategy="central_storage", batch=64)
    assert sweep.found_unsupported([target], store, echo=lambda _: None) == []
    run_sweep([target], tmp_path, echo=lambda _: None)
    assert len(fake.calls) == 1 and load(store.paths(target, 1).result).status == "ok"


def test_a_refusal_before_any_process_is_left_to_the_strategy_s_own_check(
        tmp_path: Path) -> None:
    # Its reason may rest on the batch; the spec at hand gets its own (the launcher's).
    store = SweepStore(tmp_path)
    seen = sweep.unsupported_result(tiny_spec(strategy="tpu", devices=1, batch=256))
    assert seen is not None
    seen.replicate = 1
    sweep.save(seen, store.paths(seen.spec, 1).result)
    target = tiny_spec(strategy="tpu", devices=1, batch=64)
    assert sweep.found_unsupported([target], store, echo=lambda _: None) == []
    assert not store.has_result(target, 1)
