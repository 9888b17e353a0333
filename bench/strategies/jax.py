"""Keras 3 ``keras.distribution``'s strategies: the JAX lane's
(``bench.child.backends.jax.distribution`` constructs them in the child)."""

from __future__ import annotations

from bench.hardware import Hardware
from bench.lanes import LANES
from bench.strategies.base import SpecView, StrategyFactory


class JaxStrategy(StrategyFactory):
    """A Keras 3 ``keras.distribution`` strategy on the JAX backend: one process, a
    device mesh, one jitted step (``bench.child.backends.jax``)."""

    backends = ("jax",)
    no_allreduce_reason = ("the all-reduce probe drives tf.distribute's cross-device ops; "
                           "the JAX lane has no probe of its collectives yet")
    no_shared_process_reason = ("the JAX lane fixes its devices once per process (XLA_FLAGS "
                                "before jax is imported) and holds one configuration: "
                                "each runs in a process of its own, taking turns beside "
                                "the others where it is paired")
    paced_alone = True

    def lane_reason(self, spec: SpecView) -> str | None:
        """The first limit of the JAX lane ``spec`` breaks (``bench.lanes``), as a
        reason naming the field."""
        return LANES.get("jax").limit_reason(spec)

    def run_reason(self, spec: SpecView, hw: Hardware) -> str | None:
        if hw.tpu:
            return "the JAX lane is not set up for TPUs yet (its device setup is CPU/GPU)"
        if hw.mig and spec.devices > 1:
            return (f"a CUDA process can use only one MIG slice, and {self.name} trains "
                    f"{spec.devices} devices in one process. Received: devices={spec.devices}")
        if hw.gpus and spec.devices > len(hw.gpus):
            return f"{spec.devices} devices requested but only {len(hw.gpus)} GPU(s) are visible"
        return self.lane_reason(spec)


class DataParallel(JaxStrategy):
    name = "data_parallel"
    description = ("keras.distribution.DataParallel (Keras 3 on JAX): a 1-D mesh over the "
                   "devices, variables replicated, the batch sharded, one jitted step")
    trait = ("it keeps a copy of the variables per device and XLA all-reduces the "
             "gradients inside one compiled step")
    plainness = 12


class ModelParallel(JaxStrategy):
    """A 2-D mesh ``batch x model`` with the model axis of ``MODEL_AXIS`` devices: the
    workload's layout (``Workload.layout``) shards its weights along ``model``, and the
    batch is split over the ``batch`` axis (its replicas)."""

    name = "model_parallel"
    description = ("keras.distribution.ModelParallel (Keras 3 on JAX): a 2-D mesh batch x "
                   "model, the weights sharded along the model axis by the workload's "
                   "LayoutMap, the batch along the batch axis")
    trait = ("it shards each weight across the model axis's devices and exchanges "
             "activations inside every step")
    plainness = 22
    MODEL_AXIS = 2

    def model_axis(self, spec: SpecView) -> int:
        """Devices along the mesh's model axis (1 on a single device)."""
        return min(self.MODEL_AXIS, spec.devices)

    def replicas(self, spec: SpecView) -> int:
        return max(1, spec.devices // self.model_axis(spec))

    def run_reason(self, spec: SpecView, hw: Hardware) -> str | None:
        if spec.devices % self.model_axis(spec):
            return (f"model_parallel lays a model axis of {self.MODEL_AXIS} devices over the "
                    f"mesh; devices must be 1 or a multiple of it. Received: "
                    f"devices={spec.devices}")
        from workloads import Workload, find_workload

        workload = find_workload(spec.workload)
        if not isinstance(workload, Workload):
            return ("a model of your own has no layout of its weights over the model axis "
                    "(a keras.distribution LayoutMap) for model_parallel; train it with "
                    f"data_parallel. Received: workload={spec.workload!r}")
        if workload.layout is None:
            return (f"the {workload.name} workload has no model-parallel layout yet; "
                    f"train it with data_parallel. Received: workload={workload.name!r}")
        return super().run_reason(spec, hw)
