"""The scaling projection: its arithmetic on constructed inputs, the fit, the CLI, the
report's "Projected scaling" section (synthetic result files), and the plumbing of
scripts.projection_check (with a fake runner: no TensorFlow, no namespaces)."""

from __future__ import annotations

import base64
import html
import importlib
import itertools
import re
from pathlib import Path
from typing import Any

import pytest

from bench.cli.main import main
from bench.launch.netns import LinkShape
from bench.results.schema import AllReduceFigures, AllReducePoint, RunResult
from bench.results.store import SweepStore, save
from bench.spec import RunSpec
from reports.files import write
from reports.projection import (
    DEFAULT_BACKWARD_SHARE,
    Inputs,
    Link,
    ProjectionError,
    check,
    fit_link,
    fit_link_at,
    inputs_from_result,
    link_from_probe,
    plot,
    project,
    project_point,
    text,
)
from reports.report import build
from tests.helpers import fake_environment, measured

LINK = Link(alpha_s=1e-4, bandwidth_Bps=1e9, source="test")
INPUTS = Inputs(compute_s=0.3, grad_bytes=1e8, per_replica_batch=8)


def test_ring_allreduce_formula() -> None:
    # 2(n-1)·alpha + 2(n-1)/n · S/B
    assert LINK.allreduce_s(1, 1e8) == 0.0
    assert LINK.allreduce_s(2, 1e8) == pytest.approx(2 * 1e-4 + 1.0 * 1e8 / 1e9)
    assert LINK.allreduce_s(4, 1e8) == pytest.approx(6 * 1e-4 + 1.5 * 1e8 / 1e9)
    assert LINK.terms(4, 1e8) == pytest.approx((6e-4, 0.15))


def test_small_collectives_add_latency_only() -> None:
    assert LINK.allreduce_s(4, 1e8, small=1.0) == pytest.approx(2 * 6e-4 + 0.15)
    assert LINK.terms(4, 1e8, small=0.5) == pytest.approx((1.5 * 6e-4, 0.15))


def test_band_from_no_overlap_to_full_overlap() -> None:
    link = Link(0.0, 1e9, "test")
    p = project_point(INPUTS, link, 2)  # comm = 0.1 s; backward = 0.2 s hides it all
    assert p.comm_s == pytest.approx(0.1)
    assert p.step_no_overlap_s == pytest.approx(0.4)
    assert p.step_full_overlap_s == pytest.approx(0.3)
    assert p.throughput_low == pytest.approx(16 / 0.4)
    assert p.efficiency_low == pytest.approx(0.75) and p.efficiency_high == pytest.approx(1.0)
    # At 8 replicas comm = 1.75 x 0.1 = 0.175 s: still hidden; slow links expose it.
    slow = project_point(INPUTS, Link(0.0, 1e8, "test"), 8)  # comm 1.75 s
    assert slow.step_full_overlap_s == pytest.approx(0.3 + 1.75 - 0.2)
    one = project_point(INPUTS, LINK, 1)
    assert one.efficiency_low == one.efficiency_high == 1.0


def test_projection_covers_every_n_up_to_512() -> None:
    proj = project(INPUTS, LINK, 512)
    assert [p.n for p in proj.points] == list(range(1, 513))
    effs = [p.efficiency_low for p in proj.points]
    assert all(a >= b for a, b in itertools.pairwise(effs))  # falls with n
    # The bandwidth term tends to 2·S/B; the latency term (gradients + the loss's
    # small collective) grows with n.
    assert proj.points[-1].efficiency_low == pytest.approx(
        0.3 / (0.3 + 2 * 511 * 1e-4 * 2 + 2 * 511 / 512 * 0.1))


def test_fit_recovers_alpha_and_bandwidth_from_exact_timings() -> None:
    for n in (2, 4):
        truth = Link(5e-5, 2.5e8, "truth")
        pts = [(s, truth.allreduce_s(n, s)) for s in (2**k for k in range(10, 28, 2))]
        fit = fit_link(pts, n)
        assert fit.alpha_s == pytest.approx(5e-5, rel=1e-6)
        assert fit.bandwidth_Bps == pytest.approx(2.5e8, rel=1e-6)
        assert fit.max_rel_residual == pytest.approx(0.0, abs=1e-9)


def test_fit_pins_a_negative_latency_to_zero() -> None:
    # Pure bandwidth with the smallest size's time read low: the intercept goes negative.
    pts = [(1e3, 0.5e-6), (1e6, 1e-3), (1e7, 1e-2)]
    fit = fit_link(pts, 2)
    assert fit.alpha_s == 0.0 and fit.bandwidth_Bps > 0
    with pytest.raises(ProjectionError, match="2\\+ sizes"):
        fit_link([(1e6, 1e-3)], 2)
    with pytest.raises(ProjectionError, match="replicas=1"):
        fit_link(pts, 1)


def bent_link_points(n: int) -> list[tuple[float, float]]:
    """A link that is no straight line: 2 ms of latency, 1 GB/s up to 1 MiB, then
    half that (as the emulated links behaved): one global fit misses both ends."""
    pts = []
    for k in range(10, 28):
        s = float(2**k)
        t = 2e-3 + (2 * (n - 1) / n) * (min(s, 2**20) / 1e9 + max(0.0, s - 2**20) / 5e8)
        pts.append((s, t))
    return pts


def test_the_fit_is_anchored_where_the_model_is_used() -> None:
    pts = bent_link_points(2)
    S = 50e6
    t_at = dict(pts)[2.0**25] * 1.0  # a size that was probed: no interpolation needed
    link = fit_link_at(pts, 2, 2.0**25)
    # The median of the <= 64 KiB buffers' times / 2(n-1): latency, and a little transfer.
    assert link.alpha_s == pytest.approx(1e-3, rel=0.01)
    assert link.allreduce_s(2, 2.0**25) == pytest.approx(t_at)  # reproduces the probe at S
    assert link.anchored_bytes == 2.0**25 and link.probe_replicas == 2
    # Between probed sizes: log-log interpolation; a measured time at S wins.
    between = fit_link_at(pts, 2, S)
    lo, hi = dict(pts)[2.0**25], dict(pts)[2.0**26]
    assert lo < between.allreduce_s(2, S) < hi
    measured_at = fit_link_at(pts, 2, S, measured_at=0.2)
    assert measured_at.allreduce_s(2, S) == pytest.approx(0.2)
    # The global fit misses the large sizes by more than the anchored one at S.
    glob = fit_link(pts, 2)
    assert abs(glob.allreduce_s(2, 2.0**25) - t_at) / t_at > 0.05
    # Outside the probed sizes and without a measurement: the global fit.
    assert fit_link_at(pts, 2, 2.0**30).anchored_bytes is None


def test_a_gap_beyond_an_anchored_link_is_the_compute_term() -> None:
    link = fit_link_at(bent_link_points(2), 2, 2.0**25)
    proj = project(Inputs(compute_s=0.1, grad_bytes=2.0**25, per_replica_batch=8), link, 8)
    slow = check(proj, 2, proj.at(2).throughput_low / 1.3)
    assert slow.diagnosis.startswith("compute term") and "reproduce the probe" in slow.diagnosis
    # At another replica count the link is extrapolated: the terms are named instead.
    other = check(proj, 4, proj.at(4).throughput_low / 1.5)
    assert other.diagnosis.startswith(("bandwidth term", "latency term"))


def test_inputs_and_link_from_stored_results() -> None:
    single = measured("one_device", 1, 32, 1000.0)
    inputs = inputs_from_result(single)
    assert single.figures is not None
    assert inputs.compute_s == pytest.approx(0.032)  # 32 examples at 1000 ex/s
    assert inputs.grad_bytes == single.figures.model.grad_bytes_per_step
    assert inputs.backward_share == pytest.approx(1 - 200 / 600)
    with pytest.raises(ProjectionError, match="replicas=2"):
        inputs_from_result(measured("mirrored", 2, 32, 1000.0))
    truth = Link(2e-5, 1e9, "truth")
    probe = AllReduceFigures(implementation="CollectiveAllReduce", replicas=2, dtype="float32",
                             warmup_iterations=3, points=[
        AllReducePoint(label=f"{s} B", bytes=s, tensors=1, time_median_s=truth.allreduce_s(
            2, s), time_p90_s=0.0, algbw=0.0, busbw=0.0, iterations=5)
        for s in (2**k for k in range(10, 24))] + [
        AllReducePoint(label="gradients:x", bytes=10**6, tensors=9, time_median_s=1.0,
                       time_p90_s=1.0, algbw=0.0, busbw=0.0, iterations=5)])
    link = link_from_probe(probe)  # the many-tensor gradients point stays out of the fit
    assert link.alpha_s == pytest.approx(2e-5) and link.bandwidth_Bps == pytest.approx(1e9)
    # At the gradient size, B comes from the probe's own all-reduce of the gradients.
    at = link_from_probe(probe, at_bytes=10**6)
    assert at.anchored_bytes == 10**6 and at.allreduce_s(2, 10**6) == pytest.approx(1.0)
    assert at.alpha_s == pytest.approx(truth.allreduce_s(2, 8192) / 2)  # median: 8 KiB


def test_checks_name_the_term_that_is_off() -> None:
    proj = project(INPUTS, Link(1e-5, 1e9, "test"), 8)
    p2 = proj.at(2)
    exact = check(proj, 2, p2.throughput_low)
    assert exact.error == pytest.approx(0.0) and exact.diagnosis == "within tolerance"
    slow = check(proj, 2, p2.throughput_low / 1.5)  # communication took longer
    assert slow.error == pytest.approx(0.5) and not slow.in_band
    assert slow.diagnosis.startswith("bandwidth term") and "effective B" in slow.diagnosis
    inside = check(proj, 2, (p2.throughput_low + p2.throughput_high) / 2 * 1.1)
    assert inside.diagnosis.startswith("overlap") or abs(inside.error) <= 0.10
    fast = check(proj, 2, 2 * 8 / 0.25)  # faster than one replica's compute
    assert fast.diagnosis.startswith("compute term")
    tiny = project(Inputs(compute_s=0.001, grad_bytes=1e3, per_replica_batch=8),
                   Link(1e-5, 1e9, "test"), 8)
    lat = check(tiny, 2, tiny.at(2).throughput_low / 2)
    assert lat.diagnosis.startswith("latency term")


def test_text_prints_inputs_fit_and_formulas_and_the_plot_is_a_png() -> None:
    proj = project(INPUTS, LINK, 512)
    out = text(proj, [check(proj, 2, 30.0, "mwms n=2")])
    for needle in ("compute  = 300.000 ms", "alpha    = 100.00 us", "B        = 8 Gbit/s",
                   "2(n-1)*alpha*(1 + c) + 2(n-1)/n * S/B", "c        = 1 small", "  512 ",
                   "mwms n=2"):
        assert needle in out
    png = plot(proj, [check(proj, 2, 30.0, "mwms n=2")])
    assert png.startswith(b"\x89PNG")


def test_project_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    single = measured("one_device", 1, 32, 1000.0)
    save(single, tmp_path / "single.json")
    png = tmp_path / "eff.png"
    assert main(["project", "--single", str(tmp_path / "single.json"), "--bandwidth", "1gbit",
                 "--latency-us", "20", "--max-replicas", "64", "--plot", str(png)]) == 0
    out = capsys.readouterr().out
    assert "alpha    = 20.00 us" in out and "   64 " in out and png.read_bytes()[:4] == b"\x89PNG"
    assert main(["project", "--compute-ms", "10", "--bandwidth", "1gbit"]) == 2
    assert "--grad-bytes" in capsys.readouterr().err
    assert main(["project", "--compute-ms", "10", "--grad-bytes", "1e6", "--batch", "8",
                 "--bandwidth", "fast", "--latency-us", "1"]) == 2
    assert "Received: 'fast'" in capsys.readouterr().err


# -- the report's "Projected scaling" section -----------------------------------------
TRUTH = Link(alpha_s=2e-5, bandwidth_Bps=1e8, source="truth")


def probe_result(env: dict[str, Any] | None = None) -> RunResult:
    """A mirrored all-reduce probe over 2 replicas timed exactly as ``TRUTH``."""
    r = measured("mirrored", 2, 32, 1.0, mode="allreduce", env=env)
    r.figures = None
    r.allreduce = AllReduceFigures("CollectiveAllReduce", 2, "float32", 3, [
        AllReducePoint(f"{s} B", s, 1, TRUTH.allreduce_s(2, s), 0.0, 0.0, 0.0, 5)
        for s in (2**k for k in range(10, 20))])
    return r


def report_html(tmp: Path, results: list[RunResult]) -> str:
    """The HTML report of a sweep directory holding ``results`` as stored files."""
    for r in results:
        save(r, tmp / "sweep" / "results" / f"{r.key}.json")
    return write(build(tmp / "sweep"), tmp / "out").html.read_text(encoding="utf-8")


def section(page: str) -> str:
    """The (first) "Projected scaling" section, unescaped, images left as their tags."""
    start = page.index("<h3>Projected scaling</h3>")
    end = page.index("<h3>Runs without figures", start)
    return html.unescape(page[start:end])


def test_the_report_projects_a_sweep_with_a_probe_and_checks_its_runs(tmp_path: Path) -> None:
    single = measured("mirrored", 1, 32, 950.0)  # the probed strategy's own: preferred
    inputs = Inputs(compute_s=32 / 950.0, grad_bytes=400, per_replica_batch=32,
                    backward_share=1 - 200 / 600)
    assert inputs.backward_share != DEFAULT_BACKWARD_SHARE  # read from the stored FLOPs
    p2, p4 = project_point(inputs, TRUTH, 2), project_point(inputs, TRUTH, 4)
    results = [measured("one_device", 1, 32, 1000.0), single, probe_result(),
               # global batches 64 and 128: 32 per replica, the single run's
               measured("mirrored", 2, 64, p2.throughput_low / 1.25),
               measured("mirrored", 4, 128, p4.throughput_low),
               measured("mirrored", 2, 32, 500.0)]  # 16 per replica: not a check
    got = section(report_html(tmp_path, results))
    figures = re.findall(r"data-plot='projected-scaling'><img alt='[^']*' "
                         r"src='data:image/png;base64,([A-Za-z0-9+/=]+)'", got)
    assert len(figures) == 1
    assert base64.b64decode(figures[0]).startswith(b"\x89PNG")
    assert "mlp[tiny]: link of the mirrored probe" in got
    assert single.key in got and f"compute  = {32 / 950.0 * 1e3:.3f} ms" in got
    assert f"alpha    = {TRUTH.alpha_s * 1e6:.2f} us" in got  # the probe's link, refitted
    rows = {ln.split()[1]: ln for ln in got.splitlines() if ln.startswith("mirrored n=")}
    assert set(rows) == {"n=2", "n=4"}
    assert "+25.0%" in rows["n=2"] and re.search(r" [+-]0\.0% ", rows["n=4"])
    assert "A model, not a measurement" in got
    assert "set against the 2 runs measured here its no-overlap edge is off by +25.0% at " \
           "worst (n=2)" in got
    assert "a line through its sizes, worst residual 0%" in got  # S is below the probe
    assert "logical devices sharing this machine's cores" in got  # a CPU-only fingerprint
    assert "Not projected" not in got


def test_the_report_says_in_one_line_what_a_projection_lacks(tmp_path: Path) -> None:
    other = fake_environment("box-b")
    # The only probe is another machine's: machines never lend each other figures.
    page = report_html(tmp_path / "a", [measured("one_device", 1, 32, 1000.0),
                                        measured("mirrored", 2, 64, 1500.0),
                                        probe_result(env=other)])
    assert "data-plot='projected-scaling'" not in page
    machines = {("box-b" if "<td class='l'>box-b</td>" in m else "cpu-box"): section(m)
                for m in page.split("<h2 id='machine-")[1:]}
    assert "Not projected: no all-reduce probe on this machine" in machines["cpu-box"]
    assert "Not projected: no training run on this machine." in machines["box-b"]
    # A probe but no single-replica run: the workload names what it lacks.
    got = section(report_html(tmp_path / "b", [measured("mirrored", 2, 64, 1500.0),
                                                probe_result()]))
    assert "mlp[tiny]: not projected: no single-replica training run" in got
    assert "<img" not in got
    # Both inputs and no multi-replica run: projected, its error unknown.
    got = section(report_html(tmp_path / "c", [measured("mirrored", 1, 32, 950.0),
                                                probe_result()]))
    assert "data:image/png;base64," in got and "its error is unknown" in got


# -- scripts.projection_check ---------------------------------------------------------
def load_script() -> Any:
    return importlib.import_module("scripts.projection_check")


class FakeRunner:
    """Results made up from a known link: the 1 Gbit/s runs match it, the others are
    2x slower than it predicts (so the script must name a term)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, str]] = []
        self.truth = Link(3e-5, 1e9 / 8, "truth")

    def single(self, spec: RunSpec, out: Path) -> RunResult | None:
        self.calls.append(("single", spec.workload, spec.strategy))
        return measured(spec.workload and "one_device", 1, spec.batch, 2000.0,
                        workload=spec.workload)

    def demo(self, spec: RunSpec, out: Path, shape: LinkShape) -> RunResult | None:
        self.calls.append((spec.mode, spec.workload, shape.label()))
        if spec.mode == "allreduce":
            r = measured("multi_worker_mirrored", 2, 2, 1.0, status="ok")
            r.figures = None
            r.allreduce = AllReduceFigures("CollectiveAllReduce", 2, "float32", 3, [
                AllReducePoint(f"{s}", s, 1, self.truth.allreduce_s(2, s), 0.0, 0.0, 0.0, 5)
                for s in (2**k for k in range(10, 20))])
            return r
        single = 2000.0 / spec.per_replica_batch  # steps/s of one replica
        # fake_figures: 400 gradient bytes; the loss's small collective once per step
        step = 1 / single + self.truth.allreduce_s(2, 400, small=1.0)
        tput = 2 * spec.per_replica_batch / step
        if shape.rate_bps != 1e9:
            tput /= 2
        return measured("multi_worker_mirrored", 2, 2 * spec.per_replica_batch, tput,
                        workload=spec.workload, batch_mode="global")


def test_projection_check_plumbing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = load_script()
    runner = FakeRunner()
    code = script.main(["--out", str(tmp_path), "--models", "mlp,resnet50", "--rates",
                        "1gbit,10gbit", "--quick"], runner=runner)
    out = capsys.readouterr().out
    assert code == 0, out
    kinds = [c[0] for c in runner.calls]
    assert kinds.count("single") == 2 and kinds.count("allreduce") == 4
    assert kinds.count("train") == 4
    rows = [ln for ln in out.splitlines()
            if ln.startswith(("mlp ", "resnet50 ")) and " on " not in ln]
    assert len(rows) == 4, out
    assert all("+0.0%" in r and r.rstrip().endswith("yes") for r in rows if "1 Gbit/s" in r)
    slow = [r for r in rows if "10 Gbit/s" in r]
    assert all("+100.0%" in r and r.rstrip().endswith("NO") for r in slow)
    assert "bandwidth term" in out or "latency term" in out


def test_projection_check_reports_a_failed_measurement(tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]
                                                       ) -> None:
    script = load_script()

    class Broken(FakeRunner):
        def demo(self, spec: RunSpec, out: Path, shape: LinkShape) -> RunResult | None:
            if spec.mode == "train":
                return measured("multi_worker_mirrored", 2, 64, 0.0, status="failed",
                                reason="host of task worker1 failed: boom")
            return super().demo(spec, out, shape)

    assert script.main(["--out", str(tmp_path), "--models", "mlp", "--rates", "1gbit"],
                       runner=Broken()) == 3
    assert "run: host of task worker1 failed: boom" in capsys.readouterr().out
    assert not SweepStore(tmp_path).results_dir.exists()  # the fake wrote nothing
