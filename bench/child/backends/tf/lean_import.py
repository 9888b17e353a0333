"""TensorFlow's import without the optional packages it probes for and never needs here.

``import tensorflow`` tries ``jax`` (TFLite's converter), and the Keras it loads tries
``matplotlib.pyplot`` (an image gallery) and ``pandas`` (DataFrame inputs to ``fit``),
each in ``try: import ... except ImportError``. With the JAX lane and the reports'
packages installed beside TensorFlow, every TensorFlow child paid for all three:
4.7 s to import TensorFlow and Keras on a 2-core AMD EPYC, 3.55 s without them (three
runs each), about 1.1 s of each process's start-up, which is neither measured nor the
user's. A training child of the TensorFlow lane uses none of them: its data is
synthetic NumPy or the user's own ``tf.data``.

``skip_optional_while_tensorflow_imports`` makes those imports fail only while
TensorFlow or Keras is still initialising; afterwards (a user's model file, our own
code) they import as usual.
"""

from __future__ import annotations

import importlib.abc
import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType

# What TensorFlow 2.21 and Keras 3 import only if present (checked with
# ``python -X importtime -c "import tensorflow"``).
OPTIONAL = ("jax", "jaxlib", "matplotlib", "pandas")
# The frameworks whose initialisation probes for them.
FRAMEWORKS = ("tensorflow", "keras", "tf_keras")


def _initializing(name: str) -> bool:
    module = sys.modules.get(name)
    spec = getattr(module, "__spec__", None)
    return bool(getattr(spec, "_initializing", False))


class _SkipOptional(importlib.abc.MetaPathFinder):
    """Refuses ``OPTIONAL`` packages while a ``FRAMEWORKS`` module initialises."""

    def find_spec(self, fullname: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> ModuleSpec | None:
        if fullname.partition(".")[0] in OPTIONAL and any(map(_initializing, FRAMEWORKS)):
            raise ModuleNotFoundError(f"No module named {fullname!r} (not imported while "
                                      f"TensorFlow starts: bench.child.backends.tf.lean_import)",
                                      name=fullname)
        return None


def skip_optional_while_tensorflow_imports() -> None:
    """Install the finder (once) ahead of the standard ones; call before TensorFlow."""
    if not any(isinstance(f, _SkipOptional) for f in sys.meta_path):
        sys.meta_path.insert(0, _SkipOptional())
