"""Which configurations of a sweep share a process, and how the sweep runs them."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from bench.launch import sweep as sweep_mod
from bench.launch.arms import shareable_reason
from bench.launch.evidence import Evidence
from bench.launch.groups import answer_key, is_session, sweep_units
from bench.launch.sweep import Replication, run_sweep
from bench.results.schema import Interleaving, RunResult
from bench.results.store import SweepStore
from bench.spec import RunSpec
from tests.gpu_fakes import cards, detected
from tests.helpers import fake_figures, fake_result

BASE = RunSpec(workload="mlp", strategy="one_device", devices=1, batch=32, size="tiny")
MIRRORED = BASE.replace(strategy="mirrored", devices=2)
DEFAULT = BASE.replace(strategy="default")
MWM = BASE.replace(strategy="multi_worker_mirrored", devices=2)
PS = BASE.replace(strategy="parameter_server", devices=2)
OTHER_BATCH = BASE.replace(batch=64)


def test_an_answers_configurations_that_can_take_turns_form_one_session() -> None:
    # The in-process ones as arms, MultiWorkerMirrored in its own processes beside
    # them; parameter servers (asynchronous, ps tasks that do not train) stay alone.
    units = sweep_units([BASE, MWM, PS, MIRRORED, OTHER_BATCH, DEFAULT])
    assert units == [(BASE, MWM, MIRRORED, DEFAULT), (PS,), (OTHER_BATCH,)]
    assert answer_key(BASE) == answer_key(MIRRORED) != answer_key(OTHER_BATCH)
    assert sweep_units([BASE.replace(loop="fit"), MIRRORED.replace(loop="fit")]) == [
        (BASE.replace(loop="fit"),), (MIRRORED.replace(loop="fit"),)]
    # A session is paced around an arms' process: without an in-process configuration
    # a multi-process one runs alone.
    assert not is_session([MWM, MWM.replace(batch=64)]) and is_session([BASE, MWM])
    assert sweep_units([MWM, OTHER_BATCH.replace(strategy="multi_worker_mirrored",
                                                 devices=2)]) == [
        (MWM,), (OTHER_BATCH.replace(strategy="multi_worker_mirrored", devices=2),)]


def test_on_gpus_a_multi_process_configuration_runs_alone(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A worker waiting for its turn would keep its GPU memory beside the arms' process.
    with detected(cards(2), tmp_path / "bin", monkeypatch):
        assert sweep_units([BASE, MWM, MIRRORED]) == [(BASE, MIRRORED), (MWM,)]
        assert "keeps its GPU memory" in (shareable_reason(MWM, member=True) or "")
    assert sweep_units([BASE, MWM, MIRRORED]) == [(BASE, MWM, MIRRORED)]


def _ok(spec: RunSpec) -> RunResult:
    result = fake_result("ok")
    result.spec, result.key = spec, spec.key()
    result.figures = fake_figures((1000.0, 1010.0), replicas=spec.replicas)
    return result


@pytest.mark.parametrize("interleave", [True, False])
def test_later_passes_run_each_answer_in_one_process(monkeypatch: pytest.MonkeyPatch,
                                                     tmp_path: Path, interleave: bool) -> None:
    alone: list[str] = []
    shared: list[list[str]] = []

    def fake_isolated(spec: RunSpec, log: Path, **_: Any) -> RunResult:
        alone.append(spec.label())
        return _ok(spec)

    def fake_interleaved(specs: Sequence[RunSpec], log: Path, **kw: Any) -> list[RunResult]:
        shared.append([s.label() for s in specs])
        out = []
        for k, s in enumerate(specs):
            r = _ok(s)
            r.interleaved = Interleaving("x", [t.label() for t in specs], k, kw["rounds"], 0)
            out.append(r)
        return out

    monkeypatch.setattr(sweep_mod, "run_isolated", fake_isolated)
    monkeypatch.setattr(sweep_mod, "run_interleaved", fake_interleaved)
    runners: list[str] = []

    def fake_session(specs: Sequence[RunSpec], log: Path, **kw: Any) -> list[RunResult]:
        runners.append("session")
        return fake_interleaved(specs, log, **kw)

    monkeypatch.setattr(sweep_mod, "run_session", fake_session)
    specs = [BASE, MIRRORED, MWM, PS]
    outcome = run_sweep(specs, tmp_path, echo=lambda _: None,
                        replication=Replication(runs=2), interleave=interleave)
    assert len(outcome.ran) == 8
    if interleave:
        # Pass 1: every configuration alone; pass 2: the answer's session (the two
        # in-process ones and MultiWorkerMirrored beside them); the parameter servers
        # alone again.
        assert alone == [s.label() for s in specs] + [PS.label()]
        assert shared == [[BASE.label(), MIRRORED.label(), MWM.label()]]
        assert runners == ["session"]  # a member in processes of its own: paced
    else:
        assert sorted(alone) == sorted([s.label() for s in specs] * 2) and not shared
    store = SweepStore(tmp_path)
    assert all(store.has_result(s, r) for s in specs for r in (1, 2))
    second = [r for r in outcome.ran if r.replicate == 2 and r.interleaved]
    assert len(second) == (3 if interleave else 0)


def test_on_a_budget_the_first_pass_shares_and_its_arms_are_profiled(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    alone: list[tuple[str, int]] = []
    shared: list[tuple[list[str], list[Path | None], int]] = []

    def fake_isolated(spec: RunSpec, log: Path, **kw: Any) -> RunResult:
        alone.append((spec.label(), kw["profile_steps"]))
        return _ok(spec)

    def fake_interleaved(specs: Sequence[RunSpec], log: Path, **kw: Any) -> list[RunResult]:
        shared.append(([s.label() for s in specs], list(kw["profile_dirs"]),
                       kw["profile_steps"]))
        return [_ok(s) for s in specs]

    monkeypatch.setattr(sweep_mod, "run_isolated", fake_isolated)
    monkeypatch.setattr(sweep_mod, "run_interleaved", fake_interleaved)
    monkeypatch.setattr(sweep_mod, "run_session", fake_interleaved)
    run_sweep([BASE, MIRRORED, MWM, PS], tmp_path, echo=lambda _: None,
              replication=Replication(runs=2), interleave=True, evidence=Evidence(steps=3),
              shared_from=1)
    store = SweepStore(tmp_path)
    # Both passes run the answer's session; only the first run is profiled, each
    # configuration into its own run's profile directory.
    assert [s[0] for s in shared] == [[BASE.label(), MIRRORED.label(), MWM.label()]] * 2
    assert shared[0][1:] == ([store.paths(BASE, 1).profile, store.paths(MIRRORED, 1).profile,
                              store.paths(MWM, 1).profile], 3)
    assert shared[1][1:] == ([None, None, None], 0)
    assert alone == [(PS.label(), 0), (PS.label(), 0)]


def test_sessions_measured_together_go_first_and_a_resumed_sweep_skips_what_it_stored(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # Three planned sessions two at a time: runs 1 and 2 together (the first profiled,
    # each into its own run's directory), run 3 alone in the pass; the parameter
    # servers alone, never together. Resumed with run 1 stored: 2 and 3 together.
    calls: list[tuple[list[str], list[int]]] = []
    profiled: list[list[Path | None]] = []

    def fake_sessions(copies: Sequence[Any], **kw: Any) -> list[list[RunResult]]:
        assert len({tuple(s.key() for s in c.specs) for c in copies}) == 1  # one answer
        calls.append(([s.label() for s in copies[0].specs], [c.seed for c in copies]))
        profiled.extend(list(c.profile_dirs) for c in copies)
        return [[_ok(s) for s in c.specs] for c in copies]

    def fake_one(specs: Sequence[RunSpec], log: Path, **kw: Any) -> list[RunResult]:
        calls.append(([s.label() for s in specs], [kw["seed"]]))
        return [_ok(s) for s in specs]

    monkeypatch.setattr(sweep_mod, "run_sessions", fake_sessions)
    monkeypatch.setattr(sweep_mod, "run_session", fake_one)
    monkeypatch.setattr(sweep_mod, "run_isolated", lambda spec, log, **_: _ok(spec))
    session = [BASE.label(), MIRRORED.label(), MWM.label()]
    outcome = run_sweep([BASE, MIRRORED, MWM, PS], tmp_path, echo=lambda _: None,
                        replication=Replication(runs=3), interleave=True,
                        evidence=Evidence(steps=3), shared_from=1, together=2)
    assert calls == [(session, [1, 2]), (session, [3])]
    assert len(outcome.ran) == 12
    store = SweepStore(tmp_path)
    assert profiled == [[store.paths(s, 1).profile for s in (BASE, MIRRORED, MWM)],
                        [None, None, None]]
    assert all(store.has_result(s, r) for s in (BASE, MIRRORED, MWM, PS) for r in (1, 2, 3))
    again = tmp_path / "again"
    run_sweep([BASE, MIRRORED, MWM], again, echo=lambda _: None,
              replication=Replication(runs=1), interleave=True, shared_from=1)
    calls.clear()
    run_sweep([BASE, MIRRORED, MWM], again, echo=lambda _: None,
              replication=Replication(runs=3), interleave=True, shared_from=1, together=3)
    assert calls == [(session, [2, 3])]
    # Not interleaved: no sessions, nothing together.
    calls.clear()
    run_sweep([BASE, MIRRORED], tmp_path / "alone", echo=lambda _: None,
              replication=Replication(runs=2), together=2)
    assert calls == []


def test_a_pass_measures_different_answers_sessions_together_where_due(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # The budget's next sessions (run 2) of three answers, two at a time: the first two
    # answers' together, the third's alone; an answer whose first run failed gets no
    # second, and one of other rounds is never paired.
    answers = [(BASE, MIRRORED), (OTHER_BATCH, OTHER_BATCH.replace(strategy="mirrored",
                                                                   devices=2))]
    third = (BASE.replace(batch=128), MIRRORED.replace(batch=128))
    failed = (BASE.replace(batch=8), MIRRORED.replace(batch=8))
    rounds = (BASE.replace(batch=16, repeats=4), MIRRORED.replace(batch=16, repeats=4))
    store = SweepStore(tmp_path)
    for unit in (*answers, third, failed, rounds):
        for s in unit:
            r = _ok(s) if unit is not failed else fake_result("failed")
            r.spec, r.key = s, s.key()
            sweep_mod.save(r, store.paths(s, 1).result)
    calls: list[list[tuple[int, int]]] = []

    def fake_sessions(copies: Sequence[Any], **kw: Any) -> list[list[RunResult]]:
        calls.append([(c.specs[0].batch, c.seed) for c in copies])
        return [[_ok(s) for s in c.specs] for c in copies]

    monkeypatch.setattr(sweep_mod, "run_sessions", fake_sessions)
    monkeypatch.setattr(sweep_mod, "run_interleaved",
                        lambda specs, log, **kw: (calls.append([(specs[0].batch, kw["seed"])])
                                                  or [_ok(s) for s in specs]))
    specs = [s for u in (*answers, third, failed, rounds) for s in u]
    run_sweep(specs, tmp_path, echo=lambda _: None, replication=Replication(runs=2, first=2),
              interleave=True, shared_from=1, together=2)
    assert calls[0] == [(32, 2), (64, 2)]
    assert sorted(calls[1:]) == [[(16, 2)], [(128, 2)]]
    assert not store.has_result(failed[0], 2)
