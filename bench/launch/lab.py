"""The scaling lab (``bench lab``): 1 to 4 emulated hosts with a fixed CPU budget each.

Every host is a network namespace with a cgroup CPU quota (``bench.launch.netns`` /
``bench.launch.cgroups``, through ``run_demo``), so ``n`` hosts have ``n`` times the
compute of one: the curves are real scaling on one machine. Per workload and link
rate the lab measures (``plan``):

- ``scaling``: MultiWorkerMirrored at a fixed global batch on 1..4 hosts (strong
  scaling; one host sends nothing over its link, so its runs are shared by every
  link rate and stored once under ``local/``), and ParameterServer with 1..4 worker
  hosts at a fixed batch per step (weak scaling: each step is one worker's batch, so
  more workers do more work; its coordinator and parameter server share a host of
  their own, with the same budget). The report ranks the two apart.
- ``compute``: one host at the per-host batch of two hosts, MultiWorkerMirrored (with
  the one-host run, the two batch sizes the projection's compute line is fitted to).
- ``probe``: the all-reduce probe over two hosts on the link (1 KiB doubling to
  ``PROBE_MAX_BYTES``, the tiny MLP's gradients), whose latency and bandwidth the
  projection fits away from the workloads' gradient sizes.

Each point runs ``runs`` times, each run a fresh set of processes; the order is
interleaved (every point's first run, then every point's second, ...), so a slow
spell of the machine spreads over the points instead of landing on one. Results go
to one sweep directory per link (``<out>/cpu<budget>/<link>/``) and resume: a point
with its runs stored is skipped. Every result records the hosts' budget
(``launcher["budget"]``). Needs root (namespaces, cgroups).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from bench.errors import BenchError
from bench.launch.cgroups import CpuBudget
from bench.launch.cluster_demo import DemoOutcome, run_demo
from bench.launch.netns import LinkShape, rate_text
from bench.launch.slurm.private import unavailable as slurm_unavailable
from bench.launch.slurm_demo import run_on_slurm
from bench.registry import Registry
from bench.results.store import SweepStore
from bench.spec import RunSpec

MiB = 2**20
PROBE_MAX_BYTES = 32 * MiB
LOCAL = "local"  # the directory of runs that send nothing over a link
STRATEGIES = ("multi_worker_mirrored", "parameter_server")
KINDS = ("scaling", "compute", "probe")


class LabError(BenchError):
    """A lab plan that cannot run (the CLI exits 2)."""


@dataclass(frozen=True)
class LabWorkload:
    """A workload as the lab runs it: fixed global batch for MultiWorkerMirrored (a
    multiple of 12, so 1..4 hosts split it evenly), the batch of one ParameterServer
    step, and measured windows sized to its step time under a half-CPU budget."""

    workload: str
    global_batch: int
    ps_batch: int
    params: dict[str, Any] = field(default_factory=dict)
    windows: dict[str, Any] = field(default_factory=dict)
    note: str = ""


# Window sizes: each run's steady state in a few seconds (the 40-minute budget of the
# whole lab), a step long enough that per-step overhead does not drown the work.
LAB_WORKLOADS: Registry[LabWorkload] = Registry("lab workload")
LAB_WORKLOADS.register("mlp", LabWorkload(
    "mlp", global_batch=960, ps_batch=240,
    windows={"repeats": 3, "max_seconds": 1.0, "min_steps": 3, "warmup_steps": 3}))
LAB_WORKLOADS.register("cnn", LabWorkload(
    "cnn", global_batch=48, ps_batch=24,
    windows={"repeats": 3, "max_seconds": 1.0, "min_steps": 2, "warmup_steps": 2}))
LAB_WORKLOADS.register("resnet50", LabWorkload(
    "resnet50", global_batch=12, ps_batch=4, params={"image_size": 32, "classes": 10},
    windows={"repeats": 2, "max_seconds": 1.0, "min_steps": 2, "warmup_steps": 2},
    note="reduced input: 32x32 images, 10 classes (ResNet50's full 23.6M parameters)"))

COMMON: dict[str, Any] = {"optimizer": "sgd", "learning_rate": 0.01, "size": "default",
                          "max_steps": 400, "timeout_s": 600.0}


@dataclass(frozen=True)
class LabPoint:
    """One measured configuration of the lab and where its runs are stored."""

    kind: str  # scaling, compute or probe
    workload: str  # LAB_WORKLOADS name ("" for the probe: it belongs to the link)
    strategy: str
    hosts: int  # emulated hosts that train (ParameterServer: worker hosts)
    rate_bps: float | None  # None: nothing crosses a link (one MultiWorkerMirrored host)
    spec: RunSpec

    def directory(self, out: Path, cpu: CpuBudget) -> Path:
        """The sweep directory of its runs: one per CPU budget and link rate."""
        link = LOCAL if self.rate_bps is None else link_dir(self.rate_bps)
        return Path(out) / f"cpu{cpu.cpus:g}" / link

    def label(self) -> str:
        link = "no link" if self.rate_bps is None else rate_text(self.rate_bps)
        what = self.kind if self.kind != "scaling" else self.strategy
        return (f"{self.workload or 'all-reduce probe'} {what} {self.hosts} host(s), {link}, "
                f"batch {self.spec.batch}")


def link_dir(rate_bps: float) -> str:
    """``1e9`` -> ``"1gbit"``: a directory name for a link rate."""
    return rate_text(rate_bps).replace(" ", "").replace("/s", "").lower()


def _spec(w: LabWorkload, strategy: str, hosts: int, batch: int) -> RunSpec:
    mode = "global" if strategy == "multi_worker_mirrored" else "per_replica"
    return RunSpec(workload=w.workload, strategy=strategy, devices=hosts, batch=batch,
                   batch_mode=mode, params=dict(w.params), **COMMON, **w.windows)


def probe_spec() -> RunSpec:
    """The all-reduce probe over two hosts (single buffers up to PROBE_MAX_BYTES and
    the tiny MLP's gradients, cheap on any link)."""
    return RunSpec(strategy="multi_worker_mirrored", devices=2, mode="allreduce",
                   batch_mode="per_replica", workload="mlp", size="tiny", batch=1,
                   allreduce_max_bytes=PROBE_MAX_BYTES, warmup_steps=2, min_steps=4,
                   max_steps=30, max_seconds=0.3, timeout_s=900.0)


def plan(workloads: Sequence[str], strategies: Sequence[str], hosts: Sequence[int],
         rates: Sequence[float]) -> list[LabPoint]:
    """The points of a lab invocation, without duplicates (one-host MultiWorkerMirrored
    runs and the compute points are link-free and planned once)."""
    bad = [s for s in strategies if s not in STRATEGIES]
    if bad:
        raise LabError(f"the lab runs {', '.join(STRATEGIES)}. Received: strategy={bad}")
    if not hosts or any(h < 1 or h > 8 for h in hosts):
        raise LabError(f"hosts must be between 1 and 8. Received: hosts={list(hosts)}")
    if not rates:
        raise LabError("the lab needs at least one link rate (e.g. --link 1gbit,10gbit)")
    points: dict[tuple[Any, ...], LabPoint] = {}

    def add(p: LabPoint) -> None:
        points.setdefault((p.kind, p.spec.key(), p.rate_bps), p)

    for name in workloads:
        w = LAB_WORKLOADS.get(name)
        for strategy in strategies:
            for rate in rates:
                for n in sorted(set(hosts)):
                    if strategy == "multi_worker_mirrored":
                        if w.global_batch % n:
                            raise LabError(f"{name}'s global batch {w.global_batch} does not "
                                           f"split over {n} hosts. Received: hosts={n}")
                        add(LabPoint("scaling", name, strategy, n, rate if n > 1 else None,
                                     _spec(w, strategy, n, w.global_batch)))
                    else:
                        add(LabPoint("scaling", name, strategy, n, rate,
                                     _spec(w, strategy, n, w.ps_batch)))
            if strategy == "multi_worker_mirrored":
                add(LabPoint("compute", name, strategy, 1, None,
                             _spec(w, strategy, 1, w.global_batch // 2)))
    if "multi_worker_mirrored" in strategies:
        for rate in rates:
            add(LabPoint("probe", "", "multi_worker_mirrored", 2, rate, probe_spec()))
    return list(points.values())


class Runner(Protocol):
    """How the lab runs one point (``run_demo``; tests pass a fake)."""

    def __call__(self, spec: RunSpec, out: Path, shape: LinkShape | None = None, *,
                 cpu: CpuBudget | None = None,
                 progress: Callable[[str], None] = ...) -> DemoOutcome: ...


@dataclass(frozen=True)
class Engine:
    """How the lab's hosts get their tasks: straight from the lab, or through the
    engine users run multi-host jobs on."""

    runner: Runner
    unavailable: Callable[[], str | None]  # why it cannot run here (None: it can)
    description: str


ENGINES: Registry[Engine] = Registry("lab engine")
ENGINES.register("demo", Engine(run_demo, lambda: None,
                                "each host's task started in its namespace "
                                "(bench cluster-demo)"))
ENGINES.register("slurm", Engine(run_on_slurm, slurm_unavailable,
                                 "each host a Slurm node (its own slurmd), the tasks "
                                 "placed by one srun"))


@dataclass
class LabRun:
    """One run the lab made: its point, which run of the point, how it ended."""

    point: LabPoint
    replicate: int
    status: str
    wall_s: float
    clean: bool


@dataclass
class LabOutcome:
    runs: list[LabRun] = field(default_factory=list)
    skipped: int = 0  # runs already stored (resumed)
    stopped_early: bool = False  # the time budget ran out

    @property
    def failed(self) -> list[LabRun]:
        return [r for r in self.runs if r.status not in ("ok", "unsupported")]


def stored_runs(point: LabPoint, out: Path, cpu: CpuBudget) -> int:
    """Runs of ``point`` already in its sweep directory (any status: a failed run is
    an answer too, and retrying it forever would not fit the time budget)."""
    return len(SweepStore(point.directory(out, cpu)).result_files_of(point.spec))


def run_lab(points: Sequence[LabPoint], out: Path, cpu: CpuBudget, runs: int, *,
            probe_runs: int = 1, max_minutes: float | None = None,
            runner: Runner = run_demo,
            progress: Callable[[str], None] = lambda _: None) -> LabOutcome:
    """Run every point ``runs`` times (probes ``probe_runs``), interleaved, resuming
    what is stored; stop starting runs once ``max_minutes`` have passed."""
    if runs < 1:
        raise LabError(f"runs must be at least 1. Received: runs={runs}")
    outcome = LabOutcome()
    t0 = time.monotonic()
    for r in range(1, runs + 1):
        for p in points:
            wanted = min(r, probe_runs) if p.kind == "probe" else r
            have = stored_runs(p, out, cpu)
            if have >= wanted:
                outcome.skipped += r == 1 and have > 0
                continue
            if max_minutes is not None and time.monotonic() - t0 > max_minutes * 60:
                outcome.stopped_early = True
                progress(f"time budget of {max_minutes:g} min spent: stopping (re-run to "
                         f"resume)")
                return outcome
            shape = LinkShape(rate_bps=p.rate_bps)
            total = probe_runs if p.kind == "probe" else runs
            progress(f"[run {have + 1}/{total}] {p.label()}")
            started = time.monotonic()
            demo = runner(p.spec, p.directory(out, cpu), shape, cpu=cpu,
                          progress=lambda m: progress(f"    {m}"))
            status = demo.result.status if demo.result is not None else "no result"
            outcome.runs.append(LabRun(p, have + 1, status, time.monotonic() - started,
                                       demo.clean))
            step = (f", step {demo.result.figures.step_time.median_s * 1e3:.1f} ms"
                    if demo.result is not None and demo.result.figures is not None else "")
            progress(f"    -> {status}{step} ({time.monotonic() - started:.0f} s)")
    return outcome
