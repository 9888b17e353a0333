"""Load the results of a sweep directory, naming (and skipping) bad files."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from bench.errors import SchemaError
from bench.results import RunResult, load


@dataclass
class Loaded:
    results: list[RunResult] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def result_files(sweep_dir: Path) -> list[Path]:
    folder = sweep_dir / "results" if (sweep_dir / "results").is_dir() else sweep_dir
    return sorted(p for p in folder.glob("*.json") if not p.name.startswith("."))


def load_sweep(sweep_dir: Path) -> Loaded:
    """Every readable result of ``sweep_dir``; unreadable ones become warnings."""
    out = Loaded()
    if not sweep_dir.is_dir():
        out.warnings.append(f"{sweep_dir}: not a directory")
        return out
    for path in result_files(sweep_dir):
        try:
            out.results.append(load(path))
        except SchemaError as exc:
            out.warnings.append(f"skipped {exc}")
    return out
