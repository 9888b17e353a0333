"""Whether a starting process is hung: no progress for a deadline, not a slow sum.

A process is hung when it stops making progress, not when the sum of its honest work
passes a constant (DESIGN.md, principle 15). The arms' process of a ResNet50 session
at 224x224 builds and warms eight arms before it says it is ready, several minutes
on two cores; eight independent copies on eight GPUs import and build at once. A
single start-up deadline killed both although every phase went at its normal pace.

So each child appends a line per finished phase to its progress file
(``bench.progress``), and the launcher holds two deadlines on what it sees there, on
its own monotonic clock (never the child's: clocks of two processes are not compared):

- ``startup_s``: from launch to the first phase (the interpreter and bench imported);
- ``silence_s``: from the last phase seen to the next one, while the task is not up.

A task that keeps making progress but never gets up is bounded by its run's own
timeout (the launcher's, a session's), which these deadlines never extend.
Parent side: no TensorFlow.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path

from bench.progress import last_phase, progress_path


@dataclass(frozen=True)
class Deadlines:
    """How long a starting task may be silent: before its first phase (``startup_s``,
    from launch) and between two phases (``silence_s``), in seconds."""

    startup_s: float
    silence_s: float

    def __post_init__(self) -> None:
        for name in ("startup_s", "silence_s"):
            value = getattr(self, name)
            if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
                raise ValueError(f"Deadlines.{name} must be a positive number of seconds. "
                                 f"Received: {name}={value!r}")


@dataclass
class Liveness:
    """What the launcher has seen of one task's progress, on its own clock.

    ``observe`` is given the progress file's size at a time ``now``: a size that
    changed is progress, seen at ``now``. Pure logic (no file): tests give it sizes
    and times of their own.
    """

    deadlines: Deadlines
    launched: float  # monotonic time of the launch
    size: int = 0
    last_change: float | None = None  # monotonic time progress was last seen
    changes: int = 0

    def observe(self, size: int, now: float) -> None:
        """The progress file measured ``size`` bytes at ``now``."""
        if size != self.size:
            self.size, self.last_change = size, now
            self.changes += 1

    @property
    def due(self) -> float:
        """When the task is hung unless it shows progress before."""
        if self.last_change is None:
            return self.launched + self.deadlines.startup_s
        return self.last_change + self.deadlines.silence_s

    def hung(self, now: float) -> bool:
        """Whether the task has been silent past its deadline at ``now``."""
        return now > self.due

    def silence(self, now: float) -> str:
        """Why the task is hung (or how long it has been silent), for a reason."""
        if self.last_change is None:
            return (f"no progress within {now - self.launched:.0f} s of launch "
                    f"(start-up deadline {self.deadlines.startup_s:g} s)")
        return (f"no progress for {now - self.last_change:.0f} s (deadline "
                f"{self.deadlines.silence_s:g} s between phases; "
                f"{now - self.launched:.0f} s since launch)")


@dataclass
class ProgressWatch:
    """A task's ``Liveness``, fed from its progress file (``bench.progress``)."""

    path: Path
    liveness: Liveness
    _last: str = field(default="", repr=False)

    @classmethod
    def of(cls, run_dir: Path, task_name: str, launched: float,
           deadlines: Deadlines) -> ProgressWatch:
        """The watch of task ``task_name`` launched at ``launched`` (monotonic)."""
        return cls(progress_path(run_dir, task_name), Liveness(deadlines, launched))

    def poll(self, now: float) -> bool:
        """Read the file's size at ``now``; whether the task is hung."""
        try:
            size = os.stat(self.path).st_size
        except FileNotFoundError:
            size = 0  # not one phase yet
        self.liveness.observe(size, now)
        return self.liveness.hung(now)

    def why(self, now: float) -> str:
        """The silence and the last phase the task finished, for a reason."""
        phase = last_phase(self.path)
        return self.liveness.silence(now) + (f"; last phase: {phase}" if phase else
                                             "; no phase finished")
