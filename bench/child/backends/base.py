"""The interface a framework backend implements (``Backend``), and what it builds
(``Built``). Nothing here imports a framework."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from bench.child.devices import DeviceSetup
from bench.child.windows import DeviceMemoryProbe, Loop
from bench.spec import RunSpec
from bench.tasks import Task
from workloads.flops import ModelStats


class Built(Protocol):
    """One run's distribution, model, optimizer and compiled step, built by a backend."""

    stats: ModelStats  # parameters and FLOPs (the backend's own count)
    replicas: int  # model replicas that step together
    local_replicas: int  # those in this process
    memory: DeviceMemoryProbe  # device peak per window, or why there is none
    pool: int  # distinct synthetic batches placed on the devices

    def loop(self) -> Loop:
        """The compiled step as the window loop drives it."""
        ...

    def weights_checksum(self) -> float:
        """Sum of all trainable weights (to compare runs and processes)."""
        ...

    def replica_divergence(self) -> float:
        """Largest |w_r - w_0| between the copies of a replicated weight (0: one copy)."""
        ...

    def profile(self, steps: int, directory: Path) -> str:
        """Run ``steps`` more steps under the framework's profiler, writing to
        ``directory``; returns what was written (a sentence for the run's record)."""
        ...


class Backend(Protocol):
    """A framework behind the seam: what the harness asks of it, in the order it asks."""

    name: str

    def prepare(self, task: Task, spec: RunSpec) -> None:
        """Set the process environment the framework reads at import (device counts,
        flags); called before ``load``."""
        ...

    def load(self) -> None:
        """Import the framework (timed by the harness as the import phase)."""
        ...

    def setup_devices(self, task: Task, spec: RunSpec) -> DeviceSetup:
        """The devices this process trains on."""
        ...

    def build(self, spec: RunSpec, devices: DeviceSetup,
              progress: Callable[[str], None]) -> Built:
        """The distribution, model, optimizer, data on devices and the compiled step."""
        ...

    def achievable_peak(self, device: str, dtype: str, refresh: bool = False) -> float | None:
        """Matmul FLOP/s of one ``device`` in ``dtype`` (measured after the windows, or
        cached; ``refresh``: measured again, a run beat it)."""
        ...

    def peak_method(self, device: str) -> str:
        """How ``achievable_peak`` measures, for the record."""
        ...

    def float32_fast_math(self, spec: RunSpec) -> bool:
        """Whether float32 matmuls run at a reduced-precision rate (TF32) here."""
        ...

    def fingerprint(self) -> dict[str, Any]:
        """The framework's part of the environment fingerprint."""
        ...
