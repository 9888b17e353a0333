"""Another Python interpreter for a side's runs (``--candidate-python``), checked first.

A side of an A/B comparison may run under a second virtual environment (a pinned
TensorFlow as the baseline, say). Before any run, the interpreter is probed in a
short child process with this checkout on its PYTHONPATH (as every child gets it):
it must start, import TensorFlow and import this project's child code. A path that
does not exist, is not executable, or fails the probe is a usage error naming the
flag and the value, found before a budget is spent on runs that could never start.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from bench.errors import UsageError
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


def probe(text: str, flag: str, timeout_s: float = PROBE_TIMEOUT_S) -> Interpreter:
    """Check that ``text`` runs this project's child code with TensorFlow; UsageError
    (exit 2) naming ``flag`` otherwise."""
    path = locate(text, flag)
    env = {**os.environ, "PYTHONPATH": checkout_pythonpath(os.environ),
           "TF_CPP_MIN_LOG_LEVEL": "2"}
    try:
        out = subprocess.run([path, "-c", _PROBE], capture_output=True, text=True,
                             timeout=timeout_s, env=env, stdin=subprocess.DEVNULL,
                             check=False)
    except subprocess.TimeoutExpired:
        raise UsageError(f"{flag}: importing TensorFlow under it took over {timeout_s:g} s. "
                         f"Received: {flag}={text}") from None
    except OSError as exc:
        raise UsageError(f"{flag} could not be started: {exc.strerror or exc}. "
                         f"Received: {flag}={text}") from None
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
