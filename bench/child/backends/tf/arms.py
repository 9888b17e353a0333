"""TensorFlow's arms of a session (``bench.child.arms``): the process imports it and sets
up its devices once; each arm builds its strategy and trainer (``fit.TRAINERS``)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.child.backends.base import DeviceSetup
from bench.child.backends.runner import environment, load_timed
from bench.child.probes.hooks import AfterWindows
from bench.results.schema import Figures
from bench.spec import RunSpec
from bench.tasks import Task

if TYPE_CHECKING:
    from bench.child.backends.tf import TfBackend


class TfArms:
    """``bench.child.backends.base.ArmsLane`` on TensorFlow."""

    def __init__(self, backend: TfBackend) -> None:
        self.backend = backend

    def start(self, task: Task, say: Callable[[str], None]
              ) -> tuple[dict[str, float], DeviceSetup, dict[str, Any], Any]:
        from bench.child.backends.tf.memory import DeviceMemory

        phases = load_timed(self.backend, say)
        t = time.perf_counter()
        devices = self.backend.devices_for(task, task.gpu_memory_limit_mb)
        phases["device_setup_s"] = time.perf_counter() - t
        say(f"devices set up: {', '.join(devices.names)}")
        env = environment(self.backend, devices, task)
        return phases, devices, env, DeviceMemory(self.backend.tf, devices.kind,
                                                  len(devices.names))

    def build(self, spec: RunSpec, own: DeviceSetup, after_strategy: Callable[[], None]
              ) -> Any:
        from bench.child.backends.tf.build import build as build_strategy
        from bench.child.backends.tf.fit import TRAINERS

        strategy = build_strategy(spec, own.names)
        # A cluster worker's strategy (MultiWorkerMirrored) configures the collective
        # ops, which must come before anything starts the context: reading the
        # allocator does.
        after_strategy()
        return TRAINERS.get(spec.loop)(spec, strategy, own)

    def after_windows(self, trainer: Any, figures: Figures, where: Path | None,
                      progress: Callable[[str], None], evidence_steps: int
                      ) -> AfterWindows:
        from bench.child.backends.tf.after import after_windows

        return after_windows(trainer, figures, where, progress=progress,
                             evidence_steps=evidence_steps)
