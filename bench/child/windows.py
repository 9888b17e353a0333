"""The measured-window loop: warm-up, repeated synchronised windows, the figures.

Every training loop of the child measures through ``measure``: the in-process
``Trainer`` (a compiled call of ``steps_per_call`` steps) and the ParameterServer
coordinator (a chunk of scheduled steps, then ``join``). Each supplies a ``Loop``:
how to start one call, how to wait for that call's loss, how to wait for every
device. The timing protocol is then one piece of code (definitions in
bench.results.schema):

- the first call (tracing, graph optimisation) and the warm-up calls are timed
  apart and never inside a window;
- a window opens and closes with a full synchronisation; inside it the host runs
  at most ``FETCH_LAG`` calls ahead of the losses it has fetched: after starting
  call i it waits for the loss of call i - ``FETCH_LAG``. On an asynchronous device
  (a GPU) fetching every call's own loss would serialise host and device each call
  (the device idles while the host dispatches the next), which TF's own benchmarks
  and ``fit(steps_per_execution=...)`` do not do; a bounded lag keeps the device fed
  and the host at the device's pace, so each call still gives a step-time sample
  (the interval between two calls' ends) and a window cannot run past its end by
  more than the lag. Every call's loss is still fetched and checked (the rest after
  the closing synchronisation, outside the timing);
- a window ends after ``max_steps`` steps, or once ``max_seconds`` have passed and
  ``min_steps`` were taken (or after the step count a multi-worker run agreed on);
- the headline throughput is the median window.

Nothing here imports TensorFlow: the loop only calls what it is given, so it
costs a few Python calls per training call (``scripts/overhead.py`` compares it
with a hand-written loop).
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from bench.child import preimport
from bench.child.memory import host_peak_rss_bytes, reset_host_peak
from bench.energy import EnergyMeter, energy_meter, window_energy
from bench.env import INJECT_SLOWDOWN_VAR, injected_slowdown, stall_until
from bench.results.samples import coefficient_of_variation, step_time_stats
from bench.results.schema import Figures, Memory, ModelInfo, Startup, Warmup, Window
from bench.spec import RunSpec
from workloads.flops import ModelStats

# Calls the host may start before it waits for an earlier call's loss (see the module
# docstring). 0 fetches every call's loss before the next call: the old protocol, which
# scripts/loss_fetch.py compares with this one. Two, not one, so that a call shorter
# than the next one's dispatch jitter still leaves the device work queued.
FETCH_LAG = 2


@dataclass(frozen=True)
class Loop:
    """What the window loop drives; each training loop supplies its own.

    ``call`` starts ``steps_per_call`` optimizer steps and returns a handle;
    ``fetch`` waits for that call and returns its loss (the per-call synchronisation);
    ``sync`` waits until every device has finished its queued work (window edges).
    A step-time sample is a call's seconds x ``sample_scale`` / ``steps_per_call``
    (1 in-process; the worker count for asynchronous workers, whose steps overlap).
    ``first_call``, when given, is the very first call (``first_call_steps`` steps),
    e.g. a single step before chunks of many.
    """

    call: Callable[[], Any]
    fetch: Callable[[Any], float]
    sync: Callable[[Any], None]
    steps_per_call: int
    examples_per_step: int
    replicas: int
    sample_scale: float = 1.0
    first_call: Callable[[], Any] | None = None
    first_call_steps: int = 0
    # Seconds of the first call the driver spent JIT-compiling kernels, where the loop
    # can tell (a simulated server's stand-in); None: not known.
    jit_s: Callable[[], float] | None = None


@dataclass(frozen=True)
class Rules:
    """When warm-up and windows end (the spec's fields, gathered in one place)."""

    repeats: int
    warmup_steps: int
    min_steps: int
    max_steps: int
    max_seconds: float
    # Wall-clock time (epoch seconds) the windows of processes measured side by side
    # start at: window i then ends at start + (i + 1) x max_seconds in every one of them,
    # whatever its speed. Windows that end on a step count instead last a few ms for a
    # tiny model on a fast CPU, less than the processes' release from the barrier
    # differs by, and then never overlapped.
    common_start_ts: float | None = None

    @classmethod
    def of(cls, spec: RunSpec) -> Rules:
        return cls(spec.repeats, spec.warmup_steps, spec.min_steps, spec.max_steps,
                   spec.max_seconds)

    def window_done(self, steps: int, elapsed_s: float, fixed_steps: int | None, *,
                    index: int = 0, now_ts: float = 0.0) -> bool:
        """Whether window ``index``, ``steps`` steps and ``elapsed_s`` seconds in, ends
        now (``now_ts``: the wall-clock time, read on a common schedule only)."""
        if fixed_steps is not None:
            return steps >= fixed_steps
        if self.common_start_ts is not None:
            end = self.common_start_ts + (index + 1) * self.max_seconds
            return now_ts >= end and steps >= self.min_steps
        return steps >= self.max_steps or (elapsed_s >= self.max_seconds
                                           and steps >= self.min_steps)

    def on_schedule(self, start_ts: float | None) -> Rules:
        """These rules with the windows on a common wall-clock schedule (None: unchanged)."""
        return self if start_ts is None else dataclasses.replace(self,
                                                                 common_start_ts=start_ts)


class DeviceMemoryProbe(Protocol):
    scope: str
    reason: str | None  # why peaks() is empty, once it found out

    def reset(self) -> None: ...

    def peaks(self) -> dict[str, int]: ...


@dataclass
class NoDeviceMemory:
    """For loops that hold no model state on their own devices (the PS coordinator)."""

    scope: str
    reason: str | None = None

    def reset(self) -> None:
        return None

    def peaks(self) -> dict[str, int]:
        return {}


def _epoch_offset() -> float:
    # Window edges in wall-clock time for matching processes, at perf_counter precision.
    return time.time() - time.perf_counter()


@dataclass
class Warm:
    """A loop after its first call and warm-up: what its windows start from.

    ``out`` is the last call's handle; ``fixed_steps`` the step count every window
    must take (a multi-worker run's agreement), None when windows end on their own.
    """

    out: Any
    warmup: Warmup
    startup: Startup
    loss_start: float
    fixed_steps: int | None


def warm_up(loop: Loop, rules: Rules, *, launch_ts: float, phases: dict[str, float],
            progress: Callable[[str], None] = lambda _: None,
            warm_target: int | None = None,
            agree: Callable[[float], int] | None = None) -> Warm:
    """The first call (timed apart), then the warm-up steps; nothing here is a window."""
    k = loop.steps_per_call
    t = time.perf_counter()
    if loop.first_call is not None:
        out = loop.first_call()
        warm_steps = loop.first_call_steps
    else:
        out = loop.call()
        warm_steps = k
    loss_start = loop.fetch(out)
    loop.sync(out)
    first_call_s = time.perf_counter() - t
    startup = Startup(import_framework_s=phases["import_framework_s"],
                      device_setup_s=phases["device_setup_s"], build_s=phases["build_s"],
                      launch_to_first_step_s=time.time() - launch_ts,
                      preimported_s=preimport.PREIMPORTED_S)
    progress(f"first call {first_call_s:.2f}s, loss {loss_start:.4f}")
    first_steps = warm_steps
    target = max(rules.warmup_steps, warm_target or 0)
    tw = time.perf_counter()
    while warm_steps < target:
        out = loop.call()
        warm_steps += k
    loop.sync(out)
    timed = warm_steps - first_steps
    fixed_steps = agree((time.perf_counter() - tw) / timed) if agree and timed else None
    warmup = Warmup(first_call_s=first_call_s, steps=warm_steps,
                    total_s=time.perf_counter() - t,
                    jit_s=loop.jit_s() if loop.jit_s is not None else 0.0)
    return Warm(out, warmup, startup, loss_start, fixed_steps)


@dataclass
class WindowRun:
    """One measured window and its per-call step-time samples."""

    window: Window
    step_times: list[float]
    out: Any  # the last call's handle (the next window syncs on it)
    host_scope: str  # "window", or "lifetime" where the peak cannot be reset


def run_window(loop: Loop, rules: Rules, index: int, out: Any, *,
               memory: DeviceMemoryProbe, fixed_steps: int | None = None,
               slowdown: float = 0.0, host_memory: bool = True,
               meter: EnergyMeter | None = None,
               fetch_lag: int = FETCH_LAG) -> WindowRun:
    """One synchronised window: opens after every device is idle, closes when they are.

    ``host_memory=False`` records no host peak (a process shared with other
    configurations has no peak of this one's own). ``meter``: the energy counter of
    the devices this window trains on (default: the process's, ``energy_meter()``).
    ``fetch_lag``: how many calls the host runs ahead of the losses it waits for
    (``FETCH_LAG``; 0: each call's own loss before the next call).
    """
    if fetch_lag < 0:
        raise ValueError(f"fetch_lag must be 0 or more calls. Received: fetch_lag={fetch_lag}")
    k = loop.steps_per_call
    call, fetch, scale = loop.call, loop.fetch, loop.sample_scale / k
    memory.reset()
    host_scope = "window" if reset_host_peak() else "lifetime"
    loop.sync(out)
    meter = meter or energy_meter()
    e0 = meter.read()
    epoch = _epoch_offset()
    c0 = time.process_time()
    t0 = time.perf_counter()
    times: list[float] = []
    losses: list[float] = []
    pending: deque[Any] = deque()  # calls started whose loss is not fetched yet
    steps, tc = 0, t0
    while True:
        out = call()
        pending.append(out)
        if len(pending) > fetch_lag:
            losses.append(fetch(pending.popleft()))
        tn = time.perf_counter()
        if slowdown:  # proportional to the call's own time, so any workload slows alike
            tn = stall_until(tn + (tn - tc) * slowdown)
        # The interval since the previous call ended: with the host held at most
        # fetch_lag calls ahead, the device's pace once the queue is full.
        times.append((tn - tc) * scale)
        tc = tn
        steps += k
        if rules.window_done(steps, tn - t0, fixed_steps, index=index, now_ts=epoch + tn):
            break
    loop.sync(out)
    t1 = time.perf_counter()
    cpu = time.process_time() - c0
    energy = window_energy(e0, meter.read())  # at the closing sync, as the wall time
    # The window is closed: the losses still pending cost no window time now.
    losses.extend(fetch(h) for h in pending)
    first_loss, loss = losses[0], losses[-1]
    bad = next((i for i, x in enumerate(losses) if not math.isfinite(x)), None)
    if bad is not None:  # a diverged run's throughput is not a result
        raise FloatingPointError(f"training diverged: loss is {losses[bad]} at call "
                                 f"{bad + 1} of {len(losses)} in window {index + 1}")
    wall = t1 - t0
    examples = steps * loop.examples_per_step
    window = Window(
        index=index, steps=steps, examples=examples, wall_s=wall,
        global_throughput=examples / wall,
        per_replica_throughput=examples / wall / loop.replicas,
        step_time=step_time_stats(times), loss_first=first_loss, loss_last=loss,
        device_peak_bytes=memory.peaks(),
        host_peak_rss_bytes=host_peak_rss_bytes() if host_memory else None,
        start_ts=epoch + t0, end_ts=epoch + t1, cpu_s=cpu, energy_j=energy,
        joules_per_example=energy / examples if energy is not None else None)
    return WindowRun(window, times, out, host_scope)


# Untimed calls before a window only where a call is shorter than this share of a
# window: a longer call refills the caches in a negligible part of its own time, and
# its re-warm would cost a quarter of a CNN's session.
REWARM_SHARE = 0.05


def rewarms(call_s: float, window_s: float, calls: int) -> int:
    """The untimed calls before a window of an arm whose call takes ``call_s``: a
    configuration measured in turns with another (an arm, a duet's side) finds the
    other's weights in the caches, which a call of a fraction of a millisecond feels
    and one of 50 ms does not."""
    return calls if call_s < REWARM_SHARE * window_s else 0


class Turns(Protocol):
    """The launcher's turns over a paced process's windows (``bench.child.arms.Pacer``):
    ``R`` ready, then a turn (``wait_turn``) before each window and ``d`` after it."""

    def say(self, word: bytes) -> None: ...

    def wait_turn(self) -> bool: ...


def announce_slowdown(progress: Callable[[str], None]) -> float:
    """The testing hook's slowdown (0 unless set, see bench.env), said once if set."""
    slowdown = injected_slowdown()
    if slowdown:
        progress(f"testing hook {INJECT_SLOWDOWN_VAR}={slowdown:g}: every timed call "
                 f"is made {slowdown:.0%} longer")
    return slowdown


def measure(loop: Loop, rules: Rules, *, stats: ModelStats, launch_ts: float,
            phases: dict[str, float], memory: DeviceMemoryProbe,
            replica_divergence: Callable[[], float],
            progress: Callable[[str], None] = lambda _: None,
            before_windows: Callable[[], float | None] = lambda: None,
            warm_target: int | None = None,
            agree: Callable[[float], int] | None = None,
            turns: Turns | None = None, rewarm_calls: int = 0) -> Figures:
    """Warm up, then measure ``rules.repeats`` windows; returns the run's figures.

    ``launch_ts`` is the wall-clock time the parent launched this process; ``phases``
    holds the seconds spent importing TensorFlow, setting up devices and building
    (``import_framework_s``, ``device_setup_s``, ``build_s``). ``before_windows`` runs between
    warm-up and the first window (e.g. a start barrier shared by independent copies); it
    returns the wall-clock time the windows start at when they follow a schedule common
    to several processes (``Rules.common_start_ts``), else None.
    ``warm_target`` raises the warm-up step count; ``agree``, given the warm-up's
    seconds per step, returns the step count every window must take (workers of one
    synchronous run must stop on the same step).
    ``turns``: the process is a paced side (a duet's, a session's member) and each
    window waits for the launcher's turn, after ``rewarms`` untimed calls; the
    process says ready once warm, and after the last window waits for its turn to
    finish (end of file), so that no side summarises beside another's window.
    """
    warm = warm_up(loop, rules, launch_ts=launch_ts, phases=phases, progress=progress,
                   warm_target=warm_target, agree=agree)
    rules = rules.on_schedule(before_windows())
    slowdown = announce_slowdown(progress)
    runs: list[WindowRun] = []
    out = warm.out
    call_s = 0.0  # not timed yet: the first paced window re-warms
    if turns is not None:
        turns.say(b"R")
    for r in range(rules.repeats):
        if turns is not None:
            if not turns.wait_turn():
                progress(f"the launcher ended the rounds before window {r + 1}")
                break
            for _ in range(rewarms(call_s, rules.max_seconds, rewarm_calls)):
                out = loop.call()
                loop.fetch(out)
        run = run_window(loop, rules, r, out, memory=memory, fixed_steps=warm.fixed_steps,
                         slowdown=slowdown)
        runs.append(run)
        out = run.out
        call_s = run.window.wall_s * loop.steps_per_call / max(1, run.window.steps)
        if turns is not None:
            turns.say(b"d")
        progress(f"window {r + 1}/{rules.repeats}: {run.window.global_throughput:,.1f} "
                 f"examples/s, loss {run.window.loss_last:.4f}")
    if turns is not None:
        turns.wait_turn()  # a turn or end of file: one process at a time finishes
    if not runs:
        raise RuntimeError("the launcher gave this process no turn: no window measured")
    return summarize_runs(runs, warm, stats, replicas=loop.replicas, memory=memory,
                          replica_divergence=replica_divergence())


def summarize_runs(runs: list[WindowRun], warm: Warm, stats: ModelStats, *, replicas: int,
                   memory: DeviceMemoryProbe, replica_divergence: float) -> Figures:
    """``summarize`` over measured windows (the host peak's scope: the weakest seen)."""
    host_scope = "lifetime" if any(r.host_scope == "lifetime" for r in runs) else "window"
    return summarize([r.window for r in runs], [t for r in runs for t in r.step_times],
                     warm.warmup, warm.startup, stats, warm.loss_start, replicas=replicas,
                     device_scope=memory.scope, device_reason=memory.reason,
                     host_scope=host_scope, replica_divergence=replica_divergence)


def energy_figures(windows: list[Window]) -> dict[str, Any]:
    """Figures' energy fields over ``windows``: every window's energy summed, or none
    (with this process's meter's reason) when any window has none."""
    meter = energy_meter()
    energies = [w.energy_j for w in windows]
    if not windows or any(e is None for e in energies):
        return {"energy_reason": meter.reason or "a window's energy could not be read"}
    total = sum(e for e in energies if e is not None)
    examples = sum(w.examples for w in windows)
    wall = sum(w.wall_s for w in windows)
    return {"energy_j": total, "joules_per_example": total / examples if examples else None,
            "mean_power_w": total / wall if wall else None, "energy_source": meter.source}


def summarize(windows: list[Window], step_times: list[float], warmup: Warmup,
              startup: Startup, stats: ModelStats, loss_start: float, *, replicas: int,
              device_scope: str, host_scope: str, replica_divergence: float,
              device_reason: str | None = None) -> Figures:
    """The run's figures from its measured windows (headline = median window).

    Raises FloatingPointError when the loss is no longer finite: a diverged run's
    throughput is not a result.
    """
    if not math.isfinite(windows[-1].loss_last):
        raise FloatingPointError(f"training diverged: loss is {windows[-1].loss_last}")
    throughputs = [w.global_throughput for w in windows]
    median = float(np.median(throughputs))
    device_peak: dict[str, int] = {}
    for w in windows:
        for name, peak in w.device_peak_bytes.items():
            device_peak[name] = max(device_peak.get(name, 0), peak)
    host_peaks = [w.host_peak_rss_bytes for w in windows if w.host_peak_rss_bytes]
    return Figures(
        **energy_figures(windows),
        global_throughput=median,
        per_replica_throughput=median / replicas,
        step_time=step_time_stats(step_times),
        windows=windows,
        warmup=warmup,
        startup=startup,
        memory=Memory(device_peak_bytes=device_peak, device_scope=device_scope,
                      host_peak_rss_bytes=max(host_peaks) if host_peaks else None,
                      host_scope=host_scope,
                      device_peak_reason=None if device_peak else device_reason),
        model=ModelInfo(**dataclasses.asdict(stats)),
        achieved_flops_per_s=stats.train_flops_per_example * median,
        loss_start=loss_start,
        loss_end=windows[-1].loss_last,
        learned=windows[-1].loss_last < loss_start,
        replica_divergence=replica_divergence,
        throughput_cv=coefficient_of_variation(throughputs),
    )
