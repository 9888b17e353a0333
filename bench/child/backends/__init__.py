"""Framework backends behind one seam.

The harness (the window loop, energy, GPU state, the typed payload, the parent side,
reports) knows no framework; a backend provides device setup, the distribution and
the model, one compiled step as a ``Loop`` the windows drive, memory, the achievable
peak, FLOPs, a profile and its part of the fingerprint (``base.Backend``).
``runner.run_backend`` is the harness's side of the seam.

Each lane of ``bench.lanes`` (``RunSpec.backend``: tf, jax) is the package
``bench.child.backends.<name>``, whose ``backend()`` makes its ``Backend``; a run loads
only the lane it asks for, and importing a lane's package imports no framework (its
``load`` does). On a simulated GPU server (``bench.sim``) TensorFlow's lane is acted
out by ``bench.child.backends.sim``.
"""

from __future__ import annotations

import importlib

from bench.child.backends.base import Backend
from bench.lanes import LANES


def simulated() -> bool:
    """Whether this process runs on a simulated GPU server (``bench.sim``): TensorFlow's
    lane is then acted out by ``bench.child.backends.sim``."""
    from bench import sim

    return sim.active() is not None


def lane_backend(name: str) -> Backend:
    """The backend that trains lane ``name`` (one of ``bench.lanes.LANES``) in this
    process: its package's, or on a simulated server the stand-in for TensorFlow's."""
    lane = LANES.get(name)  # an unknown name is refused, naming the lanes
    if lane.name == "tf" and simulated():
        from bench.child.backends.sim import SimBackend

        return SimBackend()
    backend: Backend = importlib.import_module(f"bench.child.backends.{lane.name}").backend()
    return backend
