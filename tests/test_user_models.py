"""A model of the user's own (issue 30), and the built-in Transformer.

The user's models are written to a temporary directory outside the project: a
two-input functional model (token ids and float features) and a subclassed model,
both through ``module:function``, and a compiled ``.keras`` file. Each trains under
``default`` and ``mirrored`` on 2 logical devices (custom loop and ``fit``, one child
process for all), ``multi_worker_mirrored`` and ``parameter_server`` (their own
processes, as a sweep runs them); losses agree across the synchronous strategies and
with ``fit``. The tiny Transformer trains under every strategy with the same parity.
Bad input is a usage error (exit 2) naming the value, whether the parent finds it
(the file, the function, its parameters: no TensorFlow) or the preflight child does
(an import that fails, no Keras model, a file that does not load, inputs that cannot
be synthesised).

    python -m tests.test_user_models CASE JSON_KWARGS   -> one result line (a TF case)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, cast

import numpy as np
import pytest

from bench.errors import SpecError
from bench.launch.launcher import run_isolated, unsupported_result
from bench.results.schema import RunResult
from bench.spec import RunSpec
from tests import tf_cases
from tests.helpers import ROOT, child_processes
from tests.tf_cases import Lanes

MODULE = "stratbench_test_user_models"
MODELS_PY = '''"""Models of a user's own, for stratbench's tests."""
import keras
import numpy as np


def two_input(vocab=50, seq=6, features=5, width=8, classes=3):
    """Token ids and float features, a class out (logits)."""
    tokens = keras.Input((seq,), dtype="int32", name="tokens")
    dense = keras.Input((features,), name="features")
    t = keras.layers.GlobalAveragePooling1D()(keras.layers.Embedding(vocab, width)(tokens))
    f = keras.layers.Dense(width, activation="relu")(dense)
    return keras.Model([tokens, dense], keras.layers.Dense(classes)(
        keras.layers.Concatenate()([t, f])))


class Small(keras.Model):
    def __init__(self, width=16, classes=4):
        super().__init__()
        self.hidden = keras.layers.Dense(width, activation="relu")
        self.out = keras.layers.Dense(classes)

    def call(self, x):
        return self.out(self.hidden(x))


def subclassed(features=12, width=16, classes=4):
    """A subclassed model, built by one call on a batch."""
    model = Small(width, classes)
    model(np.zeros((1, features), np.float32))
    return model


def saved(path):
    """The .keras file: compiled, so its loss and optimizer are the model's own."""
    inputs = keras.Input((10,), name="x")
    h = keras.layers.Dense(16, activation="relu")(inputs)
    model = keras.Model(inputs, keras.layers.Dense(3)(h))
    model.compile(optimizer=keras.optimizers.SGD(0.05),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.save(path)
'''
# A model the teacher cannot feed (a string input), with its own pipeline: trains with
# --data tfdata.
TEXTS_PY = '''import keras
import tensorflow as tf


def build():
    text = keras.Input((), dtype="string", name="text")
    words = keras.layers.StringLookup(vocabulary=["a", "b", "c"], output_mode="one_hot")(text)
    return keras.Model(text, keras.layers.Dense(2)(words))


def dataset_fn(input_context):
    text = tf.constant(["a", "b", "c", "a"] * 16)
    label = tf.constant([0, 1, 1, 0] * 16)
    return tf.data.Dataset.from_tensor_slices(({"text": text}, label))
'''
# What the preflight child must refuse, one file each (the parent cannot see these).
BAD_PY = {
    "broken_import.py": ("import keras\nraise ImportError(\"no module named 'missingdep'\")\n"
                         "\ndef build():\n    pass\n"),
    "not_a_model.py": "def build():\n    return {'layers': 3}\n",
    "strings.py": ("import keras\n\ndef build():\n"
                   "    text = keras.Input((), dtype='string', name='text')\n"
                   "    return keras.Model(text, keras.layers.Dense(2)("
                   "keras.layers.StringLookup(vocabulary=['a', 'b'], output_mode='one_hot')"
                   "(text)))\n"),
    "made.py": ("def _maker():\n    def build(width=4):\n        pass\n    return build\n\n"
                "build = _maker()\n"),
}
SGD = {"optimizer": "sgd", "learning_rate": 0.05}
# Fixed windows (min = max steps) and 3 warm-up steps (a multi-worker run warms up at
# least 3): every strategy and loop takes exactly the same steps, so their last losses
# compare. SGD: Adam normalises a doubled or halved gradient away (tests/test_training).
FIXED = {"repeats": 1, "warmup_steps": 3, "min_steps": 6, "max_steps": 6,
         "max_seconds": 60.0, "batch": 16, "timeout_s": 180.0, **SGD}
PARITY_REL = 1e-4  # as tests/test_training and tests/test_fit
# The tiny Transformer rose at SGD 0.05 with momentum over these steps; at 0.01 its last
# step (step 9, the pool's first batch again: 8 batches) is below its first. Under
# ParameterServer the workers step asynchronously on their own batches: Adam there, as
# the built-ins' ParameterServer test, only to see it learn.
TRANSFORMER = {**FIXED, "learning_rate": 0.01}
# ParameterServer's last step ran on whichever worker came last, on that worker's next
# batch: after 6 steps its loss was above the first step's in one run of the compiled
# .keras model. 48 steps (6 chunks of 8) leave every batch's loss well below the start.
PS_STEPS = {"min_steps": 48, "max_steps": 48}
TRANSFORMER_PS = {**FIXED, **PS_STEPS, "optimizer": "adam", "learning_rate": 0.01}


def user_spec(workload: str, **over: Any) -> RunSpec:
    return RunSpec(**{"workload": workload, "strategy": "default", "devices": 1,
                      **FIXED, **over})


# -- the models, written outside the project -----------------------------------------------
@pytest.fixture(scope="module")
def user_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The models' directory, importable as a module path here and in every child."""
    where = tmp_path_factory.mktemp("user-models")
    assert not str(where).startswith(str(ROOT))
    (where / f"{MODULE}.py").write_text(MODELS_PY)
    for name, text in BAD_PY.items():
        (where / name).write_text(text)
    (where / "not_a_model.keras").write_text("this is not a zip archive")
    (where / "texts.py").write_text(TEXTS_PY)
    with pytest.MonkeyPatch.context() as mp:
        mp.syspath_prepend(str(where))
        mp.setenv("PYTHONPATH", os.pathsep.join(
            p for p in (str(where), os.environ.get("PYTHONPATH")) if p))
        yield where


def run_spec(tmp_path: Path, spec: RunSpec) -> RunResult:
    # A peak cache of the module's own: a peak measured beside the other lane reads low,
    # and must not be what the session's later runs find.
    result = run_isolated(spec, tmp_path / "logs" / "run.log", timeout_s=spec.timeout_s,
                          env={"STRATBENCH_CACHE_DIR": str(tmp_path.parent / "cache")})
    assert not child_processes(tmp_path), "a process of the run survived it"
    return result


def mwm_spec(user_dir: Path, model: str) -> RunSpec:
    return user_spec(model_workloads(user_dir)[model], strategy="multi_worker_mirrored",
                     devices=2)


def ps_spec(user_dir: Path, model: str) -> RunSpec:
    return user_spec(model_workloads(user_dir)[model], strategy="parameter_server",
                     devices=2, **PS_STEPS)


def transformer_spec(strategy: str) -> RunSpec:
    return RunSpec(workload="transformer", size="tiny", strategy=strategy, devices=2,
                   **(TRANSFORMER if strategy == "multi_worker_mirrored" else TRANSFORMER_PS))


USERS_MODELS = ["two_input", "subclassed", "keras_file"]
MULTI_PROCESS = ["multi_worker_mirrored", "parameter_server"]


@pytest.fixture(scope="module")
def runs(user_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lanes]:
    """Every TensorFlow process of the module, in two lanes (tests.tf_cases.Lanes): the
    multi-process runs one after another (each picks free ports: never two at once);
    beside them the single-process children: the in-process child, then the command
    lines that run a preflight child. A test reads its job's result (or its error)."""
    base = tmp_path_factory.mktemp("runs")

    def where(name: str) -> Path:
        path = base / name.replace("/", "-")
        path.mkdir()
        return path

    # The in-process child saves the .keras file: the runs of it wait for that child.
    saved = threading.Event()

    def cluster_job(name: str, spec: Callable[[], RunSpec]
                    ) -> tuple[str, Callable[[], RunResult]]:
        def job() -> RunResult:
            if name.endswith("keras_file"):
                saved.wait()
            return run_spec(where(name), spec())
        return name, job

    def in_process_child() -> Any:
        try:
            return tf_cases.run_case("in_process", module="tests.test_user_models",
                                     timeout=400, env=dict(os.environ),
                                     directory=str(user_dir))
        finally:
            saved.set()

    cluster = [cluster_job(f"{kind}/{m}", lambda make=make, m=m: make(user_dir, m))
               for m in USERS_MODELS for kind, make in (("mwm", mwm_spec), ("ps", ps_spec))]
    cluster += [cluster_job(f"transformer/{s}", lambda s=s: transformer_spec(s))
                for s in MULTI_PROCESS]
    cluster.sort(key=lambda job: job[0].endswith("keras_file"))  # the .keras file's last
    cache = {"STRATBENCH_CACHE_DIR": str(base / "cache")}
    single = [
        ("in_process", in_process_child),
        ("sweep", lambda: sweep_of_a_users_file(user_dir, where("sweep"), cache)),
        ("preflight", lambda: preflight_run(user_dir, where("preflight"), cache)),
        ("made", lambda: made_run(user_dir, where("made"), cache)),
    ]
    lanes = Lanes(cluster, single)
    yield lanes
    lanes.join()


@pytest.fixture(scope="module")
def in_process(runs: Lanes) -> dict[str, Any]:
    """One child: saves the .keras file, then trains the three models under default and
    mirrored (2 devices), custom loop and fit, and the Transformer under the in-process
    strategies."""
    return cast(dict[str, Any], runs["in_process"])


def model_workloads(user_dir: Path) -> dict[str, str]:
    return {"two_input": f"{MODULE}:two_input", "subclassed": f"{MODULE}:subclassed",
            "keras_file": str(user_dir / "saved.keras")}


# -- parent side: spellings, digests, parameters (no TensorFlow) -----------------------------
def test_a_users_model_is_bound_to_its_file_and_digest(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    model = tmp_path / "mine.py"
    model.write_text("def build(width=4, *, depth=2):\n    pass\n")
    monkeypatch.chdir(tmp_path)
    spec = RunSpec(workload="mine.py:build", strategy="mirrored", devices=2,
                   params={"width": 8})
    # The path made absolute: the run's processes may start elsewhere.
    assert spec.workload == f"{model.resolve()}:build"
    assert len(spec.workload_digest) == 64
    assert spec.key().startswith("mine.build-default.mirrored.n2.")
    assert spec.label().startswith("mine.py:build mirrored n=2") and \
        f"code={spec.workload_digest[:8]}" in spec.label()
    # A stored spec is loaded as it was, even when its file is gone or changed.
    stored = spec.to_dict()
    model.write_text("def build(width=4, *, depth=3):\n    pass\n")
    again = RunSpec.from_dict(stored)
    assert again == spec and again.key() == spec.key()
    # The changed file is another version: another digest, key and report variant.
    changed = RunSpec(workload=str(model) + ":build", strategy="mirrored", devices=2,
                      params={"width": 8})
    assert changed.workload_digest != spec.workload_digest and changed.key() != spec.key()
    assert spec.replace(strategy="default", devices=1).workload_digest == spec.workload_digest


def test_parameters_are_read_from_the_functions_source(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text(
        "import keras\n\nclass Net:\n    def __init__(self, width, depth=2):\n        pass\n\n"
        "def build(width=4, *, depth=2, **extra):\n    pass\n\n"
        "from elsewhere import made\n")
    where = str(tmp_path / "m.py")
    RunSpec(workload=f"{where}:build", strategy="default", params={"anything": 1})  # **extra
    RunSpec(workload=f"{where}:Net", strategy="default", params={"width": 3})
    RunSpec(workload=f"{where}:made", strategy="default", params={"x": 1})  # unknown: child
    with pytest.raises(SpecError, match=r"m.py:Net requires parameter\(s\) width"):
        RunSpec(workload=f"{where}:Net", strategy="default")
    with pytest.raises(SpecError, match="m.py:Net takes no parameter size; its parameters: "
                                        "width, depth. Received: --param size=1"):
        RunSpec(workload=f"{where}:Net", strategy="default", params={"width": 1, "size": 1})
    with pytest.raises(SpecError, match="size must be default for a model of your own"):
        RunSpec(workload=f"{where}:build", strategy="default", size="tiny")


def test_the_teacher_feeds_several_inputs_and_token_ids() -> None:
    from workloads.synth import InputSpec, LabelSpec, make_pool

    inputs = (InputSpec("tokens", (6,), "int32", 50), InputSpec("features", (5,)))
    x, y = make_pool(inputs, LabelSpec("class_ids", 3), 64, seed=0)
    assert set(x) == {"tokens", "features"} and x["tokens"].dtype == np.int32
    assert x["tokens"].min() >= 0 and x["tokens"].max() < 50 and x["features"].shape == (64, 5)
    assert y.shape == (64,) and set(np.unique(y)) == {0, 1, 2}  # every class occurs
    again, y2 = make_pool(inputs, LabelSpec("class_ids", 3), 64, seed=0)
    assert np.array_equal(again["tokens"], x["tokens"]) and np.array_equal(y, y2)
    # Labels in each form a loss takes; an example's label does not depend on the pool.
    one = (InputSpec("x", (4, 4, 3)),)
    for kind, shape in (("one_hot", (32, 3)), ("binary", (32, 3)), ("real", (32, 3))):
        _, labels = make_pool(one, LabelSpec(kind, 3), 32, seed=1)
        assert labels.shape == shape and labels.dtype == np.float32
    _, small = make_pool(one, LabelSpec("class_ids", 3), 8, seed=1)
    _, large = make_pool(one, LabelSpec("class_ids", 3), 32, seed=1)
    assert np.array_equal(small, large[:8])


def test_einsum_flops_follow_the_batch_matmul_rule() -> None:
    from bench.child.backends.tf.flops import _einsum_flops

    assert _einsum_flops("abc,cd->abd", [(2, 3, 4), (4, 5)]) == 2 * 2 * 3 * 4 * 5
    assert _einsum_flops("...ij,jk->...ik", [(2, 3, 4, 5), (5, 6)]) == 2 * 2 * 3 * 4 * 5 * 6
    assert _einsum_flops("aecd,abcd->acbe", [(2, 7, 4, 8), (2, 9, 4, 8)]) \
        == 2 * 2 * 7 * 4 * 8 * 9  # attention scores: d summed over
    assert _einsum_flops("ab,ab->ab", [(3, 4), (3, 4)]) == 12  # nothing summed: products


# The bad inputs the parent finds, without importing the user's code: each refused when
# the spec is made, the value named (the command line turns SpecError into exit 2).
PARENT_ERRORS = [
    ("missing.py:build", {}, "names a Python file that does not exist"),
    ("no_such_module_xyz:build", {}, "no module no_such_module_xyz on the import path"),
    (f"{MODULE}:no_such_function", {}, "has no function no_such_function"),
    ("syntax.py:build", {}, "does not import: SyntaxError: invalid syntax (line 1)"),
    ("missing.keras", {}, "names a saved Keras model that does not exist"),
    (f"{MODULE}:two_input", {"bogus": 1}, "takes no parameter bogus; its parameters: vocab, "
                                          "seq, features, width, classes"),
    ("mlpp", {}, "unknown workload 'mlpp'; valid: mlp, cnn, resnet50, transformer, or a "
                 "model of your own"),
]


@pytest.mark.parametrize(("workload", "params", "message"), PARENT_ERRORS,
                         ids=[w for w, _, _ in PARENT_ERRORS])
def test_bad_input_found_by_the_parent_names_it(user_dir: Path, monkeypatch: pytest.MonkeyPatch,
                                                workload: str, params: dict[str, Any],
                                                message: str) -> None:
    (user_dir / "syntax.py").write_text("def build(:\n")
    monkeypatch.chdir(user_dir)
    with pytest.raises(SpecError) as caught:
        RunSpec(workload=workload, strategy="default", params=params)
    assert message in str(caught.value) and "Received: " in str(caught.value)
    assert (workload.split(":")[0] in str(caught.value)
            or f"--param {next(iter(params), '')}" in str(caught.value))


def bench_run(cwd: Path, *args: str, timeout: float = 300,
              extra_env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p), **(extra_env or {})}
    return subprocess.run([sys.executable, "-m", "bench", "run", *args], cwd=cwd, text=True,
                          capture_output=True, timeout=timeout, env=env)


def test_bad_input_found_by_the_parent_exits_2(user_dir: Path, tmp_path: Path) -> None:
    """Through the command line: exit 2, the value named, no traceback, nothing run."""
    proc = bench_run(user_dir, "--workload", f"{MODULE}:two_input", "--param", "bogus=1",
                     "--strategy", "default", "--out", str(tmp_path / "out"))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "stratbench: error: stratbench_test_user_models:two_input takes no parameter " \
           "bogus" in proc.stderr and "Received: --param bogus=1" in proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "out").exists()


def preflight_run(user_dir: Path, tmp_path: Path, env: dict[str, str]
                  ) -> tuple[Path, subprocess.CompletedProcess[str]]:
    workloads = ["broken_import.py:build", "not_a_model.py:build", "strings.py:build",
                 "not_a_model.keras"]
    return tmp_path, bench_run(user_dir, "--workload", ",".join(workloads), "--strategy",
                               "default", "--out", str(tmp_path / "out"), extra_env=env)


def test_preflight_messages(runs: Lanes) -> None:
    """Each problem the child finds, in the words the user reads."""
    tmp_path, proc = runs["preflight"]
    err = proc.stderr
    assert proc.returncode == 2, proc.stdout + err
    assert "Traceback" not in err and not (tmp_path / "out").exists()
    assert "4 models of your own cannot be trained; nothing was run" in err
    # A module that does not import: its own error's last line.
    assert "broken_import.py does not import: ImportError: no module named 'missingdep'" \
        in err
    assert "not_a_model.py:build gave a builtins.dict, not a Keras model" in err
    assert "not_a_model.keras does not load as a Keras model" in err
    # Inputs the teacher cannot make: what dataset_fn must provide instead.
    assert "input 'text' is string[]" in err and "define dataset_fn(input_context)" in err
    assert "text: string []" in err


def made_run(user_dir: Path, tmp_path: Path, env: dict[str, str]
             ) -> subprocess.CompletedProcess[str]:
    return bench_run(user_dir, "--workload", "made.py:build", "--strategy", "default",
                     "--param", "depth=3", "--out", str(tmp_path / "out"), extra_env=env)


def test_a_parameter_the_function_does_not_take_is_found_by_the_child(runs: Lanes) -> None:
    """A function bound by an assignment: the parent cannot read its parameters."""
    proc = runs["made"]
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "made.py:build does not take these parameters: got an unexpected keyword " \
           "argument 'depth'" in proc.stderr
    assert "Traceback" not in proc.stderr


# -- training: every strategy, both loops, loss parity ---------------------------------------
@pytest.mark.logical_cpu
@pytest.mark.parametrize("model", ["two_input", "subclassed", "keras_file"])
def test_users_model_trains_in_process_with_both_loops_alike(in_process: dict[str, Any],
                                                              model: str) -> None:
    runs = in_process[model]
    for name, r in runs.items():
        assert r["learned"] and r["divergence"] <= 1e-6, (name, r)
        assert r["flops_method"].startswith("graph") and r["train_flops"] > 0, r
    ref = runs["default/custom"]["loss_end"]
    for name in ("mirrored/custom", "default/fit", "mirrored/fit"):
        assert runs[name]["loss_end"] == pytest.approx(ref, rel=PARITY_REL), name


@pytest.mark.logical_cpu
def test_what_each_model_needs_is_read_from_it(in_process: dict[str, Any]) -> None:
    two, sub, saved = (in_process[m]["default/custom"]["model"]
                       for m in ("two_input", "subclassed", "keras_file"))
    assert two["inputs"] == ["tokens int32[6] (ids < 50)", "features float32[5]"]
    assert two["labels"] == "class ids in [0, 3) (int32)"
    assert two["loss"].startswith("sparse categorical cross-entropy from logits")
    assert two["optimizer"] == "sgd lr=0.05 (harness)"
    assert sub["inputs"] == ["x float32[12]"] and sub["labels"].startswith("class ids in [0, 4)")
    assert saved["inputs"] == ["x float32[10]"]
    assert saved["loss"] == "SparseCategoricalCrossentropy (the model's compile())"
    assert saved["optimizer"].startswith("SGD lr=0.05 (the model's compile()")


@pytest.mark.logical_cpu
def test_a_model_the_teacher_cannot_feed_trains_on_its_dataset_fn(
        in_process: dict[str, Any]) -> None:
    for loop in ("custom", "fit"):
        r = in_process["texts"][loop]
        assert r["learned"], r
        assert r["model"]["inputs"] == ["text string[]"]
        assert r["model"]["data"] == "the module's dataset_fn"
        assert r["model"]["loss"].startswith("sparse categorical cross-entropy from logits")


@pytest.mark.logical_cpu
@pytest.mark.parametrize("model", ["two_input", "subclassed", "keras_file"])
def test_users_model_under_multi_worker_mirrored(in_process: dict[str, Any], user_dir: Path,
                                                 runs: Lanes, model: str) -> None:
    """Each model of the user's trains under MultiWorkerMirrored (two processes) to the
    in-process default's loss; its fit is unsupported, with the Keras issue named."""
    r = runs[f"mwm/{model}"]
    spec = mwm_spec(user_dir, model)
    assert r.status == "ok", r.reason
    assert r.figures is not None and r.figures.learned
    ref = in_process[model]["default/custom"]["loss_end"]
    assert r.figures.loss_end == pytest.approx(ref, rel=PARITY_REL)
    fit = unsupported_result(spec.replace(loop="fit"))
    assert fit is not None and "keras-team/keras#20585" in (fit.reason or "")


@pytest.mark.logical_cpu
@pytest.mark.parametrize("model", ["two_input", "subclassed", "keras_file"])
def test_users_model_under_parameter_server(user_dir: Path, runs: Lanes, model: str) -> None:
    """Each model of the user's learns under ParameterServer (chief, 2 workers, a ps),
    its FLOPs counted from the graph; its fit is unsupported (DatasetCreator)."""
    r = runs[f"ps/{model}"]  # first: the .keras file exists once its run has started
    spec = ps_spec(user_dir, model)
    assert r.status == "ok", r.reason
    f = r.figures
    assert f is not None and f.learned and f.model.inputs
    assert f.model.flops_method.startswith("graph") and f.model.train_flops_per_example > 0
    fit = unsupported_result(spec.replace(loop="fit"))
    assert fit is not None and "DatasetCreator" in (fit.reason or "")


@pytest.mark.logical_cpu
def test_tiny_transformer_trains_alike_under_every_in_process_strategy(
        in_process: dict[str, Any]) -> None:
    runs = in_process["transformer"]
    ref = runs["default"]["loss_end"]
    for name, r in runs.items():
        assert r["learned"] and r["divergence"] <= 1e-6, (name, r)
        assert r["loss_end"] == pytest.approx(ref, rel=PARITY_REL), name
    # Attention is einsums and embeddings are looked up: the graph counts them.
    assert runs["default"]["flops_method"].startswith("graph")
    assert runs["default"]["model"]["inputs"] == ["tokens int32[8] (ids < 64)"]
    assert runs["default"]["sparse_gradients"] == 2  # token and position embeddings


@pytest.mark.logical_cpu
@pytest.mark.parametrize("strategy", ["multi_worker_mirrored", "parameter_server"])
def test_tiny_transformer_multi_process(in_process: dict[str, Any], runs: Lanes,
                                        strategy: str) -> None:
    """The tiny Transformer learns under each multi-process strategy; synchronous
    MultiWorkerMirrored reaches the in-process default's loss."""
    r = runs[f"transformer/{strategy}"]
    assert r.status == "ok", r.reason
    assert r.figures is not None and r.figures.learned
    if strategy == "multi_worker_mirrored":  # synchronous: the same losses
        ref = in_process["transformer"]["default"]["loss_end"]
        assert r.figures.loss_end == pytest.approx(ref, rel=PARITY_REL)


def sweep_of_a_users_file(user_dir: Path, tmp_path: Path, env: dict[str, str]
                          ) -> tuple[Path, subprocess.CompletedProcess[str]]:
    out = tmp_path / "sweep"
    return out, bench_run(user_dir, "--workload", f"./{MODULE}.py:two_input", "--strategy",
                          "mirrored", "--devices", "2", "--batch", "16", "--param",
                          "width=4", "--runs", "1", "--no-profile", "--repeats", "2",
                          "--max-seconds", "0.3", "--min-steps", "3", "--max-steps", "10",
                          "--warmup-steps", "1", "--out", str(out), extra_env=env)


def test_the_sweep_and_its_report_take_a_users_file(user_dir: Path, runs: Lanes) -> None:
    """``path/to/file.py:function`` from the command line, end to end: the preflight,
    the run, the stored origin and digest, the table and the report."""
    out, proc = runs["sweep"]
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"{MODULE}.py:two_input" in proc.stdout
    # What the preflight read the model to need, before the runs.
    assert (f"model {MODULE}.py:two_input (width=4): inputs tokens int32[6] (ids < 50), "
            f"features float32[5]; labels class ids in [0, 3) (int32); loss sparse "
            f"categorical cross-entropy from logits (harness default); optimizer adam "
            f"lr=0.001 (harness); data synthetic (teacher)") in proc.stdout
    (doc,) = (json.loads(p.read_text()) for p in (out / "results").rglob("*.json"))
    assert doc["status"] == "ok"
    assert doc["spec"]["workload"] == f"{user_dir / MODULE}.py:two_input"
    assert len(doc["spec"]["workload_digest"]) == 64
    assert doc["figures"]["model"]["inputs"] == ["tokens int32[6] (ids < 50)",
                                                 "features float32[5]"]
    assert any(p.suffix in (".md", ".html") for p in out.rglob("report*"))


# -- the child side of the TensorFlow cases --------------------------------------------------
def _measure(trainer: Any) -> dict[str, Any]:
    f = trainer.measure(0.0, {"import_framework_s": 0.0, "device_setup_s": 0.0, "build_s": 0.0})
    m = f.model
    return {"loss_start": f.loss_start, "loss_end": f.loss_end, "learned": f.learned,
            "divergence": f.replica_divergence, "flops_method": m.flops_method,
            "train_flops": m.train_flops_per_example,
            "model": {"inputs": m.inputs, "labels": m.labels, "loss": m.loss,
                      "optimizer": m.optimizer, "data": m.data}}


def case_in_process(setup: Any, directory: str) -> dict[str, Any]:
    """Save the .keras file, then train each model under default and mirrored (one
    strategy object each, see tests/tf_cases.py), custom loop and fit; the tiny
    Transformer under every in-process strategy."""
    import tensorflow as tf

    from bench.child.backends.base import DeviceSetup
    from bench.child.backends.tf.build import build as build_strategy
    from bench.child.backends.tf.fit import TRAINERS

    sys.path.insert(0, directory)
    __import__(MODULE).saved(str(Path(directory) / "saved.keras"))
    strategies: dict[str, Any] = {}

    def trainer(spec: RunSpec) -> Any:
        names = setup.names[:spec.devices]
        if spec.strategy not in strategies:
            strategies[spec.strategy] = build_strategy(spec, names)
        return TRAINERS.get(spec.loop)(spec, strategies[spec.strategy],
                                       DeviceSetup(setup.kind, names, setup.logical))

    out: dict[str, Any] = {}
    for model, workload in model_workloads(Path(directory)).items():
        out[model] = {}
        for strategy, devices in (("default", 1), ("mirrored", 2)):
            for loop in ("custom", "fit"):
                spec = user_spec(workload, strategy=strategy, devices=devices, loop=loop)
                out[model][f"{strategy}/{loop}"] = _measure(trainer(spec))
    spec = user_spec(str(Path(directory) / "texts.py:build"), data="tfdata",
                     optimizer="adam", learning_rate=0.05)
    out["texts"] = {loop: _measure(trainer(spec.replace(loop=loop))) for loop in ("custom", "fit")}
    out["transformer"] = {}
    built = {}
    for strategy, devices in (("default", 1), ("one_device", 1), ("mirrored", 2),
                              ("central_storage", 2)):
        spec = RunSpec(workload="transformer", size="tiny", strategy=strategy,
                       devices=devices, **TRANSFORMER)
        built[strategy] = trainer(spec)
        out["transformer"][strategy] = _measure(built[strategy])
    t = built["default"]  # its gradients, as the default strategy's step makes them
    x, y = t.task.make_pool(4, 0)
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(t.task.per_example_loss(y, t.model(x)))
    grads = tape.gradient(loss, t.model.trainable_variables)
    out["transformer"]["default"]["sparse_gradients"] = sum(
        isinstance(g, tf.IndexedSlices) for g in grads)
    return out


CASES = {"in_process": case_in_process}


def main() -> None:
    import tensorflow as tf

    from bench.child.backends.tf.devices import setup_devices

    case, kwargs = sys.argv[1], json.loads(sys.argv[2])
    setup = setup_devices(tf, 2, force_cpu=True)
    print(tf_cases.MARK + json.dumps(CASES[case](setup, **kwargs), default=float), flush=True)


if __name__ == "__main__":
    main()

