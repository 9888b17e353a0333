"""Check the scaling projection against real two-host runs on shaped links.

    .venv/bin/python -m scripts.projection_check [--out DIR] [--rates 1gbit,10gbit]
        [--models mlp,resnet50] [--quick]

Per model (MLP, and ResNet50 at a reduced 32x32 input): a single-replica run at the
per-replica batch, pinned to one core like each emulated host (the projection's
compute time and gradient bytes). Per model and link
speed: an all-reduce probe over two emulated hosts on that link (``bench
cluster-demo`` machinery: network namespaces, tc-shaped links), to which alpha and B
are fitted, and the two-host MultiWorkerMirrored training run on the same link.
Prints projected vs measured throughput and the error for every point, and where the
error exceeds 10% which term of the model is off. Needs root (namespaces); run under
the TensorFlow lock on shared machines. Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from bench.launch.netns import LinkShape, parse_rate, rate_text
from bench.results.schema import RunResult
from bench.results.store import SweepStore, load, new_sweep_dir
from bench.spec import RunSpec
from reports.projection import (
    TOLERANCE,
    Check,
    Projection,
    check,
    inputs_from_result,
    link_from_probe,
    project,
)

MiB = 2**20
SINGLE_CORE = 0  # the first emulated host's core

# The measured windows: long enough for a few ResNet50 steps on a shaped link.
WINDOWS: dict[str, Any] = {"repeats": 3, "max_seconds": 3.0, "min_steps": 4,
                           "max_steps": 400, "warmup_steps": 3, "timeout_s": 600.0,
                           "optimizer": "sgd", "learning_rate": 0.01}
QUICK: dict[str, Any] = {"repeats": 2, "max_seconds": 0.5, "min_steps": 2,
                         "max_steps": 50, "warmup_steps": 2, "timeout_s": 300.0,
                         "optimizer": "sgd", "learning_rate": 0.01}
MODELS: dict[str, dict[str, Any]] = {
    "mlp": {"workload": "mlp", "batch": 64},
    "resnet50": {"workload": "resnet50", "batch": 8,
                 "params": {"image_size": 32, "classes": 10}},
}


class Runner(Protocol):
    """How the script gets its measurements (a fake one tests the plumbing)."""

    def single(self, spec: RunSpec, out: Path) -> RunResult | None: ...

    def demo(self, spec: RunSpec, out: Path, shape: LinkShape) -> RunResult | None: ...


class RealRunner:
    """Real runs: one replica pinned to one core, two hosts through the namespace demo."""

    def __init__(self, progress: Callable[[str], None]) -> None:
        self.progress = progress

    def single(self, spec: RunSpec, out: Path) -> RunResult | None:
        from bench.launch.sweep import run_replicate

        store = SweepStore(out)
        if not store.has_result(spec):
            # One core, like each emulated host: the run's process inherits this
            # process's affinity (a single-process run is not pinned by the launcher).
            self.progress(f"single replica on core {SINGLE_CORE}: {spec.label()}")
            before = os.sched_getaffinity(0)
            os.sched_setaffinity(0, {SINGLE_CORE})
            try:
                run_replicate(store, spec)
            finally:
                os.sched_setaffinity(0, before)
        return load(store.paths(spec).result)

    def demo(self, spec: RunSpec, out: Path, shape: LinkShape) -> RunResult | None:
        from bench.launch.cluster_demo import run_demo

        self.progress(f"two hosts, {shape.label()}: {spec.label()}")
        outcome = run_demo(spec, out, shape, progress=lambda m: self.progress(f"  {m}"))
        if not outcome.clean:
            self.progress(f"  note: not every host ended by itself: {outcome.hosts}")
        return outcome.result


def next_pow2(n: float) -> int:
    p = 1024
    while p < n:
        p *= 2
    return p


@dataclass
class Row:
    model: str
    link: str
    check: Check | None
    projection: Projection | None
    problem: str = ""


def run_check(models: Sequence[str], rates: Sequence[float], out: Path, runner: Runner,
              quick: bool = False, progress: Callable[[str], None] = print) -> list[Row]:
    """Measure and project every (model, link rate); one row each."""
    knobs = QUICK if quick else WINDOWS
    rows = []
    for model in models:
        base = {**MODELS[model], "size": "default", **knobs}
        single_spec = RunSpec(strategy="one_device", devices=1, **base)
        single = runner.single(single_spec, out / "single")
        if single is None or single.status != "ok" or single.figures is None:
            why = single.reason if single else "no result"
            rows += [Row(model, rate_text(r), None, None, f"single-replica run: {why}")
                     for r in rates]
            continue
        inputs = inputs_from_result(single)
        grad_bytes = single.figures.model.grad_bytes_per_step
        for rate in rates:
            shape = LinkShape(rate_bps=rate)
            link_dir = out / f"{model}-{rate_text(rate).replace(' ', '').replace('/', 'p')}"
            probe_spec = RunSpec(strategy="multi_worker_mirrored", devices=2, mode="allreduce",
                                 batch_mode="per_replica", workload=base["workload"],
                                 size="default", params=base.get("params", {}), batch=1,
                                 allreduce_max_bytes=min(128 * MiB, next_pow2(grad_bytes)),
                                 warmup_steps=3, min_steps=5, max_steps=50,
                                 max_seconds=0.5 if quick else 1.0, timeout_s=900.0)
            probe = runner.demo(probe_spec, link_dir / "probe", shape)
            if probe is None or probe.status != "ok" or probe.allreduce is None:
                why = probe.reason if probe else "no result"
                rows.append(Row(model, shape.label(), None, None, f"probe: {why}"))
                continue
            projection = project(inputs, link_from_probe(probe.allreduce, inputs.grad_bytes),
                                 512)
            train_spec = RunSpec(strategy="multi_worker_mirrored", devices=2,
                                 batch_mode="per_replica", **base)
            run = runner.demo(train_spec, link_dir / "train", shape)
            if run is None or run.status != "ok" or run.figures is None:
                why = run.reason if run else "no result"
                rows.append(Row(model, shape.label(), None, projection, f"run: {why}"))
                continue
            rows.append(Row(model, shape.label(), check(
                projection, run.replicas, run.figures.global_throughput,
                f"{model} {shape.label()}"), projection))
    return rows


def table(rows: Sequence[Row]) -> str:
    """The projected-vs-measured table, then each row's fitted link and diagnosis."""
    head = (f"{'model':<9} {'link':<11} {'n':>2} {'measured ex/s':>14} "
            f"{'projected ex/s':>15} {'band (full overlap)':>20} {'error':>8}  within "
            f"{TOLERANCE:.0%}?")
    lines = [head, "-" * len(head)]
    notes = []
    for r in rows:
        if r.check is None:
            lines.append(f"{r.model:<9} {r.link:<11}  -  {r.problem}")
            continue
        c = r.check
        ok = "yes" if abs(c.error) <= TOLERANCE else "NO"
        lines.append(f"{r.model:<9} {r.link:<11} {c.n:>2} {c.measured:>14,.1f} "
                     f"{c.projected:>15,.1f} {c.projected_high:>20,.1f} {c.error:>+8.1%}  {ok}")
        assert r.projection is not None
        link, inputs = r.projection.link, r.projection.inputs
        notes.append(f"{r.model} on {r.link}: compute {inputs.compute_s * 1e3:.2f} ms, "
                     f"S {inputs.grad_bytes / MiB:.2f} MiB, fitted alpha "
                     f"{link.alpha_s * 1e6:.1f} us, B {link.bandwidth_Bps * 8 / 1e9:.3g} "
                     f"Gbit/s ({link.source}); {c.diagnosis}")
    return "\n".join([*lines, "", *notes])


def main(argv: list[str] | None = None, runner: Runner | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=new_sweep_dir("projection-check"))
    parser.add_argument("--rates", default="1gbit,10gbit")
    parser.add_argument("--models", default="mlp,resnet50")
    parser.add_argument("--quick", action="store_true",
                        help="short windows (plumbing check, noisier figures)")
    args = parser.parse_args(argv)
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    unknown = [m for m in models if m not in MODELS]
    if unknown:
        parser.error(f"--models takes {', '.join(MODELS)}. Received: {unknown}")
    rates = [parse_rate(r) for r in args.rates.split(",") if r.strip()]
    print(f"projection check -> {args.out}; load {os.getloadavg()[0]:.2f} on "
          f"{os.cpu_count()} cores", flush=True)
    rows = run_check(models, rates, args.out, runner or RealRunner(
        lambda m: print(m, flush=True)), quick=args.quick)
    print()
    print(table(rows))
    print(f"\nload after: {os.getloadavg()[0]:.2f}")
    return 0 if all(r.check is not None for r in rows) else 3


if __name__ == "__main__":
    raise SystemExit(main())
