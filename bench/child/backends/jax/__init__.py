"""Keras 3 on JAX behind the backend seam (``bench.child.backends.base.Backend``).

``keras.distribution`` strategies (data_parallel, model_parallel: bench.strategies)
over JAX's devices: GPUs where it has them, else N logical CPU devices made with
``XLA_FLAGS=--xla_force_host_platform_device_count=N`` before jax is imported. The
compiled step (step.py) is driven by the harness's windows; FLOPs come from XLA's
``cost_analysis()``. Importing this package imports neither jax nor TensorFlow; the
backend imports jax and Keras (with KERAS_BACKEND=jax) in ``load``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from bench.child.backends.base import DeviceSetup
from bench.child.backends.jax import devices as jax_devices
from bench.child.backends.jax import peak
from bench.child.backends.runner import HarnessWindows
from bench.spec import RunSpec
from bench.tasks import Task


class JaxBackend(HarnessWindows):
    """The JAX lane: see the module docstring. The harness drives its step
    (``runner.HarnessWindows``)."""

    name = "jax"
    framework = "JAX"

    def __init__(self) -> None:
        self.jax: Any = None
        self._devices: list[Any] = []

    def begin_process(self, spec: RunSpec) -> None:
        """Keras 3, whatever the shell says: TensorFlow's switch to Keras 2
        (TF_USE_LEGACY_KERAS), inherited, would be recorded as this run's software."""
        os.environ.pop("TF_USE_LEGACY_KERAS", None)

    def prepare(self, task: Task, spec: RunSpec) -> None:
        """KERAS_BACKEND and the logical CPU devices, before jax is imported."""
        jax_devices.prepare_environment(task)

    def load(self) -> None:
        """Import jax and Keras 3 on it."""
        import jax
        import keras

        if keras.backend.backend() != "jax":  # an earlier import decided otherwise
            raise RuntimeError(f"Keras runs on {keras.backend.backend()}, not jax. "
                               f"Received: KERAS_BACKEND={os.environ.get('KERAS_BACKEND')!r}")
        self.jax = jax

    def setup_devices(self, task: Task, spec: RunSpec) -> DeviceSetup:
        """The task's devices; on a GPU the run's float32 math mode (``RunSpec.tf32``)."""
        setup, self._devices = jax_devices.setup_devices(self.jax, task.local_devices)
        if setup.kind == "GPU":
            self.jax.config.update("jax_default_matmul_precision",
                                   "tensorfloat32" if spec.tf32 else "float32")
        return setup

    def build(self, spec: RunSpec, devices: DeviceSetup, progress: Callable[[str], None],
              distribution_up: Callable[[], None]) -> Any:
        """The distribution, model, pool and the compiled step (step.JaxTrainer)."""
        from bench.child.backends.jax.step import JaxTrainer

        built = JaxTrainer(spec, self._devices)
        distribution_up()
        return built

    def achievable_peak(self, device: str, dtype: str, refresh: bool = False) -> float | None:
        """Chained-matmul FLOP/s of the first device, cached (peak.py)."""
        return peak.cached_peak(self.jax, self._devices[0], dtype, refresh=refresh)

    def peak_method(self, device: str) -> str:
        return peak.method_text(device)

    def float32_fast_math(self, spec: RunSpec) -> bool:
        return spec.tf32

    def fingerprint(self) -> dict[str, Any]:
        """jax, jaxlib, Keras and numpy versions, XLA_FLAGS, platform and devices."""
        import jax
        import jaxlib
        import keras
        import numpy

        return {"backend": self.name, "jax": jax.__version__, "jaxlib": jaxlib.__version__,
                "keras": keras.__version__, "keras_backend": keras.backend.backend(),
                "numpy": numpy.__version__, "xla_flags": os.environ.get("XLA_FLAGS", ""),
                "jax_platform": jax.default_backend(),
                "physical_devices": [str(d) for d in jax.devices()],
                "matmul_precision": str(getattr(jax.config, "jax_default_matmul_precision", None))}


def backend() -> JaxBackend:
    """This lane's backend (``bench.child.backends.lane_backend``)."""
    return JaxBackend()
