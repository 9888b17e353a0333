"""Within-process pairs as an answer's evidence (bench.results.pairs, configs.settle_of)."""

from __future__ import annotations

import math
import random

from bench.results.pairs import process_log_ratio, session_log_ratios
from bench.results.schema import Interleaving, RunResult
from bench.results.stats import EQUIVALENT, FASTER, NOT_SETTLED
from bench.spec import RunSpec
from reports.configs import group_configs, settle_of
from reports.runs import views
from tests.helpers import fake_figures, fake_result

ONE = RunSpec(workload="mlp", strategy="one_device", devices=1, batch=32, size="tiny")
TWO = ONE.replace(strategy="mirrored", devices=2)


def _run(spec: RunSpec, replicate: int, windows: list[float],
         session: str | None) -> RunResult:
    result = fake_result("ok")
    result.spec, result.key, result.replicate = spec, spec.key(), replicate
    result.replicas = spec.replicas
    result.figures = fake_figures(tuple(windows), replicas=spec.replicas)
    if session is not None:
        result.interleaved = Interleaving(session, [ONE.label(), TWO.label()],
                                          0 if spec is ONE else 1, len(windows), 0)
    return result


def _sweep(gap: float, round_noise: float, process_spread: float,
           shared: bool, sessions: int = 4, seed: int = 0) -> list[RunResult]:
    """Each process has its own level (process_spread, shared by its arms when they
    share it); ``gap`` = mirrored / one_device; ``round_noise`` per window."""
    rng = random.Random(seed)
    out = []
    for p in range(1, sessions + 1):
        level = 1000 * rng.lognormvariate(0, process_spread)
        other = level if shared else 1000 * rng.lognormvariate(0, process_spread)
        for spec, base, g in ((ONE, level, 1.0), (TWO, other, gap)):
            out.append(_run(spec, p, [base * g * rng.lognormvariate(0, round_noise)
                                      for _ in range(6)], f"s{p}" if shared else None))
    return out


def _settle(results: list[RunResult]) -> str:
    one, two = sorted(group_configs(views(results)), key=lambda c: c.replicas)
    s = settle_of(two, one)
    assert s is not None
    return s.verdict


def test_pairs_settle_what_independent_runs_cannot() -> None:
    # Processes differ by 25% from each other; inside a process the arms see the same.
    assert _settle(_sweep(1.5, 0.01, 0.25, shared=True)) == FASTER
    assert _settle(_sweep(1.02, 0.01, 0.25, shared=True)) == EQUIVALENT
    assert _settle(_sweep(1.02, 0.01, 0.25, shared=False)) == NOT_SETTLED


def test_a_small_gap_at_high_window_noise_is_not_settled_by_few_pairs() -> None:
    assert _settle(_sweep(1.02, 0.30, 0.25, shared=True, sessions=2)) == NOT_SETTLED


def test_one_process_statistic_is_the_median_round_ratio() -> None:
    a = _run(ONE, 1, [1000.0, 1000.0, 1000.0], "s")
    b = _run(TWO, 1, [1500.0, 300.0, 1500.0], "s")
    assert math.isclose(process_log_ratio(a, b), math.log(1.5))
    # Only processes both configurations were arms of count.
    lone = _run(TWO, 2, [1500.0] * 3, None)
    assert session_log_ratios([a], [b, lone]) == [process_log_ratio(a, b)]


def _cpu(result: RunResult, share: float) -> RunResult:
    assert result.figures is not None
    for w in result.figures.windows:
        w.cpu_s = share * w.wall_s
    return result


def test_a_process_that_lost_cpu_for_its_whole_length_is_left_out() -> None:
    # Four processes, mirrored 2% ahead; the first shared the cores with another job
    # from start to end (both arms at 1.2 of 1.9 cores, the ratio thrown to 1.26).
    ref = [_cpu(_run(ONE, p, [1000.0 if p > 1 else 500.0] * 3, f"s{p}"), 1.9 if p > 1 else 1.2)
           for p in range(1, 5)]
    cand = [_cpu(_run(TWO, p, [1020.0 if p > 1 else 630.0] * 3, f"s{p}"), 1.9 if p > 1 else 1.2)
            for p in range(1, 5)]
    ratios = session_log_ratios(ref, cand)
    assert len(ratios) == 3 and all(math.isclose(r, math.log(1.02)) for r in ratios)
    # Without CPU figures (older results), or when fewer than 3 processes: all kept.
    plain = session_log_ratios([_run(ONE, p, [1000.0] * 3, f"s{p}") for p in (1, 2, 3)],
                               [_run(TWO, p, [1020.0] * 3, f"s{p}") for p in (1, 2, 3)])
    assert len(plain) == 3
    assert len(session_log_ratios(ref[:2], cand[:2])) == 2
