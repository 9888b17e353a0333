"""Files other processes may read at any moment: replaced whole, never half-written.

Caches shared by processes (the measured peak FLOP/s, the TensorFlow and user-model
checks of the preflight) are read by any child or CLI process that starts, while
another may be writing them: two sweeps at once, or the test suite's two workers. A
file written in place can be read truncated, and two writers can interleave. Shared
root: the child side and the parent side both write such files.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path


def cache_dir() -> Path:
    """stratbench's cache directory: $STRATBENCH_CACHE_DIR, else ~/.cache/stratbench."""
    root = os.environ.get("STRATBENCH_CACHE_DIR")
    return Path(root) if root else Path.home() / ".cache" / "stratbench"


def replace_whole(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` in one step: into a temporary file beside it, then
    ``os.replace``. A reader sees the old file or the new one; a write that fails
    leaves the old file and no temporary one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
