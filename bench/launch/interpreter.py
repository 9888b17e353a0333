"""Another Python interpreter for a side's runs (``--candidate-python``), checked first.

A side of an A/B comparison may run under a second virtual environment (a pinned
TensorFlow as the baseline, say). Before any run, the interpreter is probed in a
short child process with this checkout on its PYTHONPATH (as every child gets it):
it must start, import TensorFlow and import this project's child code. A path that
does not exist, is not executable, or fails the probe is a usage error naming the
flag and the value, found before a budget is spent on runs that could never start.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bench import sim
from bench.errors import UsageError
from bench.files import cache_dir, replace_whole
from bench.launch.launcher import checkout_pythonpath

# Importing TensorFlow cold (first time after an install, a slow disk) takes seconds.
PROBE_TIMEOUT_S = 300.0
# What the probe imports: TensorFlow, and the child's entry point (this checkout's
# code must import under that interpreter's Python and packages).
_PROBE = ("import json, sys\n"
          "import tensorflow as tf\n"
          "import bench.child.main\n"
          "print(json.dumps({'tensorflow': tf.__version__, "
          "'python': sys.version.split()[0], 'executable': sys.executable}))\n")


@dataclass(frozen=True)
class Interpreter:
    """A probed interpreter: its path as given (made absolute) and what it runs."""

    path: str
    tensorflow: str
    python: str

    def describe(self) -> str:
        """``/opt/pinned/bin/python (TensorFlow 2.16.1, Python 3.11.7)``."""
        return f"{self.path} (TensorFlow {self.tensorflow}, Python {self.python})"

    def identity(self) -> dict[str, str]:
        """What the history stores of it."""
        return {"path": self.path, "tensorflow": self.tensorflow, "python": self.python}


def locate(text: str, flag: str) -> str:
    """``text`` as an absolute path to an executable file; a bare name is looked up on
    PATH. Symbolic links are kept: a virtual environment's ``bin/python`` is a link
    to the base interpreter, and resolving it would leave the environment."""
    found = shutil.which(text) if os.sep not in text else text
    if found is None or not Path(found).exists():
        raise UsageError(f"{flag} must name a Python interpreter, but there is no such "
                         f"file. Received: {flag}={text}")
    path = Path(found)
    if not path.is_file() or not os.access(path, os.X_OK):
        raise UsageError(f"{flag} must name an executable file. Received: {flag}={text}")
    return os.path.abspath(path)


def _run_python(python: str, code: str, env: dict[str, str], timeout_s: float, who: str,
                after: str) -> subprocess.CompletedProcess[str]:
    """``code`` run under ``python``; a UsageError naming ``who`` (then ``after``) when
    it cannot be started or takes over ``timeout_s``."""
    try:
        return subprocess.run([python, "-c", code], capture_output=True, text=True,
                              timeout=timeout_s, env=env, stdin=subprocess.DEVNULL,
                              check=False)
    except subprocess.TimeoutExpired:
        raise UsageError(f"{who}: importing TensorFlow under it took over {timeout_s:g} s. "
                         f"{after}") from None
    except OSError as exc:
        raise UsageError(f"{who} could not be started: {exc.strerror or exc}. "
                         f"{after}") from None


def probe(text: str, flag: str, timeout_s: float = PROBE_TIMEOUT_S) -> Interpreter:
    """Check that ``text`` runs this project's child code with TensorFlow; UsageError
    (exit 2) naming ``flag`` otherwise."""
    path = locate(text, flag)
    env = {**os.environ, "PYTHONPATH": checkout_pythonpath(os.environ),
           "TF_CPP_MIN_LOG_LEVEL": "2"}
    out = _run_python(path, _PROBE, env, timeout_s, flag, f"Received: {flag}={text}")
    lines = out.stdout.strip().splitlines()
    if out.returncode != 0 or not lines:
        tail = (out.stderr.strip().splitlines() or ["no output"])[-1]
        raise UsageError(f"{flag} cannot import TensorFlow and this checkout's child code "
                         f"(exit {out.returncode}: {tail}). Received: {flag}={text}")
    try:
        found = json.loads(lines[-1])
        return Interpreter(path, str(found["tensorflow"]), str(found["python"]))
    except (ValueError, KeyError, TypeError):
        raise UsageError(f"{flag} printed no probe answer ({lines[-1][:200]!r}). "
                         f"Received: {flag}={text}") from None


# -- this interpreter: TensorFlow present, and the build that sees the GPUs ----------------
# Where TensorFlow lives under an interpreter, found without importing it (a fraction of
# a second): the package's __init__ file, or "" where there is none.
_LOCATE_TF = ("import importlib.util as u\n"
              "try:\n    s = u.find_spec('tensorflow')\nexcept Exception:\n    s = None\n"
              "print(s.origin if s is not None and s.origin else '')\n")
# The full check: TensorFlow imports, and how many GPUs it sees.
_IMPORT_TF = ("import json\nimport tensorflow as tf\n"
              "print(json.dumps({'tensorflow': tf.__version__, "
              "'gpus': len(tf.config.list_physical_devices('GPU'))}))\n")
INSTALL_HINT = ("`make venv` installs it (`make venv TF_EXTRA=gpu` for the GPU build), "
                "then run `.venv/bin/python -m bench ...`")


def require_tensorflow(gpus: int, python: str | None = None,
                       timeout_s: float = PROBE_TIMEOUT_S,
                       cache: Path | None = None) -> str:
    """Refuse (UsageError, exit 2) before anything runs when ``python`` (this
    interpreter by default), which will run the TensorFlow children, cannot import
    TensorFlow, or sees no GPU where nvidia-smi shows ``gpus`` (TensorFlow's CPU build on
    a GPU machine). Returns TensorFlow's version. A positive answer is cached per
    interpreter, TensorFlow install (its file's path and time) and GPU count, so that
    only the first command after an install pays the import."""
    python = python or sys.executable
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}

    def run(code: str) -> subprocess.CompletedProcess[str]:
        return _run_python(python, code, env, timeout_s, python, "Nothing was run.")

    origin = run(_LOCATE_TF).stdout.strip()
    if not origin:
        raise UsageError(f"TensorFlow is not installed for {python}, which runs the "
                         f"measurements; nothing was run. {INSTALL_HINT}")
    try:
        key = f"{python}|{origin}|{os.stat(origin).st_mtime_ns}|{gpus}"
    except OSError:
        key = ""
    path = cache or tensorflow_check_cache()
    known = _read_json(path)
    if key and key in known:
        return str(known[key])
    out = run(_IMPORT_TF)
    lines = out.stdout.strip().splitlines()
    try:
        found = json.loads(lines[-1]) if out.returncode == 0 and lines else None
    except ValueError:
        found = None
    if not isinstance(found, dict) or "tensorflow" not in found:
        tail = (out.stderr.strip().splitlines() or ["no output"])[-1]
        raise UsageError(f"TensorFlow does not import under {python} ({tail}); nothing was "
                         f"run. {INSTALL_HINT}")
    if gpus and not found.get("gpus") and sim.active() is None:
        raise UsageError(f"nvidia-smi shows {gpus} GPU(s) but TensorFlow "
                         f"{found['tensorflow']} under {python} sees none (the CPU build, or "
                         f"no CUDA libraries); nothing was run. `make venv TF_EXTRA=gpu` "
                         f"installs the GPU build")
    if key:
        with contextlib.suppress(OSError):
            replace_whole(path, json.dumps({**known, key: found["tensorflow"]}))
    return str(found["tensorflow"])


# -- the JAX lane under this interpreter: JAX present, and its CUDA plugin where GPUs are ----
# Found without importing JAX: the package's spec, and the distributions of JAX's CUDA
# plugin that `jax[cuda12]` installs (jax-cuda12-plugin, jax-cuda12-pjrt).
_LOCATE_JAX = ("import importlib.metadata as m, importlib.util as u, json\n"
               "try:\n    s = u.find_spec('jax')\nexcept Exception:\n    s = None\n"
               "names = {(d.metadata['Name'] or '').lower() for d in m.distributions()}\n"
               "print(json.dumps({'jax': bool(s is not None and s.origin), "
               "'cuda': sorted(n for n in names if n.startswith('jax-cuda'))}))\n")
JAX_CUDA_HINT = "`make venv JAX_EXTRA=jax-cuda` installs JAX's CUDA wheels"


def require_jax(gpus: int, python: str | None = None,
                timeout_s: float = PROBE_TIMEOUT_S) -> None:
    """Refuse (UsageError, exit 2) before anything runs when the JAX lane
    (``--backend jax``) cannot train where it is asked: ``python`` (this interpreter by
    default) has no JAX, or, where nvidia-smi shows ``gpus``, a JAX without its CUDA
    plugin, which would train on the CPU under a GPU label. `make venv` installs CPU jax
    where there is no GPU, and JAX's CUDA wheels only when JAX_EXTRA=jax-cuda asks."""
    python = python or sys.executable
    out = _run_python(python, _LOCATE_JAX, dict(os.environ), timeout_s, python,
                      "Nothing was run.")
    lines = out.stdout.strip().splitlines()
    try:
        found = json.loads(lines[-1]) if out.returncode == 0 and lines else None
    except ValueError:
        found = None
    if not isinstance(found, dict):
        tail = (out.stderr.strip().splitlines() or ["no output"])[-1]
        raise UsageError(f"{python} could not say whether JAX is installed ({tail}); "
                         f"nothing was run")
    hint = JAX_CUDA_HINT if gpus else "`make venv JAX_EXTRA=jax` installs CPU jax"
    if not found.get("jax"):
        raise UsageError(f"--backend jax needs JAX, which is not installed for {python}; "
                         f"nothing was run. {hint}")
    if gpus and not found.get("cuda") and sim.active() is None:
        raise UsageError(f"nvidia-smi shows {gpus} GPU(s) but the JAX under {python} has no "
                         f"CUDA plugin (jax-cuda12-plugin): --backend jax would train on the "
                         f"CPU under a GPU label; nothing was run. {hint}")


# What a lane needs installed, checked before anything runs on it (UsageError, exit 2),
# by lane (bench.lanes), given the GPUs nvidia-smi shows; a lane without an entry is
# checked by its runs themselves.
INSTALL_CHECKS: dict[str, Callable[[int], None]] = {"jax": require_jax}


def tensorflow_check_cache() -> Path:
    """Where ``require_tensorflow`` keeps its answers ($STRATBENCH_CACHE_DIR)."""
    return cache_dir() / "tensorflow-check.json"


def _read_json(path: Path) -> dict[str, object]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}
