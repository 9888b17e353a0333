"""What every strategy factory is (``StrategyFactory``), what it reads of a spec
(``SpecView``), and the limits of the training loops; the lanes' own strategies are in
``bench.strategies.tf`` and ``bench.strategies.jax``. Importing this module does not
import TensorFlow; ``build`` does."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from bench.errors import SpecError
from bench.hardware import Hardware
from bench.lanes import LANES
from bench.registry import Registry
from bench.tasks import Task, with_gpu_cores

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
    constructor in ``bench.child.backends.tf.build`` (the other side of the process boundary).
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
        """The strategy that trains as this one does on ``backend``'s lane
        (``Lane.counterparts``): what `bench ab --candidate-env KERAS_BACKEND=jax`
        measures a side's configuration with. None: no counterpart there (a lane change
        is then a usage error)."""
        return LANES.get(backend).counterpart_of(self.name) if backend in LANES else None

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


# Every lane's strategies, by name: bench.strategies registers them (tf.py, jax.py).
STRATEGIES: Registry[StrategyFactory] = Registry("strategy")
