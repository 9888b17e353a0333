"""The one owner of a sweep directory's layout, and of reading and writing results.

A sweep directory holds::

    results/<key>.json      the first run of a configuration (atomic, never overwritten)
    results/<key>.run<r>.json  its r-th run (r >= 2), in a separate process and time
    logs/<key>[.run<r>].log    the run's output (one file per task for multi-process runs)
    profiles/<key>[.run<r>]/   profiles captured after the windows
    sweep.jsonl             one line per invocation: when, what matrix, how it ended
    report/                 the HTML/Markdown/CSV report
    tensorboard/            the results as TensorBoard HParams sessions (reports.tensorboard)
    benchmark.json, nightly.md, trend.png   a nightly's pytest-benchmark file and report

Sweep directories go under ``results/`` by default (``new_sweep_dir``). Everything
else (launcher, sweep, CLI, reports, regression tracking, scripts) asks this module
for paths instead of joining names itself.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.errors import SchemaError
from bench.results.schema import RunResult
from bench.spec import RunSpec

RESULTS, LOGS, PROFILES, JOURNAL, REPORT = "results", "logs", "profiles", "sweep.jsonl", "report"
TENSORBOARD = "tensorboard"
BENCHMARK_JSON, NIGHTLY_MARKDOWN, TREND_PLOT = "benchmark.json", "nightly.md", "trend.png"
# Where sweep directories go unless a command is given one (relative to where it runs).
DEFAULT_ROOT = Path("results")


def new_sweep_dir(kind: str, root: Path = DEFAULT_ROOT) -> Path:
    """A fresh sweep directory name, ``results/<kind>-<YYYYmmdd-HHMMSS>`` (not created)."""
    return root / f"{kind}-{_dt.datetime.now():%Y%m%d-%H%M%S}"


def run_name(key: str, replicate: int = 1) -> str:
    """The name of run ``replicate`` (1-based) of configuration ``key``: its result file,
    log and profile directory are named after it, and so is its TensorBoard session."""
    if isinstance(replicate, bool) or not isinstance(replicate, int) or replicate < 1:
        raise ValueError(f"replicate must be an integer >= 1. Received: {replicate!r}")
    return key if replicate == 1 else f"{key}.run{replicate}"


@dataclass(frozen=True)
class RunPaths:
    """Where one configuration's files go inside a sweep directory."""

    result: Path
    log: Path
    profile: Path


@dataclass(frozen=True)
class SweepStore:
    """A sweep directory: paths of its parts, its results, its journal."""

    root: Path

    def paths(self, spec: RunSpec, replicate: int = 1) -> RunPaths:
        """Files of run ``replicate`` (1-based) of ``spec``."""
        name = run_name(spec.key(), replicate)
        return RunPaths(self.root / RESULTS / f"{name}.json", self.root / LOGS / f"{name}.log",
                        self.root / PROFILES / name)

    @property
    def results_dir(self) -> Path:
        return self.root / RESULTS

    @property
    def logs_dir(self) -> Path:
        return self.root / LOGS

    @property
    def report_dir(self) -> Path:
        return self.root / REPORT

    @property
    def tensorboard_dir(self) -> Path:
        """The TensorBoard export: beside profiles/, so one ``--logdir`` shows both."""
        return self.root / TENSORBOARD

    @property
    def benchmark_json(self) -> Path:
        """pytest-benchmark's JSON of a nightly's matrix."""
        return self.root / BENCHMARK_JSON

    @property
    def nightly_markdown(self) -> Path:
        return self.root / NIGHTLY_MARKDOWN

    @property
    def trend_plot(self) -> Path:
        return self.root / TREND_PLOT

    def has_result(self, spec: RunSpec, replicate: int = 1) -> bool:
        return self.paths(spec, replicate).result.exists()

    def replicates_done(self, spec: RunSpec, upto: int) -> list[int]:
        """Which of runs 1..``upto`` of ``spec`` already have a result file."""
        return [r for r in range(1, upto + 1) if self.has_result(spec, r)]

    def result_files_of(self, spec: RunSpec) -> set[Path]:
        """Result files of every run of ``spec`` stored so far (its first and replicates)."""
        name = re.compile(rf"^{re.escape(spec.key())}(\.run\d+)?\.json$")
        return {p for p in self.results_dir.glob("*.json") if name.match(p.name)}

    def result_files(self) -> list[Path]:
        """Result files of the sweep (a bare folder of result files works too)."""
        folder = self.results_dir if self.results_dir.is_dir() else self.root
        return sorted(p for p in folder.glob("*.json") if not p.name.startswith("."))

    def load(self) -> Loaded:
        """Every readable result; unreadable ones become warnings naming the file."""
        out = Loaded()
        if not self.root.is_dir():
            out.warnings.append(f"{self.root}: not a directory")
            return out
        for path in self.result_files():
            try:
                out.results.append(load(path))
            except SchemaError as exc:
                out.warnings.append(f"skipped {exc}")
        return out

    def journal(self, entry: dict[str, Any]) -> None:
        """Append one event (start, finished, interrupted) to ``sweep.jsonl``."""
        self.root.mkdir(parents=True, exist_ok=True)
        with open(self.root / JOURNAL, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(entry) + "\n")

    def journal_events(self) -> list[dict[str, Any]]:
        try:
            text = (self.root / JOURNAL).read_text(encoding="utf-8")
        except OSError:
            return []
        return [json.loads(line) for line in text.splitlines() if line.strip()]


@dataclass
class Loaded:
    results: list[RunResult] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def load_sweep(sweep_dir: Path) -> Loaded:
    """Every readable result of ``sweep_dir``; unreadable ones become warnings."""
    return SweepStore(Path(sweep_dir)).load()


def write_new(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically; refuse to replace an existing file.

    The data goes to a temporary file in the same directory, is fsynced, and is
    then hard-linked into place: ``link`` fails if the target exists, so a result
    is never overwritten, and readers never see a half-written file.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.link(tmp, path)
    finally:
        os.unlink(tmp)


def save(result: RunResult, path: Path) -> None:
    """Store a result as JSON at ``path`` (atomic, never overwrites)."""
    write_new(path, json.dumps(result.to_dict(), indent=2, sort_keys=False) + "\n")


def parse(path: Path, data: bytes) -> RunResult:
    """Validate the bytes of a result file; raises SchemaError naming ``path``."""
    try:
        doc = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise SchemaError(f"{path}: unreadable result file: {exc}") from exc
    if not isinstance(doc, dict):
        raise SchemaError(f"{path}: result file is not a JSON object")
    try:
        return RunResult.from_dict(doc)
    except SchemaError as exc:
        raise SchemaError(f"{path}: {exc}") from exc
    except Exception as exc:  # e.g. a spec naming a workload this version lacks
        raise SchemaError(f"{path}: {exc}") from exc


def load(path: Path) -> RunResult:
    """Load and validate one result file; raises SchemaError naming the file."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise SchemaError(f"{path}: unreadable result file: {exc}") from exc
    return parse(path, data)
