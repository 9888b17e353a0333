"""How a run's global figures come from its processes' own figures.

Each strategy names its rule through its ``combiner`` trait (bench/strategies/);
the arithmetic lives here, beside the schema it fills, so that the strategy
registry stays a table of traits that imports no stage. The words stored with the
result (``Figures.combination``) start from the strategy's ``combination`` trait.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Callable

from bench.registry import Registry
from bench.results.concurrency import as_windows, concurrent_windows, spans
from bench.results.samples import coefficient_of_variation
from bench.results.schema import Figures, TaskFigures
from bench.spec import RunSpec
from bench.strategies import STRATEGIES

# How a combination that is not a figure of the copies running together starts.
NOT_CONCURRENT = "NOT CONCURRENT"

# (spec, main task's figures, every task's figures, the strategy's description) -> run's.
Combiner = Callable[[RunSpec, Figures, list[TaskFigures], str], Figures]


def main_task(spec: RunSpec, main: Figures, tasks: list[TaskFigures],
              described: str) -> Figures:
    """The main task's figures stand for the run (synchronous and single-process runs:
    every step of the main task processes the global batch)."""
    return dataclasses.replace(main, tasks=tasks, combination=described)


def concurrent_copies(spec: RunSpec, main: Figures, tasks: list[TaskFigures],
                      described: str) -> Figures:
    """Independent copies: their concurrent throughput, as windows every judge reads
    (compare, pytest-benchmark, reports), never one copy's own."""
    replicas = spec.replicas
    copies = [spans(t.windows) for t in tasks]
    timed = [c for c in copies if c is not None]
    combined = concurrent_windows(timed) if len(timed) == len(tasks) else []
    if not combined:
        # Without concurrent windows there is no figure of the copies running
        # together: the sum of their medians is kept, and the combination says so.
        total = sum(t.throughput or 0.0 for t in tasks)
        why = ("some copy stored no window times" if len(timed) < len(tasks) else
               "no window of the first copy overlapped every copy's windows")
        return dataclasses.replace(
            main, tasks=tasks, global_throughput=total,
            per_replica_throughput=total / replicas,
            achieved_flops_per_s=main.model.train_flops_per_example * total,
            combination=f"{NOT_CONCURRENT} ({why}): global throughput = sum of the "
                        f"copies' median window throughputs")
    windows = as_windows(combined, tasks[0].windows, spec.examples_per_step, replicas)
    rates = [w.global_throughput for w in windows]
    total = statistics.median(rates)
    return dataclasses.replace(
        main, tasks=tasks, windows=windows, global_throughput=total,
        per_replica_throughput=total / replicas,
        achieved_flops_per_s=main.model.train_flops_per_example * total,
        throughput_cv=coefficient_of_variation(rates),
        combination=f"{described} ({len(windows)} of {len(tasks[0].windows)} "
                    f"windows of the first copy ran while every copy measured)")


def ran_concurrently(figures: Figures) -> bool:
    """Whether a run's global figure is of its processes running together (False for
    copies that never measured at the same time: their sum is no ceiling)."""
    return not (figures.combination or "").startswith(NOT_CONCURRENT)


COMBINERS: Registry[Combiner] = Registry("combiner")
COMBINERS.register("main_task", main_task)
COMBINERS.register("concurrent_copies", concurrent_copies)


def combine(spec: RunSpec, main: Figures, tasks: list[TaskFigures]) -> Figures:
    """The run's figures from the main task's and every task's own, by the rule its
    strategy's ``combiner`` names."""
    factory = STRATEGIES.get(spec.strategy)
    return tasks_energy(COMBINERS.get(factory.combiner)(spec, main, tasks,
                                                        factory.combination), tasks)


def tasks_energy(figures: Figures, tasks: list[TaskFigures]) -> Figures:
    """Energy of a multi-process run: NVML counts each task's own GPUs, so window i's
    energy is the sum of every task's window i; RAPL counts the whole socket, every
    local process included, so the main task's reading already stands for the run."""
    if figures.energy_source != "nvml" or len(tasks) < 2:
        return figures
    counts = {len(t.windows) for t in tasks if t.windows}
    per_window = [[w.energy_j for w in t.windows] for t in tasks if t.windows]
    if len(counts) != 1 or any(e is None for es in per_window for e in es) or \
            counts != {len(figures.windows)}:
        return dataclasses.replace(
            figures, energy_j=None, joules_per_example=None, mean_power_w=None,
            energy_reason="not every task metered the same windows of its GPUs",
            windows=[dataclasses.replace(w, energy_j=None, joules_per_example=None)
                     for w in figures.windows])
    windows = []
    for i, w in enumerate(figures.windows):
        joules = sum(es[i] or 0.0 for es in per_window)
        windows.append(dataclasses.replace(w, energy_j=joules,
                                           joules_per_example=joules / w.examples))
    total = sum(w.energy_j or 0.0 for w in windows)
    examples = sum(w.examples for w in windows)
    wall = sum(w.wall_s for w in windows)
    return dataclasses.replace(figures, windows=windows, energy_j=total,
                               joules_per_example=total / examples if examples else None,
                               mean_power_w=total / wall if wall else None)
