"""Registry of tf.distribute strategy factories.

Each factory is a small object that knows how many replicas it makes, whether a
spec can run on the hardware at hand (``unsupported_reason``), and how to build
the strategy. Importing this module does not import TensorFlow; ``build`` does.
Adding a strategy means adding one class and one ``register`` line here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from bench.errors import SpecError
from bench.hardware import Hardware
from bench.registry import Registry

if TYPE_CHECKING:
    from bench.spec import RunSpec


class StrategyFactory:
    name = ""
    description = ""
    # Cross-device ops choices this strategy accepts (only "default" unless overridden).
    cross_device_ops: tuple[str, ...] = ("default",)

    # Multi-process knobs this strategy accepts away from their defaults.
    accepts: tuple[str, ...] = ()

    def replicas(self, spec: RunSpec) -> int:
        """Model replicas that train together (all processes)."""
        return spec.devices

    def batch_divisor(self, spec: RunSpec) -> int:
        """What a global batch must be divisible by (the replicas in sync)."""
        return self.replicas(spec)

    def global_batch(self, spec: RunSpec) -> int:
        """Examples in one step across all replicas that step together."""
        return spec.batch if spec.batch_mode == "global" else spec.batch * self.replicas(spec)

    def per_replica_batch(self, spec: RunSpec) -> int:
        return self.global_batch(spec) // self.replicas(spec)

    def validate(self, spec: RunSpec) -> None:
        """Reject specs that are wrong whatever the hardware (raises SpecError)."""
        if spec.cross_device_ops not in self.cross_device_ops:
            raise SpecError(
                f"RunSpec.cross_device_ops must be one of {', '.join(self.cross_device_ops)} "
                f"for strategy {self.name}. Received: cross_device_ops={spec.cross_device_ops!r}"
            )
        defaults = {"workers": 0, "ps_tasks": 0, "workers_per_device": 1,
                    "communication": "auto", "partitioner": "none"}
        for name, default in defaults.items():
            value = getattr(spec, name)
            if value != default and name not in self.accepts:
                raise SpecError(
                    f"RunSpec.{name} does not apply to strategy {self.name} (it is used by "
                    f"{_users_of(name)}). Received: {name}={value!r}")

    def unsupported_reason(self, spec: RunSpec, hw: Hardware) -> str | None:
        """Why the spec cannot run on this hardware, or None if it can."""
        if hw.gpus and spec.devices > len(hw.gpus):
            return f"{spec.devices} devices requested but only {len(hw.gpus)} GPU(s) are visible"
        return None

    def build(self, spec: RunSpec, devices: list[str]) -> Any:
        raise NotImplementedError


class DefaultStrategy(StrategyFactory):
    name = "default"
    description = "no distribution: tf.distribute.get_strategy() on the first device"

    def replicas(self, spec: RunSpec) -> int:
        return 1

    def unsupported_reason(self, spec: RunSpec, hw: Hardware) -> str | None:
        if spec.devices > 1:
            return "the default strategy uses a single device; devices must be 1"
        return super().unsupported_reason(spec, hw)

    def build(self, spec: RunSpec, devices: list[str]) -> Any:
        import tensorflow as tf

        return tf.distribute.get_strategy()


class OneDevice(DefaultStrategy):
    name = "one_device"
    description = "tf.distribute.OneDeviceStrategy on the first device"

    def unsupported_reason(self, spec: RunSpec, hw: Hardware) -> str | None:
        if spec.devices > 1:
            return "one_device places everything on one device; devices must be 1"
        return StrategyFactory.unsupported_reason(self, spec, hw)

    def build(self, spec: RunSpec, devices: list[str]) -> Any:
        import tensorflow as tf

        return tf.distribute.OneDeviceStrategy(devices[0])


def _cross_device_ops(choice: str) -> Any:
    import tensorflow as tf

    table: dict[str, Any] = {
        "default": lambda: None,  # TF picks (NCCL on GPUs, collective ring on CPU)
        "hierarchical_copy": tf.distribute.HierarchicalCopyAllReduce,
        "reduction_to_one_device": tf.distribute.ReductionToOneDevice,
        "nccl": tf.distribute.NcclAllReduce,
    }
    return table[choice]()


class Mirrored(StrategyFactory):
    name = "mirrored"
    description = "tf.distribute.MirroredStrategy: a variable copy per device, all-reduce"
    cross_device_ops = ("default", "hierarchical_copy", "reduction_to_one_device", "nccl")

    def unsupported_reason(self, spec: RunSpec, hw: Hardware) -> str | None:
        if spec.cross_device_ops == "nccl" and not hw.gpus:
            return ("nccl all-reduce needs GPUs (TensorFlow registers no NcclAllReduce "
                    "kernel for CPU)")
        return super().unsupported_reason(spec, hw)

    def build(self, spec: RunSpec, devices: list[str]) -> Any:
        import tensorflow as tf

        return tf.distribute.MirroredStrategy(
            devices, cross_device_ops=_cross_device_ops(spec.cross_device_ops))


class CentralStorage(StrategyFactory):
    name = "central_storage"
    description = ("tf.distribute.experimental.CentralStorageStrategy: variables on the "
                   "CPU, compute replicated on the devices")

    def build(self, spec: RunSpec, devices: list[str]) -> Any:
        import tensorflow as tf

        return tf.distribute.experimental.CentralStorageStrategy(
            compute_devices=devices, parameter_device="/cpu:0")


def _users_of(knob: str) -> str:
    users = [n for n, f in STRATEGIES.items() if knob in f.accepts]
    return ", ".join(users) or "no strategy yet"


STRATEGIES: Registry[StrategyFactory] = Registry("strategy")
for _factory in (DefaultStrategy(), OneDevice(), Mirrored(), CentralStorage()):
    STRATEGIES.register(_factory.name, _factory)
