"""Commands that start TensorFlow children refuse before anything runs without it.

A user who skipped `make` used to learn of the missing install from every
configuration's child traceback and a report of zero runs (exit 3). Now the command
checks, in one short child process, that the interpreter imports TensorFlow (and, where
nvidia-smi shows GPUs, that TensorFlow sees them), and exits 2 naming the interpreter
and the install command, with no result written.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.errors import UsageError
from bench.launch import interpreter
from bench.launch.interpreter import require_tensorflow

REPO = Path(__file__).resolve().parent.parent
# An interpreter without TensorFlow, made from this one: a sitecustomize that makes the
# import fail as a missing package does, in the parent and in every child it starts.
_BLOCK = '''import importlib.abc, sys
class _NoTensorFlow(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "tensorflow" or name.startswith("tensorflow."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, _NoTensorFlow())
'''


def _without_tensorflow(tmp_path: Path) -> dict[str, str]:
    site = tmp_path / "no-tf"
    site.mkdir()
    (site / "sitecustomize.py").write_text(_BLOCK)
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(REPO)]),
            "STRATBENCH_CACHE_DIR": str(tmp_path / "cache")}


def _bench_without_tensorflow(tmp_path: Path, *commands: list[str]
                              ) -> list[subprocess.CompletedProcess[str]]:
    """``python -m bench ARGS`` for each of ``commands``, under an interpreter whose
    TensorFlow import fails; run at once (each is a CLI process that spends ~2 s on its
    imports, mostly on one core, and none starts TensorFlow)."""
    env = _without_tensorflow(tmp_path)
    procs = [subprocess.Popen([sys.executable, "-m", "bench", *args], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, cwd=REPO, env=env,
                              stdin=subprocess.DEVNULL) for args in commands]
    done = []
    try:
        for proc in procs:
            out, err = proc.communicate(timeout=60)
            done.append(subprocess.CompletedProcess(proc.args, proc.returncode, out, err))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return done


def test_a_command_without_tensorflow_exits_2_before_any_run(tmp_path: Path) -> None:
    """`run` and `allreduce` refuse with exit 2, naming the interpreter and the install
    command, and write nothing."""
    commands = [["run", "--preset", "smoke"], ["allreduce"]]
    outs = [tmp_path / f"sweep{i}" for i in range(len(commands))]
    procs = _bench_without_tensorflow(tmp_path, *([*command, "--out", str(out)]
                                                  for command, out in zip(commands, outs,
                                                                          strict=True)))
    for command, out, proc in zip(commands, outs, procs, strict=True):
        assert proc.returncode == 2, (command, proc.stdout + proc.stderr)
        assert f"TensorFlow is not installed for {sys.executable}" in proc.stderr, command
        assert "make venv" in proc.stderr and "Traceback" not in proc.stderr, command
        assert not out.exists(), command  # no run, no report


def test_the_cpu_build_on_a_gpu_machine_is_refused_and_a_good_answer_is_cached(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "check.json"
    # This machine's TensorFlow sees no GPU: with one GPU shown it is the wrong build.
    with pytest.raises(UsageError, match=r"nvidia-smi shows 1 GPU\(s\) but TensorFlow "
                                         r".* sees none .*TF_EXTRA=gpu"):
        require_tensorflow(1, cache=cache)
    assert not cache.exists()  # a refusal is never cached
    version = require_tensorflow(0, cache=cache)
    assert version and version in cache.read_text()
    # Cached: the import is not run again (here it would fail).
    monkeypatch.setattr(interpreter, "_IMPORT_TF", "raise SystemExit(1)")
    assert require_tensorflow(0, cache=cache) == version
    with pytest.raises(UsageError, match="TensorFlow does not import"):
        require_tensorflow(0, cache=tmp_path / "other.json")


def test_report_only_reads_stored_results_without_tensorflow(tmp_path: Path) -> None:
    """`nightly --report-only` and `lab --report-only` run nothing, so they never ask
    for TensorFlow."""
    # Nothing to run: no refusal. (The empty directory then gets its own usage error.)
    commands = [["nightly", "--report-only"], ["lab", "--report-only"]]
    empty = tmp_path / "none"
    procs = _bench_without_tensorflow(tmp_path, *([*command, "--out", str(empty)]
                                                  for command in commands))
    for command, proc in zip(commands, procs, strict=True):
        assert "TensorFlow is not installed" not in proc.stderr, proc.stderr
        assert "Traceback" not in proc.stderr and proc.returncode == 2, proc.stderr
        assert f"Received: --out{' ' if command[0] == 'nightly' else '='}{empty}" in \
            proc.stderr


# -- the JAX lane: JAX present, and its CUDA wheels where there are GPUs ------------------
def _python_answering(tmp_path: Path, answer: str) -> str:
    """A stand-in interpreter that answers the JAX probe with ``answer`` (JSON)."""
    exe = tmp_path / f"python-{len(list(tmp_path.iterdir()))}"
    exe.write_text(f"#!/bin/sh\necho '{answer}'\n")
    exe.chmod(0o755)
    return str(exe)


def test_the_jax_lane_is_refused_without_jax_or_on_gpus_without_its_cuda_wheels(
        tmp_path: Path) -> None:
    from bench.launch.interpreter import require_jax

    none = _python_answering(tmp_path, '{"jax": false, "cuda": []}')
    cpu = _python_answering(tmp_path, '{"jax": true, "cuda": []}')
    cuda = _python_answering(tmp_path, '{"jax": true, "cuda": ["jax-cuda12-plugin"]}')
    with pytest.raises(UsageError, match=r"not installed for .*JAX_EXTRA=jax` installs"):
        require_jax(0, none)
    with pytest.raises(UsageError, match=r"not installed .*JAX_EXTRA=jax-cuda"):
        require_jax(2, none)
    # CPU jax on a GPU machine would train on the CPU under a GPU label.
    with pytest.raises(UsageError, match=r"shows 2 GPU\(s\) but the JAX .* no CUDA plugin"
                                         r".*JAX_EXTRA=jax-cuda"):
        require_jax(2, cpu)
    require_jax(0, cpu)
    require_jax(2, cuda)


def test_the_probe_reads_this_interpreters_jax_without_importing_it() -> None:
    from bench.launch.interpreter import _LOCATE_JAX

    out = subprocess.run([sys.executable, "-c", _LOCATE_JAX + "import sys\n"
                          "assert 'jax' not in sys.modules\n"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert '"jax": ' in out.stdout and '"cuda": ' in out.stdout
