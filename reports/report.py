"""Build a report from a sweep directory: what every rendering of it shows.

``build(sweep_dir)`` is a pure function of the stored results: no TensorFlow, no
network. The renderings (``reports.html``, ``reports.markdown``, the CSV of
``frame``) read the ``SweepReport`` built here; ``reports.files.write`` writes them.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import pandas as pd

from bench.answers.configs import ConfigView, Ratio
from bench.answers.places import MachineAnswers, answered
from bench.answers.recommend import WorkloadAnswer
from bench.answers.runs import Machine, RunView
from bench.answers.scaling import Scaling
from bench.answers.sequential import Looks
from bench.results.schema import RunResult
from bench.results.store import SweepStore, load_sweep
from reports.columns import SCALING_FIGURES
from reports.loops import LoopCost, loop_costs
from reports.recommend import phrased
from reports.results_table import to_frame
from reports.verdicts import Verdict, overhead_share, verdicts_for


@dataclass
class MachineReport:
    """One machine's section: its configurations (every run grouped by result key),
    their scaling and verdicts, and the answer per workload."""

    machine: Machine
    configs: list[ConfigView]
    workloads: list[WorkloadAnswer]
    scaling: dict[str, Scaling]  # by result key (a configuration)
    verdicts: dict[str, list[Verdict]]
    overhead: dict[str, float]  # estimated share of step beyond ideal, by key
    # Configurations measured with both loops: what Keras fit costs over a custom loop.
    loop_costs: list[LoopCost] = field(default_factory=list)

    @property
    def problems(self) -> list[RunView]:
        """Runs without figures, in a stable order: failures first, unsupported last."""
        order = {"failed": 0, "oom": 1, "timeout": 2, "unsupported": 3}
        return sorted((r for r in self.machine.runs if r.status != "ok"),
                      key=lambda r: (order.get(r.status, 0), r.key))


@dataclass
class SweepReport:
    """Everything the renderings show about one sweep directory, per machine."""

    source: Path
    machines: list[MachineReport]
    warnings: list[str] = field(default_factory=list)
    generated_at: str = ""

    @property
    def results(self) -> list[RunResult]:
        return [r.result for m in self.machines for r in m.machine.runs]


def report_machine(answers: MachineAnswers) -> MachineReport:
    """One machine's section from its answers (``bench.answers.places``): each answer in
    sentences (``reports.recommend.phrased``), and every configuration's verdicts."""
    basis = answers.basis
    configs = list(basis.runs)
    verdicts = {c.key: verdicts_for(c, basis) for c in configs}
    overhead = {c.key: v for c in configs if (v := overhead_share(c, basis)) is not None}
    workloads = [replace(w, recommendations=[phrased(r) for r in w.recommendations])
                 for w in answers.workloads]
    costs = loop_costs(r.result for r in basis.machine.runs)
    return MachineReport(basis.machine, configs, workloads, basis.scaling, verdicts,
                         overhead, costs)


def build_from_results(results: Sequence[RunResult], source: Path,
                       warnings: Sequence[str] = (), looks: Looks | None = None
                       ) -> SweepReport:
    """A report of ``results``; runs are grouped per machine, never mixed. ``looks``:
    the alpha each answer is read at (a budgeted sweep's journal; full alpha without)."""
    machines = [report_machine(a) for a in answered(results, looks)]
    now = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    return SweepReport(source, machines, list(warnings), now)


def build(sweep_dir: Path) -> SweepReport:
    """Load ``sweep_dir`` (bad files become warnings) and build its report."""
    loaded = load_sweep(sweep_dir)
    looks = Looks.of_journal(SweepStore(sweep_dir).journal_events())
    return build_from_results(loaded.results, sweep_dir, loaded.warnings, looks)


def _ratio_columns(name: str, r: Ratio | None) -> dict[str, float | None]:
    return {name: r.value if r else None, f"{name}_low": r.low if r else None,
            f"{name}_high": r.high if r else None}


def frame(report: SweepReport) -> pd.DataFrame:
    """Every result (run) with its own figures, then its configuration's: headline over
    the runs, run-to-run noise, scaling with intervals, verdicts (the CSV)."""
    results = report.results
    base = to_frame(results)
    if base.empty:
        return base
    extra = []
    for m in report.machines:
        for c in m.configs:
            sc = m.scaling.get(c.key, Scaling())
            row: dict[str, object] = {
                "key": c.key, "machine_id": c.machine, "variant": c.variant.label(),
                "batch_mode": c.batch_mode, "per_replica_batch": c.per_replica_batch,
                "config_runs": c.n_runs, "config_throughput": c.throughput,
                "config_run_to_run_cv": c.between_cv, "config_window_cv": c.within_cv}
            for f in SCALING_FIGURES:
                row.update(_ratio_columns(f.name, f.value(sc)))
            row["overhead_share"] = m.overhead.get(c.key)
            row["verdicts"] = "; ".join(f"{v.kind} ({v.severity})"
                                        for v in m.verdicts.get(c.key, []))
            extra.append(row)
    return base.merge(pd.DataFrame(extra), on="key", how="left")
