"""Can these models of the user's own be trained at all? One short process answers.

    python -m bench.child.backends.tf.preflight  < CHECK.json   -> one line: MARK + answers (JSON)

CHECK.json holds ``{"keras": 3, "specs": [spec, ...]}``: one spec per distinct model,
parameters and data source. Each is built as a run builds it (bench.child.backends.tf.task, under
the default strategy: no devices are set up, nothing is trained), so that a module that
does not import, a function that is missing or returns no Keras model, a file that
does not load, parameters the function does not take, or inputs the harness cannot
synthesise stop the command before any run (exit 2, bench.launch.usermodel) instead of
failing every configuration of a sweep. The answer per spec: ``{"key", "problem"}``
(None when it can be trained) and what the model was read to need (``record``).
"""

from __future__ import annotations

import json
import sys
from typing import Any

from bench.child.backends.tf.keras_lane import select_keras
from bench.child.backends.tf.lean_import import skip_optional_while_tensorflow_imports
from bench.errors import BenchError
from bench.spec import RunSpec

MARK = "STRATBENCH_PREFLIGHT "


def check(spec: RunSpec) -> dict[str, Any]:
    """One spec's answer: its problem (None: the model can be trained) and its record."""
    import tensorflow as tf

    from bench.child.backends.tf.task import build_task, check_data, last_line

    try:
        task = build_task(spec, tf.distribute.get_strategy())
        check_data(task, spec)
    except BenchError as exc:  # UserModelError, Unsupported, SpecError: said for the user
        return {"key": spec.key(), "problem": str(exc)}
    except Exception as exc:  # anything else the model's code or Keras raised
        return {"key": spec.key(), "problem": f"{spec.workload}: {last_line(exc)}"}
    return {"key": spec.key(), "problem": None, "record": task.record}


def main() -> int:
    request = json.loads(sys.stdin.read())
    select_keras(int(request.get("keras", 3)))  # before anything imports TensorFlow
    if all(d.get("backend", "tf") == "tf" for d in request["specs"]):
        skip_optional_while_tensorflow_imports()
    answers = []
    for data in request["specs"]:
        try:
            spec = RunSpec.from_dict(data)
        except BenchError as exc:
            answers.append({"key": "", "problem": str(exc)})
            continue
        answers.append(check(spec))
    print(MARK + json.dumps(answers), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
