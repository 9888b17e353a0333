"""Device setup inside the child process, before TensorFlow initialises.

Without GPUs the CPU is split into N logical devices (they share the same
cores: more devices add strategy overhead, not speed). With GPUs the first N
are made visible, with memory growth or an optional per-GPU memory limit.
"""

from __future__ import annotations

from typing import Any

from bench.child.backends.base import DeviceSetup
from bench.errors import BenchError, Unsupported
from bench.tasks import Task


def configure_threads(tf: Any, task: Task) -> dict[str, int]:
    """Apply the task's thread counts; returns the counts TensorFlow uses."""
    if task.intra_threads:
        tf.config.threading.set_intra_op_parallelism_threads(task.intra_threads)
    if task.inter_threads:
        tf.config.threading.set_inter_op_parallelism_threads(task.inter_threads)
    return {"intra_op": tf.config.threading.get_intra_op_parallelism_threads(),
            "inter_op": tf.config.threading.get_inter_op_parallelism_threads()}


def setup_devices(tf: Any, count: int, gpu_memory_limit_mb: int | None = None,
                  force_cpu: bool = False) -> DeviceSetup:
    """Configure ``count`` devices; must run before any op executes.

    ``force_cpu`` hides the GPUs and splits the CPU (tests use it so that they
    exercise the same logical-device path on every machine).
    """
    gpus = tf.config.list_physical_devices("GPU")
    if gpus and force_cpu:
        tf.config.set_visible_devices([], "GPU")
        gpus = []
    if not gpus and not force_cpu:
        _refuse_silent_cpu_fallback()
    if gpus:
        if count > len(gpus):
            raise Unsupported(f"{count} devices requested but only {len(gpus)} GPU(s) visible")
        chosen = gpus[:count]
        tf.config.set_visible_devices(chosen, "GPU")
        for gpu in chosen:
            if gpu_memory_limit_mb:
                tf.config.set_logical_device_configuration(
                    gpu, [tf.config.LogicalDeviceConfiguration(memory_limit=gpu_memory_limit_mb)])
            else:
                tf.config.experimental.set_memory_growth(gpu, True)
        return DeviceSetup("GPU", [f"/gpu:{i}" for i in range(count)], False)
    cpu = tf.config.list_physical_devices("CPU")[0]
    if count > 1:
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration() for _ in range(count)])
    return DeviceSetup("CPU", [f"/cpu:{i}" for i in range(count)], count > 1)


class GpuSetupError(BenchError):
    """The driver shows GPUs to this process but TensorFlow cannot use them."""


def _refuse_silent_cpu_fallback() -> None:
    """Fail when nvidia-smi shows this process GPUs that TensorFlow does not see.

    With TensorFlow's CPU build (or a CUDA/cuDNN that does not match it) on a GPU
    machine, TensorFlow lists no GPU and the run would quietly train on logical CPU
    devices while the sweep, which counts GPUs with nvidia-smi, labels it a GPU run.
    """
    from bench.hardware import detect

    visible = detect().gpus
    if visible:
        raise GpuSetupError(
            f"TensorFlow found no GPU, but nvidia-smi shows {len(visible)} to this process "
            f"({visible[0].name}); TensorFlow is its CPU build or cannot load CUDA: install "
            f"tensorflow[and-cuda] (pip install -e .[gpu]) and check the log for CUDA errors")
