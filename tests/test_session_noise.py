"""scripts/session_noise: a session's noise against what its rounds predict, both ways."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from bench.results.schema import Interleaving
from bench.results.store import SweepStore, save
from scripts import session_noise
from tests.helpers import fake_figures, fake_result, tiny_spec

A = tiny_spec(strategy="one_device", devices=1)
B = tiny_spec(strategy="mirrored", devices=2)


def _sweep(out: Path, offset_sd: float, sessions: int = 12, rounds: int = 10) -> None:
    """Sessions of A and B, B 1.5x A; each round's windows have 3% noise, and each
    session's B gets an offset of its own with SD ``offset_sd`` (0: none)."""
    rng = random.Random(0)
    for n in range(1, sessions + 1):
        offset = rng.gauss(0.0, offset_sd) if offset_sd else 0.0
        for i, spec in enumerate((A, B)):
            level = 1000.0 * (1.5 * (1 + offset) if spec is B else 1.0)
            r = fake_result("ok", strategy=spec.strategy, devices=spec.devices)
            r.spec, r.key, r.replicate = spec, spec.key(), n
            r.figures = fake_figures(tuple(level * rng.lognormvariate(0, 0.03)
                                           for _ in range(rounds)), replicas=spec.replicas)
            r.interleaved = Interleaving(f"s{n}", [A.label(), B.label()], i, rounds, 0)
            save(r, SweepStore(out).paths(spec, n).result)


def _ratio(out: Path, capsys: pytest.CaptureFixture[str]) -> float:
    assert session_noise.main([str(out)]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines()
               if line.startswith("all"))
    return float(row.split()[-1])


def test_sessions_that_differ_only_by_their_windows_read_near_1(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _sweep(tmp_path, offset_sd=0.0)
    assert 0.4 < _ratio(tmp_path, capsys) < 2.0


def test_sessions_with_offsets_of_their_own_read_well_above_1(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _sweep(tmp_path, offset_sd=0.10)
    assert _ratio(tmp_path, capsys) > 5.0


def test_a_missing_sweep_is_a_usage_error(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    assert session_noise.main([str(tmp_path / "nope")]) == 2
    assert "nope" in capsys.readouterr().err


def _together(out: Path, shared_sd: float) -> None:
    """Twelve sessions of A and B measured two at a time (a group: one start and wall
    time); each group's B moves by an offset of SD ``shared_sd`` that both of its
    sessions share, and each session's B by 2% of its own."""
    rng = random.Random(3)
    for n in range(1, 13):
        if n % 2:
            shared = rng.gauss(0.0, shared_sd)
        own = rng.gauss(0.0, 0.02)
        for i, spec in enumerate((A, B)):
            level = 1000.0 * (1.5 * (1 + shared + own) if spec is B else 1.0)
            r = fake_result("ok", strategy=spec.strategy, devices=spec.devices)
            r.spec, r.key, r.replicate = spec, spec.key(), n
            r.started_at, r.wall_s = f"2026-11-29T06:{(n + 1) // 2:02d}:00+00:00", 30.0
            r.figures = fake_figures(tuple(level * rng.lognormvariate(0, 0.01)
                                           for _ in range(10)), replicas=spec.replicas)
            r.interleaved = Interleaving(f"s{n}", [A.label(), B.label()], i, 10, 0,
                                         together=2)
            save(r, SweepStore(out).paths(spec, n).result)


def _sds(out: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, float]:
    assert session_noise.main([str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    return {line.split()[0]: float(line.split()[1]) for line in lines
            if line.strip().startswith(("together", "apart"))}


def test_sessions_measured_together_that_share_their_minutes_read_closer_than_apart(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _together(tmp_path, shared_sd=0.10)
    sds = _sds(tmp_path, capsys)
    assert sds["together"] < 0.5 * sds["apart"]


def test_sessions_measured_together_that_do_not_read_alike(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _together(tmp_path, shared_sd=0.0)
    sds = _sds(tmp_path, capsys)
    assert 0.5 < sds["together"] / sds["apart"] < 2.0
    # Sessions measured one at a time print no such comparison.
    _sweep(tmp_path / "alone", offset_sd=0.0)
    assert _sds(tmp_path / "alone", capsys) == {}
