"""Whether a session's builds share an offset of their process (scripts.build_share)."""

from __future__ import annotations

import random

from bench.results.schema import Interleaving, RunResult
from bench.spec import RunSpec
from scripts.build_share import comparisons, simulate
from tests.helpers import fake_figures, fake_result, with_builds

ONE = RunSpec(workload="mlp", strategy="one_device", devices=1, batch=32, size="tiny")
TWO = ONE.replace(strategy="mirrored", devices=2)


def _session(p: int, offsets: list[float], rng: random.Random) -> list[RunResult]:
    """Two arms of process ``p``, three rounds on each build; ``offsets`` per build."""
    out = []
    base = [1000.0 * rng.lognormvariate(0, 0.002) for _ in range(3 * len(offsets))]
    for k, spec in enumerate((ONE, TWO)):
        windows = [x * (offsets[i // 3] if k else 1.0) for i, x in enumerate(base)]
        r = fake_result("ok")
        r.spec, r.key, r.replicate, r.replicas = spec, spec.key(), p, spec.replicas
        r.figures = fake_figures(tuple(windows), replicas=spec.replicas)
        with_builds(r, 3)
        r.interleaved = Interleaving(f"s{p}", [ONE.label(), TWO.label()], k, len(windows), p,
                                     builds=len(offsets))
        out.append(r)
    return out


def _f(process_sd: float, seed: int) -> float:
    rng = random.Random(seed)
    results = []
    for p in range(1, 7):
        own = rng.lognormvariate(0, process_sd)
        results += _session(p, [own * rng.lognormvariate(0, 0.03) for _ in range(3)], rng)
    found = comparisons(results, "t")
    assert len(found) == 1 and len(found[0].processes) == 6
    assert [len(b) for b in found[0].processes] == [3] * 6
    return found[0].test()[2]


def test_a_process_offset_shared_by_its_builds_stands_out_and_none_does_not() -> None:
    assert _f(0.10, seed=3) > 5.0  # every build of a process shares a 10% offset
    assert _f(0.0, seed=3) < 3.0  # builds alone: between ~ within


def test_builds_read_as_pairs_lose_coverage_once_the_process_has_a_share() -> None:
    rows = simulate(shares=(0.0, 0.6), series=4000, seed=2)[2:]
    as_builds = [float(r.split()[1].rstrip("%")) for r in rows]
    as_sessions = [float(r.split()[3].rstrip("%")) for r in rows]
    assert abs(as_builds[0] - 96.0) < 1.5 and as_builds[1] < 88.0
    assert all(abs(c - 96.0) < 1.5 for c in as_sessions)
