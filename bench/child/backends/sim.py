"""The stand-in for TensorFlow on a simulated GPU server (``bench.sim``).

On a simulated server every child process keeps its whole protocol (progress, ready,
the windows, pacing, payloads) and replaces only its training: this backend acts out
the configuration's life at the profile's costs, in real time, without TensorFlow:

- the framework's import and the CUDA context (idle waits);
- the first call: the driver's JIT of the wheel's PTX where the wheel has no SASS for
  the card (``bench.gpu_build``) and the CUDA cache (``CUDA_CACHE_PATH``, at most
  ``CUDA_CACHE_MAXSIZE``) does not hold it yet, with one CPU core busy as the real
  compile keeps it; then cuDNN's autotuning per GPU, the step's tracing (again per
  replica one process holds) and NCCL's set-up; then the memory check (an OOM where
  the model's memory passes the card's);
- steps at the throughput model's rate (``bench.sim_model``) with the profile's window
  noise, the cards reported busy to nvidia-smi and NVML meanwhile;
- the peak probe (once per machine) and the profile's capture.

Faults on demand, ``STRATBENCH_GPU_SIM_FAULTS`` (comma-separated, each optionally
``@strategy``): ``hang`` (the first collective never returns, the process idle),
``jit=S`` (the JIT takes S seconds), ``memory_mib=M`` (the card has M MiB).
``STRATBENCH_FAULT`` (bench.child.main) still kills or hangs a task by name.
"""

from __future__ import annotations

import hashlib
import math
import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench import gpu_build, sim
from bench.child.backends.base import DeviceSetup
from bench.child.backends.runner import HarnessWindows, environment, load_timed, settle
from bench.child.probes.hooks import AfterWindows, evidence_step_count
from bench.child.windows import DeviceMemoryProbe, Loop
from bench.errors import Unsupported
from bench.results.payload import TaskReport
from bench.results.schema import AllReduceFigures, AllReducePoint
from bench.sim.faults import FAULTS_VAR, Faults
from bench.sim.profile import Profile
from bench.sim_model import (
    collective,
    convolutional,
    device_memory_mib,
    has_tf32,
    model_stats,
    parameters,
    step_model,
)
from bench.spec import RunSpec
from bench.tasks import Task
from workloads import Workload, find_workload
from workloads.flops import ModelStats

# (GPU of this process, per-replica batch) whose convolutions cuDNN has tuned.
_AUTOTUNED: set[tuple[int, int]] = set()
# Whether this process has its kernels compiled (loaded once, for every arm after).
_JITTED: list[bool] = []
# What each configuration built in this process holds on a card (the arms of a session
# keep theirs side by side).
_HELD: list[int] = []


class ResourceExhaustedError(Exception):
    """The simulated card ran out of memory (named as TensorFlow's class is, so the
    child reports ``oom``)."""


def active_profile() -> Profile:
    found = sim.active()
    if found is None:  # the caller checked
        raise RuntimeError(f"{sim.SIM_VAR} is not set")
    return found


def idle(seconds: float) -> None:
    """Wait as a process waiting on the driver or on a peer does: no CPU."""
    if seconds > 0:
        time.sleep(seconds)


def busy(seconds: float) -> None:
    """Keep one core busy for ``seconds`` of wall time (a compile), in slices."""
    end = time.monotonic() + seconds
    x = 0
    while time.monotonic() < end:
        for _ in range(20_000):
            x += 1


def hang_forever() -> None:
    """A collective whose peers never answer: the process waits, idle, until killed."""
    while True:
        time.sleep(3600)


@dataclass
class SimMemory:
    """The device memory probe of a simulated run: the model's figure per card."""

    names: list[str]
    per_device: int = 0
    scope: str = "per_device"
    reason: str | None = None

    def reset(self) -> None:
        return None

    def peaks(self) -> dict[str, int]:
        return {n: self.per_device for n in self.names}

    def current(self) -> dict[str, int]:
        return self.peaks()


@dataclass
class SimBuilt:
    """One configuration's simulated training (``bench.child.backends.base.Built``, and
    what a session's arms ask of a trainer)."""

    machine: Profile
    spec: RunSpec
    devices: DeviceSetup
    stats: ModelStats
    replicas: int
    local_replicas: int
    faults: Faults
    progress: Callable[[str], None]
    memory: DeviceMemoryProbe = field(init=False)
    held: SimMemory = field(init=False)
    pool: int = 8
    steps_done: int = 0
    first_done: bool = False
    jit_paid_s: float = 0.0
    _window_factor: float = 1.0
    _rng: random.Random = field(default_factory=lambda: random.Random(os.getpid()))

    def __post_init__(self) -> None:
        self.held = SimMemory([f"GPU:{i}" for i in range(len(self.devices.names))])
        self.memory = self.held
        # Each process differs a little from another of the same configuration.
        self._offset = math.exp(self._rng.gauss(0.0, self.machine.throughput.noise_cv / 2))
        self.model = step_model(self.machine, self.spec, self.local_replicas)

    # -- the first call: everything a real first step pays once --------------------
    def _first_call(self) -> None:
        p, say = self.machine, self.progress
        self.jit_paid_s = jit_cache(p, self.faults).compile_if_cold(say)
        hint = find_workload(self.spec.workload)
        cost = hint.cost_hint if isinstance(hint, Workload) else 1.0
        if convolutional(self.spec):
            # cuDNN keeps what it tuned per GPU and shape for the process's life: an arm
            # after another of the same per-replica batch on a GPU tunes nothing there.
            new = {(g, self.spec.per_replica_batch) for g in range(self.local_replicas)}
            new -= _AUTOTUNED
            _AUTOTUNED.update(new)
            idle(p.costs.cudnn_autotune_s * len(new))
            say(f"cuDNN autotuned on {len(new)} GPU(s)")
        idle(p.costs.trace_s * cost * (1 + p.costs.trace_per_replica_share *
                                       (self.local_replicas - 1)))
        say("step traced")
        if collective(self.spec):
            if self.faults.hang:
                say("first collective started")
                hang_forever()
            idle(p.costs.nccl_init_s)
            say(f"NCCL communicator over {self.replicas} replicas")
        need = device_memory_mib(p, self.spec, self.replicas)
        have = self.faults.memory_mib or p.card.memory_mib
        if need > have:
            raise ResourceExhaustedError(
                f"OOM when allocating tensor: the simulated {p.card.name} holds {have:.0f} "
                f"MiB and {self.spec.label()} needs about {need:.0f} MiB per card")
        self.held.per_device = int(need * 2**20)
        _HELD.append(self.held.per_device)
        sim.set_held(sum(_HELD))
        self.first_done = True

    def _call(self) -> int:
        if not self.first_done:
            self._first_call()
        sim.set_busy(True)
        steps = self.spec.steps_per_call
        idle(self.model.seconds * steps * self._offset * self._window_factor)
        self.steps_done += steps
        return self.steps_done

    def _fetch(self, out: Any) -> float:
        # Cross-entropy falling from ln(classes) as training goes on.
        classes = int(self.spec.workload_params().get("classes", 10))
        return math.log(classes) * (0.5 + 0.5 * math.exp(-self.steps_done / 500))

    def _sync(self, out: Any) -> None:
        sim.set_busy(False)
        # The next window's own luck.
        self._window_factor = math.exp(self._rng.gauss(0.0, self.machine.throughput.noise_cv))

    def loop(self) -> Loop:
        return Loop(call=self._call, fetch=self._fetch, sync=self._sync,
                    steps_per_call=self.spec.steps_per_call,
                    examples_per_step=self.spec.global_batch, replicas=self.replicas,
                    sample_scale=1.0, jit_s=lambda: self.jit_paid_s)

    def agreed_window_steps(self, steps: int) -> int:
        """The step count every worker of a run agrees on: from the model, the same in
        each (no collective needed), within the spec's bounds."""
        per = self.model.seconds * self.spec.steps_per_call
        want = int(self.spec.max_seconds / per) if per > 0 else steps
        return max(self.spec.min_steps, min(self.spec.max_steps, want))

    def weights_checksum(self) -> float:
        digest = hashlib.sha1(f"{self.spec.key()}|{self.steps_done}".encode()).hexdigest()
        return int(digest[:8], 16) / 1e6

    def replica_divergence(self) -> float:
        return 0.0

    def profile(self, steps: int, directory: Path) -> str:
        p = self.machine
        idle(p.costs.cupti_s + steps * self.model.seconds)
        idle(p.costs.trace_parse_per_gpu_s * self.local_replicas)
        directory.mkdir(parents=True, exist_ok=True)
        return (f"simulated profile of {steps} step(s): its capture and trace parsing "
                f"timed, no trace written")


@dataclass(frozen=True)
class JitCache:
    """The driver's JIT of the wheel's PTX and the CUDA cache that keeps it."""

    support: gpu_build.CardSupport
    jit_s: float
    needed_bytes: int
    directory: Path
    limit_bytes: int

    @property
    def marker(self) -> Path:
        return gpu_build.jit_marker(self.directory)

    def warm(self) -> bool:
        return self.marker.exists()

    def compile_if_cold(self, say: Callable[[str], None]) -> float:
        """The JIT where the cache does not hold it (one core busy); its seconds."""
        if self.support.kind != "jit" or self.jit_s <= 0 or _JITTED:
            return 0.0
        _JITTED.append(True)  # the process holds the compiled kernels from now on
        if self.warm():
            say("the CUDA cache holds the JIT-compiled kernels")
            return 0.0
        say(f"JIT-compiling TensorFlow's PTX for this card (~{self.jit_s:.0f} s, one core "
            f"busy): {self.support.reason}")
        busy(self.jit_s)
        if gpu_build.cache_keeps_jit(os.environ):
            self.directory.mkdir(parents=True, exist_ok=True)
            self.marker.touch()
            say("JIT done; kept in the CUDA cache")
        else:
            say(f"JIT done; not kept: the CUDA cache holds {self.limit_bytes / 2**20:.0f} "
                f"MiB (CUDA_CACHE_MAXSIZE) and the kernels need "
                f"{self.needed_bytes / 2**20:.0f} MiB")
        return self.jit_s


def jit_cache(p: Profile, faults: Faults) -> JitCache:
    support = gpu_build.card_support(p.card.compute_capability,
                                     gpu_build.parse_build_info(p.wheel_build_info()),
                                     p.driver)
    directory = Path(os.environ.get("CUDA_CACHE_PATH") or Path.home() / ".nv" / "ComputeCache")
    return JitCache(support, faults.jit_s if faults.jit_s is not None else p.costs.jit_s,
                    p.costs.jit_cache_mib * 2**20, directory,
                    gpu_build.cache_bytes(os.environ))


def visible_cards(p: Profile) -> int:
    listed = os.environ.get("CUDA_VISIBLE_DEVICES")
    if listed is None:
        return p.count
    return len([e for e in listed.split(",") if e.strip()])


class SimBackend(HarnessWindows):
    """``bench.child.backends.base.Backend`` for a simulated server (TensorFlow's lane
    acted out): the name, software and build it records are the wheel's; the harness
    drives its step (``runner.HarnessWindows``)."""

    name = "tf"
    framework = "TensorFlow (simulated)"

    def __init__(self) -> None:
        self.profile = active_profile()
        self.faults = Faults()

    def begin_process(self, spec: RunSpec) -> None:
        """The spec's Keras, as TensorFlow's lane selects it."""
        from bench.child.backends.tf.keras_lane import select_keras

        select_keras(spec.keras)

    def prepare(self, task: Task, spec: RunSpec) -> None:
        self.faults = Faults.parse(os.environ.get(FAULTS_VAR, ""), spec.strategy)
        support = jit_cache(self.profile, self.faults).support
        if not support.runs:
            raise RuntimeError(f"CUDA_ERROR_UNSUPPORTED_PTX_VERSION: {support.reason}")
        if spec.xla and support.xla_problem:
            raise RuntimeError(support.xla_problem)

    def load(self) -> None:
        idle(self.profile.costs.process_start_s + self.profile.costs.import_tf_s)

    def setup_devices(self, task: Task, spec: RunSpec) -> DeviceSetup:
        count = task.local_devices
        seen = visible_cards(self.profile)
        if count > seen:
            raise Unsupported(f"{count} devices requested but only {seen} GPU(s) visible")
        costs = self.profile.costs
        idle(costs.cuda_init_s + costs.cuda_init_per_gpu_s * max(0, count - 1))
        return DeviceSetup("GPU", [f"/gpu:{i}" for i in range(count)], False)

    def build(self, spec: RunSpec, devices: DeviceSetup, progress: Callable[[str], None],
              distribution_up: Callable[[], None] = lambda: None) -> SimBuilt:
        stats = model_stats(spec)
        workload = find_workload(spec.workload)
        cost = workload.cost_hint if isinstance(workload, Workload) else 1.0
        idle(self.profile.costs.build_s * cost)
        built = SimBuilt(self.profile, spec, devices, stats, spec.replicas,
                         len(devices.names), self.faults, progress)
        distribution_up()
        return built

    def achievable_peak(self, device: str, dtype: str, refresh: bool = False) -> float | None:
        """The datasheet peak at the share a matmul reached on the recorded H100 (TF32
        390 of 494.7, bf16 793 of 989.4); measured once per simulated machine."""
        from bench.hardware import gpu_model

        mark = gpu_build.sim_state_dir(self.profile) / f"peak-{dtype}.done"
        if refresh or not mark.exists():
            idle(self.profile.costs.peak_probe_s)
            mark.parent.mkdir(parents=True, exist_ok=True)
            mark.touch()
        model = gpu_model(self.profile.card.name)
        if model is None:
            return None
        return model.peaks(True).get(dtype, model.float32) * 0.79

    def peak_method(self, device: str) -> str:
        return "simulated: 79% of the datasheet peak, as a matmul reached on a real H100"

    def float32_fast_math(self, spec: RunSpec) -> bool:
        return spec.tf32 and has_tf32(self.profile)

    def fingerprint(self) -> dict[str, Any]:
        p = self.profile
        build = gpu_build.parse_build_info(p.wheel_build_info())
        return {"backend": self.name, "tensorflow": f"{p.wheel} (simulated)",
                "keras": "3 (simulated)",
                "tf_build": {k: str(v) for k, v in build.items()},
                "physical_devices": [f"GPU:/physical_device:GPU:{i}"
                                     for i in range(visible_cards(p))]}

    def allreduce(self, spec: RunSpec, task: Task, mark_ready: Callable[[], None],
                  progress: Callable[[str], None]) -> TaskReport:
        return TaskReport("ok", allreduce=run_allreduce(spec, task, mark_ready, progress))

    def serve(self, task: Task, mark_ready: Callable[[], None],
              progress: Callable[[str], None]) -> TaskReport:
        """A server that is up, then idle until the launcher kills it."""
        progress("server up (simulated)")
        mark_ready()
        while True:
            time.sleep(3600)

    def coordinate(self, spec: RunSpec, task: Task, *, launch_ts: float,
                   mark_ready: Callable[[], None], progress: Callable[[str], None]
                   ) -> TaskReport | None:
        return None  # the coordinator acted out as one training process

    def gather_hosts(self, task: Task, spec: RunSpec, run_dir: Path,
                     report: TaskReport) -> TaskReport:
        """As TensorFlow's lane gathers (bench.child.backends.tf.gather)."""
        from bench.child.backends.tf.gather import gather_hosts

        return gather_hosts(task, spec, run_dir, report)

    def arms_lane(self) -> SimArms:
        return SimArms()


def run_allreduce(spec: RunSpec, task: Task, mark_ready: Callable[[], None],
                  say: Callable[[str], None]) -> AllReduceFigures:
    """The all-reduce probe acted out: NCCL's set-up, then each size at the profile's
    bus bandwidth (nccl-tests' convention), a point's progress said as it ends."""
    from bench.child.backends.tf.allreduce import busbw, human_bytes, sizes

    backend = SimBackend()
    backend.prepare(task, spec)
    backend.load()
    say("TensorFlow imported (simulated)")
    devices = backend.setup_devices(task, spec)
    say(f"devices set up: {', '.join(devices.names)}")
    mark_ready()
    p, n = backend.profile, spec.replicas
    if backend.faults.hang:
        say("first all-reduce started")
        hang_forever()
    idle(p.costs.nccl_init_s)
    out = AllReduceFigures(implementation="NcclAllReduce (simulated)", replicas=n,
                           dtype="float32", warmup_iterations=max(2, spec.warmup_steps))
    grads = 4 * parameters(spec)
    points = [(human_bytes(b), b) for b in sizes(spec.allreduce_max_bytes)]
    points.append((f"gradients:{spec.workload}", grads))
    for label, size in points:
        seconds = 20e-6 + size * 2 * (n - 1) / n / p.busbw(n)
        iterations = max(spec.min_steps, min(spec.max_steps, int(spec.max_seconds / seconds)))
        idle(seconds * (iterations + spec.warmup_steps))
        alg = size / seconds
        out.points.append(AllReducePoint(label=label, bytes=size, tensors=1,
                                         time_median_s=seconds, time_p90_s=seconds * 1.05,
                                         algbw=alg, busbw=busbw(alg, n), iterations=iterations))
        say(f"{label:>20s}: {seconds * 1e3:9.3f} ms median, busbw "
            f"{busbw(alg, n) / 1e9:7.3f} GB/s")
    return out


class SimAllocator:
    """The device memory a session's simulated arms share: each built arm holds its
    model's figure on each of its cards (``bench.child.memory.ArmMemory`` reads it as
    TensorFlow's allocator)."""

    scope = "per_device"

    def __init__(self, devices: int) -> None:
        self.names = [f"GPU:{i}" for i in range(devices)]
        self.reason: str | None = None
        self.arms: list[SimBuilt] = []

    def reset(self) -> None:
        return None

    def current(self) -> dict[str, int]:
        return {name: sum(a.held.per_device for a in self.arms
                          if i < len(a.devices.names)) for i, name in enumerate(self.names)}

    def peaks(self) -> dict[str, int]:
        return self.current()


class SimArms:
    """A session's arms on a simulated server (``bench.child.arms.ArmsLane``)."""

    def __init__(self) -> None:
        self.backend = SimBackend()
        self.allocator: SimAllocator | None = None
        self.say: Callable[[str], None] = lambda _msg: None

    def start(self, task: Task, say: Callable[[str], None]
              ) -> tuple[dict[str, float], DeviceSetup, dict[str, Any], Any]:
        self.say = say
        phases = load_timed(self.backend, say)
        t = time.perf_counter()
        devices = self.backend.setup_devices(task, RunSpec(workload="resnet50",
                                                           strategy="default"))
        phases["device_setup_s"] = time.perf_counter() - t
        say(f"devices set up: {', '.join(devices.names)}")
        self.allocator = SimAllocator(len(devices.names))
        return phases, devices, environment(self.backend, devices, task), self.allocator

    def build(self, spec: RunSpec, own: DeviceSetup, after_strategy: Callable[[], None]
              ) -> SimBuilt:
        self.backend.prepare(Task("single", 0, "train"), spec)  # its strategy's faults
        after_strategy()
        built = self.backend.build(spec, own, self.say)
        if self.allocator is not None:
            self.allocator.arms.append(built)
        return built

    def after_windows(self, trainer: Any, figures: Any, where: Path | None,
                      progress: Callable[[str], None], evidence_steps: int) -> Any:
        entry, problems = settle(self.backend, trainer, figures, trainer.spec,
                                 trainer.devices, progress)
        out = AfterWindows(entry, problems)
        if where is not None and evidence_steps:
            steps = evidence_step_count(evidence_steps,
                                        figures.step_time.median_s * trainer.spec.steps_per_call,
                                        trainer.local_replicas < trainer.replicas)
            out.problems.append(trainer.profile(steps, where))
        return out
