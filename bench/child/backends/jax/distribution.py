"""Keras 3 ``keras.distribution`` objects of the JAX lane's strategies, one builder per
registry name (``bench.strategies``: DataParallel, ModelParallel)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bench.errors import Unsupported
from bench.registry import Registry
from bench.spec import RunSpec
from bench.strategies import STRATEGIES, ModelParallel
from workloads import Workload, find_workload


@dataclass(frozen=True)
class Placement:
    """A strategy on this process's devices: the Keras distribution (variables' layouts)
    and the JAX mesh and sharding the batches are placed with."""

    distribution: Any
    mesh: Any  # jax.sharding.Mesh over the same devices as the distribution's
    data_sharding: Any  # NamedSharding of a batch: rows along the batch axis
    replicas: int


Builder = Callable[[RunSpec, list[Any]], Placement]
DISTRIBUTIONS: Registry[Builder] = Registry("JAX distribution")


def _mesh(devices: list[Any], shape: tuple[int, ...], axes: tuple[str, ...]) -> tuple[Any, Any]:
    import jax
    import numpy as np
    from keras import distribution as kd

    keras_mesh = kd.DeviceMesh(shape, axes, devices=[f"{d.platform}:{d.id}" for d in devices])
    jax_mesh = jax.sharding.Mesh(np.array(devices).reshape(shape), axes)
    return keras_mesh, jax_mesh


def _rows(mesh: Any) -> Any:
    import jax

    return jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("batch"))


def _data_parallel(spec: RunSpec, devices: list[Any]) -> Placement:
    from keras import distribution as kd

    keras_mesh, jax_mesh = _mesh(devices, (len(devices),), ("batch",))
    return Placement(kd.DataParallel(device_mesh=keras_mesh), jax_mesh, _rows(jax_mesh),
                     len(devices))


def _model_parallel(spec: RunSpec, devices: list[Any]) -> Placement:
    from keras import distribution as kd

    factory = STRATEGIES.get(spec.strategy)
    assert isinstance(factory, ModelParallel)
    model = factory.model_axis(spec)
    shape = (len(devices) // model, model)
    keras_mesh, jax_mesh = _mesh(devices, shape, ("batch", "model"))
    workload = find_workload(spec.workload)
    if not isinstance(workload, Workload) or workload.layout is None:  # the parent refuses it
        raise Unsupported(f"no model-parallel layout for {spec.workload}. "
                          f"Received: workload={spec.workload!r}")
    layout_map = kd.LayoutMap(keras_mesh)
    for pattern, axes in workload.layout(spec.workload_params()).items():
        layout_map[pattern] = axes
    return Placement(kd.ModelParallel(layout_map=layout_map, batch_dim_name="batch"),
                     jax_mesh, _rows(jax_mesh), shape[0])


DISTRIBUTIONS.register("data_parallel", _data_parallel)
DISTRIBUTIONS.register("model_parallel", _model_parallel)
