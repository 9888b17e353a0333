"""The nightly job: run the benchmark matrix, store it, compare, report.

1. ``pytest benchmarks/ --benchmark-only`` in a child process group with a hard
   timeout: every configuration is measured in ``runs`` separate processes (2 by
   default, in rounds: every configuration once, then again), results saved in the
   nightly's sweep directory, pytest-benchmark JSON beside them;
2. the sweep is ingested into the history store, tagged ``nightly``;
3. it is compared with a baseline pooling the last ``baseline_nightlies`` nightlies
   (5 by default) *of the same hardware* (``machine_id``): a TensorFlow or driver
   upgrade keeps the baseline, since finding what it costs is the point, and every
   software difference is listed loudly. Pooling puts the night-to-night drift into
   the baseline: each run is labelled with its nightly, so the statistics measure
   that drift and use it when it is larger than the run-to-run noise;
4. Markdown (``nightly.md``) and a trend plot (``trend.png``) are written.

Exit code (``NightlyOutcome.exit_code``): regression 4, else runs failed 3, else
cannot tell 5 (the noise hides a change of the threshold's size, or there is no
baseline yet), else 0.

The A/B nightly (``bench nightly`` with sides) instead runs ``bench ab``'s sessions:
tonight's environment against a pinned one, interleaved, so the machine's drift
cancels. Each configuration's ratio is stored in the history with both sides'
identities (``report_ab_nightly``), and the stored ratio series is searched for steps
no single night could call (``bench.regress.changes``). Its exit code is ``bench
ab``'s: 0 SAME or IMPROVED, 4 REGRESSED, 5 UNKNOWN, 3 runs failed.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.env import REPO_ROOT, fingerprint, now_iso, stored_machine_id
from bench.exits import Exit
from bench.launch.launcher import process_group
from bench.regress.changes import DEFAULT_MIN_NIGHTS, Series, describe_step, find_changes
from bench.regress.compare import DEFAULT_ALPHA, Report, Thresholds, compare
from bench.regress.history import AbRecord, IngestReport, Selection, Sweep, open_history
from bench.regress.interleave import BASELINE, CANDIDATE, Session, Side, session_exit
from bench.regress.options import NIGHTLY_BASELINE_NIGHTLIES, NIGHTLY_RUNS, NIGHTLY_TIMEOUT_S
from bench.regress.render import as_markdown
from bench.regress.trend import plot_trend
from bench.results.levels import DEFAULT_POWER
from bench.results.store import SweepStore

NIGHTLY_TAG = "nightly"
# Defined in bench.regress.options, which bench nightly's parser reads without scipy.
DEFAULT_TIMEOUT_S = NIGHTLY_TIMEOUT_S
DEFAULT_RUNS = NIGHTLY_RUNS
DEFAULT_BASELINE_NIGHTLIES = NIGHTLY_BASELINE_NIGHTLIES


@dataclass
class NightlyOutcome:
    out: Path
    ingest: IngestReport
    machine_id: str | None
    baseline: list[Sweep] = field(default_factory=list)  # pooled nightlies, oldest first
    report: Report | None = None
    markdown: Path | None = None
    plot: Path | None = None
    pytest_rc: int | None = None  # None when the matrix was not run by this invocation

    @property
    def exit_code(self) -> Exit:
        """REGRESSION, else RUNS_FAILED, else CANNOT_TELL (no baseline counts), else OK."""
        if self.report is not None and self.report.regressed:
            return Exit.REGRESSION
        if self.pytest_rc not in (None, 0):
            return Exit.RUNS_FAILED
        if self.report is None or self.report.exit_code == Exit.CANNOT_TELL:
            return Exit.CANNOT_TELL
        return Exit.OK


def run_matrix(out: Path, pytest_args: list[str], timeout_s: float = DEFAULT_TIMEOUT_S,
               runs: int = DEFAULT_RUNS) -> int:
    """Run the pytest-benchmark matrix into sweep directory ``out``; pytest's exit code."""
    out.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pytest", str(REPO_ROOT / "benchmarks"), "--benchmark-only",
           f"--stratbench-out={out}", f"--stratbench-runs={runs}",
           f"--benchmark-json={SweepStore(out).benchmark_json}", "--benchmark-autosave",
           *pytest_args]
    print("nightly: " + " ".join(cmd), flush=True)
    # The group is killed as the block ends: nothing outlives the job, even on Ctrl-C.
    with process_group(cmd, cwd=REPO_ROOT, stdin=subprocess.DEVNULL) as proc:
        try:
            return proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            print(f"nightly: the matrix exceeded {timeout_s:g} s; killed", file=sys.stderr)
            return -9


def report_nightly(out: Path, *, history_path: Path | None = None,
                   thresholds: Thresholds | None = None, alpha: float = DEFAULT_ALPHA,
                   power: float = DEFAULT_POWER, pytest_rc: int | None = None,
                   baseline_nightlies: int = DEFAULT_BASELINE_NIGHTLIES,
                   plot: bool = True) -> NightlyOutcome:
    """Ingest ``out``, compare with the last nightlies of the same hardware, write reports.

    The baseline pools up to ``baseline_nightlies`` earlier nightlies of the same
    ``machine_id``; each run keeps the label of its nightly (see the module docstring).
    """
    if baseline_nightlies < 1:
        raise ValueError(f"baseline_nightlies must be >= 1. Received: {baseline_nightlies!r}")
    with open_history(history_path) as h:
        ingest = h.ingest(out, tag=NIGHTLY_TAG)
        sweep_id = h.sweep_of(out)
        current, _ = h.results(Selection({"sweep": str(sweep_id)}))
        ids = [r.machine_id for r in h.rows(Selection({"sweep": str(sweep_id)}))
               if r.machine_id]
        machine = max(set(ids), key=ids.count) if ids else None
        same_machine = Selection({"tag": NIGHTLY_TAG, **({"machine": machine} if machine
                                                         else {})})
        sweeps = h.sweeps(same_machine)
        mine = [s for s in sweeps if s.id == sweep_id]
        earlier = [s for s in sweeps if s.id != sweep_id
                   and (not mine or s.started_at < mine[0].started_at)]
        pooled = earlier[-baseline_nightlies:]
        base_results, base_groups = [], []
        for s in pooled:
            found, _, _ = h.results_by_sweep(Selection({**same_machine.filters,
                                                        "sweep": str(s.id)}))
            base_results += found
            base_groups += [s.id] * len(found)
        trend_rows = h.rows(same_machine)
    report = None
    if pooled and base_results and current:
        label = pooled[-1].path if len(pooled) == 1 else \
            f"{len(pooled)} nightlies, {pooled[0].path} to {pooled[-1].path}"
        report = compare(base_results, current, baseline_label=f"nightly {label}",
                         current_label=f"nightly {out}", thresholds=thresholds, alpha=alpha,
                         power=power, baseline_groups=base_groups,
                         current_groups=[sweep_id] * len(current))
    store = SweepStore(out)
    png = plot_trend(trend_rows, store.trend_plot,
                     title=f"nightly throughput, machine {machine}") if plot else None
    outcome = NightlyOutcome(out=out, ingest=ingest, machine_id=machine, baseline=pooled,
                             report=report, markdown=store.nightly_markdown, plot=png,
                             pytest_rc=pytest_rc)
    store.nightly_markdown.write_text(nightly_markdown(outcome), encoding="utf-8")
    return outcome


def nightly_markdown(o: NightlyOutcome) -> str:
    lines = [f"# stratbench nightly, {now_iso()}", ""]
    if o.report is not None:  # the comparison first: its software warning leads
        lines += [as_markdown(o.report), ""]
    lines += [f"- sweep: `{o.out}` (machine `{o.machine_id}`)",
              f"- stored in history: {o.ingest.added} new, {o.ingest.already} already there, "
              f"{len(o.ingest.skipped)} unreadable"]
    lines += [f"  - skipped `{why}`" for why in o.ingest.skipped]
    if o.pytest_rc is not None:
        lines.append(f"- benchmark run: pytest exit code {o.pytest_rc}"
                     + ("" if o.pytest_rc == 0 else " (some configurations failed)"))
    if not o.baseline:
        lines += ["", "No earlier nightly of this machine in the history: nothing was "
                      "compared (exit code 5, cannot tell). This run is the baseline for the "
                      "next one.", ""]
    lines.append(f"- exit code {int(o.exit_code)} ({o.exit_code.name.lower()})")
    if o.plot is not None:
        lines += ["", f"![throughput over time]({o.plot.name})", ""]
    return "\n".join(lines) + "\n"


# -- the A/B nightly: tonight's environment against a pinned one, in one session ---------
def side_identity(side: Side, environment: Mapping[str, Any]) -> dict[str, Any]:
    """What the history keeps of a side: what it set (interpreter, env, params) and what
    its runs say they ran on (interpreter, TensorFlow, Python, software id, commit)."""
    return {**side.identity(), "interpreter": environment.get("interpreter"),
            "tensorflow": environment.get("tensorflow"),
            "python_version": environment.get("python"),
            "software_id": environment.get("software_id"),
            "git_commit": (environment.get("git") or {}).get("commit")}


def ab_record(session: Session, out: Path, *, started_at: str, threshold: float,
              alpha: float, tag: str | None = NIGHTLY_TAG,
              machine: str | None = None) -> AbRecord:
    """One configuration's session as a night of its ratio series. ``machine`` is the
    fallback when no run of the session left a fingerprint (runs failed)."""
    envs = session.environments
    found = [stored_machine_id(envs[side]) for side in (CANDIDATE, BASELINE) if side in envs]
    d = session.decision if session.failed is None else None
    return AbRecord(
        session=str(out.resolve()), started_at=started_at, spec_key=session.spec.key(),
        label=session.spec.label(), machine_id=next((m for m in found if m), machine),
        verdict=d.verdict.value if d is not None else "failed",
        pairs=len(session.log_ratios), threshold=threshold, alpha=alpha,
        baseline=side_identity(session.baseline, envs.get(BASELINE, {})),
        candidate=side_identity(session.candidate, envs.get(CANDIDATE, {})),
        ratio=d.ratio if d is not None else None, low=d.low if d is not None else None,
        high=d.high if d is not None else None, sd_log=d.sd_log if d is not None else None,
        tag=tag)


@dataclass
class AbNightlyOutcome:
    """An A/B nightly: tonight's sessions, what was stored, the steps of their series."""

    out: Path
    sessions: list[Session]
    records: list[AbRecord]
    added: int
    series: list[Series]  # tonight's configurations' series, with the steps found
    markdown: Path | None = None

    @property
    def exit_code(self) -> Exit:
        """The sessions' verdicts (``bench ab``'s codes): the history's steps are reported,
        not judged, so each exit code keeps its one meaning."""
        return session_exit(self.sessions)


def report_ab_nightly(out: Path, sessions: list[Session], *, started_at: str,
                      threshold: float, alpha: float, history_path: Path | None = None,
                      min_nights: int = DEFAULT_MIN_NIGHTS) -> AbNightlyOutcome:
    """Store tonight's sessions in the history, look for steps in their ratio series and
    write ``nightly.md`` into ``out``."""
    envs = [s.environments for s in sessions]
    machine = None if any(envs) else str(fingerprint()["machine_id"])
    records = [ab_record(s, out, started_at=started_at, threshold=threshold, alpha=alpha,
                         machine=machine) for s in sessions]
    with open_history(history_path) as h:
        added = h.add_ab(records)
        stored = h.ab_records()
    tonight = {(r.spec_key, r.machine_id) for r in records}
    series = [s for s in find_changes(stored, alpha=alpha, threshold=threshold,
                                      min_nights=min_nights)
              if (s.spec_key, s.machine_id) in tonight]
    markdown = SweepStore(out).nightly_markdown
    outcome = AbNightlyOutcome(out, sessions, records, added, series, markdown=markdown)
    markdown.write_text(ab_nightly_markdown(outcome), encoding="utf-8")
    return outcome


def ab_nightly_markdown(o: AbNightlyOutcome) -> str:
    """Tonight's verdicts, both sides, and the steps of the stored series."""
    lines = [f"# stratbench A/B nightly, {now_iso()}", ""]
    if o.sessions:
        s0 = o.sessions[0]
        lines += [f"- baseline: {s0.baseline.describe()}",
                  f"- candidate: {s0.candidate.describe()}", ""]
    lines += ["| configuration | verdict | candidate/baseline | pairs |", "|---|---|---|---|"]
    for r in o.records:
        ratio = (f"{r.ratio:.3f} [{r.low:.3f}, {r.high:.3f}]"
                 if r.ratio is not None and r.low is not None and r.high is not None else "-")
        lines.append(f"| {r.label} | {r.verdict.upper()} | {ratio} | {r.pairs} |")
    steps = [describe_step(s, step) for s in o.series for step in s.steps]
    nights = ", ".join(f"{s.label}: {len(s.records)}" for s in o.series)
    lines += ["", f"Steps in the stored ratio series (nights: {nights or 'none'}):"
                  + ("" if steps else " none found.")]
    lines += ["", *[f"- {line}" for line in steps]] if steps else []
    lines += ["", f"- sessions stored in the history: {o.added} new",
              f"- exit code {int(o.exit_code)} ({o.exit_code.name.lower()})"]
    return "\n".join(lines) + "\n"
