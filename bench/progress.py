"""A process's progress file: one line per phase it finished, the launcher's heartbeat.

A process that builds for minutes (eight ResNet50 arms at 224x224 on two cores) is
not hung; one that stops finishing phases is. Every child process appends a line to
``progress.<task>`` in its run directory when it finishes a phase of its start-up
(interpreter up, TensorFlow imported, devices set up, a strategy or an arm built, a
warm-up call...); the launcher watches the file grow
(``bench.launch.liveness``) and declares the task hung only when it has stopped
growing for a deadline, whatever the sum of the phases before. Shared root: written
by the child, read by the parent, no TensorFlow.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

PREFIX = "progress."


def progress_path(run_dir: Path, task_name: str) -> Path:
    """Where task ``task_name`` of the run in ``run_dir`` reports its phases."""
    return run_dir / f"{PREFIX}{task_name}"


def beat(run_dir: Path, task_name: str, phase: str) -> None:
    """Append ``<epoch seconds> <phase>`` to the task's progress file.

    One ``write`` on a file opened for appending: a reader sees whole lines. An
    OSError is raised, not swallowed: a process that cannot say it is alive will be
    declared hung, and its failure should say why.
    """
    line = f"{time.time():.3f} {' '.join(phase.split())}\n".encode()
    fd = os.open(progress_path(run_dir, task_name), os.O_WRONLY | os.O_CREAT | os.O_APPEND,
                 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


def last_phase(path: Path, tail_bytes: int = 4096) -> str:
    """The last phase written to ``path`` ("" when there is none yet)."""
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - tail_bytes))
            lines = fh.read().decode("utf-8", errors="replace").splitlines()
    except OSError:
        return ""
    _, _, phase = (lines[-1] if lines else "").partition(" ")
    return phase
