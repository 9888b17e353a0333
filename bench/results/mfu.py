"""The MFU of a multi-process run, from the peaks its training tasks measured.

Each training task stores the achievable and theoretical peaks of the hardware it
could use (its cores or GPU). The run's peak adds up the hardware it used: tasks
on disjoint hardware add up; tasks sharing a GPU, or a core set whose threads they
do not split, count its peaks once; tasks splitting a core set's threads each
measured the peak of their share, and those add up. A task on its own host (a
multi-host run) is its own hardware. Local runs (bench/launch/launcher.py) and
multi-host runs (bench/launch/worker.py) both use ``run_mfu``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from bench.hardware import sustained_clock
from bench.results.payload import HostReport
from bench.results.schema import Figures
from bench.tasks import Task


@dataclass(frozen=True)
class TaskPeak:
    """One training task's peaks, and the hardware they are the peaks of."""

    task: str
    achievable: float | None  # FLOP/s; None: not measured
    theoretical: float | None = None
    fault: str | None = None  # why this task's achievable peak cannot be trusted
    # "" for a task on the launcher's machine; the task's name where it is a host of
    # its own (a multi-host run), which its faults then name.
    host: str = ""
    cores: tuple[int, ...] = ()  # empty: every core
    gpus: tuple[str, ...] = ()
    intra_threads: int = 0  # 0: TensorFlow's default (as many as the cores)

    @classmethod
    def of_task(cls, task: Task, figures: Figures) -> TaskPeak:
        """The peaks a local task stored in its figures, on the hardware it was given."""
        return cls(task.name, figures.peak_flops_per_s, figures.theoretical_peak_flops_per_s,
                   figures.peak_fault, cores=task.cores, gpus=task.gpus,
                   intra_threads=task.intra_threads)

    @classmethod
    def of_host(cls, report: HostReport) -> TaskPeak:
        """The peaks a host reported for the task it ran, on its own hardware."""
        name = report.task_figures.task
        return cls(name, report.peak_flops_per_s, report.theoretical_peak_flops_per_s,
                   report.peak_fault, host=name)


def run_mfu(figures: Figures, peaks: list[TaskPeak]) -> Figures:
    """``figures`` with MFU over the peaks of the hardware the run's training tasks used.

    Without an achievable peak for every piece of hardware there is no MFU. MFU above
    100% is never stored: a task whose own peak had a fault, or a run above the sum of
    the peaks, leaves ``mfu`` empty and says why in ``peak_fault``. The theoretical
    peak counts once per piece of hardware, and only where it is known for every one
    and reads at least the achievable total.
    """
    groups: dict[tuple[str, tuple[int, ...], tuple[str, ...]], list[TaskPeak]] = {}
    for p in peaks:
        groups.setdefault((p.host, p.cores, p.gpus), []).append(p)
    achievable: list[float] = []
    theoretical: list[float | None] = []
    faults: list[str] = []
    for (_, cores, gpus), members in groups.items():
        measured = [m.achievable for m in members if m.achievable]
        threads = [m.intra_threads for m in members]
        split = not gpus and all(threads) and sum(threads) <= len(cores)
        if measured:
            achievable.append(sum(measured) if split else max(measured))
        theo = [m.theoretical or 0.0 for m in members]
        theoretical.append(max(theo) if all(theo) else None)
        faults += [f"{m.task}: {m.fault}" if m.host else m.fault for m in members if m.fault]
    if not groups or len(achievable) < len(groups):
        return replace(figures, mfu=None, peak_flops_per_s=None, mfu_theoretical=None,
                       theoretical_peak_flops_per_s=None, peak_fault="; ".join(faults) or None)
    achieved = figures.achieved_flops_per_s
    total = sum(achievable)
    if not faults and achieved > total:
        hosts = any(p.host for p in peaks)
        faults.append(f"no MFU: the run achieved {achieved:.4g} FLOP/s, above the sum of "
                      f"its {'hosts' if hosts else 'tasks'}' achievable peaks ({total:.4g} "
                      f"FLOP/s): those peaks read low"
                      f"{'' if hosts else ' for the hardware the tasks shared'}")
    theo_total = sum(t for t in theoretical if t) if all(theoretical) else None
    usable = theo_total if theo_total and theo_total >= total and achieved <= theo_total \
        else None
    return replace(figures, peak_flops_per_s=total, mfu=None if faults else achieved / total,
                   theoretical_peak_flops_per_s=usable,
                   mfu_theoretical=achieved / usable if usable else None,
                   peak_fault="; ".join(faults) or None)


def at_sustained_clock(figures: Figures, gpu_state: dict[str, Any]) -> Figures:
    """``figures`` with the SM clock the windows sustained and the MFU against the
    theoretical peak at that clock (the datasheet's is at the maximum clock); unchanged
    without GPU state, a maximum clock or a theoretical peak."""
    sustained = sustained_clock(gpu_state)
    maxima = [st["sm_clock_max_mhz"] for st in gpu_state.get("start") or []
              if st.get("sm_clock_max_mhz")]
    if sustained is None or not maxima:
        return figures
    peak = figures.theoretical_peak_flops_per_s
    at_clock = peak * sustained / max(maxima) if peak else None
    return replace(figures, sustained_sm_clock_mhz=sustained,
                   mfu_at_clock=figures.achieved_flops_per_s / at_clock if at_clock else None)
