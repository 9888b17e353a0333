"""Answers the data decides: faster, equivalent within a margin, or not settled.

Constructed evidence with exactly known gaps and noise (no TensorFlow), each case in
both directions (the candidate ahead and behind): a real 1.5x speed-up with 1% noise is
called; a 2% gap with 1% noise is shown equivalent within +-5% and the simplest wins; a
2% gap with 20% noise is not settled, with the runs (or pairs) that would settle it; a
30% gap with 5% noise is called with its interval. The same decision is fed by
independent runs (Welch) and by interleaved pairs (paired t), and the report renders
each answer in HTML, Markdown and the terminal summary saying what was shown.
"""

from __future__ import annotations

import html
import math
import re
from pathlib import Path
from typing import Any

import pytest

import reports.html
from bench.answers.recommend import ALONE, STANDS, Recommendation
from bench.answers.worth import worth
from bench.cli.main import main
from bench.results.schema import RunResult
from bench.results.stats.settlement import (
    EQUIVALENT,
    FASTER,
    NOT_SETTLED,
    PAIRS,
    RUNS,
    SLOWER,
    Settlement,
    settle_pairs,
    settle_runs,
)
from bench.results.stats.spread import LogSpread
from bench.results.store import SweepStore, save
from reports.answers import KIND_WORDS, MAX_ROW_WORDS, answer_rows, recommendations_text
from reports.html import render_html
from reports.markdown import render_markdown
from reports.recommend import answer_line, workload_lines
from reports.report import SweepReport, build_from_results
from reports.worth import worth_sentence
from tests.helpers import fake_environment, measured, replicated

GPU = fake_environment("gpu-box", gpus=2)
# (gap, noise, the comparison's verdict, the answer's kind) with the candidate ahead;
# each case is also run with the candidate behind (gap -> 1 / gap). Which is faster is
# settled apart from whether it is by more than the margin: a 3% gap at 0.5% noise and a
# 7% gap at 2% noise are shown beyond the noise, so the faster is the answer, while the
# first is shown within the margin and the second's size against it is open.
CASES = {"real speed-up": (1.5, 0.01, FASTER, FASTER),
         "inside the margin": (1.005, 0.01, EQUIVALENT, EQUIVALENT),
         "shown, inside the margin": (1.03, 0.005, EQUIVALENT, FASTER),
         "shown, margin open": (1.07, 0.02, NOT_SETTLED, FASTER),
         "inside the noise": (1.02, 0.20, NOT_SETTLED, NOT_SETTLED),
         "30% gap": (1.3, 0.05, FASTER, FASTER)}
BEHIND = {FASTER: SLOWER, EQUIVALENT: EQUIVALENT, NOT_SETTLED: NOT_SETTLED}


def _runs(center: float, cv: float, n: int = 3) -> list[float]:
    """``n`` run figures with geometric mean ``center`` and log-scale SD exactly ``cv``."""
    z = [i - (n - 1) / 2 for i in range(n)]
    sd = math.sqrt(sum(v * v for v in z) / (n - 1))
    return [center * math.exp(cv * v / sd) for v in z]


def _pairs(gap: float, sd: float, n: int = 8) -> list[float]:
    """``n`` log ratios with mean log(gap) and SD exactly ``sd``."""
    z = [(-1.0) ** i for i in range(n)]
    scale = sd / math.sqrt(sum(v * v for v in z) / (n - 1))
    return [math.log(gap) + scale * v for v in z]


def _evidence(kind: str, gap: float, noise: float) -> Settlement:
    if kind == RUNS:
        return settle_runs(_runs(1000.0, noise), _runs(1000.0 * gap, noise))
    # A pair's log ratio carries both runs' noise: sqrt(2) x a run's.
    return settle_pairs(_pairs(gap, noise * math.sqrt(2)))


@pytest.mark.parametrize("kind", [RUNS, PAIRS])
@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("ahead", [True, False], ids=["ahead", "behind"])
def test_each_case_is_decided_the_same_from_runs_and_from_pairs(kind: str, case: str,
                                                                ahead: bool) -> None:
    gap, noise, verdict, answer = CASES[case]
    gap = gap if ahead else 1 / gap
    s = _evidence(kind, gap, noise)
    assert s.verdict == (verdict if ahead else BEHIND[verdict])
    # Shown beyond the noise (the 95% interval leaves out 1) wherever the answer is the
    # faster one, whatever the margin says.
    assert s.direction == ((FASTER if ahead else SLOWER) if answer == FASTER else None)
    assert s.beyond_noise_only == (s.direction is not None and verdict == NOT_SETTLED)
    assert s.evidence == kind and s.margin == 0.05
    assert s.low < s.ratio < s.high  # every answer carries its interval
    assert s.ratio == pytest.approx(gap)
    if verdict == FASTER:
        # called with its interval: 1 and the margin are outside it, the true gap inside
        assert s.low > 1.05 if ahead else s.high < 1 / 1.05
        assert s.low < gap < s.high
        assert s.needed is None and s.settled
    elif verdict == EQUIVALENT:
        # shown: the 90% interval inside +-5%, while a 2% gap is there to see
        assert 1 / 1.05 < s.eq_low < s.eq_high < 1.05
        assert "shown to lie within +-5%" in s.reason
    elif answer == FASTER:  # beyond the noise, its size against the margin open
        assert not s.settled and s.needed is not None and s.needed > max(s.sizes)
        assert s.low > 1.0 if ahead else s.high < 1.0
        assert s.low < 1.05 if ahead else s.high > 1 / 1.05
    else:
        assert not s.settled and s.needed is not None and s.needed > max(s.sizes)
        assert f"about {s.needed:,} {s.unit} would settle it" in s.reason
        assert s.low < 1 / 1.05 and s.high > 1.05  # wide: neither shown nor shown away


@pytest.mark.parametrize("kind", [RUNS, PAIRS])
def test_the_runs_it_would_need_do_settle_it(kind: str) -> None:
    """The plan of a 'not settled' answer is a real one: that many runs (pairs) at the
    same gap and noise settle it, and a tenth of them does not."""
    gap, noise = 1.02, 0.20
    s = _evidence(kind, gap, noise)
    assert s.needed is not None
    for n, settled in ((s.needed, True), (s.needed // 10, False)):
        again = (settle_runs(_runs(1000.0, noise, n), _runs(1000.0 * gap, noise, n))
                 if kind == RUNS else settle_pairs(_pairs(gap, noise * math.sqrt(2), n)))
        assert again.settled is settled, (n, again)
        if settled:
            assert again.verdict == EQUIVALENT


def test_a_side_of_one_run_measures_no_noise_and_borrows_none() -> None:
    blind = settle_runs([1000.0], [1500.0])
    assert blind.verdict == NOT_SETTLED and not blind.decided and blind.needed is None
    assert "the noise is not measured: 2 or more runs a configuration needed" in blind.reason
    # The other side's spread says nothing of how a single run varies: not settled,
    # even beside a pool with many degrees of freedom (a 1.5x gap at 1% noise).
    for pooled in (None, LogSpread(40 * 1e-4, 40)):
        one_side = settle_runs([1000.0], _runs(1500.0, 0.01), pooled=pooled)
        assert one_side.verdict == NOT_SETTLED and not one_side.decided, pooled
        assert one_side.needed is None and "noise is not measured" in one_side.reason
    # Measured on both sides, the same gap is settled.
    assert settle_runs(_runs(1000.0, 0.01), _runs(1500.0, 0.01)).verdict == FASTER
    # a window floor widens what two lucky, identical runs would claim
    lucky = settle_runs([1000.0, 1000.0], [1030.0, 1030.0])
    assert lucky.verdict == EQUIVALENT and lucky.half_width == 0.0
    floored = settle_runs([1000.0, 1000.0], [1030.0, 1030.0], floor_sd_log=0.05)
    assert floored.verdict == NOT_SETTLED and floored.half_width is not None
    assert floored.half_width > 0.05


def test_flipped_reads_the_same_evidence_the_other_way_round() -> None:
    s = settle_runs(_runs(1000.0, 0.05), _runs(1300.0, 0.05))
    f = s.flipped()
    assert f.verdict == SLOWER and f.ratio == pytest.approx(1 / s.ratio)
    assert (f.low, f.high) == pytest.approx((1 / s.high, 1 / s.low))
    assert f.half_width == pytest.approx(s.half_width)
    assert f.reason.startswith("-23.1%")


def test_bad_evidence_is_refused_with_the_received_value() -> None:
    with pytest.raises(ValueError, match=r"Received: margin=0"):
        settle_runs([1.0, 2.0], [1.0, 2.0], margin=0.0)
    with pytest.raises(ValueError, match=r"Received: log_ratios=\[nan\]"):
        settle_pairs([math.nan])
    with pytest.raises(ValueError, match=r"Received: \[-1.0\]"):
        settle_runs([-1.0], [1.0])


# -- the report: each answer, rendered ------------------------------------------------------
def _sweep() -> SweepReport:
    """One batch setting per case and direction: one_device on 1 device against mirrored
    on 2 devices, which is ``gap`` times as fast (ahead) or 1 / ``gap`` (behind). Each
    noise level on a machine of its own: a machine's configurations pool their noise
    (bench.answers.noise), which assumes they share one, and the F test that guards it cannot
    tell 5% from 20% apart at 3 runs a configuration."""
    results = []
    batch = 8
    for i, (gap, noise, _, _) in enumerate(CASES.values()):
        env = fake_environment(f"gpu-box-{i}", gpus=2)
        for ahead in (True, False):
            g = gap if ahead else 1 / gap
            results += [*replicated("one_device", 1, batch, 1000.0, env=env, run_cv=noise,
                                    cv=noise),
                        *replicated("mirrored", 2, batch, 1000.0 * g, env=env, run_cv=noise,
                                    cv=noise)]
            batch *= 2
    return build_from_results(results, Path("/nonexistent/sweep"))


@pytest.fixture(scope="module")
def sweep() -> SweepReport:
    return _sweep()


def _answers(report: SweepReport) -> dict[tuple[str, bool], Recommendation]:
    recs = [r for m in report.machines for r in m.workloads[0].recommendations]
    keys = [(case, ahead) for case in CASES for ahead in (True, False)]
    return dict(zip(keys, sorted(recs, key=lambda r: r.ranking.batch), strict=True))


def test_each_answer_in_the_report_says_what_was_shown(sweep: SweepReport) -> None:
    answers = _answers(sweep)
    for (case, ahead), rec in answers.items():
        gap, _, verdict, kind = CASES[case]
        assert rec.best is not None and rec.fastest is not None
        expected = ("mirrored" if ahead else "one_device") if kind == FASTER else "one_device"
        assert rec.best.base_strategy == expected, (case, ahead, rec.text)
        assert rec.kind == kind, (case, ahead)
        assert not rec.shown_faster_than_it  # never an answer the data shows slower
        d = rec.deciding
        assert d is not None and d.half_width is not None
        if kind == FASTER:
            assert rec.verb == "use "
            change = f"-{1 - 1 / gap:.0%} ["  # the next best against the answer
            assert f"is {change}" in rec.text
            said = {FASTER: "Faster beyond the noise and by more than the +-5% margin",
                    EQUIVALENT: "by less than the margin (shown within +-5%)",
                    NOT_SETTLED: "not yet shown beyond the +-5% margin"}[verdict]
            assert said in rec.text, (case, rec.text)
        elif kind == EQUIVALENT:
            assert rec.verb == "use " and "an equivalence test: the interval lies inside the " \
                "margin" in rec.text
            assert "the simplest" in rec.text and "[90%: " in rec.text
        else:
            assert rec.verb == "" and rec.text.startswith("NOT SETTLED at this precision")
            assert rec.runs_needed is not None and rec.runs_needed > 3
            assert f"about {rec.runs_needed:,} runs a configuration would settle it" in rec.text


def test_every_rendering_carries_the_answer_and_its_evidence(
        sweep: SweepReport, monkeypatch: pytest.MonkeyPatch) -> None:
    answers = _answers(sweep)
    md = render_markdown(sweep)
    # The plots say nothing about the answers and take seconds to draw: left out here.
    monkeypatch.setattr(reports.html, "workload_plots", lambda *_: [])
    page = html.unescape(re.sub(r"<[^>]+>", "", render_html(sweep)))
    cli = recommendations_text(sweep, explain=True)
    for (case, ahead), rec in answers.items():
        label = rec.ranking.label
        (line,) = [x for m in sweep.machines for x in workload_lines(m.workloads[0])
                   if x.startswith(label + ":")]
        # The terminal with --explain, the Markdown and the HTML answers in full
        assert line in cli and line in md and line in page
        assert f"**{label}**: {rec.verb}{rec.text}" in md  # the Markdown details
        # The HTML recommendation box: what the answer is worth, the reasoning folded.
        found = worth(rec)
        assert found is not None
        assert f"{label}: {worth_sentence(found)}." in page
        assert f"why{rec.verb}{rec.text}" in page
        # Every rendering leads with what the answer is worth.
        assert worth_sentence(found) in cli and worth_sentence(found) in md
        kind = CASES[case][3]
        said = {FASTER: "faster beyond the noise than", EQUIVALENT: "equivalent within +-5% to",
                NOT_SETTLED: "NOT SETTLED at this precision"}[kind]
        assert said in line, (case, ahead, line)
        if kind == NOT_SETTLED:
            assert "for now" in line and "runs a configuration would settle it" in line
        if kind == FASTER:
            assert "[+" in line  # the interval of the gap it was called on
    assert "definitions" in md.lower() and "EQUIVALENT" in md  # the definition says how


@pytest.mark.parametrize(("mirrored", "kind"), [(970.0, STANDS), (1030.0, NOT_SETTLED)])
def test_an_open_comparison_that_cannot_change_the_answer_leaves_it_settled(
        mirrored: float, kind: str) -> None:
    # one_device at 1,000 examples/s, mirrored (2 devices: not simpler) 3% behind or
    # ahead, 2% noise, 3 runs each: the gap is neither shown beyond the noise nor within
    # +-5%. Behind, mirrored cannot beat one_device by more than the margin, so whatever
    # the gap turns out to be, one_device is the answer; ahead, it may, and nothing stands.
    env = fake_environment("stands-box", gpus=2)
    results = [*replicated("one_device", 1, 8, 1000.0, env=env, run_cv=0.02, cv=0.02),
               *replicated("mirrored", 2, 8, mirrored, env=env, run_cv=0.02, cv=0.02)]
    (rec,) = build_from_results(results, Path("/x")).machines[0].workloads[0].recommendations
    assert rec.best is not None and rec.best.base_strategy == "one_device"
    (s,) = rec.settlements.values()
    assert s.verdict == NOT_SETTLED  # the comparison itself stays open either way
    assert rec.kind == kind and rec.settled == (kind == STANDS)
    if kind == STANDS:
        assert [c.base_strategy for c in rec.bounded] == ["mirrored"] and not rec.unsettled
        assert "none can change this answer" in rec.text and rec.verb == "use "
        assert "stands: mirrored on 2 devices -3% [90%: " in answer_line(rec)
    else:
        # mirrored is the fastest; one_device, simplest, is not shown within the margin
        # of it, and mirrored may beat it by more: open.
        assert rec.fastest is not None and rec.fastest.base_strategy == "mirrored"
        assert not rec.bounded and rec.text.startswith("NOT SETTLED at this precision")
        assert [c.base_strategy for c in rec.unsettled] == ["mirrored"]


# -- the answers at a glance: a row per place ------------------------------------------------
def _place(*configs: tuple[str, int, float, float], batch: int = 8) -> list[RunResult]:
    """One place (mlp, global ``batch``) on a machine of its own: each configuration
    (strategy, devices, throughput, noise) in 3 runs."""
    env = fake_environment("rows-box", gpus=2)
    return [r for strategy, devices, level, noise in configs
            for r in replicated(strategy, devices, batch, level, env=env, run_cv=noise,
                                cv=noise)]


ONE, TWO, MWM = "one_device", "mirrored", "multi_worker_mirrored"
# Each kind of answer at one place, and what its row says: (results, answer, kind,
# against, the start of "answer vs it", noise, to settle; None: checked apart).
ROWS = {
    FASTER: (_place((ONE, 1, 1000.0, 0.01), (TWO, 2, 1500.0, 0.01)),
             "mirrored on 2 devices", "faster", "one_device on 1 device", "+50% [+", "cv 1%",
             "-"),
    EQUIVALENT: (_place((ONE, 1, 1000.0, 0.01), (TWO, 2, 1005.0, 0.01)),
                 "one_device on 1 device", "equivalent", "mirrored on 2 devices",
                 "0% [90%: ", "cv 1%", "-"),
    STANDS: (_place((ONE, 1, 1000.0, 0.02), (TWO, 2, 970.0, 0.02)),
             "one_device on 1 device", "stands", "mirrored on 2 devices", "+3% [90%: ",
             "cv 2%", "-"),
    NOT_SETTLED: (_place((ONE, 1, 1000.0, 0.20), (TWO, 2, 1020.0, 0.20)),
                  "one_device on 1 device", "not settled", "mirrored on 2 devices", "-2% [",
                  "cv 20%", None),
    "open twice": (_place((ONE, 1, 1000.0, 0.20), (TWO, 2, 1020.0, 0.20),
                          (MWM, 2, 1010.0, 0.20)),
                   "one_device on 1 device", "not settled", None, None, "cv 20%", None),
    ALONE: (_place((ONE, 1, 1000.0, 0.03)), "one_device on 1 device", "alone", "-", "-",
            "cv 3%", "-"),
    "": ([measured(TWO, 2, 8, 0.0, status="failed")],
         "no successful run (see the runs without figures)", "no answer", "-", "-", "-", "-"),
}


@pytest.mark.parametrize("case", list(ROWS))
def test_each_kind_of_answer_is_a_short_row_from_its_fields(case: str) -> None:
    results, answer, kind, against, change, noise, to_settle = ROWS[case]
    report = build_from_results(results, Path("/nonexistent/rows"))
    (rec,) = [r for m in report.machines for w in m.workloads for r in w.recommendations]
    (row,) = answer_rows(report)
    assert kind == KIND_WORDS[rec.kind] and row.kind == kind
    assert row.place == "mlp[tiny], batch 8" and row.answer == answer
    assert row.words <= MAX_ROW_WORDS, row.cells
    assert row.sentence == f"mlp[tiny], {answer_line(rec)}"  # --explain's, in full
    assert (row.noise, row.answer) == (noise, answer)
    for cell, expected in ((row.against, against), (row.to_settle, to_settle)):
        assert expected is None or cell == expected, (case, row.cells)
    assert change is None or row.change.startswith(change), (case, row.change)
    if kind == "not settled":
        # The hardest open comparison: what it would take, in the plan's own count.
        assert rec.runs_needed is not None
        assert row.to_settle == f"~{rec.runs_needed:,} runs each"
    if case == "open twice":
        assert row.against.endswith(" (+1)") and len(rec.unsettled) == 2


def test_rows_of_long_labels_stay_under_the_word_limit() -> None:
    # The longest cells a sweep gives: a workload with parameters, the longest strategy
    # name, two open comparisons, and a budget's look at another alpha.
    env = fake_environment("long-box", gpus=2)
    over = {"workload": "resnet50", "params": {"classes": 10, "image_size": 32}}
    results = [r for s, n, level in ((ONE, 1, 1000.0), (MWM, 2, 1020.0), (TWO, 2, 1010.0))
               for r in replicated(s, n, 16, level, env=env, run_cv=0.2, cv=0.2, **over)]
    from bench.answers.sequential import Looks

    report = build_from_results(results, Path("/x"), looks=Looks(default=0.001))
    (row,) = answer_rows(report)
    assert row.kind == "not settled" and "[99.9%: " in row.change, row.cells
    assert row.words <= MAX_ROW_WORDS, (row.words, row.cells)


def test_the_terminal_shows_the_table_and_explain_adds_the_sentences(
        tmp_path: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)  # a pipe: one line a row
    sweep = tmp_path / "sweep"
    store = SweepStore(sweep)
    # Two places: a clear answer at batch 8 and an open one at batch 16.
    results = [*_place((ONE, 1, 1000.0, 0.01), (TWO, 2, 1500.0, 0.01)),
               *_place((ONE, 1, 1000.0, 0.20), (TWO, 2, 1020.0, 0.20), batch=16)]
    for r in results:
        save(r, store.paths(r.spec, r.replicate).result)
    sentences = [row.sentence for row in answer_rows(build_from_results(results, sweep))]
    assert len(sentences) == 2
    for explain in (False, True):
        rc = main(["report", str(sweep), "--out", str(tmp_path / "out"),
                   *(["--explain"] if explain else [])])
        out = capsys.readouterr().out
        assert rc == 0
        lines = out.splitlines()
        # What each answer is worth leads, one line a place, then the table.
        assert lines[1].startswith("  mlp[tiny], batch 8: use mirrored on 2 devices: faster")
        assert lines[2].startswith("  mlp[tiny], batch 16: ")
        assert lines[4].split()[:3] == ["place", "answer", "kind"]
        assert all((s in out) == explain for s in sentences), out
        assert ("--explain: each answer in full" in out) != explain
