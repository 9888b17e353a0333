"""Which Keras a run's process trains with: Keras 3 (``keras``) or Keras 2 (``tf_keras``).

``select_keras`` runs first thing in the child, before anything imports TensorFlow
or Keras. For Keras 2 it sets ``TF_USE_LEGACY_KERAS=1`` (TensorFlow then resolves
``tf.keras`` to tf_keras) and makes ``import keras`` give tf_keras too, so the
harness's own Keras code (workloads, both training loops) builds the same model
with Keras 2 without a second code path. The variable sits in the process's
environment, so the fingerprint records it (as every ``TF_*`` variable), and the
fingerprint's ``keras`` version is then tf_keras's.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import types
from typing import Any

from bench.errors import Unsupported

LEGACY_KERAS_VAR = "TF_USE_LEGACY_KERAS"
KERAS2_MODULE = "tf_keras"


class _KerasAlias(types.ModuleType):
    """``keras`` standing for tf_keras, imported at first use.

    Importing tf_keras imports TensorFlow: deferring it keeps TensorFlow's import
    where the child times it (``import_framework_s``).
    """

    def __getattr__(self, name: str) -> Any:
        return getattr(importlib.import_module(KERAS2_MODULE), name)


def select_keras(version: int) -> None:
    """Make this process train with Keras ``version`` (3 or 2); call before TensorFlow.

    Raises Unsupported when Keras 2 is asked for and tf_keras is not installed.
    """
    if version == 3:
        # The spec decides: a TF_USE_LEGACY_KERAS inherited from the shell would make
        # tf.keras Keras 2 beside a Keras 3 model.
        os.environ.pop(LEGACY_KERAS_VAR, None)
        return
    if importlib.util.find_spec(KERAS2_MODULE) is None:
        raise Unsupported(f"keras=2 needs the {KERAS2_MODULE} package, which is not "
                          f"installed: pip install -e '.[keras2]' (make venv installs it)")
    os.environ[LEGACY_KERAS_VAR] = "1"
    sys.modules["keras"] = _KerasAlias("keras")


def variable_handle(v: Any) -> Any:
    """The tf.Variable behind a model variable, in either lane.

    Keras 3 variables wrap one in ``.value``; tf_keras's are tf.Variables, whose
    ``value`` is a method (the variable itself is the handle).
    """
    inner = getattr(v, "value", v)
    return v if callable(inner) else inner
