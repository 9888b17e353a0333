"""What `make venv` installs, read from `make -n` (nothing installed, nothing run): the
TensorFlow build it picks, and JAX's CUDA wheels only when JAX_EXTRA=jax-cuda asks."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from tests.gpu_fakes import cards
from tests.helpers import ROOT

pytestmark = pytest.mark.skipif(subprocess.run(["which", "make"], capture_output=True)
                                .returncode != 0, reason="make is not installed")


def _make_n(tmp_path: Path, *args: str, path: str | None = None) -> str:
    """``make -n venv ARGS`` against a virtual environment that does not exist yet (so
    that make prints the install whatever this checkout's .venv holds)."""
    env = {k: v for k, v in os.environ.items() if k not in ("TF_EXTRA", "JAX_EXTRA")}
    env.update({"PATH": path} if path else {})
    proc = subprocess.run(["make", "-n", "venv", f"VENV={tmp_path / 'venv'}", *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=60, env=env)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def _extras(text: str) -> set[str]:
    """The extras of every `install -e ".[...]"` make would run."""
    found = re.findall(r'install[^\n]*-e \\?"\.\[([^\]]*)\]', text)
    assert found, text
    return {extra for group in found for extra in group.split(",")}


def test_the_gpu_build_installs_no_jax_cuda_wheels_unless_asked(tmp_path: Path) -> None:
    gpu = _make_n(tmp_path, "TF_EXTRA=gpu")
    assert "jax-cuda" not in gpu and "jax[cuda" not in gpu
    assert _extras(gpu) == {"gpu", "dev"}
    asked = _make_n(tmp_path, "TF_EXTRA=gpu", "JAX_EXTRA=jax-cuda")
    assert _extras(asked) == {"gpu", "jax-cuda", "dev"}
    # The CPU build keeps CPU jax for the JAX lane; JAX_EXTRA= leaves it out.
    assert _extras(_make_n(tmp_path, "TF_EXTRA=cpu")) == {"cpu", "jax", "dev"}
    assert _extras(_make_n(tmp_path, "TF_EXTRA=cpu", "JAX_EXTRA=")) == {"cpu", "dev"}


def test_a_machine_where_nvidia_smi_answers_gets_the_gpu_build_without_jax(
        tmp_path: Path) -> None:
    directory = cards(2).write(tmp_path / "smi")
    text = _make_n(tmp_path, path=f"{directory}{os.pathsep}{os.environ['PATH']}")
    assert _extras(text) == {"gpu", "dev"}


def test_make_help_says_how_to_ask_for_jax_cuda() -> None:
    proc = subprocess.run(["make", "help"], cwd=ROOT, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    (line,) = [ln for ln in proc.stdout.splitlines() if "variables:" in ln]
    assert "JAX_EXTRA=jax|jax-cuda" in line and "only with JAX_EXTRA=jax-cuda" in line
