"""The JAX lane's process environment and devices (before and after ``import jax``)."""

from __future__ import annotations

import os
import sys
from typing import Any

from bench.child.backends.base import DeviceSetup
from bench.errors import BenchError, Unsupported
from bench.tasks import Task

FORCE_DEVICES = "--xla_force_host_platform_device_count"


def xla_flags(current: str, devices: int) -> str:
    """``current`` XLA_FLAGS with the host platform split into ``devices`` logical CPU
    devices (any earlier count replaced; the user's other flags kept in order)."""
    kept = [f for f in current.split() if not f.startswith(FORCE_DEVICES)]
    return " ".join([*kept, f"{FORCE_DEVICES}={devices}"])


def prepare_environment(task: Task, environ: Any = None) -> None:
    """KERAS_BACKEND=jax, and on a CPU run N logical devices through XLA_FLAGS: both
    are read once, when jax and keras are first imported, so this must come first."""
    environ = os.environ if environ is None else environ
    wanted = {"KERAS_BACKEND": "jax"}
    if not task.gpus:
        wanted["XLA_FLAGS"] = xla_flags(environ.get("XLA_FLAGS", ""), task.local_devices)
    if all(environ.get(k) == v for k, v in wanted.items()):
        return  # already so (a second run of one process, e.g. scripts.jax_gpu_check)
    for name in ("jax", "keras"):
        if name in sys.modules and environ is os.environ:
            raise BenchError(f"{name} was imported before the JAX lane set up its process "
                             f"(KERAS_BACKEND, XLA_FLAGS): its device count cannot change "
                             f"now. Received: {name} in sys.modules")
    environ.update(wanted)


def setup_devices(jax: Any, count: int) -> tuple[DeviceSetup, list[Any]]:
    """The first ``count`` devices of JAX's default platform (GPUs where it has them,
    else the logical CPU devices ``prepare_environment`` made)."""
    found = jax.devices()
    if len(found) < count:
        raise Unsupported(f"JAX sees {len(found)} {found[0].platform} device(s), the run "
                          f"needs {count}. Received: devices={count}")
    chosen = list(found[:count])
    kind = "GPU" if chosen[0].platform in ("gpu", "cuda", "rocm") else "CPU"
    names = [f"{kind.lower()}:{d.id}" for d in chosen]
    return DeviceSetup(kind, names, logical=kind == "CPU" and count > 1), chosen
