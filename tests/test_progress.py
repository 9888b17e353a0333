"""Sweep progress: the time-left estimate."""

from __future__ import annotations

import dataclasses

import pytest

from bench.launch.sweep import Progress
from tests.helpers import fake_result, tiny_spec


def test_eta_uses_per_workload_means_and_cost_hints_for_unseen_workloads() -> None:
    lines: list[str] = []
    p = Progress(total=4, echo=lines.append)
    assert p.eta([tiny_spec()]) is None  # nothing measured yet
    for wall in (10.0, 20.0):
        p.finish(dataclasses.replace(fake_result(), wall_s=wall))
    mlp, cnn, resnet = (tiny_spec(workload=w) for w in ("mlp", "cnn", "resnet50"))
    assert p.eta([mlp, mlp]) == pytest.approx(30.0)  # 2 x the MLP mean of 15 s
    # Unseen workloads: the MLP mean scaled by their cost hints (cnn 1.2, resnet50 4).
    assert p.eta([cnn, resnet]) == pytest.approx(15.0 * 1.2 + 15.0 * 4.0)
    assert "-> ok" in lines[-1]
    # One of a shared session's results says which configuration it is.
    p.finish(dataclasses.replace(fake_result(), spec=mlp), named=True)
    assert lines[-1].startswith(f"    -> {mlp.label()}: ok: ")


def test_unsupported_results_do_not_count_towards_the_estimate() -> None:
    p = Progress(total=2, echo=lambda _: None)
    p.finish(dataclasses.replace(fake_result("unsupported"), wall_s=0.01))
    assert p.eta([tiny_spec()]) is None
