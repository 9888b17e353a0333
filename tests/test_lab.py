"""The scaling lab: its plan, its interleaved resumable runs (a fake runner), and its
model, fitted on synthetic data with known parameters.

No TensorFlow and no namespaces: runs are constructed results whose figures come
from a known model (compute line, link, overlap exponent), so the fit must give the
parameters back, predict the held-out hosts, and order them as measured.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from bench.cli.main import main
from bench.launch import lab as lab_launch
from bench.launch.cgroups import CpuBudget
from bench.launch.cluster_demo import DemoOutcome
from bench.launch.lab import LabError, LabPoint, plan, run_lab
from bench.launch.launcher import make_result
from bench.launch.netns import LinkShape
from bench.results.schema import AllReduceFigures, AllReducePoint, RunResult
from bench.results.store import SweepStore, save
from bench.spec import RunSpec
from reports.lab import check_workload, curves, group, lab_run, report, transfer
from reports.lab_fit import (
    ComputeLine,
    FitInputs,
    LabModel,
    Measured,
    fit,
    fit_compute,
    fit_link_away,
    fit_overlap,
    order_check,
    overlap_step,
)
from reports.projection import Link
from tests.helpers import fake_environment, fake_figures, tiny_spec

TRUE_COMPUTE = ComputeLine(fixed_s=0.004, per_example_s=0.0002)
TRUE_LINKS = {1e9: Link(50e-6, 100e6, "truth"), 1e10: Link(30e-6, 600e6, "truth")}
G, S, TRUE_G = 960, 2.7e6, 2.0
TRUTH = LabModel(TRUE_COMPUTE, TRUE_LINKS, S, G, TRUE_G, small_collectives=1.0)
SIZES = [2**k for k in range(10, 26)]  # 1 KiB .. 32 MiB
HOST_PEAK = 3.5e10


def probe_points(link: Link, noise: float = 0.0, seed: int = 0) -> list[tuple[float, float]]:
    rng = np.random.default_rng(seed)
    return [(float(s), link.allreduce_s(2, s) * float(np.exp(rng.normal(0, noise))))
            for s in SIZES] if noise else [(float(s), link.allreduce_s(2, s)) for s in SIZES]


def synthetic_inputs(noise: float = 0.0, runs: int = 3, seed: int = 0) -> FitInputs:
    rng = np.random.default_rng(seed)

    def draws(value: float) -> list[float]:
        return [value * float(np.exp(rng.normal(0, noise))) if noise else value
                for _ in range(runs)]

    return FitInputs(
        G, S, {b: draws(b / TRUE_COMPUTE.at(b)) for b in (G, G // 2)},
        {r: draws(TRUTH.throughput(2, r)) for r in TRUE_LINKS},
        {r: probe_points(lk, noise, seed + 1) for r, lk in TRUE_LINKS.items()},
        avoid=[S])


# -- the fit on synthetic data -------------------------------------------------------------
def test_the_fit_recovers_known_parameters_and_predicts_the_held_out_hosts() -> None:
    model = fit(synthetic_inputs())
    assert model.compute.fixed_s == pytest.approx(TRUE_COMPUTE.fixed_s, rel=1e-6)
    assert model.compute.per_example_s == pytest.approx(TRUE_COMPUTE.per_example_s, rel=1e-6)
    for rate, truth in TRUE_LINKS.items():
        assert model.links[rate].alpha_s == pytest.approx(truth.alpha_s, rel=1e-3)
        assert model.links[rate].bandwidth_Bps == pytest.approx(truth.bandwidth_Bps, rel=1e-3)
    assert model.g == pytest.approx(TRUE_G, rel=1e-3)
    for n in (3, 4):
        for rate in TRUE_LINKS:
            assert model.throughput(n, rate) == pytest.approx(TRUTH.throughput(n, rate),
                                                              rel=1e-3)


@pytest.mark.parametrize("g", [0.6, 1.0, 2.0, 5.0])
def test_the_overlap_exponent_is_recovered(g: float) -> None:
    triples = [(c, m, overlap_step(c, m, g)) for c, m in ((0.1, 0.05), (0.08, 0.12))]
    assert fit_overlap(triples) == pytest.approx(g, rel=1e-3)
    # The limits Pollux's term spans: the sum at g = 1, the larger part as g grows.
    assert overlap_step(0.1, 0.05, 1.0) == pytest.approx(0.15)
    assert overlap_step(0.1, 0.05, 50.0) == pytest.approx(0.1, rel=1e-6)


def test_noisy_inputs_give_intervals_that_hold_the_truth() -> None:
    from reports.lab_fit import bootstrap, interval

    inputs = synthetic_inputs(noise=0.02, seed=3)
    where = [(n, r) for n in (3, 4) for r in TRUE_LINKS]
    low, high = interval(bootstrap(inputs, lambda m: [m.throughput(n, r) for n, r in where],
                                   resamples=300))
    truth = [TRUTH.throughput(n, r) for n, r in where]
    assert all(lo <= t <= hi for lo, t, hi in zip(low, truth, high, strict=True))
    assert all(hi / lo < 1.3 for lo, hi in zip(low, high, strict=True))  # informative


def test_probe_sizes_near_a_gradient_size_are_never_used() -> None:
    pts = probe_points(TRUE_LINKS[1e9])
    # Poison the sizes near S: a fit that used them would move.
    poisoned = [(s, t * (5.0 if abs(s / S - 1) < 0.3 or abs(S / s - 1) < 0.3 else 1.0))
                for s, t in pts]
    link, dropped = fit_link_away(poisoned, 2, [S])
    assert dropped == 1  # 2 MiB (4 MiB is 55% away)
    assert link.bandwidth_Bps == pytest.approx(100e6, rel=1e-3)
    assert link.probe_replicas == 2


def test_the_compute_line_needs_two_batches_and_never_a_negative_fixed_part() -> None:
    with pytest.raises(ValueError, match="2. batch sizes"):
        fit_compute([(960, 0.2), (960, 0.21)])
    line = fit_compute([(100, 0.09), (200, 0.2)])  # would extrapolate below 0
    assert line.fixed_s == 0.0 and line.per_example_s > 0


def test_the_order_check_counts_only_pairs_the_measurement_separates() -> None:
    def m(v: float, half: float = 0.01) -> Measured:
        return Measured(3, v, v, v * (1 - half), v * (1 + half))

    ok = order_check(["a", "b", "c"], [1.0, 2.0, 3.0], [m(10), m(20), m(30)])
    assert ok.preserved and (ok.concordant, ok.ties) == (3, 0)
    assert ok.kendall_tau == pytest.approx(1.0)
    broken = order_check(["a", "b", "c"], [2.0, 1.0, 3.0], [m(10), m(20), m(30)])
    assert not broken.preserved and broken.discordant_pairs == (("a", "b"),)
    tied = order_check(["a", "b"], [2.0, 1.0], [m(10, 0.2), m(11, 0.2)])
    assert tied.preserved and tied.ties == 1


# -- constructed lab results -----------------------------------------------------------------
def budget(rate: float | None) -> dict[str, Any]:
    return {"cpu": {"cpus": 0.5, "period_us": 10000, "quota_us": 5000}, "cgroup": "v1",
            "link": {"rate_bps": rate, "delay_s": 0.0}, "note": None}


def train_result(hosts: int, batch: int, throughput: float, rate: float | None,
                 strategy: str = "multi_worker_mirrored", replicate: int = 1) -> RunResult:
    mode = "global" if strategy == "multi_worker_mirrored" else "per_replica"
    spec = tiny_spec(strategy=strategy, devices=hosts, batch=batch, batch_mode=mode,
                     size="default")
    figures = fake_figures(throughputs=(throughput, throughput, throughput),
                           replicas=spec.replicas, batch=spec.global_batch)
    figures.model.grad_bytes_per_step = int(S)
    hosts_info = [{"task": f"worker{i}", "address": "", "peak_flops_per_s": HOST_PEAK}
                  for i in range(hosts)]
    r = make_result(spec, "ok", None, figures=figures, environment=fake_environment(),
                    launcher={"budget": budget(rate), "hosts": hosts_info})
    r.replicate = replicate
    return r


def probe_result(rate: float) -> RunResult:
    spec = RunSpec(strategy="multi_worker_mirrored", devices=2, mode="allreduce",
                   batch_mode="per_replica", workload="mlp", size="tiny", batch=1)
    pts = [AllReducePoint(f"{s} B", int(s), 1, t, t, s / t, s / t, 10)
           for s, t in probe_points(TRUE_LINKS[rate])]
    return make_result(spec, "ok", None, environment=fake_environment(),
                       allreduce=AllReduceFigures("CollectiveAllReduce", 2, "float32", 2, pts),
                       launcher={"budget": budget(rate)})


def synthetic_lab(ps: bool = True) -> list[RunResult]:
    """Three runs of every point, figures from TRUTH (ParameterServer: 0.9 n x one)."""
    out = []
    for k in (1, 2, 3):
        out.append(train_result(1, G, TRUTH.throughput(1, 1e9), None, replicate=k))
        out.append(train_result(1, G // 2, (G // 2) / TRUE_COMPUTE.at(G // 2), None,
                                replicate=k))
        for rate in TRUE_LINKS:
            for n in (2, 3, 4):
                out.append(train_result(n, G, TRUTH.throughput(n, rate), rate, replicate=k))
            for n in (1, 2, 3, 4) if ps else ():
                out.append(train_result(n, 32, 100.0 * n * 0.9 ** (n - 1), rate,
                                        "parameter_server", k))
    return [*out, *(probe_result(r) for r in TRUE_LINKS)]


def test_the_lab_check_holds_out_three_and_four_hosts() -> None:
    lab = group([r for r in map(lab_run, synthetic_lab()) if r is not None])
    check = check_workload(lab, "mlp", resamples=50)
    assert {(h.hosts, h.rate_bps) for h in check.held} == {(n, r) for n in (3, 4)
                                                           for r in TRUE_LINKS}
    assert all(abs(h.error) < 1e-3 and h.within for h in check.held)
    assert check.order.preserved and check.order.discordant == 0
    assert check.model.g == pytest.approx(TRUE_G, rel=1e-3)
    strong = {(c.rate_bps, cell.hosts): cell for c in curves(lab, "multi_worker_mirrored")
              for cell in c.cells}
    s4 = strong[(1e9, 4)].speedup
    assert s4 is not None and s4.median == pytest.approx(
        TRUTH.throughput(4, 1e9) / TRUTH.throughput(1, 1e9), rel=1e-6)
    weak = {(c.rate_bps, cell.hosts): cell for c in curves(lab, "parameter_server")
            for cell in c.cells}
    s4 = weak[(1e9, 4)].speedup
    assert s4 is not None and s4.median == pytest.approx(4 * 0.9**3)


def test_the_fit_never_sees_three_or_four_hosts() -> None:
    results = synthetic_lab(ps=False)
    lab = group([r for r in map(lab_run, results) if r is not None])
    before = check_workload(lab, "mlp", resamples=20).model
    # Wreck every 3- and 4-host run: the fitted model must not change at all.
    wrecked = [train_result(r.spec.devices, G, 1.0, r.launcher["budget"]["link"]["rate_bps"])
               if r.spec.mode == "train" and r.spec.devices >= 3 else r for r in results]
    after = check_workload(group([r for r in map(lab_run, wrecked) if r is not None]), "mlp",
                           resamples=20)
    assert after.model == before
    assert all(not h.within for h in after.held)


def write_lab(out: Path, results: list[RunResult]) -> None:
    for r in results:
        rate = r.launcher["budget"]["link"]["rate_bps"]
        store = SweepStore(out / "cpu0.5" / ("local" if rate is None else f"{rate:g}"))
        save(r, store.paths(r.spec, r.replicate).result)


def test_the_report_and_the_transfer_from_stored_results(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]
                                                          ) -> None:
    write_lab(tmp_path, synthetic_lab())
    rep = report(tmp_path, resamples=30)
    assert "## Strong scaling" in rep.markdown and "## Weak scaling" in rep.markdown
    assert "| mlp | 1 Gbit/s | 3 |" in rep.markdown and "order preserved" in rep.markdown
    assert "FLOP per byte/s" in rep.markdown
    assert set(rep.plots) == {"speedup-mwms.png", "speedup-ps.png"}
    assert all(png.startswith(b"\x89PNG") for png in rep.plots.values())
    assert main(["lab", "--report-only", "--out", str(tmp_path), "--resamples", "20"]) == 0
    assert (tmp_path / "report" / "lab.md").exists()
    capsys.readouterr()
    assert main(["project", "--lab", str(tmp_path), "--workload", "mlp", "--peak-flops",
                 "3.5e11", "--bandwidth", "10gbit", "--max-replicas", "512"]) == 0
    printed = capsys.readouterr().out
    assert "  512 " in printed and "95% bootstrap" in printed


def test_a_target_at_the_labs_own_ratio_reproduces_the_labs_model() -> None:
    lab = group([r for r in map(lab_run, synthetic_lab(ps=False)) if r is not None])
    # Same peak, same link as the lab's 1 Gbit/s fit: the lab's model itself.
    t = transfer(lab, "mlp", HOST_PEAK, TRUE_LINKS[1e9].bandwidth_Bps,
                 TRUE_LINKS[1e9].alpha_s, batch=G // 2, max_replicas=4, resamples=20)
    by_n = {p.n: p for p in t.points}
    for n in (1, 2, 4):
        expected = n * (G // 2) / overlap_step(TRUE_COMPUTE.at(G // 2),
                                               TRUE_LINKS[1e9].allreduce_s(n, S, 1.0)
                                               if n > 1 else 0.0, TRUE_G)
        assert by_n[n].throughput == pytest.approx(expected, rel=1e-3)
        assert by_n[n].low <= by_n[n].throughput <= by_n[n].high
    faster = transfer(lab, "mlp", HOST_PEAK * 10, TRUE_LINKS[1e9].bandwidth_Bps, None,
                      batch=G // 2, max_replicas=4, resamples=0)
    # Ten times the compute on the same link: more of each step is communication.
    assert {p.n: p for p in faster.points}[4].efficiency < by_n[4].efficiency


# -- the plan and the runs (fake runner) -------------------------------------------------------
def test_the_plan_shares_link_free_points_and_probes_each_link() -> None:
    points = plan(["mlp"], ["multi_worker_mirrored", "parameter_server"], [1, 2, 3, 4],
                  [1e9, 1e10])
    kinds: dict[str, list[LabPoint]] = {}
    for p in points:
        kinds.setdefault(p.kind, []).append(p)
    mwms = [p for p in kinds["scaling"] if p.strategy == "multi_worker_mirrored"]
    assert len(mwms) == 1 + 3 * 2  # one host once, 2-4 hosts per link
    assert [p.rate_bps for p in mwms if p.hosts == 1] == [None]
    assert all(p.spec.global_batch == 960 for p in mwms)
    ps = [p for p in kinds["scaling"] if p.strategy == "parameter_server"]
    assert len(ps) == 4 * 2 and all(p.spec.global_batch == 240 for p in ps)
    assert [(p.hosts, p.spec.batch) for p in kinds["compute"]] == [(1, 480)]
    assert sorted(p.rate_bps or 0 for p in kinds["probe"]) == [1e9, 1e10]
    assert kinds["probe"][0].spec.mode == "allreduce"
    out = Path("/lab")
    assert mwms[0].directory(out, CpuBudget(0.5)) == out / "cpu0.5" / "local"
    assert kinds["probe"][0].directory(out, CpuBudget(0.5)).name in ("1gbit", "10gbit")
    with pytest.raises(LabError, match="strategy=.'mirrored'"):
        plan(["mlp"], ["mirrored"], [1, 2], [1e9])
    with pytest.raises(LabError, match="hosts=7"):
        plan(["mlp"], ["multi_worker_mirrored"], [7], [1e9])  # 960 does not split in 7
    with pytest.raises(LabError, match="hosts=.9"):
        plan(["mlp"], ["multi_worker_mirrored"], [9], [1e9])


class FakeRunner:
    """Stores an ok result for every run it is asked for; records the order."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, float | None]] = []

    def __call__(self, spec: RunSpec, out: Path, shape: LinkShape | None = None, *,
                 cpu: CpuBudget | None = None, progress: Any = None) -> DemoOutcome:
        assert cpu is not None and cpu.cpus == 0.5
        rate = shape.rate_bps if shape else None
        self.calls.append((spec.key(), rate))
        store = SweepStore(out)
        replicate = 1 + len(store.result_files_of(spec))
        r = make_result(spec, "ok", None, environment=fake_environment(),
                        launcher={"budget": budget(rate)})
        save(r, store.paths(spec, replicate).result)
        return DemoOutcome(r, [], shape or LinkShape(), 0.0)


@pytest.fixture
def points() -> Iterator[list[LabPoint]]:
    yield plan(["mlp"], ["multi_worker_mirrored"], [1, 2], [1e9])


def test_runs_are_interleaved_and_resume(tmp_path: Path, points: list[LabPoint]) -> None:
    runner = FakeRunner()
    outcome = run_lab(points, tmp_path, CpuBudget(0.5), 2, runner=runner)
    keys = [k for k, _ in runner.calls]
    # Every point's first run before any second run; the probe once.
    first = keys[:len(points)]
    assert sorted(first) == sorted(p.spec.key() for p in points)
    assert len(keys) == 2 * len(points) - 1 and not outcome.failed
    again = FakeRunner()
    resumed = run_lab(points, tmp_path, CpuBudget(0.5), 3, runner=again)
    assert len(again.calls) == len(points) - 1  # only the third runs
    assert resumed.skipped == len(points)


def test_the_time_budget_stops_before_the_next_run(tmp_path: Path,
                                                   points: list[LabPoint],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    clock = iter(range(0, 10_000, 100))  # every look at the clock: 100 s later
    monkeypatch.setattr(lab_launch.time, "monotonic", lambda: float(next(clock)))
    runner = FakeRunner()
    outcome = run_lab(points, tmp_path, CpuBudget(0.5), 3, max_minutes=4.0, runner=runner)
    assert outcome.stopped_early and 0 < len(runner.calls) < len(points)
    assert len(outcome.runs) == len(runner.calls)
