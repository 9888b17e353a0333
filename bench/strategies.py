"""Registry of strategy factories: tf.distribute's, and Keras 3 ``keras.distribution``'s
on the JAX backend.

Each factory is a small object that knows how many replicas it makes, whether a
spec can run on the hardware at hand (``unsupported_reason``), and how to build
the strategy. Importing this module does not import TensorFlow; ``build`` does.
Adding a strategy means adding one class and one ``register`` line here.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from bench.errors import SpecError
from bench.hardware import Hardware
from bench.registry import Registry
from bench.tasks import Task, shared_device_tasks, with_gpu_cores, with_run_gpus

S = TypeVar("S", bound="SpecView")


class SpecView(Protocol):
    """What a strategy reads of a run's spec; ``bench.spec.RunSpec`` is the one
    implementation. The spec depends on this registry (it validates itself and derives
    its replicas and batches through it), so the registry names the fields it reads here
    instead of importing the spec: one direction, no import cycle. A field a strategy
    starts to read is added here; mypy checks that the spec still fits."""

    @property
    def workload(self) -> str: ...
    @property
    def backend(self) -> str: ...
    @property
    def devices(self) -> int: ...
    @property
    def batch(self) -> int: ...
    @property
    def batch_mode(self) -> str: ...
    @property
    def grad_accum(self) -> int: ...
    @property
    def steps_per_call(self) -> int: ...
    @property
    def precision(self) -> str: ...
    @property
    def xla(self) -> bool: ...
    @property
    def loop(self) -> str: ...
    @property
    def keras(self) -> int: ...
    @property
    def data(self) -> str: ...
    @property
    def tf32(self) -> bool: ...
    @property
    def seed(self) -> int: ...
    @property
    def cross_device_ops(self) -> str: ...
    @property
    def communication(self) -> str: ...
    @property
    def workers(self) -> int: ...
    @property
    def workers_per_device(self) -> int: ...
    @property
    def ps_tasks(self) -> int: ...
    @property
    def gpu_memory_limit_mb(self) -> int | None: ...
    @property
    def replicas(self) -> int: ...
    @property
    def per_replica_batch(self) -> int: ...
    def replace(self: S, **changes: Any) -> S: ...
    def workload_params(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class LoopLimit:
    """A training loop / Keras lane that cannot train a strategy, and why.

    It applies to a spec whose ``loop`` is in ``loops`` and ``keras`` in ``keras``,
    that reaches every ``min_*`` threshold and has ``xla``/``precision`` where
    given. ``reason`` becomes the run's ``unsupported`` reason: it says what fails
    and where upstream it is tracked, or that the harness does not drive it.
    """

    reason: str
    loops: tuple[str, ...] = ("fit",)
    keras: tuple[int, ...] = (3, 2)
    min_replicas: int = 1
    min_steps_per_call: int = 1
    min_grad_accum: int = 1
    xla: bool | None = None
    precision: str | None = None

    def applies(self, spec: SpecView) -> bool:
        return (spec.loop in self.loops and spec.keras in self.keras
                and spec.replicas >= self.min_replicas
                and spec.steps_per_call >= self.min_steps_per_call
                and spec.grad_accum >= self.min_grad_accum
                and self.xla in (None, spec.xla)
                and self.precision in (None, spec.precision))


# Limits of every strategy (each strategy's ``loop_limits`` adds its own).
COMMON_LOOP_LIMITS = (
    LoopLimit("Keras fit compiles the whole distributed step with jit_compile, which "
              "fails with 2+ replicas (a variable of replica 1 read from device 0; seen with "
              "TF 2.21, Keras 3.15 and tf_keras 2.21); the custom loop compiles the "
              "per-replica step", min_replicas=2, xla=True),
    LoopLimit("fit applies one batch per optimizer step (Keras' gradient_accumulation_steps "
              "counts each micro-batch as a step): the fit mode takes grad_accum=1 only",
              min_grad_accum=2),
    LoopLimit("the harness builds Keras 3's LossScaleOptimizer; in tf_keras it lives in "
              "keras.mixed_precision, which the Keras 2 lane does not build",
              loops=("custom", "fit"), keras=(2,), precision="mixed_float16"),
)


# Processes of their own cost a start-up each; what they show is there at 2 GPUs (the
# first step across processes) and on all of them.
WHY_TWO_AND_ALL = ("one process per GPU: the step from one process to two, and all the "
                   "GPUs")


def two_and_all(gpus: int) -> tuple[int, ...]:
    """2 GPUs and all of them (none on one GPU: one process is no multi-process run)."""
    return tuple(sorted({2, gpus})) if gpus >= 2 else ()


def own_gpus(hw: Hardware, devices: int) -> tuple[str, ...]:
    """The CUDA_VISIBLE_DEVICES entries of a process training on ``devices`` GPUs: the
    first that many visible (empty without GPUs: CPU children are unchanged)."""
    return tuple(g.cuda_id for g in hw.gpus[:devices])


class StrategyFactory:
    """One strategy: its traits (read by specs and reports) and how a run is laid out.

    Adding a strategy means one subclass registered below, plus its TensorFlow
    constructor in ``bench.child.build`` (the other side of the process boundary).
    """

    name = ""
    description = ""
    # Why the strategy does what it does, for reports: "because <trait>".
    trait = ""
    # None: the strategy all-reduces between replicas (the all-reduce probe can time it);
    # otherwise why there is nothing to time.
    no_allreduce_reason: str | None = None
    # None: a run's steps can be profiled in its main process (the step breakdown);
    # otherwise why not (a sweep then takes no profile of it).
    no_profile_reason: str | None = None
    # A way to train one model a user can choose (False: a baseline, measured and shown
    # as a ceiling, never recommended).
    is_choice = True
    # Single-device reference for "vs one device" ratios: lower is preferred; None if not.
    single_device_rank: int | None = None
    # Among tied configurations the plainest wins: lower is plainer (fewer moving parts).
    plainness = 50
    # Cross-device ops choices this strategy accepts (only "default" unless overridden).
    cross_device_ops: tuple[str, ...] = ("default",)

    # Its processes can take turns with an arms session's, window by window
    # (``bench.launch.session``): every process trains, all of them step together, and
    # they agree on a window's step count. Only then is a multi-process configuration
    # measured beside the in-process ones it is compared with, free of the drift
    # between separate runs.
    paced_processes = False

    # Its variables live in host memory, away from the replicas' devices: every step
    # copies them to each device and the gradients back (what a GPU sweep weighs
    # against an all-reduce over the cards' own links, ``bench.adaptive.plan``).
    variables_on_host = False
    # Why a GPU sweep measures it at the device counts ``sweep_devices`` gives.
    sweep_devices_why = "its scaling curve at each doubling of the GPUs, and on all of them"

    # None: its configuration can be an arm of a process shared with others
    # (bench.launch.arms); otherwise why it runs in a process of its own.
    no_shared_process_reason: str | None = None
    # The strategy that trains the same way on another backend's lane (RunSpec.backend):
    # what `bench ab --candidate-env KERAS_BACKEND=jax` measures a side's configuration
    # with. Absent: no counterpart there (a lane change is then a usage error).
    counterparts: tuple[tuple[str, str], ...] = ()  # (backend, strategy) pairs
    # Whether, sharing none, its one process can still take turns as the only arm of
    # a paced process (a duet's side, a session's member): another framework's lane,
    # measured window by window beside the configurations it is compared with.
    paced_alone = False

    # The framework backends (RunSpec.backend) that run it: a strategy of one backend
    # asked on another is ``unsupported`` with ``backend_reason``, never a traceback.
    backends: tuple[str, ...] = ("tf",)

    # Multi-process knobs this strategy accepts away from their defaults.
    accepts: tuple[str, ...] = ()
    # Training loops / Keras lanes it cannot train with (besides COMMON_LOOP_LIMITS).
    loop_limits: tuple[LoopLimit, ...] = ()
    # Where it cannot train a model with BatchNormalization layers (``Workload.batch_norm``),
    # and why; None: wherever it trains at all. Not an ``unsupported`` verdict up front:
    # an explicit run still tries, and its child reports the failure as unsupported, so
    # that a TensorFlow and Keras that fixed it simply run. A sweep's plan leaves it out.
    batch_norm_limit: LoopLimit | None = None

    def all_reduces(self, spec: SpecView) -> bool:
        """Whether ``spec``'s replicas all-reduce their gradients (NCCL's on GPUs): a
        communicator to set up at the first collective, its buffers on every card."""
        return self.replicas(spec) > 1 and self.no_allreduce_reason is None and \
            not self.variables_on_host

    def batch_norm_reason(self, spec: SpecView) -> str | None:
        """Why this strategy cannot train ``spec``'s model, a built-in workload with
        BatchNormalization layers, on ``spec``'s lane and replicas (None: it can, or the
        model is not known to have them)."""
        limit = self.batch_norm_limit
        if limit is None or not limit.applies(spec):
            return None
        from workloads import Workload, find_workload

        workload = find_workload(spec.workload)
        if not (isinstance(workload, Workload) and workload.batch_norm):
            return None
        return f"{limit.reason}, and {workload.name} has such layers"

    def counterpart(self, backend: str) -> str | None:
        """The strategy that trains as this one does on ``backend``'s lane, if any."""
        return dict(self.counterparts).get(backend)

    def replicas(self, spec: SpecView) -> int:
        """Model replicas that train together (all processes)."""
        return spec.devices

    def batch_divisor(self, spec: SpecView) -> int:
        """What a global batch must be divisible by (the replicas in sync)."""
        return self.replicas(spec)

    def global_batch(self, spec: SpecView) -> int:
        """Examples in one step across all replicas that step together."""
        return spec.batch if spec.batch_mode == "global" else spec.batch * self.replicas(spec)

    def per_replica_batch(self, spec: SpecView) -> int:
        return self.global_batch(spec) // self.replicas(spec)

    def sweep_devices(self, gpus: int) -> tuple[int, ...]:
        """The device counts at which the default sweep on ``gpus`` GPUs measures it:
        powers of two from 2 and all the GPUs (one GPU: that one)."""
        if gpus <= 1:
            return (1,)
        return tuple(sorted({*(2 ** k for k in range(1, gpus.bit_length())
                               if 2 ** k <= gpus), gpus}))

    def validate(self, spec: SpecView) -> None:
        """Reject specs that are wrong whatever the hardware (raises SpecError).

        Knobs away from their default that the strategy does not ``accept`` are
        refused by RunSpec itself, which knows the knobs' defaults.
        """
        if spec.cross_device_ops not in self.cross_device_ops:
            raise SpecError(
                f"RunSpec.cross_device_ops must be one of {', '.join(self.cross_device_ops)} "
                f"for strategy {self.name}. Received: cross_device_ops={spec.cross_device_ops!r}"
            )

    def loop_reason(self, spec: SpecView) -> str | None:
        """Why the spec's loop / Keras lane cannot train this strategy, or None."""
        return next((limit.reason for limit in (*COMMON_LOOP_LIMITS, *self.loop_limits)
                     if limit.applies(spec)), None)

    def backend_reason(self, spec: SpecView) -> str | None:
        """Why ``spec.backend`` cannot run this strategy, naming the ones that can."""
        if spec.backend in self.backends:
            return None
        others = [n for n, f in STRATEGIES.items() if spec.backend in f.backends]
        return (f"{self.name} is a strategy of the {'/'.join(self.backends)} backend, not "
                f"of {spec.backend} (which runs {', '.join(others) or 'no strategy'}). "
                f"Received: backend={spec.backend!r}, strategy={self.name!r}")

    def unsupported_reason(self, spec: SpecView, hw: Hardware) -> str | None:
        """Why the spec cannot run on this hardware, or None if it can: the backend
        first, so that no strategy blames the hardware for what is the wrong framework,
        then what the strategy itself says (``run_reason``)."""
        return self.backend_reason(spec) or self.run_reason(spec, hw)

    def run_reason(self, spec: SpecView, hw: Hardware) -> str | None:
        """Why this strategy cannot run the spec here, its backend being this
        strategy's (what subclasses add to; callers ask ``unsupported_reason``)."""
        loop = self.loop_reason(spec)
        if loop is not None:
            return loop
        if hw.gpus and spec.devices > len(hw.gpus):
            return f"{spec.devices} devices requested but only {len(hw.gpus)} GPU(s) are visible"
        # Said up front rather than left to fail at device setup: CUDA gives a process
        # one MIG slice, whatever CUDA_VISIBLE_DEVICES lists, so a process of the plan
        # that trains on several slices would see only the first.
        if hw.mig and any(t.local_devices > 1 for t in self.plan(spec, hw)):
            return (f"a CUDA process can use only one MIG slice, and {self.name} trains "
                    f"{spec.devices} devices in one process; use devices=1, or one process "
                    f"per slice (multi_worker_mirrored, independent). "
                    f"Received: devices={spec.devices}")
        return None

    def plan(self, spec: SpecView, hw: Hardware) -> list[Task]:
        """The processes of a run; in-process strategies need exactly one, which sees
        only the GPUs it trains on (by UUID, as every process of a multi-process run):
        a 1-GPU run on an 8-GPU server must not count the other seven cards' energy. On
        GPUs it is pinned to the cores of its cards' NUMA node(s) (``with_gpu_cores``)."""
        return with_gpu_cores([Task("single", 0, "train", main=True,
                                    local_devices=spec.devices,
                                    gpus=own_gpus(hw, spec.devices))], hw)

    def local_spec(self, spec: S, task: Task) -> S:
        """The spec one training process trains (the run's spec unless it is a copy)."""
        return spec

    # How the run's global figures come from its processes: the rule (a name in
    # bench.results.combination.COMBINERS, which holds the arithmetic) and its
    # description, stored with results.
    combiner = "main_task"
    combination = "single process: the figures are that process's own"

    def task_share(self, spec: SpecView, local_replicas: int) -> float:
        """Fraction of the main task's measured examples that one task's replicas did.

        Synchronous strategies measure global figures in every task, so a task's own
        share is its replicas over all replicas.
        """
        return local_replicas / self.replicas(spec)




class DefaultStrategy(StrategyFactory):
    name = "default"
    description = "no distribution: tf.distribute.get_strategy() on the first device"
    trait = "it is no distribution at all: one device, nothing replicated"
    single_device_rank = 1
    plainness = 0
    counterparts = (("jax", "data_parallel"),)

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
    counterparts = (("jax", "data_parallel"),)
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


@dataclass(frozen=True)
class LaneLimit:
    """A spec field the JAX lane runs at ``allowed`` values only, and why (the run's
    ``unsupported`` reason): what the harness does not build there yet, or what means
    nothing on JAX."""

    field: str
    allowed: tuple[Any, ...]
    why: str


JAX_LANE_LIMITS = (
    LaneLimit("loop", ("custom",), "the JAX lane drives its own compiled step (Keras fit "
                                   "on JAX is not measured yet)"),
    LaneLimit("keras", (3,), "keras.distribution is Keras 3 only"),
    LaneLimit("precision", ("float32", "mixed_bfloat16"),
              "mixed_float16 needs loss scaling, which the JAX step does not build yet"),
    LaneLimit("xla", (False,), "JAX compiles every step with XLA: the xla knob is the "
                               "TensorFlow lane's"),
    LaneLimit("data", ("synthetic",), "tf.data belongs to the TensorFlow lane"),
    LaneLimit("steps_per_call", (1,), "the JAX step is one optimizer step per call"),
    LaneLimit("grad_accum", (1,), "gradient accumulation is not built in the JAX step yet"),
)


class JaxStrategy(StrategyFactory):
    """A Keras 3 ``keras.distribution`` strategy on the JAX backend: one process, a
    device mesh, one jitted step (``bench.child.backends.jax``)."""

    backends = ("jax",)
    no_allreduce_reason = ("the all-reduce probe drives tf.distribute's cross-device ops; "
                           "the JAX lane has no probe of its collectives yet")
    limits: tuple[LaneLimit, ...] = JAX_LANE_LIMITS
    no_shared_process_reason = ("the JAX lane fixes its devices once per process (XLA_FLAGS "
                                "before jax is imported) and holds one configuration: "
                                "each runs in a process of its own, taking turns beside "
                                "the others where it is paired")
    paced_alone = True

    def lane_reason(self, spec: SpecView) -> str | None:
        """The first lane limit ``spec`` breaks, as a reason naming the field."""
        for limit in self.limits:
            value = getattr(spec, limit.field)
            if value not in limit.allowed:
                return (f"{limit.field}={value!r} does not run on the JAX backend: "
                        f"{limit.why}. Received: {limit.field}={value!r}")
        return None

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
    counterparts = (("tf", "mirrored"),)


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


STRATEGIES: Registry[StrategyFactory] = Registry("strategy")
for _factory in (DefaultStrategy(), OneDevice(), Mirrored(), CentralStorage(),
                 MultiWorkerMirrored(), ParameterServer(), Independent(), TPU(),
                 DataParallel(), ModelParallel()):
    STRATEGIES.register(_factory.name, _factory)
