"""Whether a starting process is hung: no progress for a deadline, not a slow sum.

A process is hung when it stops making progress, not when the sum of its honest work
passes a constant (DESIGN.md, principle 15). The arms' process of a ResNet50 session
at 224x224 builds and warms eight arms before it says it is ready, several minutes
on two cores; eight independent copies on eight GPUs import and build at once. A
single start-up deadline killed both although every phase went at its normal pace.

So each child appends a line per finished phase to its progress file
(``bench.progress``), and the launcher holds deadlines on what it sees there and on
the process's CPU time, on its own monotonic clock (never the child's: clocks of two
processes are not compared):

- ``startup_s``: from launch to the first phase (the interpreter and bench imported);
- ``idle_s``: from the last sign of life to the next, a sign being a phase finished
  or a stretch of busy CPU (``BUSY_CORES`` of a core or more, read from
  ``/proc/<pid>/stat``). A phase may be one long call: the driver JIT-compiling
  TensorFlow's kernels for a card its wheel has no SASS for (minutes, one core busy),
  or tracing a large step (74 s on two loaded cores). Such a call is busy and is never
  taken for a hang, however long; a collective whose peers never answer (an NCCL hang
  on a PCIe box without peer access, a 64 MB ``/dev/shm``) leaves the process idle,
  and is ended ``idle_s`` after its last sign of life;
- ``silence_s``: from the last phase to the next where the CPU time cannot be read.

The launcher watches every process of a run until its main task finishes, through its
first collective and first call (``bench.launch.launcher``); the processes of one run
wait on each other (a worker waits, idle, for a peer that compiles), so a run is hung
only once every one of its live processes is (``all_hung``). A task that keeps making
progress is bounded by its run's own timeout (the launcher's, a session's), which these
deadlines never extend. Parent side: no TensorFlow.
"""

from __future__ import annotations

import math
import os
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from bench.progress import last_phase, progress_path

# A process using at least this share of a core over ``BUSY_SPAN_S`` is working (a
# compile, a long call): on a machine whose cores are shared by eight processes each
# still gets a quarter. An idle TensorFlow process's threads take a few ms a second.
BUSY_CORES = 0.1
BUSY_SPAN_S = 5.0
# CPU time is read at most this often per process.
CPU_READ_S = 1.0
_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def cpu_seconds(pid: int) -> float | None:
    """CPU time (user + system) of process ``pid`` so far, None where it cannot be read
    (gone, not Linux)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            text = fh.read()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: fields after the last ')'.
    fields = text[text.rfind(")") + 2:].split()
    try:
        return (int(fields[11]) + int(fields[12])) / _TICKS
    except (IndexError, ValueError):
        return None


@dataclass(frozen=True)
class Deadlines:
    """How long a task may show no sign of life: before its first phase (``startup_s``,
    from launch), after its last phase or busy stretch (``idle_s``), and between two
    phases where its CPU time cannot be read (``silence_s``), in seconds."""

    startup_s: float
    silence_s: float
    idle_s: float | None = None  # None: silence_s

    def __post_init__(self) -> None:
        for name in ("startup_s", "silence_s", *(("idle_s",) if self.idle_s is not None
                                                 else ())):
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
    last_busy: float | None = None  # monotonic time the CPU was last seen busy
    cpu_read: bool = False  # the CPU time could be read at least once
    _cpu: deque[tuple[float, float]] = field(default_factory=deque, repr=False)

    def observe(self, size: int, now: float, cpu_s: float | None = None) -> None:
        """The progress file measured ``size`` bytes at ``now``, the process had used
        ``cpu_s`` seconds of CPU (None: unknown)."""
        if size != self.size:
            self.size, self.last_change = size, now
            self.changes += 1
        if cpu_s is None:
            return
        self.cpu_read = True
        self._cpu.append((now, cpu_s))
        while len(self._cpu) > 2 and now - self._cpu[1][0] >= BUSY_SPAN_S:
            self._cpu.popleft()
        t0, c0 = self._cpu[0]
        if now - t0 >= BUSY_SPAN_S / 2 and (cpu_s - c0) >= BUSY_CORES * (now - t0):
            self.last_busy = now

    @property
    def alive_at(self) -> float | None:
        """The last sign of life: a phase, or (CPU time read) a busy stretch."""
        signs = [t for t in (self.last_change, self.last_busy) if t is not None]
        return max(signs) if signs else None

    @property
    def due(self) -> float:
        """When the task is hung unless it shows a sign of life before."""
        if self.last_change is None:
            return self.launched + self.deadlines.startup_s
        if self.cpu_read:
            alive = self.alive_at or self.last_change
            return alive + (self.deadlines.idle_s or self.deadlines.silence_s)
        return self.last_change + self.deadlines.silence_s

    def hung(self, now: float) -> bool:
        """Whether the task has been silent past its deadline at ``now``."""
        return now > self.due

    def silence(self, now: float) -> str:
        """Why the task is hung (or how long it has been silent), for a reason."""
        if self.last_change is None:
            return (f"no progress within {now - self.launched:.0f} s of launch "
                    f"(start-up deadline {self.deadlines.startup_s:g} s)")
        if self.cpu_read:
            idle = self.deadlines.idle_s or self.deadlines.silence_s
            busy = (f"last busy {now - self.last_busy:.0f} s ago" if self.last_busy
                    is not None else "never busy")
            return (f"idle and silent: no progress for {now - self.last_change:.0f} s and "
                    f"its CPU idle ({busy}; deadline {idle:g} s without a phase or busy "
                    f"CPU; {now - self.launched:.0f} s since launch)")
        return (f"no progress for {now - self.last_change:.0f} s (deadline "
                f"{self.deadlines.silence_s:g} s between phases; "
                f"{now - self.launched:.0f} s since launch)")


@dataclass
class ProgressWatch:
    """A task's ``Liveness``, fed from its progress file (``bench.progress``)."""

    path: Path
    liveness: Liveness
    pid: int | None = None  # whose CPU time counts as a sign of life
    _last: str = field(default="", repr=False)
    _cpu_at: float = field(default=-math.inf, repr=False)

    @classmethod
    def of(cls, run_dir: Path, task_name: str, launched: float,
           deadlines: Deadlines, pid: int | None = None) -> ProgressWatch:
        """The watch of task ``task_name`` launched at ``launched`` (monotonic), its
        process ``pid`` (None: progress alone)."""
        return cls(progress_path(run_dir, task_name), Liveness(deadlines, launched), pid)

    def poll(self, now: float) -> bool:
        """Read the file's size (and, at most every ``CPU_READ_S``, the process's CPU
        time) at ``now``; whether the task is hung."""
        try:
            size = os.stat(self.path).st_size
        except FileNotFoundError:
            size = 0  # not one phase yet
        cpu = None
        if self.pid is not None and now - self._cpu_at >= CPU_READ_S:
            self._cpu_at = now
            cpu = cpu_seconds(self.pid)
        self.liveness.observe(size, now, cpu)
        return self.liveness.hung(now)

    def alive(self, now: float) -> None:
        """Count ``now`` as a sign of life (the launcher knows the process was waiting
        on it, not hung)."""
        self.liveness.last_busy = now
        if self.liveness.last_change is not None:
            self.liveness.last_change = now

    def why(self, now: float) -> str:
        """The silence and the last phase the task finished, for a reason."""
        phase = last_phase(self.path)
        return self.liveness.silence(now) + (f"; last phase: {phase}" if phase else
                                             "; no phase finished")


def all_hung(watches: Iterable[ProgressWatch], now: float) -> bool:
    """Whether every one of ``watches`` is hung at ``now`` (none given: False): the
    processes of one run wait on each other, so one that waits, idle, on a busy peer
    is not hung."""
    polled = [w.poll(now) for w in watches]
    return bool(polled) and all(polled)
