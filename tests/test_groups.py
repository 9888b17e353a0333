"""Which configurations of a sweep share a process, and how the sweep runs them."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from bench.launch import sweep as sweep_mod
from bench.launch.evidence import Evidence
from bench.launch.groups import answer_key, sweep_units
from bench.launch.sweep import Replication, run_sweep
from bench.results.schema import Interleaving, RunResult
from bench.results.store import SweepStore
from bench.spec import RunSpec
from tests.helpers import fake_figures, fake_result

BASE = RunSpec(workload="mlp", strategy="one_device", devices=1, batch=32, size="tiny")
MIRRORED = BASE.replace(strategy="mirrored", devices=2)
DEFAULT = BASE.replace(strategy="default")
MWM = BASE.replace(strategy="multi_worker_mirrored", devices=2)
OTHER_BATCH = BASE.replace(batch=64)


def test_an_answers_in_process_configurations_form_one_unit() -> None:
    units = sweep_units([BASE, MWM, MIRRORED, OTHER_BATCH, DEFAULT])
    assert units == [(BASE, MIRRORED, DEFAULT), (MWM,), (OTHER_BATCH,)]
    assert answer_key(BASE) == answer_key(MIRRORED) != answer_key(OTHER_BATCH)
    assert sweep_units([BASE.replace(loop="fit"), MIRRORED.replace(loop="fit")]) == [
        (BASE.replace(loop="fit"),), (MIRRORED.replace(loop="fit"),)]


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
    specs = [BASE, MIRRORED, MWM]
    outcome = run_sweep(specs, tmp_path, echo=lambda _: None,
                        replication=Replication(runs=2), interleave=interleave)
    assert len(outcome.ran) == 6
    if interleave:
        # Pass 1: every configuration alone; pass 2: the answer's two in one process.
        assert alone == [BASE.label(), MIRRORED.label(), MWM.label(), MWM.label()]
        assert shared == [[BASE.label(), MIRRORED.label()]]
    else:
        assert sorted(alone) == sorted([s.label() for s in specs] * 2) and not shared
    store = SweepStore(tmp_path)
    assert all(store.has_result(s, r) for s in specs for r in (1, 2))
    second = [r for r in outcome.ran if r.replicate == 2 and r.interleaved]
    assert len(second) == (2 if interleave else 0)


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
    run_sweep([BASE, MIRRORED, MWM], tmp_path, echo=lambda _: None,
              replication=Replication(runs=2), interleave=True, evidence=Evidence(steps=3),
              shared_from=1)
    store = SweepStore(tmp_path)
    # Both passes run the answer's two in one process; only the first run is profiled,
    # each arm into its own run's profile directory.
    assert [s[0] for s in shared] == [[BASE.label(), MIRRORED.label()]] * 2
    assert shared[0][1:] == ([store.paths(BASE, 1).profile, store.paths(MIRRORED, 1).profile],
                             3)
    assert shared[1][1:] == ([None, None], 0)
    assert alone == [(MWM.label(), 3), (MWM.label(), 0)]
