"""Registry of strategy factories: tf.distribute's, and Keras 3 ``keras.distribution``'s
on the JAX backend.

Each factory is a small object that knows how many replicas it makes, whether a
spec can run on the hardware at hand (``unsupported_reason``), and how to build
the strategy. Importing this module does not import TensorFlow; ``build`` does.
Adding a strategy means adding one class to its lane's module (``tf.py``, ``jax.py``)
and one ``register`` line here.
"""

from __future__ import annotations

from bench.strategies.base import (
    COMMON_LOOP_LIMITS,
    STRATEGIES,
    LoopLimit,
    SpecView,
    StrategyFactory,
    own_gpus,
)
from bench.strategies.jax import DataParallel, JaxStrategy, ModelParallel
from bench.strategies.tf import (
    TPU,
    CentralStorage,
    DefaultStrategy,
    Independent,
    Mirrored,
    MultiWorkerMirrored,
    OneDevice,
    ParameterServer,
)

__all__ = ["COMMON_LOOP_LIMITS", "STRATEGIES", "TPU", "CentralStorage", "DataParallel",
           "DefaultStrategy", "Independent", "JaxStrategy", "LoopLimit", "Mirrored",
           "ModelParallel", "MultiWorkerMirrored", "OneDevice", "ParameterServer", "SpecView",
           "StrategyFactory", "own_gpus"]

for _factory in (DefaultStrategy(), OneDevice(), Mirrored(), CentralStorage(),
                 MultiWorkerMirrored(), ParameterServer(), Independent(), TPU(),
                 DataParallel(), ModelParallel()):
    STRATEGIES.register(_factory.name, _factory)
