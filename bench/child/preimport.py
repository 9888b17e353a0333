"""What a process forked from the pre-imported starter (``bench.child.starter``) was
spared: the imports, done once, and how long they took."""

from __future__ import annotations

# The starter's import of TensorFlow, Keras and the harness's child modules (s), set in
# a child forked from it; None in a process that imported them itself.
PREIMPORTED_S: float | None = None
