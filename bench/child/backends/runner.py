"""The harness's side of the seam: one training task through any ``Backend``.

Every lane's run: the framework import, device setup and build timed as phases, the
run's GPU state sampled at both ends of the windows, the windows of
bench.child.windows, then MFU against the achievable peak (measured after the windows,
never inside them) and the theoretical one, the MFU at the sustained clock, and an
optional profile. ``HarnessWindows`` is what a lane whose step the harness drives
(``base.LoopBuilt``) inherits: those windows, MFU and profile, and no other role.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.child.backends.base import ArmsLane, Backend, DeviceSetup, LoopBuilt
from bench.child.probes.hooks import AfterWindows
from bench.child.probes.peak import PRECISION_DTYPE, gpu_name, settle_mfu, theoretical_for
from bench.child.windows import Rules, Turns, measure
from bench.env import fingerprint
from bench.errors import Unsupported
from bench.results.mfu import at_sustained_clock
from bench.results.payload import TaskReport
from bench.results.schema import Figures
from bench.spec import RunSpec
from bench.tasks import Task, gpu_run

FRAMEWORKS = ("tensorflow", "jax", "torch")
# The schema's name for the framework's import phase (bench.results.schema.Startup).
IMPORT_PHASE = "import_framework_s"
BeforeWindows = Callable[[Callable[[], None]], Callable[[], float | None]]


def load_timed(backend: Backend, progress: Callable[[str], None]) -> dict[str, float]:
    """Import the backend's framework; the phases with its import time."""
    t = time.perf_counter()
    backend.load()
    phases = {IMPORT_PHASE: time.perf_counter() - t}
    progress(f"{backend.framework} imported in {phases[IMPORT_PHASE]:.1f}s")
    return phases


def environment(backend: Backend, devices: DeviceSetup, task: Task) -> dict[str, Any]:
    """This process's fingerprint with the backend's part, its devices and task."""
    env = fingerprint(backend.fingerprint())
    env["devices"] = {"kind": devices.kind, "names": devices.names, "logical": devices.logical}
    env["task"] = {"name": task.name, "cores": list(task.cores), "gpus": list(task.gpus),
                   "gpu_memory_limit_mb": task.gpu_memory_limit_mb}
    return env


def settle(backend: Backend, built: LoopBuilt, figures: Figures, spec: RunSpec,
           devices: DeviceSetup, progress: Callable[[str], None]) -> tuple[dict[str, Any],
                                                                           list[str]]:
    """Fill ``figures``' MFU fields in place; returns the fingerprint's peak entry and
    the problems that cost a figure (for the run's reason)."""
    dtype = PRECISION_DTYPE[spec.precision]
    device = devices.names[0]
    gpu = devices.kind == "GPU"
    # Logical CPU devices share the same cores: the CPU's peak counts once.
    physical = len(devices.names) if gpu else 1
    theo = theoretical_for(device, gpu_name() if gpu else None,
                           backend.float32_fast_math(spec))
    problems: list[str] = []
    measured: dict[str, float] = {}

    def achievable(refresh: bool) -> float | None:
        try:
            value = backend.achievable_peak(device, dtype, refresh)
        except Exception as exc:  # no matmul of this dtype here: no MFU, the run stands
            problems.append(f"no MFU: no {dtype} matmul peak on {device} "
                            f"({type(exc).__name__}: {str(exc).strip()[:200]})")
            return None
        if value:
            measured[dtype] = value
        return value

    out = settle_mfu(figures.achieved_flops_per_s * built.local_replicas / built.replicas,
                     physical, achievable, theo.flops_per_s.get(dtype),
                     backend.peak_method(device), theoretical_bound=theo.bound)
    figures.mfu, figures.peak_flops_per_s = out.mfu, out.peak_flops_per_s
    figures.mfu_theoretical = out.mfu_theoretical
    figures.theoretical_peak_flops_per_s = out.theoretical_peak_flops_per_s
    if out.fault:
        figures.peak_fault = out.fault
        problems.append(out.fault)
        progress(out.fault)
    entry = {"device": device, "achievable": measured, "method": backend.peak_method(device),
             "theoretical": theo.flops_per_s, "theoretical_source": theo.source,
             "theoretical_is_bound": theo.bound}
    return entry, problems


def run_backend(backend: Backend, spec: RunSpec, task: Task, *, launch_ts: float,
                mark_ready: Callable[[], None], before_windows: BeforeWindows,
                profile_dir: Path | None, progress: Callable[[str], None],
                turns: Turns | None = None, rewarm_calls: int = 0,
                evidence_steps: int = 0) -> TaskReport:
    """Build ``spec`` with ``backend`` for ``task`` and measure training (``turns``:
    each window in the launcher's turn, ``bench.child.windows.measure``;
    ``evidence_steps``: a sweep's evidence profile, where the lane takes one)."""
    backend.prepare(task, spec)
    phases = load_timed(backend, progress)
    t = time.perf_counter()
    devices = backend.setup_devices(task, spec)
    phases["device_setup_s"] = time.perf_counter() - t
    progress(f"devices set up: {', '.join(devices.names)}")
    env = environment(backend, devices, task)
    gpu = gpu_run(task)  # clocks, power, throttling of the run's cards (main task only)
    gpu.begin()
    env.update(gpu.environment())
    t = time.perf_counter()
    # Barrier tasks are ready once warmed up (the launcher's before_windows hook).
    built = backend.build(spec, devices, progress,
                          (lambda: None) if task.barrier else mark_ready)
    phases["build_s"] = time.perf_counter() - t
    progress(f"built {spec.label()} with {backend.name} in {phases['build_s']:.2f}s "
             f"({built.stats.params:,} params, pool of {built.pool} batches)")
    figures = backend.measure(built, spec, launch_ts=launch_ts, phases=phases,
                              progress=progress, before_windows=before_windows(gpu.at_start),
                              turns=turns, rewarm_calls=rewarm_calls)
    gpu.at_end()  # the state at both ends of the windows, for throttle_findings
    env.update(gpu.environment())
    extras = backend.after_windows(built, figures, spec, devices, profile_dir, progress,
                                   evidence_steps)
    env["peak_flops"] = extras.peak_entry
    figures = at_sustained_clock(figures, env.get("gpu_state") or {})
    # Which frameworks the process held by the end: a JAX run that loaded TensorFlow
    # (a library, or the user's code) paid its import and memory inside the figures.
    env["frameworks_loaded"] = sorted(m for m in FRAMEWORKS if m in sys.modules)
    return TaskReport("ok", extras.reason, figures=figures, environment=env,
                      local_replicas=built.local_replicas,
                      weights_checksum=built.weights_checksum())


class HarnessWindows:
    """What a lane whose ``Built`` is a ``LoopBuilt`` inherits: the harness's windows,
    MFU from ``achievable_peak`` and the spec's profile through ``LoopBuilt.profile``
    (a sweep's evidence profile is TensorFlow's alone), one arm per process, one host,
    and no cluster role (servers, a parameter-server coordinator, the all-reduce
    probe)."""

    name: str

    def begin_process(self, spec: RunSpec) -> None:
        return None

    def measure(self, built: LoopBuilt, spec: RunSpec, *, launch_ts: float,
                phases: dict[str, float], progress: Callable[[str], None],
                before_windows: Callable[[], float | None], turns: Turns | None,
                rewarm_calls: int) -> Figures:
        return measure(built.loop(), Rules.of(spec), stats=built.stats, launch_ts=launch_ts,
                       phases=phases, memory=built.memory,
                       replica_divergence=built.replica_divergence, progress=progress,
                       before_windows=before_windows, turns=turns,
                       rewarm_calls=rewarm_calls)

    def after_windows(self, built: LoopBuilt, figures: Figures, spec: RunSpec,
                      devices: DeviceSetup, profile_dir: Path | None,
                      progress: Callable[[str], None], evidence_steps: int) -> AfterWindows:
        backend: Backend = self  # type: ignore[assignment]  # mixed into a Backend
        entry, problems = settle(backend, built, figures, spec, devices, progress)
        out = AfterWindows(entry, problems)
        if not spec.profile_steps:
            return out
        if profile_dir is None:
            out.problems.append("profile_steps > 0 but no profile directory was given: "
                                "not profiled")
            return out
        try:
            out.problems.append(built.profile(spec.profile_steps, profile_dir.resolve()))
        except Exception as exc:  # a profile costs the breakdown, never the run
            out.problems.append(f"profile failed: {type(exc).__name__}: "
                                f"{str(exc).strip()[:300]}")
        return out

    def _refuse(self, what: str) -> Unsupported:
        return Unsupported(f"the {self.name} lane has no {what}")

    def allreduce(self, spec: RunSpec, task: Task, mark_ready: Callable[[], None],
                  progress: Callable[[str], None]) -> TaskReport:
        raise self._refuse("all-reduce probe")

    def serve(self, task: Task, mark_ready: Callable[[], None],
              progress: Callable[[str], None]) -> TaskReport:
        raise self._refuse("cluster server")

    def coordinate(self, spec: RunSpec, task: Task, *, launch_ts: float,
                   mark_ready: Callable[[], None], progress: Callable[[str], None]
                   ) -> TaskReport | None:
        raise self._refuse("parameter-server coordinator")

    def gather_hosts(self, task: Task, spec: RunSpec, run_dir: Path,
                     report: TaskReport) -> TaskReport:
        return report  # one host: nothing to gather

    def arms_lane(self) -> ArmsLane | None:
        return None
