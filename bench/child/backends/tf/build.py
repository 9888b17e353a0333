"""How each registered strategy is constructed in TensorFlow (child side only).

``bench.strategies`` holds what the parent needs to know about a strategy (its
replicas, processes, validation, traits); constructing the ``tf.distribute``
object needs TensorFlow, so it lives here, one function per registry name.
``tests/test_registry.py`` checks both sides name the same strategies.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable
from typing import Any

from bench.registry import Registry
from bench.spec import RunSpec

Builder = Callable[[RunSpec, list[str]], Any]
BUILDERS: Registry[Builder] = Registry("strategy builder")


def _register(name: str) -> Callable[[Builder], Builder]:
    def deco(fn: Builder) -> Builder:
        return BUILDERS.register(name, fn)
    return deco


def build(spec: RunSpec, devices: list[str]) -> Any:
    """The ``tf.distribute`` strategy of ``spec`` over ``devices`` (TensorFlow names),
    with the run's float32 math mode set first (``RunSpec.tf32``: TensorFloat-32 on
    Ampere and newer GPUs; no effect on a CPU)."""
    import tensorflow as tf

    tf.config.experimental.enable_tensor_float_32_execution(spec.tf32)
    return BUILDERS.get(spec.strategy)(spec, devices)


@_register("default")
def _default(spec: RunSpec, devices: list[str]) -> Any:
    import tensorflow as tf

    return tf.distribute.get_strategy()


@_register("one_device")
def _one_device(spec: RunSpec, devices: list[str]) -> Any:
    import tensorflow as tf

    return tf.distribute.OneDeviceStrategy(devices[0])


def cross_device_ops(choice: str) -> Any:
    """The Mirrored cross-device ops object of a ``RunSpec.cross_device_ops`` choice."""
    import tensorflow as tf

    table: dict[str, Any] = {
        "default": lambda: None,  # TF picks (NCCL on GPUs, collective ring on CPU)
        "hierarchical_copy": tf.distribute.HierarchicalCopyAllReduce,
        "reduction_to_one_device": tf.distribute.ReductionToOneDevice,
        "nccl": tf.distribute.NcclAllReduce,
    }
    return table[choice]()


# Collective group keys of each MirroredStrategy built in this process start at
# 1 + its class's _collective_key_base, read at construction. The arms of one process
# (bench.child.arms) hold several: mirrored on 4 devices, then on 2, both took group
# key 1 and the second failed at its first step ("CPU:1 is joining a group with size2,
# but that group has size 4"). Each gets a range of keys of its own.
COLLECTIVE_KEY_STRIDE = 100_000
_mirrored_built = itertools.count()


@_register("mirrored")
def _mirrored(spec: RunSpec, devices: list[str]) -> Any:
    import tensorflow as tf

    cls = tf.distribute.MirroredStrategy
    saved = cls._collective_key_base
    cls._collective_key_base = COLLECTIVE_KEY_STRIDE * next(_mirrored_built)
    try:
        return cls(devices, cross_device_ops=cross_device_ops(spec.cross_device_ops))
    finally:
        cls._collective_key_base = saved


@_register("central_storage")
def _central_storage(spec: RunSpec, devices: list[str]) -> Any:
    import tensorflow as tf

    return tf.distribute.experimental.CentralStorageStrategy(
        compute_devices=devices, parameter_device="/cpu:0")


def communication_options(choice: str) -> Any:
    """CommunicationOptions of a ``RunSpec.communication`` choice."""
    import tensorflow as tf

    impl = tf.distribute.experimental.CommunicationImplementation
    table = {"auto": impl.AUTO, "ring": impl.RING, "nccl": impl.NCCL}
    return tf.distribute.experimental.CommunicationOptions(implementation=table[choice])


@_register("multi_worker_mirrored")
def _multi_worker_mirrored(spec: RunSpec, devices: list[str]) -> Any:
    import tensorflow as tf

    return tf.distribute.MultiWorkerMirroredStrategy(
        communication_options=communication_options(spec.communication))


@_register("parameter_server")
def _parameter_server(spec: RunSpec, devices: list[str]) -> Any:
    import tensorflow as tf

    shards = spec.ps_tasks or 1
    partitioners = tf.distribute.experimental.partitioners
    partitioner = {
        "none": None,
        "fixed": partitioners.FixedShardsPartitioner(num_shards=shards),
        "min_size": partitioners.MinSizePartitioner(min_shard_bytes=256 << 10,
                                                    max_shards=shards),
    }[spec.partitioner]
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    return tf.distribute.ParameterServerStrategy(resolver, variable_partitioner=partitioner)


@_register("independent")
def _independent(spec: RunSpec, devices: list[str]) -> Any:
    # Each copy trains as a one-device run (Independent.local_spec); this builds that.
    import tensorflow as tf

    return tf.distribute.OneDeviceStrategy(devices[0])


@_register("tpu")
def _tpu(spec: RunSpec, devices: list[str]) -> Any:
    import tensorflow as tf

    resolver = tf.distribute.cluster_resolver.TPUClusterResolver(
        tpu=os.environ.get("TPU_NAME", ""))
    tf.config.experimental_connect_to_cluster(resolver)
    tf.tpu.experimental.initialize_tpu_system(resolver)
    return tf.distribute.TPUStrategy(resolver)
