"""Before a sweep: can the user's own models be trained? (parent side)

What the parent can check without importing the user's code is checked when the spec
is made (workloads.user: the spelling, the file, the function's parameters). What needs
the model itself (does the module import, is it a Keras model, can its inputs be
synthesised) needs TensorFlow, so one short child process (bench.child.backends.tf.preflight)
builds each distinct model once, under the default strategy, before any run; a
problem is a usage error (exit 2) naming the value, never a traceback. The
configurations then run as usual: a model that fails under one strategy only is a
failed run with TensorFlow's reason, and the sweep goes on.

A model that passed is remembered ($STRATBENCH_CACHE_DIR, per interpreter, model
file digest, parameters, data source and Keras lane), so that a second command on the
same file does not pay the check. The digest covers the file that defines the model,
not modules it imports: a change there shows at the run.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterable
from pathlib import Path

from bench.errors import UsageError
from bench.files import replace_whole
from bench.lanes import LANES
from bench.launch.interpreter import _read_json, tensorflow_check_cache
from bench.launch.launcher import checkout_pythonpath
from bench.spec import RunSpec, workload_label
from workloads.user import looks_like_user_model

# Importing TensorFlow and building a model: seconds; a large model on a slow disk more.
PREFLIGHT_TIMEOUT_S = 300.0
MARK = "STRATBENCH_PREFLIGHT "  # bench.child.backends.tf.preflight.MARK (no child import here)


def _identity(spec: RunSpec) -> dict[str, object]:
    """What decides whether a model can be trained: the model, not the strategy."""
    return {"workload": spec.workload, "workload_digest": spec.workload_digest,
            "params": dict(spec.params), "data": spec.data, "keras": spec.keras,
            "precision": spec.precision}


def _cache_key(spec: RunSpec, python: str) -> str:
    text = json.dumps({**_identity(spec), "python": python}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def cache_path() -> Path:
    """Where models that passed are remembered ($STRATBENCH_CACHE_DIR)."""
    return tensorflow_check_cache().with_name("user-models.json")


def models_to_check(specs: Iterable[RunSpec]) -> list[RunSpec]:
    """One spec per distinct user model (with its parameters, data source and lane)."""
    out: dict[str, RunSpec] = {}
    for spec in specs:
        # The check builds with TensorFlow: a JAX-lane run checks its model itself (a
        # model that calls TensorFlow is unsupported there, with that reason).
        if looks_like_user_model(spec.workload) and \
                LANES.get(spec.backend).preflights_user_models:
            out.setdefault(json.dumps(_identity(spec), sort_keys=True), spec)
    return list(out.values())


def describe(record: dict[str, object]) -> str:
    """What a model was read to need, one line: ``inputs ...; labels ...; loss ...``."""
    inputs = record.get("inputs") or []
    parts = [f"inputs {', '.join(map(str, inputs))}" if isinstance(inputs, list) else ""]
    parts += [f"{k} {record[k]}" for k in ("labels", "loss", "optimizer", "data")
              if record.get(k)]
    return "; ".join(p for p in parts if p)


def preflight(specs: Iterable[RunSpec], python: str | None = None,
              timeout_s: float = PREFLIGHT_TIMEOUT_S, cache: Path | None = None,
              echo: Callable[[str], None] = print) -> None:
    """UsageError (exit 2) listing every user model of ``specs`` that cannot be
    trained, each with the reason its child found; nothing for built-in workloads.
    ``echo`` gets one line per model that can: what it was read to need."""
    python = python or sys.executable
    path = cache or cache_path()
    known = _read_json(path)
    checked = models_to_check(specs)
    todo = [s for s in checked if _cache_key(s, python) not in known]
    problems: list[str] = []
    for lane in sorted({s.keras for s in todo}):
        batch = [s for s in todo if s.keras == lane]
        for spec, answer in zip(batch, _ask(python, lane, batch, timeout_s), strict=True):
            if answer.get("problem"):
                problems.append(f"--workload {spec.workload}: {answer['problem']}")
            else:
                known[_cache_key(spec, python)] = answer.get("record") or {}
    with contextlib.suppress(OSError):
        replace_whole(path, json.dumps(known))
    if problems:
        head = "a model of your own cannot be trained" if len(problems) == 1 else \
            f"{len(problems)} models of your own cannot be trained"
        raise UsageError(f"{head}; nothing was run:\n  " + "\n  ".join(problems))
    for spec in checked:
        record = known.get(_cache_key(spec, python))
        if isinstance(record, dict):
            given = ", ".join(f"{k}={v}" for k, v in sorted(spec.params.items()))
            echo(f"model {workload_label(spec.workload, spec.size)}"
                 f"{f' ({given})' if given else ''}: {describe(record)}")


def _ask(python: str, keras: int, specs: list[RunSpec],
         timeout_s: float) -> list[dict[str, object]]:
    """The child's answers for ``specs`` (one process; a UsageError if it gives none)."""
    request = json.dumps({"keras": keras, "specs": [s.to_dict() for s in specs]})
    env = {**os.environ, "PYTHONPATH": checkout_pythonpath(os.environ),
           "TF_CPP_MIN_LOG_LEVEL": "2"}
    names = ", ".join(s.workload for s in specs)
    try:
        out = subprocess.run([python, "-m", "bench.child.backends.tf.preflight"], input=request,
                             capture_output=True, text=True, timeout=timeout_s, env=env,
                             check=False)
    except subprocess.TimeoutExpired:
        raise UsageError(f"checking {names} took over {timeout_s:g} s (importing the "
                         f"module and building the model); nothing was run") from None
    for line in out.stdout.splitlines():
        if line.startswith(MARK):
            answers = json.loads(line[len(MARK):])
            if isinstance(answers, list) and len(answers) == len(specs):
                return answers
    tail = (out.stderr.strip().splitlines() or ["no output"])[-1]
    raise UsageError(f"checking {names} ended without an answer (exit {out.returncode}: "
                     f"{tail}); nothing was run")
