"""tf.distribute's strategies: the TensorFlow lane's (``bench.child.backends.tf.build``
constructs them in the child)."""

from __future__ import annotations

import dataclasses

from bench.errors import SpecError
from bench.hardware import Hardware
from bench.strategies.base import (
    WHY_TWO_AND_ALL,
    LoopLimit,
    S,
    SpecView,
    StrategyFactory,
    two_and_all,
)
from bench.tasks import Task, shared_device_tasks, with_gpu_cores, with_run_gpus


class DefaultStrategy(StrategyFactory):
    name = "default"
    description = "no distribution: tf.distribute.get_strategy() on the first device"
    trait = "it is no distribution at all: one device, nothing replicated"
    single_device_rank = 1
    plainness = 0

    sweep_devices_why = "a single-device reference"

    def replicas(self, spec: SpecView) -> int:
        return 1

    def sweep_devices(self, gpus: int) -> tuple[int, ...]:
        return (1,)

    def run_reason(self, spec: SpecView, hw: Hardware) -> str | None:
        if spec.devices > 1:
            return "the default strategy uses a single device; devices must be 1"
        return super().run_reason(spec, hw)


class OneDevice(DefaultStrategy):
    name = "one_device"
    description = "tf.distribute.OneDeviceStrategy on the first device"
    trait = "it runs on one device with nothing replicated"
    single_device_rank = 0
    plainness = 1

    def run_reason(self, spec: SpecView, hw: Hardware) -> str | None:
        if spec.devices > 1:
            return "one_device places everything on one device; devices must be 1"
        return StrategyFactory.run_reason(self, spec, hw)


class Mirrored(StrategyFactory):
    name = "mirrored"
    description = "tf.distribute.MirroredStrategy: a variable copy per device, all-reduce"
    trait = "it keeps a copy of the variables per device and all-reduces the gradients every step"
    plainness = 10
    cross_device_ops = ("default", "hierarchical_copy", "reduction_to_one_device", "nccl")
    loop_limits = (
        LoopLimit("Keras 3 fit with steps_per_execution > 1 fails under MirroredStrategy with "
                  "2+ replicas (\"You must feed a value for placeholder tensor\" in "
                  "multi_step_on_iterator; seen with TF 2.21 / Keras 3.15)",
                  keras=(3,), min_replicas=2, min_steps_per_call=2),
    )

    def run_reason(self, spec: SpecView, hw: Hardware) -> str | None:
        if spec.cross_device_ops == "nccl" and not hw.gpus:
            return ("nccl all-reduce needs GPUs (TensorFlow registers no NcclAllReduce "
                    "kernel for CPU)")
        return super().run_reason(spec, hw)


class CentralStorage(StrategyFactory):
    name = "central_storage"
    description = ("tf.distribute.experimental.CentralStorageStrategy: variables on the "
                   "CPU, compute replicated on the devices")
    trait = ("its variables sit on one device (the CPU); every step copies them to each "
             "replica and sends the gradients back")
    plainness = 11
    variables_on_host = True
    # The child recognises the same failure by its message (bench.child.main's
    # KNOWN_INCOMPATIBLE) in models that are not known up front to have BatchNormalization.
    batch_norm_limit = LoopLimit(
        "Keras 3 BatchNormalization cannot train under CentralStorageStrategy with 2+ "
        "replicas (its moving statistics have no aggregation method, which CentralStorage "
        "needs to update them in replica context; seen with TF 2.21 / Keras 3.15)",
        loops=("custom", "fit"), keras=(3,), min_replicas=2)


class MultiWorkerMirrored(StrategyFactory):
    """Synchronous data parallelism across worker processes (collective all-reduce).

    ``devices`` is the run's total. With ``workers_per_device = K > 1``, K worker
    processes share each device (devices x K workers, one replica each);
    otherwise ``workers`` processes (0: one per device) split the devices.
    """

    name = "multi_worker_mirrored"
    description = ("tf.distribute.MultiWorkerMirroredStrategy: one process per worker on "
                   "127.0.0.1, collective all-reduce between them")
    trait = ("it runs one process per worker and all-reduces the gradients across processes "
             "every step")
    plainness = 20
    paced_processes = True

    sweep_devices_why = WHY_TWO_AND_ALL

    def sweep_devices(self, gpus: int) -> tuple[int, ...]:
        return two_and_all(gpus)
    accepts = ("workers", "workers_per_device", "communication")
    loop_limits = (
        LoopLimit("Keras 3 fit cannot train under MultiWorkerMirroredStrategy "
                  "(keras-team/keras#20585); the Keras 2 lane (keras=2, tf_keras) can",
                  keras=(3,)),
    )
    combination = ("synchronous: every step processes the global batch across all workers, "
                   "so the global figures are the chief's (worker 0) window; each task's "
                   "figures are its own replicas' share measured in its own windows")

    def processes(self, spec: SpecView) -> int:
        if spec.workers_per_device > 1:
            return spec.devices * spec.workers_per_device
        return spec.workers or spec.devices

    def replicas(self, spec: SpecView) -> int:
        return spec.devices * spec.workers_per_device

    def validate(self, spec: SpecView) -> None:
        super().validate(spec)
        if spec.workers_per_device > 1 and spec.workers:
            raise SpecError("RunSpec.workers must be 0 when workers_per_device > 1 (the "
                            "workers are devices x workers_per_device). "
                            f"Received: workers={spec.workers}")
        if spec.workers and spec.devices % spec.workers:
            raise SpecError(f"RunSpec.workers must divide devices ({spec.devices}). "
                            f"Received: workers={spec.workers}")

    def nccl_blocker(self, spec: SpecView, hw: Hardware) -> str | None:
        """Why NCCL cannot connect this run's workers on ``hw``'s GPUs, or None.

        NCCL takes one GPU per rank and tells GPUs apart by PCI bus id: two ranks on
        one card (several workers per GPU, or MIG slices of one GPU) fail at the
        first collective with "Duplicate GPU detected".
        """
        if spec.workers_per_device > 1:
            return (f"{spec.workers_per_device} worker processes share each GPU, and NCCL "
                    f"needs a GPU per process (it fails with 'Duplicate GPU detected')")
        cards = [g.index for g in hw.gpus[:spec.devices] if g.mig]
        if len(cards) != len(set(cards)):
            return ("several of the run's MIG slices are on one GPU, and NCCL needs a GPU "
                    "per process (it fails with 'Duplicate GPU detected')")
        return None

    def communication_for(self, spec: SpecView, hw: Hardware) -> str:
        """The collective implementation a run uses.

        On GPUs ``auto`` is made explicit rather than left to TensorFlow's runtime
        choice: NCCL when every worker has GPUs of its own, RING when NCCL cannot run
        (``nccl_blocker``). Without GPUs the spec's choice stands (only RING exists).
        """
        if not hw.gpus or spec.communication != "auto":
            return spec.communication
        return "ring" if self.nccl_blocker(spec, hw) else "nccl"

    def run_reason(self, spec: SpecView, hw: Hardware) -> str | None:
        if spec.communication == "nccl" and not hw.gpus:
            return "nccl collectives need GPUs"
        if spec.communication == "nccl" and (why := self.nccl_blocker(spec, hw)):
            return f"communication=nccl cannot run here: {why}; use ring (auto picks it)"
        per_worker = spec.devices // self.processes(spec)
        if not hw.gpus and per_worker > 1:
            return ("MultiWorkerMirroredStrategy uses one CPU device per worker; without GPUs "
                    "use one worker per device (workers=0)")
        if hw.mig and per_worker > 1:
            return ("a CUDA process can use only one MIG slice; use one worker per slice "
                    "(workers=0)")
        return super().run_reason(spec, hw)

    def plan(self, spec: SpecView, hw: Hardware) -> list[Task]:
        per_worker = spec.devices // self.processes(spec)  # 0 when workers share a device
        if per_worker <= 1:
            tasks = shared_device_tasks("worker", "train", spec.devices,
                                        spec.workers_per_device, hw, cluster_job="worker",
                                        barrier=False, memory_limit_mb=spec.gpu_memory_limit_mb)
        else:
            tasks = [Task("worker", w, "train", main=w == 0, local_devices=per_worker,
                          gpus=tuple(g.cuda_id for g in
                                     hw.gpus[w * per_worker:(w + 1) * per_worker]),
                          cluster_job="worker") for w in range(self.processes(spec))]
        if not hw.gpus:
            return tasks
        # The implementation every worker builds (local_spec) and the run records.
        comm = self.communication_for(spec, hw)
        return with_gpu_cores(with_run_gpus(
            [dataclasses.replace(t, extra={**t.extra, "communication": comm}) for t in tasks]),
            hw)

    def local_spec(self, spec: S, task: Task) -> S:
        """The run's spec with the collective implementation its plan chose."""
        comm = task.extra.get("communication")
        return spec.replace(communication=comm) if comm and comm != spec.communication \
            else spec


class ParameterServer(StrategyFactory):
    """Asynchronous training: a coordinator schedules steps on worker servers that
    read and update variables held by parameter-server tasks.

    One worker process per device (``workers`` 0 or equal to devices). Steps are
    not synchronised across workers: each step processes one batch of ``batch``
    examples on one worker, so ``global_batch`` = ``per_replica_batch`` = batch.
    """

    name = "parameter_server"
    description = ("tf.distribute.ParameterServerStrategy with a ClusterCoordinator: "
                   "ps, worker and chief processes on 127.0.0.1")
    trait = "workers pull variables from and push gradients to parameter-server tasks over RPC"
    no_allreduce_reason = ("parameter-server training sends gradients to the ps tasks; it has "
                           "no all-reduce between replicas")
    no_profile_reason = ("parameter_server steps run on remote worker servers, which the "
                         "coordinator's profiler does not see")
    plainness = 30

    sweep_devices_why = WHY_TWO_AND_ALL

    def sweep_devices(self, gpus: int) -> tuple[int, ...]:
        return two_and_all(gpus)
    accepts = ("workers", "ps_tasks", "partitioner")
    loop_limits = (
        LoopLimit("Keras 3 fit cannot train under ParameterServerStrategy: it has no "
                  "DatasetCreator and rejects per-worker datasets (seen with TF 2.21 / "
                  "Keras 3.15)", keras=(3,)),
        LoopLimit("tf_keras fit trains ParameterServerStrategy only through a "
                  "DatasetCreator, with its own ClusterCoordinator; the harness's fit mode "
                  "does not drive that (its coordinator measures the custom loop)",
                  keras=(2,)),
    )
    combination = ("asynchronous: examples of the steps that all workers completed in the "
                   "chief's window / the window's wall time; workers do not report their "
                   "own throughput (the coordinator does not say which worker ran a step)")

    def replicas(self, spec: SpecView) -> int:
        return spec.devices

    def batch_divisor(self, spec: SpecView) -> int:
        return 1

    def global_batch(self, spec: SpecView) -> int:
        return spec.batch

    def per_replica_batch(self, spec: SpecView) -> int:
        return spec.batch

    def validate(self, spec: SpecView) -> None:
        """Besides the common checks, refuse the knobs its coordinator loop does not
        implement: they would be labelled on its results while ignored."""
        super().validate(spec)
        if spec.workers and spec.workers != spec.devices:
            raise SpecError("RunSpec.workers must be 0 or equal devices for parameter_server "
                            f"(one worker per device). Received: workers={spec.workers}")
        for name, why in (("grad_accum", "each scheduled step applies one batch's gradients"),
                          ("steps_per_call", "the coordinator schedules one step per call")):
            value = getattr(spec, name)
            if value != 1:
                raise SpecError(f"RunSpec.{name} must be 1 for parameter_server ({why}; "
                                f"the knob is not implemented there). Received: "
                                f"{name}={value!r}")

    def plan(self, spec: SpecView, hw: Hardware) -> list[Task]:
        # Servers keep TensorFlow's default threads and every core: a server pinned to
        # one core sizes its inter-op pool to 1 and deadlocks on the first step (seen
        # with TF 2.21; TF-NOTES: in-process servers hang with 2 inter-op threads).
        workers = [dataclasses.replace(t, main=False, inter_threads=0, intra_threads=0,
                                       cores=())
                   for t in shared_device_tasks(
                       "worker", "server", spec.devices, 1, hw, cluster_job="worker",
                       barrier=False, memory_limit_mb=spec.gpu_memory_limit_mb)]
        # Parameter servers and the coordinator compute nothing on a GPU; seeing one they
        # would take its memory beside the worker that trains on it. Each worker gets
        # its own GPU (shared_device_tasks).
        ps = [Task("ps", i, "server", cluster_job="ps", no_gpu=True)
              for i in range(spec.ps_tasks or 1)]
        chief = Task("chief", 0, "ps_chief", main=True, local_devices=1, cluster_job="chief",
                     no_gpu=True)
        return with_run_gpus([chief, *ps, *workers])


class Independent(StrategyFactory):
    """N copies of the workload, one per device and process, no communication: the
    ideal-scaling baseline ("can I just train separate models on each GPU?").

    With ``workers_per_device = K``, K copies share each device. The global batch is
    split over the copies as over replicas, so each copy does a replica's work.
    """

    name = "independent"
    description = "N independent copies, one process each, no communication (baseline)"
    trait = ("its replicas train separately without communication (a baseline, not a way to "
             "train one model)")
    no_allreduce_reason = "independent copies never communicate"
    is_choice = False
    plainness = 40

    sweep_devices_why = WHY_TWO_AND_ALL

    def sweep_devices(self, gpus: int) -> tuple[int, ...]:
        return two_and_all(gpus)
    accepts = ("workers_per_device",)
    combiner = "concurrent_copies"
    combination = ("independent copies started together (barrier after every copy's "
                   "warm-up, then windows on one wall-clock schedule the launcher sets, each "
                   "max_seconds long in every copy): each combined window is a window of "
                   "the first copy cut to the time every copy was measuring, its "
                   "throughput the sum of the copies' "
                   "rates inside it (examples of their windows pro-rated by overlap); the "
                   "global throughput is the median combined window. Step times, loss and "
                   "memory are the first copy's; every copy's own windows are in tasks")

    def replicas(self, spec: SpecView) -> int:
        return spec.devices * spec.workers_per_device

    def plan(self, spec: SpecView, hw: Hardware) -> list[Task]:
        return with_gpu_cores(with_run_gpus(shared_device_tasks(
            "replica", "train", spec.devices, spec.workers_per_device, hw, cluster_job=None,
            barrier=True, memory_limit_mb=spec.gpu_memory_limit_mb)), hw)

    def task_share(self, spec: SpecView, local_replicas: int) -> float:
        return 1.0  # each copy measures only itself

    def local_spec(self, spec: S, task: Task) -> S:
        # Each copy is a one-device run of a replica's share, with its own seed.
        return spec.replace(strategy="one_device", devices=1, batch=spec.per_replica_batch,
                            batch_mode="global", workers_per_device=1,
                            seed=spec.seed + task.index)


class TPU(StrategyFactory):
    name = "tpu"
    description = "tf.distribute.TPUStrategy (needs a TPU; TPU_NAME names a remote one)"
    trait = "it runs on TPU replicas"
    plainness = 25

    def run_reason(self, spec: SpecView, hw: Hardware) -> str | None:
        if not hw.tpu:
            return "no TPU on this machine (no /dev/accel* device and TPU_NAME is not set)"
        return self.loop_reason(spec)
