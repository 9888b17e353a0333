"""The default sweep on GPUs is planned to fit its budget (bench.adaptive.plan, .pricing).

Hardware is the recorded H100's nvidia-smi, replayed for 1, 2, 4 and 8 cards
(``tests.gpu_fakes.h100s``). Nothing here asserts a timing: the prices are first
guesses from constants, and the tests check the decisions they lead to.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest

from bench import hardware
from bench.adaptive import sweep as adaptive_sweep
from bench.adaptive.plan import MAKE_BENCH_SWEEP_S, FirstPass, plan_first_pass
from bench.adaptive.pricing import Price, PriceError, Pricer, unit_price
from bench.hardware import Hardware
from bench.launch.evidence import DEFAULT_STEPS, Evidence
from bench.launch.launcher import make_result
from bench.launch.sweep import SweepOutcome
from bench.matrix import preset_default
from bench.spec import RunSpec
from tests.gpu_fakes import cards, h100s, l40s
from tests.helpers import ROOT, bench, fake_figures


@pytest.fixture
def smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """Install a fake nvidia-smi: ``smi(FakeSmi)`` -> the Hardware detect() then sees."""
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)

    def install(fake: Any) -> Hardware:
        directory = fake.write(tmp_path / f"smi{len(list(tmp_path.iterdir()))}")
        monkeypatch.setenv("PATH", f"{directory}{os.pathsep}{os.environ['PATH']}")
        hardware.detect.cache_clear()
        return hardware.detect()

    yield install
    hardware.detect.cache_clear()


def plan(hw: Hardware, budget_s: float = MAKE_BENCH_SWEEP_S, workloads: tuple[str, ...] = (),
         **kw: Any) -> FirstPass:
    return plan_first_pass(preset_default(hw, workloads), hw, budget_s=budget_s, preset=True,
                           links=hardware.topology_links(hardware.topology()),
                           evidence_steps=DEFAULT_STEPS, **kw)


def running(first: FirstPass) -> set[tuple[str, int, int]]:
    """(strategy, devices, per-replica batch) of what the first pass runs."""
    return {(e.spec.strategy, e.spec.devices, e.spec.batch) for e in first.entries
            if e.state == "will run"}


def test_make_bench_budget_is_what_the_makefile_leaves_the_sweep() -> None:
    make = (ROOT / "Makefile").read_text()
    total, report = (re.search(rf"^{name} \?= (\d+)$", make, re.M)
                     for name in ("BENCH_BUDGET_S", "BENCH_REPORT_S"))
    assert total and report
    # ~20 s more: the all-reduce probe make bench runs first.
    assert float(total.group(1)) - float(report.group(1)) - 20 == MAKE_BENCH_SWEEP_S


@pytest.mark.parametrize("n", [1, 2, 4, 8])
def test_the_first_pass_on_h100s_fits_make_bench_with_the_answers_that_matter(
        smi: Any, n: int) -> None:
    first = plan(smi(h100s(n)))
    assert first.priced and first.fits and 0 < first.estimate_s <= MAKE_BENCH_SWEEP_S
    runs = running(first)
    assert ("one_device", 1, 64) in runs  # the single-GPU reference
    assert not any(s == "default" for s, _, _ in runs)  # one reference, not two
    if n > 1:
        assert {("mirrored", n, 64), ("multi_worker_mirrored", n, 64),
                ("mirrored", 2, 64)} <= runs
    # Every configuration is accounted for, each one left out with its reason.
    assert len(first.entries) == len(preset_default(smi(h100s(n))))
    assert all(e.reason for e in first.entries if e.state != "will run")
    # ResNet50's BatchNormalization cannot train under central_storage with 2+ replicas
    # (on NVLink it could not win either); it is left out saying so.
    central = [e for e in first.entries if e.spec.strategy == "central_storage"
               and e.spec.devices > 1]
    assert all(e.state == "left out" and "BatchNormalization" in (e.reason or "")
               for e in central)


def test_bench_list_prints_the_plan_its_estimate_and_what_it_left_out(smi: Any) -> None:
    smi(h100s(8))
    proc = bench("list", "--preset", "default")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    line = next(ln for ln in out.splitlines() if "multi_worker_mirrored n=8 b=512" in ln)
    assert "will run, ~" in line and "start-up" in line
    assert re.search(r"first pass on 8 GPU\(s\) \(NVIDIA H100 80GB HBM3\): ~\d+ s "
                     r"estimated .*; fits the budget of 565 s \(make bench", out)
    assert "left out: the budget cannot pay for it" in out
    assert "left out: Keras 3 BatchNormalization cannot train under CentralStorage" in out
    # No lone reference: batch 128's one_device runs only beside something of its batch.
    assert not re.search(r"one_device n=1 b=128 \S*\s+will run", out)
    assert "resnet50 mirrored n=8 b=512 opt=sgd" in out
    small = bench("list", "--preset", "default", "--budget", "2m").stdout
    assert "fits the budget of 120 s" in small and small.count("will run") < out.count(
        "will run")


def test_a_bad_budget_is_a_usage_error(smi: Any) -> None:
    smi(h100s(2))
    proc = bench("list", "--preset", "default", "--budget", "soon")
    assert proc.returncode == 2 and "--budget" in proc.stderr and "Traceback" not in proc.stderr


def test_a_smaller_budget_leaves_more_out_and_none_buys_nothing(smi: Any) -> None:
    hw = smi(h100s(8))
    full, small, none = plan(hw), plan(hw, budget_s=150), plan(hw, budget_s=10)
    assert running(small) < running(full) and small.estimate_s <= 150
    assert running(none) == set() and none.estimate_s == 0
    (reference,) = [e for e in none.entries if (e.spec.strategy, e.spec.devices,
                                                 e.spec.batch) == ("one_device", 1, 64)]
    assert reference.state == "left out" and "budget cannot pay" in (reference.reason or "")


def test_a_larger_budget_adds_the_second_batch(smi: Any) -> None:
    hw = smi(h100s(4))
    short = plan(hw, budget_s=300)
    assert {b for _, _, b in running(short)} == {64}
    assert all("comes after every configuration of batch 64" in (e.reason or "")
               for e in short.entries if e.spec.batch == 128 and e.state == "left out"
               and "GPU(s)" not in (e.reason or "") and "same computation" not in
               (e.reason or "") and "BatchNormalization" not in (e.reason or ""))
    long = plan(hw, budget_s=3600)
    assert {b for _, _, b in running(long)} == {64, 128}
    assert {(s, d) for s, d, b in running(long) if b == 128} == \
        {(s, d) for s, d, b in running(long) if b == 64}


def test_central_storage_is_measured_where_the_gpus_have_no_link_of_their_own(
        smi: Any) -> None:
    # The CNN has no BatchNormalization: only the links decide.
    first = plan(smi(h100s(2, link="PHB")), budget_s=3600, workloads=("cnn",))
    assert ("central_storage", 2, 64) in running(first)
    nvlink = plan(smi(h100s(2)), budget_s=3600, workloads=("cnn",))
    (central,) = [e for e in nvlink.entries if (e.spec.strategy, e.spec.devices,
                                                 e.spec.batch) == ("central_storage", 2, 64)]
    assert central.state == "left out" and "NV18" in (central.reason or "")


def test_resnet50_is_not_planned_under_central_storage_on_pcie_gpus(smi: Any) -> None:
    """Four L40S on PCIe across two sockets (PIX, PXB, SYS): no link of their own, but
    Keras 3 BatchNormalization cannot train under CentralStorage with 2+ replicas."""
    hw = smi(l40s(4))
    first = plan(hw, budget_s=3600)
    central = [e for e in first.entries if e.spec.strategy == "central_storage"]
    assert central and not [e for e in central if e.state == "will run"]
    assert all("BatchNormalization" in (e.reason or "") for e in central if e.spec.devices > 1)
    # What the budget no longer spends on it goes to the others at 2 GPUs.
    assert {("multi_worker_mirrored", 2, 64), ("independent", 2, 64)} <= running(first)
    listing = bench("list", "--preset", "default", "--budget", "60m")
    assert listing.returncode == 0, listing.stderr
    lines = [ln for ln in listing.stdout.splitlines() if " central_storage n=" in ln]
    assert lines and not [ln for ln in lines if "will run" in ln]
    assert "first pass on 4 GPU(s) (NVIDIA L40S)" in listing.stdout


def test_an_explicit_sweep_still_runs_central_storage_with_resnet50(smi: Any) -> None:
    """Only the preset's plan leaves it out: asked for, it runs (a TensorFlow and Keras
    that fixed BatchNormalization under it would train it)."""
    hw = smi(l40s(4))
    spec = RunSpec(workload="resnet50", strategy="central_storage", devices=2, batch=64,
                   batch_mode="per_replica")
    first = plan_first_pass([spec], hw, budget_s=3600, preset=False)
    assert [e.state for e in first.entries] == ["will run"]


@pytest.mark.parametrize("fake", [h100s(8), cards(8)], ids=["8xH100", "8xA100"])
def test_no_single_device_reference_is_planned_without_something_to_compare_it_with(
        smi: Any, fake: Any) -> None:
    hw = smi(fake)
    # Every budget from too small for batch 64 to room for batch 128's reference and
    # more: at some of them all of batch 64 is in and only the reference of batch 128
    # still fits, which the old rule then planned alone.
    lone_seen = False
    for budget in range(300, 1400, 25):
        first = plan(hw, budget_s=float(budget))
        runs = running(first)
        for batch in {b for _, _, b in runs}:
            assert {(s, d) for s, d, b in runs if b == batch} - {("one_device", 1)}, \
                (budget, batch)
        (entry,) = [e for e in first.entries if (e.spec.strategy, e.spec.devices,
                                                 e.spec.batch) == ("one_device", 1, 128)]
        if entry.state == "left out" and "nothing else at batch 128" in (entry.reason or ""):
            lone_seen = True
    assert lone_seen  # the case the rule is for was met
    # With time for them, the reference runs beside the others of its batch.
    roomy = running(plan(hw, budget_s=3600))
    assert ("one_device", 1, 128) in roomy and ("mirrored", 8, 128) in roomy


def test_resnet50_trains_with_sgd_and_momentum_on_gpus_as_on_cpus(smi: Any) -> None:
    from bench.matrix import preset_optimizer

    gpu = preset_default(smi(h100s(8)))
    cpu = preset_default(Hardware("test cpu", 2, 2**34))
    assert {s.optimizer for s in gpu if s.workload == "resnet50"} == {"sgd"}
    assert {s.optimizer for s in cpu if s.workload == "resnet50"} == {"sgd"}
    assert preset_optimizer("resnet50") == "sgd" and preset_optimizer("cnn") == "adam"
    # A workload of the user's choice keeps the CPU preset's optimizer for it.
    assert {s.optimizer for s in preset_default(smi(h100s(2)), ["cnn"])} == {"adam"}


def test_a_cpu_machine_keeps_its_preset_whole() -> None:
    cpu = Hardware("test cpu", 2, 2**34)
    specs = preset_default(cpu)
    first = plan_first_pass(specs, cpu, budget_s=10, preset=True)
    assert first.runs == specs and not first.left_out and first.summary() == []


def test_measured_figures_replace_the_first_guess(smi: Any) -> None:
    hw = smi(h100s(2))
    spec = RunSpec(workload="resnet50", strategy="one_device", devices=1, batch=64,
                   batch_mode="per_replica")
    other = spec.replace(strategy="mirrored", devices=2)
    result = make_result(spec, "ok", None, figures=fake_figures(),
                         environment={"machine_id": "test"})
    pricer = Pricer(hw, [result])
    measured = pricer.price(spec)
    assert measured.source == "measured"
    assert measured.startup_s == pytest.approx(2.01) and measured.build_s == 0.4
    guess = Pricer(hw).price(other)
    scaled = pricer.price(other)
    assert scaled.source.startswith("first guess scaled") and scaled.build_s < guess.build_s


def test_a_session_pays_one_start_up() -> None:
    a, b = Price(10, 1, 2, 3), Price(12, 1, 2, 3)
    assert unit_price([a, b]) == 12 + 6 + 6 and unit_price([a]) == a.total_s == 16


@pytest.mark.parametrize("field", ["startup_s", "windows_s"])
def test_a_price_names_the_field_and_value_it_refuses(field: str) -> None:
    values = {"startup_s": 1.0, "build_s": 1.0, "warmup_s": 1.0, "windows_s": 1.0,
              field: -2.0}
    with pytest.raises(PriceError, match=rf"Price\.{field} .*Received: {field}=-2\.0"):
        Price(**values)


def test_the_budgeted_sweep_runs_the_priced_plan_and_prints_what_it_left_out(
        smi: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    hw = smi(h100s(8))
    specs = preset_default(hw)
    ran: list[RunSpec] = []
    together: set[int] = set()

    def fake_run_sweep(todo: list[RunSpec], out: Path, **kw: Any) -> SweepOutcome:
        ran.extend(todo)
        together.add(kw.get("together", 1))
        return SweepOutcome(out)

    monkeypatch.setattr(adaptive_sweep, "run_sweep", fake_run_sweep)
    monkeypatch.setattr(adaptive_sweep, "spend", lambda *a, **kw: [])
    monkeypatch.setattr(adaptive_sweep, "print_answers", lambda *a, **kw: None)
    lines: list[str] = []
    adaptive_sweep.budgeted_sweep(specs, tmp_path, budget_s=MAKE_BENCH_SWEEP_S,
                                  started=__import__("time").monotonic(), interleave=True,
                                  evidence=Evidence(), preset=True, echo=lines.append)
    first = plan(hw)
    assert {s.key() for s in ran} == {s.key() for s in first.runs}
    assert not {e.spec.key() for e in first.left_out} & {s.key() for s in ran}
    text = "\n".join(lines)
    assert "left out of the first pass" in text and "budget cannot pay" in text
    assert "first pass on 8 GPU(s)" in text
    # A process waiting for its turn would keep its GPU's memory: one session at a time.
    assert together == {1}


@pytest.mark.parametrize(("name", "params"), [
    ("mlp", {}), ("cnn", {}), ("resnet50", {"image_size": 32, "classes": 10})])
def test_the_analytic_flops_match_the_built_models(name: str, params: dict[str, Any]) -> None:
    from workloads import WORKLOADS
    from workloads.flops import model_stats

    w = WORKLOADS.get(name)
    resolved = w.resolve("default", params)
    assert w.train_flops is not None
    assert w.train_flops(resolved) == pytest.approx(
        model_stats(w.build(resolved)).train_flops_per_example, rel=1e-9)
