"""Stability of the answer across two sweeps, on hand-built sweeps (no TensorFlow)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from bench.exits import Exit
from bench.results.schema import RunResult
from bench.results.store import SweepStore, save
from reports.report import SweepReport, build_from_results
from reports.stability import (
    AGREE,
    DISAGREE,
    NO_ANSWER,
    ONLY_A,
    TIE_CONSISTENT,
    Answer,
    agreement,
    compare_answers,
    disagreements,
    stability_text,
)
from tests.helpers import fake_environment, replicated

ROOT = Path(__file__).resolve().parent.parent
GPU = fake_environment("gpu-box", gpus=2)


def _sweep(mirrored_64: float, mirrored_128: float = 1000.0, *,
           run_cv: float = 0.05) -> list[RunResult]:
    """one_device at 1,000 examples/s and mirrored on 2 devices, at batches 64 and 128."""
    return [*replicated("one_device", 1, 64, 1000.0, env=GPU, run_cv=run_cv),
            *replicated("mirrored", 2, 64, mirrored_64, env=GPU, run_cv=run_cv),
            *replicated("one_device", 1, 128, 1000.0, env=GPU, run_cv=run_cv),
            *replicated("mirrored", 2, 128, mirrored_128, env=GPU, run_cv=run_cv)]


def _report(results: list[RunResult]) -> SweepReport:
    return build_from_results(results, Path("/nonexistent/sweep"))


def test_the_same_choice_agrees_and_a_changed_one_disagrees() -> None:
    a = _report(_sweep(1500.0, 1020.0))
    b = _report(_sweep(1480.0, 1500.0, run_cv=0.03))
    rows = {r.where: r for r in compare_answers(a, b)}
    assert set(rows) == {"mlp[tiny], global batch 64", "mlp[tiny], global batch 128"}
    same = rows["mlp[tiny], global batch 64"]
    assert same.verdict == AGREE and same.a is not None
    assert same.a.choice == "mirrored on 2 devices"
    # A: a tie at batch 128 -> the simpler one_device; B: mirrored beyond the noise
    changed = rows["mlp[tiny], global batch 128"]
    assert changed.verdict == DISAGREE and changed.a is not None and changed.b is not None
    assert changed.a.choice == "one_device on 1 device"
    assert changed.a.tied == {"mirrored on 2 devices"} and not changed.b.tied
    assert disagreements(list(rows.values())) == [changed]
    text = stability_text(list(rows.values()))
    assert "disagree" in text and "1 agree, 1 disagree" in text


def test_tie_consistency_needs_each_tie_to_contain_the_other_choice() -> None:
    x, y = "one_device on 1 device", "mirrored on 2 devices"
    tie_x = Answer("w", x, frozenset({y}), "")
    tie_y = Answer("w", y, frozenset({x}), "")
    plain_y = Answer("w", y, frozenset(), "")
    assert agreement(tie_x, tie_y) == TIE_CONSISTENT
    assert agreement(tie_x, plain_y) == DISAGREE  # only one side saw a tie
    assert agreement(tie_x, tie_x) == AGREE
    assert agreement(tie_x, None) == ONLY_A
    assert agreement(tie_x, Answer("w", None, frozenset(), "")) == NO_ANSWER


def _store(results: list[RunResult], root: Path) -> Path:
    store = SweepStore(root)
    for r in results:
        save(r, store.paths(r.spec, r.replicate).result)
    return root


def _script(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "scripts.stability", *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)


def test_the_script_exits_non_zero_on_a_disagreement(tmp_path: Path) -> None:
    a = _store(_sweep(1500.0), tmp_path / "a")
    b = _store(_sweep(1490.0, run_cv=0.03), tmp_path / "b")
    c = _store(_sweep(1000.0), tmp_path / "c")  # batch 64 becomes a tie -> one_device
    same = _script(str(a), str(b))
    assert same.returncode == Exit.OK, same.stdout + same.stderr
    assert same.stdout.count("agree ") == 2
    changed = _script(str(a), str(c))
    assert changed.returncode == Exit.REGRESSION, changed.stdout + changed.stderr
    assert "disagree        mlp[tiny], global batch 64: A mirrored on 2 devices | B " \
           "one_device on 1 device (tie with mirrored on 2 devices)" in changed.stdout
    missing = _script(str(a), str(tmp_path / "nowhere"))
    assert missing.returncode == Exit.USAGE and "Received: sweep_b=" in missing.stderr
