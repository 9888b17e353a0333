"""The interface a framework backend implements (``Backend``), what it builds
(``Built``), and the seam's shared types: the devices a process trains on
(``DeviceSetup``) and the size of the synthetic batch pool (``pool_batches``). Nothing
here imports a framework."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from bench.child.probes.hooks import AfterWindows
from bench.child.windows import DeviceMemoryProbe, Loop, Turns
from bench.results.payload import TaskReport
from bench.results.schema import Figures
from bench.spec import RunSpec
from bench.tasks import Task
from workloads.flops import ModelStats

POOL_BYTES_BUDGET = 256 * 2**20  # host/device bytes for the synthetic pool
MAX_POOL_BATCHES = 8


@dataclass(frozen=True)
class DeviceSetup:
    """The devices one process trains on, as its backend names them."""

    kind: str  # "CPU" or "GPU"
    names: list[str]  # the framework's device strings, one per device, e.g. "/cpu:1"
    logical: bool  # True when devices are logical splits of one physical device


def pool_batches(global_batch_bytes: int) -> int:
    """How many distinct global batches the synthetic pool holds (1..8): as many as
    ``POOL_BYTES_BUDGET`` holds, whatever the lane."""
    return max(1, min(MAX_POOL_BATCHES, POOL_BYTES_BUDGET // max(1, global_batch_bytes)))


class Built(Protocol):
    """One run's distribution, model, optimizer and compiled step, built by a backend:
    what the harness reads of it whatever the lane."""

    stats: ModelStats  # parameters and FLOPs (the backend's own count)
    replicas: int  # model replicas that step together
    local_replicas: int  # those in this process
    pool: int  # distinct synthetic batches placed on the devices

    def weights_checksum(self) -> float:
        """Sum of all trainable weights (to compare runs and processes)."""
        ...

    def replica_divergence(self) -> float:
        """Largest |w_r - w_0| between the copies of a replicated weight (0: one copy)."""
        ...


class LoopBuilt(Built, Protocol):
    """A ``Built`` whose step the harness's window loop drives and profiles
    (``runner.HarnessWindows``: the JAX lane, the simulated server)."""

    memory: DeviceMemoryProbe  # device peak per window, or why there is none

    def loop(self) -> Loop:
        """The compiled step as the window loop drives it."""
        ...

    def profile(self, steps: int, directory: Path) -> str:
        """Run ``steps`` more steps under the framework's profiler, writing to
        ``directory``; returns what was written (a sentence for the run's record)."""
        ...


class ArmsLane(Protocol):
    """What a session's process (``bench.child.arms``: several arms in one process)
    asks of the lane that trains its arms: the process set up (``start``: its phases,
    devices, fingerprint and the allocator the arms share), each arm built (``build``;
    ``after_strategy`` runs once its strategy exists, before its variables), and MFU
    and the profile after the windows."""

    def start(self, task: Task, say: Callable[[str], None]
              ) -> tuple[dict[str, float], DeviceSetup, dict[str, Any], Any]: ...

    def build(self, spec: RunSpec, own: DeviceSetup, after_strategy: Callable[[], None]
              ) -> Any: ...

    def after_windows(self, trainer: Any, figures: Figures, where: Path | None,
                      progress: Callable[[str], None], evidence_steps: int
                      ) -> AfterWindows: ...


class Backend(Protocol):
    """A framework behind the seam: what the harness asks of it, in the order it asks.

    ``runner.HarnessWindows`` gives a lane whose ``Built`` is a ``LoopBuilt`` the
    harness's own windows, MFU and profile, and refuses the roles it does not play."""

    name: str  # the lane (``RunSpec.backend``)
    framework: str  # what ``load`` imports, as the run's log names it

    def begin_process(self, spec: RunSpec) -> None:
        """What the process does first, before anything imports a framework (which
        Keras it trains with, what the framework's import may skip)."""
        ...

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

    def build(self, spec: RunSpec, devices: DeviceSetup, progress: Callable[[str], None],
              distribution_up: Callable[[], None]) -> Built:
        """The distribution, model, optimizer, data on devices and the compiled step;
        ``distribution_up`` is called once the distribution exists (the process is up
        for the launcher)."""
        ...

    def measure(self, built: Any, spec: RunSpec, *, launch_ts: float,
                phases: dict[str, float], progress: Callable[[str], None],
                before_windows: Callable[[], float | None], turns: Turns | None,
                rewarm_calls: int) -> Figures:
        """Warm ``built`` (this backend's own) up and measure its windows
        (``bench.child.windows``)."""
        ...

    def after_windows(self, built: Any, figures: Figures, spec: RunSpec,
                      devices: DeviceSetup, profile_dir: Path | None,
                      progress: Callable[[str], None], evidence_steps: int) -> AfterWindows:
        """Fill ``figures``' MFU fields (and the profile's, when asked) in place; the
        fingerprint's peak entry and what cost a figure."""
        ...

    def allreduce(self, spec: RunSpec, task: Task, mark_ready: Callable[[], None],
                  progress: Callable[[str], None]) -> TaskReport:
        """The all-reduce probe (``RunSpec.mode == "allreduce"``) instead of training."""
        ...

    def serve(self, task: Task, mark_ready: Callable[[], None],
              progress: Callable[[str], None]) -> TaskReport:
        """A cluster server's task (parameter server or worker): serve until killed."""
        ...

    def coordinate(self, spec: RunSpec, task: Task, *, launch_ts: float,
                   mark_ready: Callable[[], None], progress: Callable[[str], None]
                   ) -> TaskReport | None:
        """A parameter-server run's coordinator, measured; None: the lane trains the
        coordinator's task as one training process."""
        ...

    def gather_hosts(self, task: Task, spec: RunSpec, run_dir: Path,
                     report: TaskReport) -> TaskReport:
        """``report`` with every host's own figures, for a task of a multi-host run
        marked to gather them; else ``report`` as it is."""
        ...

    def arms_lane(self) -> ArmsLane | None:
        """How several arms share one process (``bench.child.arms``); None: one arm
        per process, trained through ``runner.run_backend``."""
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
        """The framework's part of the environment fingerprint (``bench.env``)."""
        ...
