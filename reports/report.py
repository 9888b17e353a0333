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

from bench.results.schema import RunResult
from bench.results.store import SweepStore, load_sweep
from reports.columns import SCALING_FIGURES
from reports.configs import ConfigView, Ratio, group_configs, pool_noise
from reports.loops import LoopCost, loop_costs
from reports.machines import Machine, by_machine
from reports.recommend import Recommendation, WorkloadAnswer, answer_workload, place_of
from reports.results_table import to_frame
from reports.runs import RunView, Variant, views
from reports.scaling import Index, Scaling, scaling_of
from reports.sequential import Looks
from reports.verdicts import RuleInputs, Verdict, overhead_share, verdicts_for


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


def build_machine(machine: Machine, looks: Looks | None = None) -> MachineReport:
    """Group the machine's runs into configurations and answer per workload (each
    answer read at its place's last look, ``reports.sequential``)."""
    configs = group_configs(machine.runs)
    pool_noise(configs)
    index = Index(configs)
    scaling = {c.key: scaling_of(c, index) for c in configs}
    inputs = RuleInputs(machine=machine, index=index, scaling=scaling, runs=configs)
    verdicts = {c.key: verdicts_for(c, inputs) for c in configs}
    overhead = {c.key: v for c in configs if (v := overhead_share(c, inputs)) is not None}
    groups: dict[Variant, list[ConfigView]] = {}
    for config in configs:
        # Probe-only runs (mode "allreduce") have no training figures: they appear in
        # the all-reduce section, not as a workload to rank.
        if config.variant.mode == "train":
            groups.setdefault(config.variant, []).append(config)
    workloads = [answer_workload(v, cs, machine, scaling, inputs, looks)
                 for v, cs in sorted(groups.items(), key=lambda kv: kv[0].label())]
    costs = loop_costs(r.result for r in machine.runs)
    return MachineReport(machine, configs, workloads, scaling, verdicts, overhead, costs)


def build_from_results(results: Sequence[RunResult], source: Path,
                       warnings: Sequence[str] = (), looks: Looks | None = None
                       ) -> SweepReport:
    """A report of ``results``; runs are grouped per machine, never mixed. ``looks``:
    the alpha each answer is read at (a budgeted sweep's journal; full alpha without)."""
    machines = [build_machine(m, looks) for m in by_machine(views(results))]
    if looks is not None and looks.settled_at:
        machines = _as_settled(machines, results, looks)
    now = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    return SweepReport(source, machines, list(warnings), now)


def _when(iso: str) -> _dt.datetime | None:
    try:
        when = _dt.datetime.fromisoformat(iso)
    except ValueError:
        return None
    return when if when.tzinfo else when.replace(tzinfo=_dt.timezone.utc)


def _as_settled(machines: list[MachineReport], results: Sequence[RunResult],
                looks: Looks) -> list[MachineReport]:
    """``machines`` with each settled place's answer as its settling look read it: from
    the results finished by its settlement (``Looks.settled_at``), every configuration
    and the noise pool as they were then; the configurations' own figures stay
    those of every run."""
    then: dict[str, Recommendation] = {}
    for at in sorted(set(looks.settled_at.values())):
        until = _when(at)
        if until is None:
            continue
        stored = [r for r in results
                  if (finished := _when(r.finished_at)) is not None and finished <= until]
        for mr in (build_machine(m, looks.unsettled()) for m in by_machine(views(stored))):
            for w in mr.workloads:
                for rec in w.recommendations:
                    where = place_of(mr.machine.machine_id, w.variant, rec.ranking)
                    if looks.settled_at.get(where) == at:
                        then[where] = rec
    return [replace(mr, workloads=[replace(w, recommendations=[
        then.get(place_of(mr.machine.machine_id, w.variant, rec.ranking), rec)
        for rec in w.recommendations]) for w in mr.workloads]) for mr in machines]


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
