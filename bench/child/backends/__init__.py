"""Framework backends behind one seam (DESIGN principle 14).

The harness (the window loop, energy, GPU state, the typed payload, the parent side,
reports) knows no framework; a backend provides device setup, the distribution and
the model, one compiled step as a ``Loop`` the windows drive, memory, the achievable
peak, FLOPs, a profile and its part of the fingerprint (``base.Backend``).
``runner.run_backend`` is the harness's side of the seam.

TensorFlow (``RunSpec.backend == "tf"``) still trains through bench.child.main's own
path; ``BACKENDS`` holds the backends that already sit behind the seam, each loaded
only by the run that asks for it (importing one imports its framework).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from bench.child.backends.base import Backend
from bench.registry import Registry

BACKENDS: Registry[Callable[[], Backend]] = Registry("backend")


def _jax() -> Backend:
    return importlib.import_module("bench.child.backends.jax").JaxBackend()


BACKENDS.register("jax", _jax)


def simulated() -> bool:
    """Whether this process runs on a simulated GPU server (``bench.sim``): TensorFlow's
    lane is then acted out by ``bench.child.backends.sim``."""
    from bench import sim

    return sim.active() is not None


def lane_backend(name: str) -> Backend | None:
    """The backend that trains lane ``name`` in this process: a registered one, the
    simulated server's stand-in for TensorFlow's, or None (TensorFlow's own path)."""
    if name in BACKENDS:
        return BACKENDS.get(name)()
    if name == "tf" and simulated():
        from bench.child.backends.sim import SimBackend

        return SimBackend()
    return None
