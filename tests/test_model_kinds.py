"""Every kind of a user's model, on both lanes: both train it, or both say why.

One description of the model (bench.child.description) feeds TensorFlow's lane and
Keras 3 on JAX. The models, written outside the project: a keras.applications model
with a softmax head over 10 classes, an Embedding + LSTM binary classifier (one sigmoid
unit), a regression model compiled with mse and its own SGD, a subclassed model built
on (None, 32), a model with a dict of two heads and a loss per head in its compile(),
a model whose output the teacher cannot label (both lanes refuse it before a step,
with the same words), and one whose file imports TensorFlow (TensorFlow's lane trains
it, the JAX lane says why it cannot).

Each lane is one child process (tests.tf_cases.run_case) holding every model: the TF
lane builds each through the preflight's check, then trains it under MirroredStrategy
on 2 logical CPU devices with the custom loop (the two-headed model with ``fit`` too,
to the same loss); the JAX lane builds each run's compiled step under data_parallel on
2 logical CPU devices (JaxTrainer) and takes a few steps. A slow test runs the four
models of the issue's "done" list through the real harness on the JAX lane.

    python -m tests.test_model_kinds tf|jax JSON_KWARGS   -> one result line per lane
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from bench.spec import RunSpec
from tests import tf_cases
from tests.helpers import ROOT, child_processes
from tests.tf_cases import Lanes

needs_jax = pytest.mark.skipif(importlib.util.find_spec("jax") is None,
                               reason="jax is not installed (the jax extra)")

KINDS_PY = '''"""Kinds of a user's model, Keras layers only."""
import keras


def applications(classes=10):
    """keras.applications with a softmax head over 10 classes."""
    return keras.applications.MobileNet(input_shape=(32, 32, 3), alpha=0.25, weights=None,
                                        classes=classes)


def binary(vocab=50, seq=8, width=8):
    """Embedding + LSTM, one sigmoid unit."""
    tokens = keras.Input((seq,), dtype="int32", name="tokens")
    h = keras.layers.LSTM(width)(keras.layers.Embedding(vocab, width)(tokens))
    return keras.Model(tokens, keras.layers.Dense(1, activation="sigmoid")(h))


def regression(features=6, width=8):
    """Compiled with mse and its own SGD."""
    model = keras.Sequential([keras.Input((features,), name="features"),
                              keras.layers.Dense(width, activation="relu"),
                              keras.layers.Dense(1)])
    model.compile(optimizer=keras.optimizers.SGD(0.01), loss="mse")
    return model


class Net(keras.Model):
    def __init__(self, width=16, classes=10):
        super().__init__()
        self.hidden = keras.layers.Dense(width, activation="relu")
        self.head = keras.layers.Dense(classes)

    def call(self, x):
        return self.head(self.hidden(x))


def subclassed():
    """Built on a shape, never called."""
    model = Net()
    model.build((None, 32))
    return model


def two_heads(features=8, width=16):
    """A dict of two heads, a loss per head (and a weight) in its compile()."""
    x = keras.Input((features,), name="x")
    h = keras.layers.Dense(width, activation="relu")(x)
    outputs = {"cls": keras.layers.Dense(3, activation="softmax", name="cls")(h),
               "reg": keras.layers.Dense(1, name="reg")(h)}
    model = keras.Model(x, outputs)
    model.compile(optimizer=keras.optimizers.SGD(0.05),
                  loss={"cls": "sparse_categorical_crossentropy", "reg": "mse"},
                  loss_weights={"cls": 1.0, "reg": 0.5})
    return model


def sequence_out():
    """An output of shape (batch, 2, 3): the teacher labels (batch, units) only."""
    x = keras.Input((4,), name="x")
    return keras.Model(x, keras.layers.Reshape((2, 3))(keras.layers.Dense(6)(x)))
'''
WITH_TF_PY = '''import tensorflow as tf  # noqa: F401
import keras


def build():
    return keras.Sequential([keras.Input((4,), name="x"), keras.layers.Dense(3)])
'''
KINDS = ["applications", "binary", "regression", "subclassed", "two_heads", "sequence_out"]
# Trained by both lanes, described alike; the model TensorFlow's lane trains alone last
# (a JAX-lane process that imported it holds TensorFlow from then on).
BOTH = ["applications", "binary", "regression", "subclassed", "two_heads"]
SGD = {"optimizer": "sgd", "learning_rate": 0.05}
STEPS = {"repeats": 1, "warmup_steps": 1, "min_steps": 3, "max_steps": 3,
         "max_seconds": 60.0, "batch": 16, "timeout_s": 240.0, **SGD}


def workloads(where: Path) -> dict[str, str]:
    out = {k: f"{where / 'kinds.py'}:{k}" for k in KINDS}
    out["with_tf"] = f"{where / 'with_tf.py'}:build"
    return out


def lane_spec(workload: str, lane: str, **over: Any) -> RunSpec:
    strategy = "mirrored" if lane == "tf" else "data_parallel"
    return RunSpec(workload=workload, backend=lane, strategy=strategy, devices=2,
                   **{**STEPS, **over})


@pytest.fixture(scope="module")
def kinds_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = tmp_path_factory.mktemp("model-kinds")
    assert not str(where).startswith(str(ROOT))
    (where / "kinds.py").write_text(KINDS_PY)
    (where / "with_tf.py").write_text(WITH_TF_PY)
    return where


@pytest.fixture(scope="module")
def lanes(kinds_dir: Path) -> Iterator[Lanes]:
    """The two lanes' children, side by side (2 cores: one each)."""
    env = {k: v for k, v in os.environ.items() if k not in ("KERAS_BACKEND", "XLA_FLAGS")}
    jax_env = {**env, "KERAS_BACKEND": "jax",
               "XLA_FLAGS": "--xla_force_host_platform_device_count=2"}
    jobs = [("tf", lambda: tf_cases.run_case("tf", module="tests.test_model_kinds",
                                             timeout=500, env=env, directory=str(kinds_dir))),
            ("jax", lambda: tf_cases.run_case("jax", module="tests.test_model_kinds",
                                              timeout=500, env=jax_env,
                                              directory=str(kinds_dir)))]
    running = Lanes([jobs[0]], [jobs[1]])
    yield running
    running.join()


def _without_names(record: dict[str, Any]) -> dict[str, Any]:
    """A record less its inputs' names (Keras numbers unnamed inputs per process)."""
    return {**record, "inputs": [s.split(" ", 1)[1] for s in record["inputs"]]}


# -- the teacher's labels of several heads (numpy only) -------------------------------------
def test_several_heads_are_labelled_by_one_teacher_and_packed() -> None:
    from workloads.synth import InputSpec, LabelSpec, PackedLabels, make_pool

    inputs = (InputSpec("x", (8,)),)
    packed = PackedLabels((("cls", LabelSpec("class_ids", 3)), ("reg", LabelSpec("real", 2)),
                           ("hot", LabelSpec("one_hot", 4))))
    assert packed.width == 1 + 2 + 4 and packed.spans() == [(0, 1), (1, 3), (3, 7)]
    assert packed.describe().startswith("cls: class ids in [0, 3) (int32); reg: real")
    x, y = make_pool(inputs, packed, 64, seed=3)
    assert x.shape == (64, 8) and y.shape == (64, 7) and y.dtype == np.float32
    assert set(np.unique(y[:, 0])) == {0.0, 1.0, 2.0}  # class ids, one column
    assert np.all(y[:, 3:].sum(axis=1) == 1.0)  # one-hot rows
    _, y2 = make_pool(inputs, packed, 16, seed=3)
    # An example's labels do not depend on the pool (real values up to BLAS rounding).
    assert np.allclose(y2, y[:16], rtol=1e-5, atol=1e-6)
    # One head: the labels as before (no packing).
    _, one = make_pool(inputs, LabelSpec("class_ids", 3), 64, seed=3)
    assert one.shape == (64,) and one.dtype == np.int32


# -- both lanes ------------------------------------------------------------------------------
@needs_jax
@pytest.mark.slow
@pytest.mark.logical_cpu
@pytest.mark.parametrize("kind", BOTH)
def test_both_lanes_train_it_from_one_description(lanes: Lanes, kind: str) -> None:
    tf, jax = lanes["tf"][kind], lanes["jax"][kind]
    assert tf["status"] == "ok", tf
    assert jax["status"] == "ok", jax
    assert all(math.isfinite(v) for v in jax["losses"]) and math.isfinite(tf["loss_end"])
    assert _without_names(tf["record"]) == _without_names(jax["record"])


@needs_jax
@pytest.mark.slow
@pytest.mark.logical_cpu
def test_what_each_kind_is_read_to_need(lanes: Lanes) -> None:
    rec = {k: lanes["jax"][k]["record"] for k in BOTH}
    assert rec["applications"]["loss"] == \
        "sparse categorical cross-entropy from softmax (harness default)"
    assert rec["applications"]["labels"] == "class ids in [0, 10) (int32)"
    assert rec["binary"]["inputs"] == ["tokens int32[8] (ids < 50)"]
    assert rec["binary"]["labels"] == "0/1 targets, 1 per example (float32)"
    assert rec["binary"]["loss"] == "binary cross-entropy from sigmoid (harness default)"
    assert rec["regression"]["labels"] == "real-valued targets, 1 per example (float32)"
    assert rec["regression"]["loss"] == "mse (the model's compile())"
    assert rec["regression"]["optimizer"].startswith("SGD lr=0.01 (the model's compile()")
    assert rec["subclassed"]["inputs"] == ["x float32[32]"]
    assert rec["subclassed"]["labels"] == "class ids in [0, 10) (int32)"
    assert rec["two_heads"]["labels"] == ("cls: class ids in [0, 3) (int32); reg: "
                                          "real-valued targets, 1 per example (float32)")
    assert rec["two_heads"]["loss"] == (
        "sum over 2 heads (cls: 1 x sparse_categorical_crossentropy (the model's compile()); "
        "reg: 0.5 x mse (the model's compile()))")
    assert rec["two_heads"]["optimizer"].startswith("SGD lr=0.05 (the model's compile()")
    for kind in ("applications", "binary", "subclassed"):
        assert rec[kind]["optimizer"] == "sgd lr=0.05 (harness)"


@needs_jax
@pytest.mark.slow
@pytest.mark.logical_cpu
def test_the_heads_losses_are_summed_as_keras_fit_sums_them(lanes: Lanes) -> None:
    """The two-headed model's custom loop and Keras fit (a loss per head compiled with
    its weight) take the same steps to the same loss."""
    tf = lanes["tf"]["two_heads"]
    assert tf["fit_loss_end"] == pytest.approx(tf["loss_end"], rel=1e-4)


@needs_jax
@pytest.mark.slow
def test_what_neither_lane_can_feed_both_refuse_in_the_same_words(lanes: Lanes) -> None:
    tf, jax = lanes["tf"]["sequence_out"], lanes["jax"]["sequence_out"]
    assert tf["status"] == "refused" and jax["status"] == "unsupported", (tf, jax)
    said = ("the teacher makes labels for outputs of shape (batch, units); this model's is "
            "[None, 2, 3]")
    assert said in tf["reason"] and said in jax["reason"]
    assert "--backend tf" in jax["reason"]  # where a dataset_fn would feed it


@needs_jax
@pytest.mark.slow
def test_a_model_importing_tensorflow_trains_on_tf_and_is_unsupported_on_jax(
        lanes: Lanes) -> None:
    tf, jax = lanes["tf"]["with_tf"], lanes["jax"]["with_tf"]
    assert tf["status"] == "ok", tf
    assert jax["status"] == "unsupported" and "imports TensorFlow" in jax["reason"], jax


@needs_jax
@pytest.mark.slow
@pytest.mark.logical_cpu
@pytest.mark.parametrize("kind", ["binary", "regression", "subclassed", "two_heads"])
def test_the_issues_models_end_ok_through_the_harness_on_jax(kinds_dir: Path,
                                                             tmp_path: Path, kind: str) -> None:
    from bench.launch.launcher import run_isolated

    spec = lane_spec(workloads(kinds_dir)[kind], "jax", repeats=2, min_steps=2, max_steps=5,
                     max_seconds=0.5)
    result = run_isolated(spec, tmp_path / "run.log", timeout_s=240)
    assert not child_processes(tmp_path), "a process of the run survived it"
    assert result.status == "ok", (result.status, result.reason)
    assert result.figures is not None and result.figures.model.loss
    assert result.environment["frameworks_loaded"] == ["jax"]


# -- the children ----------------------------------------------------------------------------
def case_tf(directory: str) -> dict[str, Any]:
    """Each model through the preflight's check, then trained under MirroredStrategy on
    2 logical devices (custom loop; the two-headed model with fit too)."""
    import tensorflow as tf

    from bench.child.backends.base import DeviceSetup
    from bench.child.backends.tf.build import build as build_strategy
    from bench.child.backends.tf.devices import setup_devices
    from bench.child.backends.tf.fit import TRAINERS
    from bench.child.backends.tf.preflight import check

    setup = setup_devices(tf, 2, force_cpu=True)
    devices = DeviceSetup(setup.kind, setup.names[:2], setup.logical)
    strategy = build_strategy(lane_spec("mlp", "tf", size="tiny"), devices.names)
    out: dict[str, Any] = {}
    for kind, workload in workloads(Path(directory)).items():
        spec = lane_spec(workload, "tf")
        answer = check(spec)
        if answer["problem"]:
            out[kind] = {"status": "refused", "reason": answer["problem"]}
            continue
        figures = TRAINERS.get("custom")(spec, strategy, devices).measure(
            0.0, {"import_framework_s": 0.0, "device_setup_s": 0.0, "build_s": 0.0})
        m = figures.model
        out[kind] = {"status": "ok", "loss_end": figures.loss_end,
                     "record": {"inputs": m.inputs, "labels": m.labels, "loss": m.loss,
                                "optimizer": m.optimizer, "data": m.data}}
        if kind == "two_heads":
            fit = TRAINERS.get("fit")(spec.replace(loop="fit"), strategy, devices).measure(
                0.0, {"import_framework_s": 0.0, "device_setup_s": 0.0, "build_s": 0.0})
            out[kind]["fit_loss_end"] = fit.loss_end
    return out


def case_jax(directory: str) -> dict[str, Any]:
    """Each model's run built on the JAX lane (data_parallel, 2 logical devices) and a
    few of its compiled steps taken; ``unsupported`` with the lane's reason otherwise."""
    import jax

    from bench.child.backends.jax.step import JaxTrainer
    from bench.errors import Unsupported

    out: dict[str, Any] = {}
    for kind, workload in workloads(Path(directory)).items():
        spec = lane_spec(workload, "jax")
        try:
            trainer = JaxTrainer(spec, list(jax.devices("cpu")[:2]))
        except Unsupported as exc:
            out[kind] = {"status": "unsupported", "reason": str(exc)}
            continue
        losses = [float(trainer.call()) for _ in range(3)]
        s = trainer.stats
        out[kind] = {"status": "ok", "losses": losses,
                     "record": {"inputs": s.inputs, "labels": s.labels, "loss": s.loss,
                                "optimizer": s.optimizer, "data": s.data}}
    return out


CASES = {"tf": case_tf, "jax": case_jax}


def main() -> None:
    case, kwargs = sys.argv[1], json.loads(sys.argv[2])
    print(tf_cases.MARK + json.dumps(CASES[case](**kwargs), default=float), flush=True)


if __name__ == "__main__":
    main()
