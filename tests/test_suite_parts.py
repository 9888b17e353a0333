"""How `make test` splits the suite: files whole on two pytest-xdist workers, longest
first, tests that make network namespaces one at a time, the `alone` tests after the
rest (conftest.py, the Makefile)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from conftest import LONGEST_FIRST, shared_dir

ROOT = Path(__file__).resolve().parent.parent


def test_the_longest_files_named_first_exist() -> None:
    files = {p.name for p in (ROOT / "tests").glob("test_*.py")}
    assert set(LONGEST_FIRST) <= files
    assert len(set(LONGEST_FIRST)) == len(LONGEST_FIRST)


def test_workers_share_the_parent_of_their_temporary_directories(
        tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    assert shared_dir(tmp_path_factory) is None  # one process: nothing to share
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw1")
    assert shared_dir(tmp_path_factory) == tmp_path_factory.getbasetemp().parent


def test_make_test_runs_the_alone_tests_apart_after_the_others() -> None:
    text = (ROOT / "Makefile").read_text()
    recipe = re.search(r"^test: .*\n((?:\t.*\n)+)", text, re.M)
    assert recipe, "the Makefile has no test target"
    parallel, alone = recipe.group(1).strip().splitlines()
    assert "-n $(TEST_WORKERS)" in parallel and '-m "not alone"' in parallel
    # Each file whole on one worker, in the order conftest.py gives.
    assert "--dist loadfile" in parallel and "--no-loadscope-reorder" in parallel
    assert "-m alone" in alone and "-n " not in alone
