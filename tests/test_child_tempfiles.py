"""A child's temporary files stay in its run directory (bench.child.main.temp_files_in).

Autograph writes every function it converts to a ``__autograph_generated_file*.py`` in
the temporary directory and removes it at interpreter exit, which a child never
reaches (it ends with ``os._exit``). The child points its temporary directory into the
run directory, which the launcher removes with the run.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.launch.launcher import run_isolated
from tests.helpers import tiny_spec


def test_a_runs_autograph_files_leave_nothing_in_the_temporary_directory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The child inherits this TMPDIR; the launcher's run directory was made before.
    shared_tmp = tmp_path / "tmp"
    shared_tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(shared_tmp))
    result = run_isolated(tiny_spec(strategy="one_device", devices=1),
                          tmp_path / "logs" / "run.log", timeout_s=120)
    assert result.status == "ok", result.reason
    assert not list(shared_tmp.iterdir()), sorted(p.name for p in shared_tmp.iterdir())
