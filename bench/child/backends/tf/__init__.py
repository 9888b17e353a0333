"""TensorFlow's lane behind the backend seam (``bench.child.backends.base.Backend``).

tf.distribute strategies (build.py) over the devices of devices.py, the custom loop
(trainer.py) and Keras ``fit`` (fit.py), each measuring its own windows through
bench.child.windows' rules; MFU against TensorFlow's matmul probe and the profile's
breakdown after them (after.py); a session's several arms in one
process (arms.py), the parameter-server coordinator (ps.py), cluster servers, the
all-reduce probe (allreduce.py), and Keras 2 (keras_lane.py). Importing this package
imports no TensorFlow: ``load`` does.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.child.backends.base import ArmsLane, DeviceSetup
from bench.child.backends.tf import devices as tf_devices
from bench.child.backends.tf import peak as tf_peak
from bench.child.probes.hooks import AfterWindows
from bench.child.windows import Turns
from bench.results.payload import TaskReport
from bench.results.schema import Figures
from bench.spec import RunSpec
from bench.tasks import Task


class TfBackend:
    """The TensorFlow lane: see the module docstring."""

    name = "tf"
    framework = "TensorFlow"

    def __init__(self) -> None:
        self.tf: Any = None
        self.threads: dict[str, int] = {}
        self.task: Task | None = None

    def begin_process(self, spec: RunSpec) -> None:
        """The spec's Keras (3, or Keras 2 through tf_keras), and TensorFlow's import
        without the optional packages it probes for (lean_import)."""
        from bench.child.backends.tf.keras_lane import select_keras
        from bench.child.backends.tf.lean_import import skip_optional_while_tensorflow_imports

        select_keras(spec.keras)
        skip_optional_while_tensorflow_imports()

    def prepare(self, task: Task, spec: RunSpec) -> None:
        return None  # TensorFlow is configured once imported (setup_devices)

    def load(self) -> None:
        import tensorflow as tf

        self.tf = tf

    def setup_devices(self, task: Task, spec: RunSpec) -> DeviceSetup:
        """The task's thread counts, then its devices (GPU memory: the task's limit,
        else the spec's)."""
        return self.devices_for(task, task.gpu_memory_limit_mb or spec.gpu_memory_limit_mb)

    def devices_for(self, task: Task, gpu_memory_limit_mb: int | None) -> DeviceSetup:
        self.task = task
        self.threads = tf_devices.configure_threads(self.tf, task)
        return tf_devices.setup_devices(self.tf, task.local_devices, gpu_memory_limit_mb)

    def build(self, spec: RunSpec, devices: DeviceSetup, progress: Callable[[str], None],
              distribution_up: Callable[[], None]) -> Any:
        """The strategy, then the spec's loop (``fit.TRAINERS``: custom or Keras fit)."""
        from bench.child.backends.tf.build import build as build_strategy
        from bench.child.backends.tf.fit import TRAINERS

        strategy = build_strategy(spec, devices.names)
        progress(f"strategy {spec.strategy} built")
        distribution_up()
        return TRAINERS.get(spec.loop)(spec, strategy, devices)

    def measure(self, built: Any, spec: RunSpec, *, launch_ts: float,
                phases: dict[str, float], progress: Callable[[str], None],
                before_windows: Callable[[], float | None], turns: Turns | None,
                rewarm_calls: int) -> Figures:
        """The trainer's own windows (the custom loop's or ``fit``'s callbacks)."""
        if turns is not None:
            raise ValueError("a TensorFlow run takes the launcher's turns in a session's "
                             "process (bench.child.arms), not in a run of its own")
        return built.measure(launch_ts, phases, progress=progress,
                             before_windows=before_windows)

    def after_windows(self, built: Any, figures: Figures, spec: RunSpec,
                      devices: DeviceSetup, profile_dir: Path | None,
                      progress: Callable[[str], None], evidence_steps: int) -> AfterWindows:
        """MFU against TensorFlow's matmul probe, then the profile (probes.hooks); the
        processes of one run profile into a directory each."""
        from bench.child.backends.tf.after import after_windows

        task = self.task
        if profile_dir is not None and task is not None and task.role != "single":
            profile_dir = profile_dir / task.name
        return after_windows(built, figures, profile_dir, progress=progress,
                             evidence_steps=evidence_steps)

    def allreduce(self, spec: RunSpec, task: Task, mark_ready: Callable[[], None],
                  progress: Callable[[str], None]) -> TaskReport:
        from bench.child.backends.tf.allreduce import run_strategy_probe

        return run_strategy_probe(self, spec, task, mark_ready, progress)

    def serve(self, task: Task, mark_ready: Callable[[], None],
              progress: Callable[[str], None]) -> TaskReport:
        """A tf.distribute.Server from TF_CONFIG, serving until the launcher kills it."""
        self.load()
        progress("TensorFlow imported")
        tf = self.tf
        tf_devices.configure_threads(tf, task)
        resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
        server = tf.distribute.Server(resolver.cluster_spec(), job_name=resolver.task_type,
                                      task_index=resolver.task_id, protocol="grpc",
                                      start=True)
        mark_ready()
        progress(f"serving as {resolver.task_type}:{resolver.task_id}")
        server.join()  # the launcher kills this process when the run ends
        return TaskReport("failed", "server.join() returned")

    def coordinate(self, spec: RunSpec, task: Task, *, launch_ts: float,
                   mark_ready: Callable[[], None], progress: Callable[[str], None]
                   ) -> TaskReport | None:
        from bench.child.backends.tf.ps import run_coordinator

        return run_coordinator(self, spec, task, launch_ts, mark_ready, progress)

    def gather_hosts(self, task: Task, spec: RunSpec, run_dir: Path,
                     report: TaskReport) -> TaskReport:
        """Every host's figures through the cluster itself (gather.py)."""
        from bench.child.backends.tf.gather import gather_hosts

        return gather_hosts(task, spec, run_dir, report)

    def arms_lane(self) -> ArmsLane:
        from bench.child.backends.tf.arms import TfArms

        return TfArms(self)

    def achievable_peak(self, device: str, dtype: str, refresh: bool = False) -> float | None:
        return tf_peak.achievable_peak(self.tf, device, dtype, refresh=refresh).flops_per_s

    def peak_method(self, device: str) -> str:
        return tf_peak.method_of(device)

    def float32_fast_math(self, spec: RunSpec) -> bool:
        return tf_peak.tf32_enabled(self.tf, "/gpu:0") if self.tf is not None else False

    def fingerprint(self) -> dict[str, Any]:
        """TensorFlow's versions, build and devices (env.py), and the thread counts."""
        from bench.child.backends.tf.env import tf_fingerprint

        return {**tf_fingerprint(), "threads": self.threads}


def backend() -> TfBackend:
    """This lane's backend (``bench.child.backends.lane_backend``)."""
    return TfBackend()
