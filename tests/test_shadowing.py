"""A user's own ``workloads/``, ``bench/`` or ``reports.py`` in the working directory never
replaces ours in a run's child processes (``python -m`` puts the working directory first
on sys.path; the launcher's PYTHONSAFEPATH keeps it out)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.launch.launcher import run_isolated
from bench.spec import RunSpec


@pytest.mark.logical_cpu
def test_a_run_from_a_directory_with_packages_of_our_names_uses_ours(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    project = tmp_path / "project"
    for name in ("workloads", "bench"):
        (project / name).mkdir(parents=True)
        (project / name / "__init__.py").write_text(
            f"raise ImportError('the user\\'s own {name} was imported')\n")
    (project / "reports.py").write_text("raise ImportError('the user\\'s own reports')\n")
    monkeypatch.chdir(project)
    spec = RunSpec(workload="mlp", strategy="one_device", devices=1, batch=16, size="tiny",
                   max_seconds=0.2, min_steps=3, max_steps=10, warmup_steps=1, repeats=2)
    result = run_isolated(spec, tmp_path / "logs" / "run.log", timeout_s=300)
    assert result.status == "ok", result.reason
