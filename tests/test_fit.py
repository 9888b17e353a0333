"""The loop axis: Keras ``fit`` beside the custom loop, and the Keras 2 lane.

Pure tests check the spec fields, the support rules, the window protocol of the fit
mode (``FitClock``, with a fake clock) and the fit-vs-custom report. The TensorFlow
tests run in child processes on 2 logical CPUs: one process trains every in-process
strategy with ``fit`` and compares it with the custom loop (one per Keras lane); one
run trains MultiWorkerMirrored with ``fit`` in the Keras 2 lane on two local processes,
beside the children (``fit_runs``).

    python -m tests.test_fit CASE JSON_KWARGS   -> prints one result line (a TF case)
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bench.child.windows import NoDeviceMemory, Rules
from bench.errors import SpecError
from bench.hardware import Hardware
from bench.launch.launcher import make_result, unsupported_result
from bench.matrix import expand_axes
from bench.results.schema import RunResult
from bench.spec import RunSpec
from bench.strategies import STRATEGIES
from reports.loops import cost_line, loop_costs
from tests import tf_cases
from tests.helpers import fake_figures, tiny_spec
from tests.tf_cases import Lanes

CPU = Hardware("test cpu", 2, 2**34)
# fit and the custom loop differ only in the order of floating-point operations (Keras
# averages the loss per replica, then over replicas): after 20 Adam steps on the tiny
# MLP their losses agreed to 5e-7 (relative) here; the tolerance leaves room for other
# kernels and thread counts.
LOSS_PARITY_REL = 1e-4


# -- spec: fields, labels, identity ------------------------------------------------------
def test_loop_and_keras_are_validated_with_the_field_named() -> None:
    with pytest.raises(SpecError, match=r"RunSpec.loop .*Received: loop='fast'"):
        RunSpec(workload="mlp", strategy="one_device", loop="fast")
    for bad in (4, True, "2"):
        with pytest.raises(SpecError, match=r"RunSpec.keras .*Received: keras="):
            RunSpec(workload="mlp", strategy="one_device", keras=bad)


def test_defaults_keep_old_keys_and_others_are_labelled() -> None:
    plain = RunSpec(workload="mlp", strategy="mirrored", devices=2, batch=256)
    explicit = plain.replace(loop="custom", keras=3)
    assert explicit.key() == plain.key() and explicit.label() == plain.label()
    fit, k2 = plain.replace(loop="fit"), plain.replace(loop="fit", keras=2)
    assert len({plain.key(), fit.key(), k2.key()}) == 3
    assert ".fit." in fit.key() and ".keras2." in k2.key()
    assert "loop=fit" in fit.label() and "keras2" in k2.label()
    assert "loop" not in plain.label() and "keras" not in plain.label()


def test_loop_and_keras_are_sweep_axes() -> None:
    from bench.cli.common import add_matrix_args

    parser = argparse.ArgumentParser()
    add_matrix_args(parser)
    args = parser.parse_args(["--loop", "custom,fit", "--keras", "3,2"])
    assert args.loop == ["custom", "fit"] and args.keras == [3, 2]
    specs = expand_axes({"workload": ["mlp"], "strategy": ["one_device"],
                         "loop": args.loop, "keras": args.keras}).specs
    assert {(s.loop, s.keras) for s in specs} == {("custom", 3), ("custom", 2), ("fit", 3),
                                                  ("fit", 2)}


# -- support rules ----------------------------------------------------------------------
SUPPORTED = [("default", 1, {}), ("one_device", 1, {}), ("mirrored", 2, {}),
             ("central_storage", 2, {}), ("mirrored", 1, {"steps_per_call": 2}),
             ("one_device", 1, {"xla": True}), ("independent", 2, {}),
             ("multi_worker_mirrored", 2, {"keras": 2}), ("mirrored", 2, {"keras": 2}),
             ("mirrored", 2, {"keras": 2, "steps_per_call": 2}),
             ("one_device", 1, {"profile_steps": 2}), ("mirrored", 2, {"profile_steps": 2})]
UNSUPPORTED = [
    ("multi_worker_mirrored", 2, {}, "keras-team/keras#20585"),
    ("parameter_server", 2, {}, "DatasetCreator"),
    ("parameter_server", 2, {"keras": 2}, "DatasetCreator"),
    ("mirrored", 2, {"steps_per_call": 2}, "You must feed a value for placeholder tensor"),
    ("mirrored", 2, {"xla": True}, "jit_compile"),
    ("central_storage", 2, {"xla": True}, "jit_compile"),
    ("mirrored", 2, {"xla": True, "keras": 2}, "jit_compile"),
    ("one_device", 1, {"grad_accum": 2}, "grad_accum"),
    ("one_device", 1, {"keras": 2, "precision": "mixed_float16"}, "LossScaleOptimizer"),
]


@pytest.mark.parametrize(("strategy", "devices", "over"), SUPPORTED)
def test_fit_runs_where_keras_can_train(strategy: str, devices: int,
                                        over: dict[str, Any]) -> None:
    spec = tiny_spec(strategy=strategy, devices=devices, loop="fit", **over)
    assert STRATEGIES.get(strategy).unsupported_reason(spec, CPU) is None


@pytest.mark.parametrize(("strategy", "devices", "over", "why"), UNSUPPORTED)
def test_unsupported_combinations_are_recorded_with_their_reason(
        strategy: str, devices: int, over: dict[str, Any], why: str) -> None:
    spec = tiny_spec(strategy=strategy, devices=devices, loop="fit", **over)
    result = unsupported_result(spec, CPU)  # what the launcher stores, without a process
    assert result is not None and result.status == "unsupported"
    assert why in (result.reason or ""), result.reason


@pytest.mark.parametrize("strategy", ["default", "one_device", "mirrored", "central_storage",
                                      "multi_worker_mirrored", "parameter_server"])
def test_the_custom_loop_keeps_every_strategy(strategy: str) -> None:
    devices = 1 if strategy in ("default", "one_device") else 2
    for keras in (3, 2):
        spec = tiny_spec(strategy=strategy, devices=devices, keras=keras)
        assert STRATEGIES.get(strategy).loop_reason(spec) is None


# -- the fit mode's window protocol (no TensorFlow) ----------------------------------------
class FakeFit:
    """Drives a FitClock as Keras' fit would: calls of ``k`` steps, a running-mean loss
    since the last metric reset, a clock advancing 10 ms per call."""

    def __init__(self, rules: Rules, k: int = 1, agree: Any = None,
                 warm_target: int | None = None) -> None:
        from bench.child.backends.tf.fit import FitClock

        self.now, self.sum, self.n, self.syncs, self.gone = 0.0, 0.0, 0, 0, 0
        self.k = k
        self.clock = FitClock(
            rules=rules, sync=self._sync, reset_loss=self._reset,
            memory=NoDeviceMemory("process"), examples_per_step=32, replicas=2,
            launch_ts=0.0, phases={"import_framework_s": 1.0, "device_setup_s": 0.1,
                                   "build_s": 0.2},
            before_windows=self._go, agree=agree, warm_target=warm_target,
            clock=self._tick)

    def _tick(self) -> float:
        self.now += 0.005
        return self.now

    def _sync(self) -> None:
        self.syncs += 1

    def _reset(self) -> None:
        self.sum, self.n = 0.0, 0

    def _go(self) -> None:
        self.gone += 1

    def run(self, losses: list[float]) -> int:
        """Feed per-step losses until the clock says stop; returns the steps taken."""
        self.clock.start()
        for step in range(0, len(losses), self.k):
            self.clock.begin()
            for loss in losses[step:step + self.k]:
                self.sum, self.n = self.sum + loss, self.n + 1
            if self.clock.end(step, step + self.k - 1, self.sum / self.n):
                return step + self.k
        raise AssertionError("the clock never stopped fit")


def test_fit_clock_times_warmup_apart_and_recovers_each_calls_loss() -> None:
    fake = FakeFit(Rules(repeats=2, warmup_steps=2, min_steps=3, max_steps=3,
                         max_seconds=100.0))
    losses = [3.0, 2.5, 2.0, 1.8, 1.6, 1.5, 1.4, 1.3, 9.9]
    assert fake.run(losses) == 8  # 2 warm-up steps, then 2 windows of 3
    c = fake.clock
    assert c.done and c.loss_start == pytest.approx(3.0) and fake.gone == 1
    assert c.warmup is not None and c.warmup.steps == 2
    assert [w.steps for w in c.windows] == [3, 3]
    assert [(w.loss_first, w.loss_last) for w in c.windows] == [
        pytest.approx((2.0, 1.6)), pytest.approx((1.5, 1.3))]
    assert all(w.examples == 96 and w.global_throughput > 0 for w in c.windows)
    assert len(c.step_times) == 6  # one sample per call inside the windows only
    # Synchronised after the first call, at the end of warm-up, and at both edges of
    # every window.
    assert fake.syncs == 2 + 2 * 2


def test_fit_clock_with_several_steps_per_call_and_agreed_windows() -> None:
    proposals: list[float] = []

    def agree(step_s: float) -> int:
        proposals.append(step_s)
        return 4

    fake = FakeFit(Rules(repeats=2, warmup_steps=1, min_steps=1, max_steps=100,
                         max_seconds=100.0), k=2, agree=agree, warm_target=6)
    assert fake.run([float(10 - i) for i in range(20)]) == 6 + 8
    c = fake.clock
    assert len(proposals) == 1 and [w.steps for w in c.windows] == [4, 4]
    # A call's loss is the mean over its steps: steps 6-7 then 8-9 in the first window.
    assert c.windows[0].loss_first == pytest.approx(3.5)
    assert c.windows[0].loss_last == pytest.approx(1.5)
    assert c.step_bound(2) % 2 == 0 and c.step_bound(2) > 6 + 2 * 100


# -- the report: what fit costs ------------------------------------------------------------
def _run(loop: str, throughputs: tuple[float, ...], replicate: int, status: str = "ok",
         **over: Any) -> RunResult:
    spec = tiny_spec(loop=loop, **over)
    figures = fake_figures(throughputs, replicas=spec.replicas) if status == "ok" else None
    r = make_result(spec, status, None if status == "ok" else "no fit here",
                    figures=figures, environment={"machine_id": "box"})
    r.replicate = replicate
    return r


def test_loop_costs_pairs_fit_with_its_custom_configuration() -> None:
    custom = [_run("custom", (1000.0, 1010.0, 990.0), i) for i in (1, 2, 3)]
    fit = [_run("fit", (800.0 + i, 810.0, 790.0), i) for i in (1, 2, 3)]
    other = [_run("custom", (500.0, 505.0), 1, batch=64)]  # no fit twin: left out
    [cost] = loop_costs(custom + fit + other)
    assert cost.strategy == "mirrored" and "loop" not in cost.label
    assert cost.custom_runs == cost.fit_runs == 3
    assert cost.ratio == pytest.approx(0.8, rel=0.01) and cost.significant
    assert cost.custom_gain == pytest.approx(0.25, rel=0.02)
    c = cost.comparison
    assert c is not None and c.low < cost.ratio < c.high
    assert "a custom loop would gain 25%" in cost_line(cost)


def test_loop_costs_keeps_an_unsupported_fit_with_its_reason() -> None:
    costs = loop_costs([_run("custom", (1000.0,), 1), _run("fit", (), 1, "unsupported")])
    assert len(costs) == 1 and costs[0].comparison is None
    assert "unsupported: no fit here" in costs[0].note
    assert "no fit vs custom comparison" in cost_line(costs[0])


def test_loop_costs_calls_a_tie_a_tie() -> None:
    custom = [_run("custom", (1000.0 * f, 1000.0 * f), i)
              for i, f in ((1, 1.0), (2, 1.1), (3, 0.9))]
    fit = [_run("fit", (1000.0 * f, 1000.0 * f), i) for i, f in ((1, 1.05), (2, 0.95), (3, 1.0))]
    [cost] = loop_costs(custom + fit)
    assert not cost.significant and "tied" in cost_line(cost)
    assert math.isfinite(cost.comparison.mde if cost.comparison else math.inf)


# -- TensorFlow: fit trains, and matches the custom loop ----------------------------------
def run_case(case: str, **kwargs: Any) -> Any:
    """Run a case of this module in a child process (``tests.tf_cases.run_case``)."""
    return tf_cases.run_case(case, module="tests.test_fit", **kwargs)


# Fixed-length windows (min = max steps): both loops take exactly the same steps.
FIXED = {"repeats": 3, "warmup_steps": 2, "min_steps": 6, "max_steps": 6,
         "max_seconds": 60.0}
IN_PROCESS = [("default", 1), ("one_device", 1), ("central_storage", 2), ("mirrored", 2)]
PARITY = ("one_device", "mirrored")


def case_fit_and_custom(setup: Any, keras: int = 3,
                        strategies: list[list[Any]] | None = None) -> dict[str, Any]:
    """In-process strategies trained with fit; one_device and mirrored with the custom
    loop too (one strategy object per strategy: a second MirroredStrategy in a process
    breaks collectives, see tests/tf_cases.py). ``keras``: the lane (chosen by main)."""
    from bench.child.backends.base import DeviceSetup
    from bench.child.backends.tf.build import build as build_strategy
    from bench.child.backends.tf.fit import TRAINERS

    phases = {"import_framework_s": 0.0, "device_setup_s": 0.0, "build_s": 0.0}
    out: dict[str, Any] = {}
    for strategy_name, devices in strategies or IN_PROCESS:
        loops = ("fit", "custom") if strategy_name in PARITY else ("fit",)
        names = setup.names[:devices]
        strategy = None
        for loop in loops:
            spec = tiny_spec(strategy=strategy_name, devices=devices, loop=loop,
                             keras=keras, **FIXED)
            strategy = strategy or build_strategy(spec, names)
            trainer = TRAINERS.get(loop)(spec, strategy,
                                         DeviceSetup(setup.kind, names, setup.logical))
            f = trainer.measure(0.0, phases)
            out[f"{strategy_name}/{loop}"] = {
                "loss_start": f.loss_start, "loss_end": f.loss_end, "learned": f.learned,
                "steps": [w.steps for w in f.windows], "warm": f.warmup.steps,
                "divergence": f.replica_divergence, "throughput": f.global_throughput,
                "checksum": trainer.weights_checksum(), "samples": f.step_time.samples}
    return out


HAS_TF_KERAS = importlib.util.find_spec("tf_keras") is not None


def keras2_mwm_run(tmp: Path) -> RunResult:
    """tf_keras' fit under MultiWorkerMirrored on two local processes, as a run."""
    from bench.launch.launcher import run_isolated

    spec = tiny_spec(strategy="multi_worker_mirrored", devices=2, loop="fit", keras=2,
                     repeats=2, min_steps=3, max_steps=30, max_seconds=0.3)
    # Its own peak cache: a peak measured beside the other lane's child reads low, and
    # must not be what the session's later runs find.
    return run_isolated(spec, tmp / "logs" / "run.log", timeout_s=180,
                        env={"STRATBENCH_CACHE_DIR": str(tmp / "cache")})


@pytest.fixture(scope="module")
def fit_runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lanes]:
    """The module's three TensorFlow processes, two at a time (tests.tf_cases.Lanes):
    the Keras 3 child then the Keras 2 one (the lane is chosen before TensorFlow is
    imported: a process each), beside the Keras 2 MultiWorkerMirrored run (the only
    multi-process run here). Keras 2 jobs give None where tf_keras is missing."""
    tmp = tmp_path_factory.mktemp("keras2-mwm")
    lanes = Lanes(
        [("keras3", lambda: run_case("fit_and_custom")),
         ("keras2", lambda: run_case("fit_and_custom", keras=2, strategies=[
             ["one_device", 1], ["central_storage", 2], ["mirrored", 2]])
          if HAS_TF_KERAS else None)],
        [("keras2_mwm", lambda: keras2_mwm_run(tmp) if HAS_TF_KERAS else None)])
    yield lanes
    lanes.join()


@pytest.fixture(scope="module")
def fit_and_custom(fit_runs: Lanes) -> dict[str, Any]:
    return fit_runs["keras3"]


@pytest.fixture(scope="module")
def keras2_fit_and_custom(fit_runs: Lanes) -> dict[str, Any]:
    pytest.importorskip("tf_keras", reason="the keras2 extra is not installed")
    return fit_runs["keras2"]


@pytest.mark.parametrize(("strategy", "devices"), IN_PROCESS)
def test_fit_trains_under_every_supported_in_process_strategy(
        fit_and_custom: dict[str, Any], strategy: str, devices: int) -> None:
    r = fit_and_custom[f"{strategy}/fit"]
    assert r["learned"] and r["loss_end"] < 0.9 * r["loss_start"], r
    assert r["steps"] == [6, 6, 6] and r["warm"] == 2 and r["samples"] == 18
    assert r["divergence"] <= 1e-6 and r["throughput"] > 0


@pytest.mark.parametrize("strategy", PARITY)
def test_fit_and_the_custom_loop_reach_the_same_loss(fit_and_custom: dict[str, Any],
                                                     strategy: str) -> None:
    fit, custom = fit_and_custom[f"{strategy}/fit"], fit_and_custom[f"{strategy}/custom"]
    assert fit["steps"] == custom["steps"] and fit["warm"] == custom["warm"]
    assert fit["loss_start"] == pytest.approx(custom["loss_start"], rel=LOSS_PARITY_REL)
    assert fit["loss_end"] == pytest.approx(custom["loss_end"], rel=LOSS_PARITY_REL)
    assert fit["checksum"] == pytest.approx(custom["checksum"], rel=LOSS_PARITY_REL)


@pytest.mark.parametrize("strategy", PARITY)
def test_keras2_lane_trains_both_loops_alike(keras2_fit_and_custom: dict[str, Any],
                                             strategy: str) -> None:
    fit, custom = (keras2_fit_and_custom[f"{strategy}/{loop}"] for loop in ("fit", "custom"))
    assert fit["learned"] and custom["learned"] and fit["divergence"] <= 1e-6
    assert fit["loss_end"] == pytest.approx(custom["loss_end"], rel=LOSS_PARITY_REL)
    assert keras2_fit_and_custom["central_storage/fit"]["learned"]


def test_keras2_lane_trains_multi_worker_mirrored_with_fit(fit_runs: Lanes) -> None:
    """tf_keras' fit trains MultiWorkerMirrored (Keras 3's cannot): two local processes."""
    pytest.importorskip("tf_keras", reason="the keras2 extra is not installed")
    r = fit_runs["keras2_mwm"]
    assert r.status == "ok", r.reason
    f = r.figures
    assert f is not None and f.learned and f.tasks is not None
    a, b = sorted(f.tasks, key=lambda t: t.task)
    assert a.loss_end == pytest.approx(b.loss_end, rel=1e-6)  # the workers stayed in step
    assert r.environment["env_vars"].get("TF_USE_LEGACY_KERAS") == "1"
    assert str(r.environment["keras"]).startswith("2.")


CASES = {"fit_and_custom": case_fit_and_custom}


def main() -> None:
    from bench.child.backends.tf.keras_lane import select_keras

    select_keras(json.loads(sys.argv[2]).get("keras", 3))  # before TensorFlow
    import tensorflow as tf

    from bench.child.backends.tf.devices import setup_devices

    case, kwargs = sys.argv[1], json.loads(sys.argv[2])
    setup = setup_devices(tf, 2, force_cpu=True)
    print(tf_cases.MARK + json.dumps(CASES[case](setup, **kwargs)), flush=True)


if __name__ == "__main__":
    main()
