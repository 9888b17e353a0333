"""The JAX lane (issue 42): Keras 3 on JAX with keras.distribution beside tf.distribute.

The spec field and its CLI option, the strategies' backend traits (a strategy asked on
the other backend is unsupported with a reason, never a traceback), then real runs on
2 logical CPU devices (XLA_FLAGS=--xla_force_host_platform_device_count=2, set by the
child before it imports jax) and the device script's CPU path. Each real run is a
fresh process: jax cannot change its device count once imported.

    flock /tmp/stratbench-tf.lock .venv/bin/python -m pytest tests/test_jax_lane.py -q
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench.cli.main import build_parser
from bench.errors import SpecError
from bench.hardware import Hardware
from bench.spec import RunSpec, cli_args, declared
from bench.strategies import STRATEGIES
from tests.helpers import tiny_spec

ROOT = Path(__file__).resolve().parent.parent
CPU = Hardware("test cpu", 2, 2**34)
needs_jax = pytest.mark.skipif(importlib.util.find_spec("jax") is None,
                               reason="jax is not installed (the jax extra)")


def jax_spec(**over: object) -> RunSpec:
    base: dict[str, object] = {"backend": "jax", "strategy": "data_parallel", "devices": 2,
                               "batch": 64}
    base.update(over)
    return tiny_spec(**base)


# -- the spec field and the CLI -----------------------------------------------------------
def test_backend_is_declared_once_and_derives_label_key_and_cli() -> None:
    f = declared("backend")
    assert f.default == "tf" and f.info.choices == ("tf", "jax") and f.info.hparam
    spec = jax_spec()
    assert "data_parallel(jax) n=2" in spec.label() and ".jax." in spec.key()
    assert "jax" not in tiny_spec().label() and ".jax" not in tiny_spec().key()
    assert cli_args(spec)[cli_args(spec).index("--backend") + 1] == "jax"
    args = build_parser().parse_args(["run", "--backend", "jax", "--workload", "mlp",
                                      "--strategy", "data_parallel", "--devices", "1,2"])
    assert args.backend == ["jax"]


def test_an_unknown_backend_names_the_field() -> None:
    with pytest.raises(SpecError, match=r"RunSpec.backend must be one of tf, jax. "
                                        r"Received: backend='torch'"):
        jax_spec(backend="torch")


def test_an_unknown_backend_on_the_command_line_exits_2() -> None:
    out = subprocess.run([sys.executable, "-m", "bench", "list", "--backend", "torch",
                          "--workload", "mlp", "--strategy", "data_parallel"],
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 2, out.stderr
    assert "backend" in out.stderr and "Traceback" not in out.stderr


# -- unsupported combinations, both directions -------------------------------------------
@pytest.mark.parametrize(("over", "needle"), [
    ({"backend": "jax", "strategy": "mirrored"}, "mirrored is a strategy of the tf backend"),
    ({"backend": "jax", "strategy": "one_device", "devices": 1},
     "one_device is a strategy of the tf backend"),
    ({"backend": "jax", "strategy": "tpu"}, "tpu is a strategy of the tf backend"),
    ({"backend": "tf", "strategy": "data_parallel"},
     "data_parallel is a strategy of the jax backend"),
    ({"backend": "tf", "strategy": "model_parallel"},
     "model_parallel is a strategy of the jax backend"),
    ({"strategy": "model_parallel", "workload": "cnn"}, "no model-parallel layout"),
    ({"strategy": "model_parallel", "devices": 3, "batch": 63}, "multiple of it"),
    ({"xla": True}, "xla=True does not run on the JAX backend"),
    ({"loop": "fit"}, "loop='fit' does not run on the JAX backend"),
    ({"precision": "mixed_float16"}, "needs loss scaling"),
    ({"data": "tfdata"}, "tf.data belongs to the TensorFlow lane"),
])
def test_unsupported_combinations_say_why(over: dict, needle: str) -> None:
    spec = jax_spec(**over)
    reason = STRATEGIES.get(spec.strategy).unsupported_reason(spec, CPU)
    assert reason is not None and needle in reason, reason
    assert "Received:" in reason


def test_a_model_of_your_own_has_no_layout_for_model_parallel(tmp_path: Path) -> None:
    f = tmp_path / "own.py"
    f.write_text("def build():\n    import keras\n"
                 "    return keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])\n")
    spec = jax_spec(strategy="model_parallel", workload=f"{f}:build", size="default")
    reason = STRATEGIES.get("model_parallel").unsupported_reason(spec, CPU)
    assert reason is not None and "no layout of its weights" in reason
    ok = jax_spec(workload=f"{f}:build", size="default")
    assert STRATEGIES.get("data_parallel").unsupported_reason(ok, CPU) is None


def test_supported_jax_specs_and_their_replicas() -> None:
    dp, mp = jax_spec(), jax_spec(strategy="model_parallel", devices=4)
    assert STRATEGIES.get("data_parallel").unsupported_reason(dp, CPU) is None
    assert STRATEGIES.get("model_parallel").unsupported_reason(mp, CPU) is None
    assert (dp.replicas, mp.replicas, mp.per_replica_batch) == (2, 2, 32)


def test_xla_flags_keep_the_users_and_replace_the_count() -> None:
    from bench.child.backends.jax.devices import xla_flags

    assert xla_flags("", 2) == "--xla_force_host_platform_device_count=2"
    assert xla_flags("--xla_dump_to=/tmp/x --xla_force_host_platform_device_count=8", 2) \
        == "--xla_dump_to=/tmp/x --xla_force_host_platform_device_count=2"


# -- real runs (2 logical CPU devices, fresh processes) ---------------------------------
def _run(spec: RunSpec, tmp_path: Path) -> object:
    from bench.launch.launcher import run_isolated

    return run_isolated(spec, tmp_path / "run.log", timeout_s=240)


def _check_ok(result: object) -> None:
    r = result
    assert r.status == "ok", (r.status, r.reason)  # type: ignore[attr-defined]
    f = r.figures  # type: ignore[attr-defined]
    assert f.global_throughput > 0 and f.step_time.median_s > 0 and len(f.windows) == 2
    assert f.model.train_flops_per_example > 0 and "cost_analysis" in f.model.flops_method
    assert f.mfu is None or 0 < f.mfu <= 1
    assert f.memory.device_peak_bytes or f.memory.device_peak_reason
    assert f.replica_divergence == 0.0
    env = r.environment  # type: ignore[attr-defined]
    assert env["backend"] == "jax" and env["jax"] and env["jaxlib"]
    assert "--xla_force_host_platform_device_count=2" in env["xla_flags"]
    assert env["frameworks_loaded"] == ["jax"]  # Keras on JAX never loads TensorFlow


@needs_jax
@pytest.mark.logical_cpu
def test_data_parallel_trains_on_two_logical_cpu_devices(tmp_path: Path) -> None:
    result = _run(jax_spec(), tmp_path)
    _check_ok(result)
    assert result.spec.backend == "jax" and result.replicas == 2  # type: ignore[attr-defined]


@needs_jax
@pytest.mark.logical_cpu
def test_model_parallel_trains_the_mlp_on_two_devices(tmp_path: Path) -> None:
    result = _run(jax_spec(strategy="model_parallel"), tmp_path)
    _check_ok(result)
    assert result.replicas == 1  # type: ignore[attr-defined]  # the 2 devices hold one model


@needs_jax
def test_a_model_that_calls_tensorflow_is_unsupported_on_jax(tmp_path: Path) -> None:
    f = tmp_path / "tfmodel.py"
    f.write_text("import tensorflow as tf\n\ndef build():\n    import keras\n"
                 "    return keras.Sequential([keras.Input((4,)), keras.layers.Dense(3)])\n")
    result = _run(jax_spec(workload=f"{f}:build", size="default", devices=1), tmp_path)
    assert result.status == "unsupported"  # type: ignore[attr-defined]
    assert "imports TensorFlow" in result.reason  # type: ignore[attr-defined]


@needs_jax
def test_the_device_script_runs_its_cpu_path(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-m", "scripts.jax_gpu_check", "--out",
                          str(tmp_path), "--batch", "64", "--max-seconds", "0.3",
                          "--profile-steps", "2"],
                         capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "no GPU" in out.stderr or "GPU" in json.loads(
        (tmp_path / "figures.json").read_text())["gpu"]
    figures = json.loads((tmp_path / "figures.json").read_text())
    assert figures["tensorflow_imported"] is False
    assert set(figures["runs"]) == {"float32", "mixed_bfloat16"}
    for run in figures["runs"].values():
        assert run["status"] == "ok" and run["examples_per_s"] > 0
    assert json.loads((tmp_path / "fingerprint.json").read_text())["backend"] == "jax"
    assert any((tmp_path / "profile").rglob("*.xplane.pb"))


def test_jax_configurations_run_in_processes_of_their_own() -> None:
    from bench.launch.arms import shareable_reason

    reason = shareable_reason(jax_spec())
    assert reason is not None and "process of its own" in reason
    assert shareable_reason(tiny_spec()) is None


def test_the_jax_peak_is_measured_once_then_read_and_a_refresh_keeps_the_higher(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from types import SimpleNamespace

    from bench.child.backends.jax import peak

    monkeypatch.setenv("STRATBENCH_CACHE_DIR", str(tmp_path))
    readings = iter([100e9, 80e9, 130e9, 50e9])
    measured: list[float] = []

    def measure(jax: object, device: object, dtype: str) -> float:
        measured.append(next(readings))
        return measured[-1]

    monkeypatch.setattr(peak, "achievable_peak", measure)
    fake = SimpleNamespace(__version__="0.10.2",
                           config=SimpleNamespace(jax_default_matmul_precision=None))
    cpu = SimpleNamespace(platform="cpu", device_kind="cpu")
    assert peak.cached_peak(fake, cpu, "float32") == 100e9
    assert peak.cached_peak(fake, cpu, "float32") == 100e9 and len(measured) == 1
    # A run beat it: measured again; a lower reading (a busy machine) keeps the cached.
    assert peak.cached_peak(fake, cpu, "float32", refresh=True) == 100e9
    assert peak.cached_peak(fake, cpu, "float32", refresh=True) == 130e9
    assert len(measured) == 3
    # Another dtype, another float32 precision (TF32 on a GPU): entries of their own.
    assert peak.cached_peak(fake, cpu, "bfloat16") == 50e9 and len(measured) == 4
    tf32 = SimpleNamespace(__version__="0.10.2",
                           config=SimpleNamespace(jax_default_matmul_precision="tensorfloat32"))
    assert peak.cache_key(tf32, cpu) != peak.cache_key(fake, cpu)
