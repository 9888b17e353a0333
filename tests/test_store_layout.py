"""The store alone knows a sweep directory's layout: names of runs, where their files go.

Every other module asks ``bench.results.store`` for a path; a static check finds
any that joins a layout name to a directory itself.
"""

from __future__ import annotations

import ast
from pathlib import Path

from bench.results.store import (
    BENCHMARK_JSON,
    DEFAULT_ROOT,
    JOURNAL,
    LOGS,
    NIGHTLY_MARKDOWN,
    PROFILES,
    REPORT,
    RESULTS,
    TENSORBOARD,
    TREND_PLOT,
    SweepStore,
    new_sweep_dir,
    run_name,
)
from tests.helpers import tiny_spec

ROOT = Path(__file__).resolve().parent.parent
LAYOUT = {RESULTS, LOGS, PROFILES, JOURNAL, REPORT, TENSORBOARD, BENCHMARK_JSON,
          NIGHTLY_MARKDOWN, TREND_PLOT}


def test_a_run_is_named_once_for_its_result_log_and_profile(tmp_path: Path) -> None:
    spec, other = tiny_spec(batch=8), tiny_spec(batch=16)
    store = SweepStore(tmp_path)
    paths = store.paths(spec, 2)
    assert run_name(spec.key(), 2) == f"{spec.key()}.run2" and run_name(spec.key()) == spec.key()
    assert paths.result.name == f"{run_name(spec.key(), 2)}.json"
    assert paths.log.stem == paths.profile.name == run_name(spec.key(), 2)
    for s, r in ((spec, 1), (spec, 2), (other, 1)):
        store.paths(s, r).result.parent.mkdir(parents=True, exist_ok=True)
        store.paths(s, r).result.write_text("{}", encoding="utf-8")
    assert store.result_files_of(spec) == {store.paths(spec, 1).result, paths.result}
    fresh = new_sweep_dir("noise")
    assert fresh.parent == DEFAULT_ROOT and fresh.name.startswith("noise-")


def _layout_joins(source: str) -> list[int]:
    """Lines of ``<expr> / "<layout name>"`` in ``source`` (a path built past the store)."""
    return [node.lineno for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div)
            and isinstance(node.right, ast.Constant) and node.right.value in LAYOUT]


def test_no_module_but_the_store_joins_the_sweep_layout() -> None:
    store = ROOT / "bench" / "results" / "store.py"
    files = [p for d in ("bench", "reports", "scripts", "benchmarks")
             for p in (ROOT / d).rglob("*.py") if p != store]
    assert len(files) > 50
    joins = {str(p.relative_to(ROOT)): lines for p in files
             if (lines := _layout_joins(p.read_text(encoding="utf-8")))}
    assert joins == {}
    assert _layout_joins('out = sweep / "logs"\n') == [1]  # the check sees a join
