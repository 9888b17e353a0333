"""The nightly job: run the benchmark matrix, store it, compare, report.

1. ``pytest benchmarks/ --benchmark-only`` in a child process group with a hard
   timeout (results saved in the nightly's sweep directory, pytest-benchmark JSON
   beside them and autosaved in .benchmarks/ for ``--benchmark-compare``);
2. the sweep is ingested into the history store, tagged ``nightly``;
3. it is compared with the previous nightly *of the same machine* (``machine_id``:
   same hardware). Software differences (TensorFlow, drivers, variables) are not
   filtered out, since finding what they cost is the point, but they are listed loudly;
4. Markdown (``nightly.md``) and a trend plot (``trend.png``) are written.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from bench.env import REPO_ROOT, now_iso
from bench.exits import Exit
from bench.launch.launcher import kill_group
from bench.regress.compare import DEFAULT_ALPHA, DEFAULT_METHOD, Report, Thresholds, compare
from bench.regress.history import IngestReport, Selection, Sweep, open_history
from bench.regress.render import as_markdown
from bench.regress.trend import plot_trend

NIGHTLY_TAG = "nightly"
DEFAULT_TIMEOUT_S = 3600.0


@dataclass
class NightlyOutcome:
    out: Path
    ingest: IngestReport
    machine_id: str | None
    baseline: Sweep | None  # the newest of the baseline nightlies
    report: Report | None
    markdown: Path
    plot: Path | None
    pytest_rc: int | None  # None when the matrix was not run by this invocation

    @property
    def exit_code(self) -> int:
        if self.report is not None and self.report.regressed:
            return Exit.REGRESSION
        return Exit.RUNS_FAILED if self.pytest_rc not in (None, 0) else Exit.OK


def run_matrix(out: Path, pytest_args: list[str], timeout_s: float = DEFAULT_TIMEOUT_S) -> int:
    """Run the pytest-benchmark matrix into sweep directory ``out``; pytest's exit code."""
    out.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pytest", str(REPO_ROOT / "benchmarks"), "--benchmark-only",
           f"--stratbench-out={out}", f"--benchmark-json={out / 'benchmark.json'}",
           "--benchmark-autosave", *pytest_args]
    print("nightly: " + " ".join(cmd), flush=True)
    proc = subprocess.Popen(cmd, cwd=REPO_ROOT, start_new_session=True,
                            stdin=subprocess.DEVNULL)
    try:
        return proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        print(f"nightly: the matrix exceeded {timeout_s:g} s; killed", file=sys.stderr)
        return -9
    finally:
        kill_group(proc)  # nothing outlives the job, even on Ctrl-C


def report_nightly(out: Path, *, history_path: Path | None = None,
                   thresholds: Thresholds | None = None, method: str = DEFAULT_METHOD,
                   alpha: float = DEFAULT_ALPHA, pytest_rc: int | None = None,
                   baseline_runs: int = 1) -> NightlyOutcome:
    """Ingest ``out``, compare with the previous nightly of the same machine, write reports.

    ``baseline_runs`` > 1 pools the windows of that many previous nightlies: the
    baseline then holds the night-to-night drift too, fewer false alarms on a noisy
    machine, at the price of blurring a regression that landed in one of them.
    """
    with open_history(history_path) as h:
        ingest = h.ingest(out, tag=NIGHTLY_TAG)
        sweep_id = h.sweep_of(out)
        current, _ = h.results(Selection({"sweep": str(sweep_id)}))
        machine = next((r.environment.get("machine_id") for r in current
                        if r.environment.get("machine_id")), None)
        same_machine = Selection({"tag": NIGHTLY_TAG, **({"machine": machine} if machine
                                                         else {})})
        mine = [s for s in h.sweeps(same_machine) if s.id == sweep_id]
        earlier = [s for s in h.sweeps(same_machine) if s.id != sweep_id
                   and (not mine or s.started_at < mine[0].started_at)]
        pooled = earlier[-baseline_runs:]
        baseline = pooled[-1] if pooled else None
        base_results = [r for s in pooled
                        for r in h.results(Selection({"sweep": str(s.id)}))[0]]
        trend_rows = h.rows(same_machine)
    report = None
    if baseline is not None and base_results and current:
        label = baseline.path if len(pooled) == 1 else \
            f"{len(pooled)} nightlies up to {baseline.path}"
        report = compare(base_results, current, baseline_label=f"nightly {label}",
                         current_label=f"nightly {out}", thresholds=thresholds,
                         method=method, alpha=alpha)
    plot = plot_trend(trend_rows, out / "trend.png",
                      title=f"nightly throughput, machine {machine}")
    outcome = NightlyOutcome(out=out, ingest=ingest, machine_id=machine, baseline=baseline,
                             report=report, markdown=out / "nightly.md", plot=plot,
                             pytest_rc=pytest_rc)
    outcome.markdown.write_text(nightly_markdown(outcome), encoding="utf-8")
    return outcome


def nightly_markdown(o: NightlyOutcome) -> str:
    lines = [f"# stratbench nightly, {now_iso()}", "",
             f"- sweep: `{o.out}` (machine `{o.machine_id}`)",
             f"- stored in history: {o.ingest.added} new, {o.ingest.already} already there, "
             f"{len(o.ingest.skipped)} unreadable"]
    lines += [f"  - skipped `{why}`" for why in o.ingest.skipped]
    if o.pytest_rc is not None:
        lines.append(f"- benchmark run: pytest exit code {o.pytest_rc}"
                     + ("" if o.pytest_rc == 0 else " (some configurations failed)"))
    if o.baseline is None:
        lines += ["", "No earlier nightly of this machine in the history: this run is the "
                      "baseline for the next one.", ""]
    elif o.report is not None:
        lines += ["", as_markdown(o.report)]
    if o.plot is not None:
        lines += ["", f"![throughput over time]({o.plot.name})", ""]
    return "\n".join(lines) + "\n"
