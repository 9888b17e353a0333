"""Stability of the answer across two sweeps, on hand-built sweeps (no TensorFlow)."""

from __future__ import annotations

import math
import statistics
from pathlib import Path

import pytest

from bench.exits import Exit
from bench.results.schema import RunResult
from bench.results.store import SweepStore, save
from reports.report import SweepReport, build_from_results
from reports.stability import (
    AGREE,
    CONSISTENT,
    DISAGREE,
    NO_ANSWER,
    NOT_SETTLED,
    ONLY_A,
    ONLY_B,
    Agreement,
    Answer,
    agreement,
    answers_of,
    compare_answers,
    corrected,
    counted,
    disagreements,
    exit_code,
    median_half_width,
    shared_places,
    stability_text,
    verdict_line,
)
from scripts.stability import main
from tests.helpers import fake_environment, replicated

GPU = fake_environment("gpu-box", gpus=2)
B64, B128 = "[gpu-box] mlp[tiny], global batch 64", "[gpu-box] mlp[tiny], global batch 128"


def _sweep(mirrored_64: float, mirrored_128: float = 1000.0, *, run_cv: float = 0.01,
           env: dict | None = None, batches: tuple[int, ...] = (64, 128)) -> list[RunResult]:
    """one_device at 1,000 examples/s and mirrored on 2 devices, at batches 64 and 128,
    3 runs each with run-to-run (and window) noise ``run_cv``."""
    env = env or GPU
    mirrored = {64: mirrored_64, 128: mirrored_128}
    return [r for b in batches for r in (
        *replicated("one_device", 1, b, 1000.0, env=env, run_cv=run_cv, cv=run_cv),
        *replicated("mirrored", 2, b, mirrored[b], env=env, run_cv=run_cv, cv=run_cv))]


def _report(results: list[RunResult]) -> SweepReport:
    return build_from_results(results, Path("/nonexistent/sweep"))


def test_the_same_choice_agrees_and_a_changed_one_disagrees() -> None:
    a = _report(_sweep(1500.0, 1005.0))
    b = _report(_sweep(1480.0, 1500.0))
    rows = {r.where: r for r in compare_answers(a, b)}
    assert set(rows) == {B64, B128}  # the machine is part of every place
    same = rows[B64]
    assert same.verdict == AGREE and same.a is not None
    assert same.a.choice == "mirrored on 2 devices" and same.a.settled
    # A: 0.5% apart at 1% noise, shown equivalent -> the simpler one_device; B: mirrored
    # faster beyond the noise. Both settled, on different choices.
    changed = rows[B128]
    assert changed.verdict == DISAGREE and changed.a is not None and changed.b is not None
    assert changed.a.choice == "one_device on 1 device"
    assert changed.a.within == {"mirrored on 2 devices"} and not changed.b.within
    assert disagreements(list(rows.values())) == [changed]
    # 0.5% apart in one sweep, 50% in the other, at 1% noise: far beyond chance even
    # corrected over the two places.
    assert changed.p_value is not None and changed.adjusted is not None
    assert changed.adjusted == pytest.approx(2 * changed.p_value) and changed.adjusted < 1e-3
    assert exit_code(list(rows.values())) == Exit.REGRESSION
    text = stability_text(list(rows.values()))
    assert "1 agree, 1 disagree" in text
    assert ("verdict: the answer changed at 1 place(s), beyond what the places compared "
            "give by chance (exit 4)") in text.splitlines()


def test_an_answer_not_settled_never_agrees() -> None:
    """Two sweeps that recommend the same configuration for now, unsettled, do not agree:
    otherwise a check of answers fixed before anything is measured would pass."""
    settled = _report(_sweep(1500.0, 1005.0))
    noisy = _report(_sweep(1500.0, 1005.0, run_cv=0.20))
    rows = {r.where: r for r in compare_answers(settled, noisy)}
    assert rows[B128].verdict == NOT_SETTLED
    assert rows[B128].b is not None and not rows[B128].b.settled
    assert rows[B128].a is not None and rows[B128].a.choice == rows[B128].b.choice
    assert "not settled, one_device on 1 device for now" in rows[B128].line()
    assert exit_code(list(rows.values())) == Exit.CANNOT_TELL
    assert [r.verdict for r in rows.values()] == [NOT_SETTLED, NOT_SETTLED]  # 20% noise
    assert verdict_line(list(rows.values())) == (
        "verdict: cannot tell yet (exit 5): 2 place(s) not settled; sweeps with a longer "
        "budget settle more places")
    both = compare_answers(settled, _report(_sweep(1480.0, 1003.0)))
    assert [r.verdict for r in both] == [AGREE, AGREE] and exit_code(both) == Exit.OK
    assert verdict_line(both) == "verdict: the answers hold at every place compared: 2 agree " \
        "(exit 0)"
    one_within = [both[0], Agreement("w", CONSISTENT, None, None)]
    assert exit_code(one_within) == Exit.OK
    assert verdict_line(one_within) == ("verdict: the answers hold at every place compared: "
                                        "1 agree, 1 equivalent-consistent (exit 0)")


def test_consistency_needs_each_side_to_have_shown_the_other_choice_equivalent() -> None:
    x, y = "one_device on 1 device", "mirrored on 2 devices"
    eq_x = Answer("w", x, frozenset({y}), "")
    eq_y = Answer("w", y, frozenset({x}), "")
    plain_y = Answer("w", y, frozenset(), "")
    assert agreement(eq_x, eq_y) == CONSISTENT
    assert agreement(eq_x, plain_y) == DISAGREE  # only one side showed the margin
    assert agreement(eq_x, eq_x) == AGREE
    assert agreement(eq_x, Answer("w", x, frozenset({y}), "", settled=False)) == NOT_SETTLED
    # One sweep shows y faster than x by a gap the margin does not call, the other shows
    # them within the margin: one truth (a gap under the margin) fits both.
    near_y = Answer("w", y, frozenset(), "", faster_near=frozenset({x}))
    assert agreement(eq_x, near_y) == agreement(near_y, eq_x) == CONSISTENT
    assert agreement(plain_y, eq_x) == DISAGREE  # y's sweep said nothing of x
    assert agreement(near_y, Answer("w", x, frozenset(), "", faster_near=frozenset({y}))) \
        == DISAGREE  # each faster than the other: contradicted
    assert agreement(eq_x, None) == ONLY_A and agreement(None, eq_x) == ONLY_B
    assert agreement(eq_x, Answer("w", None, frozenset(), "")) == NO_ANSWER


X, Y = "one_device on 1 device", "mirrored on 2 devices"


def _places(gap_a: float, gap_b: float, se: float, agreeing: int) -> list[Agreement]:
    """One place where A answers X with Y ``gap_a`` from it and B answers Y with X
    ``gap_b`` from it (each estimate at standard error ``se``, 10 df), and ``agreeing``
    more places where both answer X, corrected together."""
    a = Answer("[m] w, global batch 1", X, frozenset(), "",
               versus=((Y, math.log1p(gap_a), se, 10.0),))
    b = Answer("[m] w, global batch 1", Y, frozenset(), "",
               versus=((X, math.log1p(gap_b), se, 10.0),))
    same = [Answer(f"[m] w, global batch {k + 2}", X, frozenset(), "")
            for k in range(agreeing)]
    return corrected([Agreement(a.where, agreement(a, b), a, b),
                      *(Agreement(x.where, AGREE, x, x) for x in same)])


def test_a_disagreement_fails_the_check_only_beyond_what_the_places_give_by_chance() -> None:
    """Each answer holds per place. A: Y 5% behind X; B: X 1% behind Y, at 2% standard
    error each: 2.2 standard errors apart, p 0.04. Alone it fails the check; among five
    places compared, Holm's correction puts it at 0.21, within what five places give by
    chance: not settled, not a regression. The same disagreement at 0.5% standard
    errors (p about 1e-7) fails it among five as well."""
    alone = _places(-0.05, -0.01, 0.02, agreeing=0)
    (row,) = disagreements(alone)
    assert row.p_value == pytest.approx(0.04, abs=0.01) and row.adjusted == row.p_value
    assert counted(alone) == [row] and exit_code(alone) == Exit.REGRESSION
    among = _places(-0.05, -0.01, 0.02, agreeing=4)
    (row,) = disagreements(among)
    assert row.p_value is not None and row.adjusted == pytest.approx(5 * row.p_value)
    assert counted(among) == [] and exit_code(among) == Exit.CANNOT_TELL
    text = stability_text(among)
    assert "each answer holds per place, not jointly across places" in text
    assert "over the 5 place(s) compared (Holm at 5%): 0 of 1 beyond" in text
    assert ("verdict: cannot tell yet (exit 5): 1 place(s) disagreeing within what that "
            "many places give by chance") in text
    assert f"(p={row.p_value:.2g}; {row.adjusted:.2g} over the places compared" in row.line()
    clear = _places(-0.05, -0.01, 0.005, agreeing=4)
    assert exit_code(clear) == Exit.REGRESSION and len(counted(clear)) == 1


def test_a_disagreement_the_noise_cannot_weigh_counts() -> None:
    """Where either sweep did not compare the two choices (a configuration that ran in
    one sweep only), nothing in the noise explains the disagreement: it counts."""
    a = Answer("w", X, frozenset(), "")
    b = Answer("w", Y, frozenset(), "", versus=((X, -0.01, 0.02, 10.0),))
    rows = corrected([Agreement("w", agreement(a, b), a, b),
                      *(Agreement(f"v{k}", AGREE, a, a) for k in range(4))])
    (row,) = disagreements(rows)
    assert row.p_value is None and row.adjusted == 0.0 and exit_code(rows) == Exit.REGRESSION
    assert "did not both compare the two choices" in row.line()


def test_a_choice_set_aside_yet_shown_within_the_margin_is_shown_within_it() -> None:
    """mirrored 3% ahead of one_device at 0.5% noise: one_device is set aside (shown
    slower beyond the noise), mirrored is the answer, and the equivalence test put the
    gap inside the margin all the same: the sweep showed one_device within the margin
    of its answer, so another sweep's one_device answer, shown equivalent to mirrored
    there, is consistent with it."""
    results = [*replicated("one_device", 1, 64, 1000.0, env=GPU, run_cv=0.005, cv=0.005),
               *replicated("mirrored", 2, 64, 1030.0, env=GPU, run_cv=0.005, cv=0.005)]
    (answer,) = answers_of(_report(results)).values()
    assert answer.choice == "mirrored on 2 devices" and answer.settled
    assert answer.within == {"one_device on 1 device"}
    other = Answer(B64, "one_device on 1 device", frozenset({"mirrored on 2 devices"}), "")
    assert agreement(answer, other) == CONSISTENT
    # 8% ahead: beyond the margin, not within it; a sweep answering one_device disagrees.
    faster = [*replicated("one_device", 1, 64, 1000.0, env=GPU, run_cv=0.005, cv=0.005),
              *replicated("mirrored", 2, 64, 1080.0, env=GPU, run_cv=0.005, cv=0.005)]
    (beyond,) = answers_of(_report(faster)).values()
    assert beyond.choice == "mirrored on 2 devices" and not beyond.within
    assert agreement(beyond, other) == DISAGREE


def test_sweeps_from_two_machines_share_no_place_and_cannot_agree() -> None:
    here = _sweep(1500.0, 1005.0)
    there = _sweep(1500.0, 1005.0, env=fake_environment("other-box", gpus=2))
    same_machine = compare_answers(_report(here), _report(_sweep(1500.0, 1005.0)))
    assert shared_places(same_machine) is None and exit_code(same_machine) == Exit.OK
    rows = compare_answers(_report(here), _report(there))
    assert {r.verdict for r in rows} == {ONLY_A, ONLY_B}  # identical answers, other machine
    why = shared_places(rows)
    assert why is not None and "share 0 place(s)" in why
    assert exit_code(rows) == Exit.USAGE
    assert f"cannot compare: {why}" in stability_text(rows)
    assert verdict_line(rows) == "verdict: the two sweeps cannot be compared (exit 2)"


def test_sweeps_must_share_every_place_either_has() -> None:
    full = _report(_sweep(1500.0, 1005.0))
    part = _report(_sweep(1500.0, 1005.0, batches=(64,)))
    rows = compare_answers(full, part)
    why = shared_places(rows)
    assert why is not None and "share 1 place(s)" in why and "A has 2 and B 1" in why
    assert exit_code(rows) == Exit.USAGE  # though the one shared place agrees
    assert [r.verdict for r in rows if r.b is not None] == [AGREE]
    assert exit_code(compare_answers(part, part)) == Exit.OK  # both have the same one place
    assert exit_code([]) == Exit.USAGE  # nothing compared is not a pass


def test_median_half_width_is_printed_and_grows_with_the_noise() -> None:
    precise = _report(_sweep(1500.0, 1005.0))
    rows = compare_answers(precise, precise)
    recs = [r for mr in precise.machines for w in mr.workloads for r in w.recommendations]
    widths = [r.half_width for r in recs if r.half_width is not None]
    assert len(widths) == 2
    expected = statistics.median(widths * 2)
    assert median_half_width(rows) == pytest.approx(expected)
    # 1% run-to-run noise, 3 runs a configuration: 2 degrees of freedom each, too few for
    # the guard to judge a configuration's noise against the others' (bench.answers.noise), so
    # no pooling: Welch on the pair alone, t(0.975, 4) x 1% x sqrt(2/3) ~ 2.3% (pooled
    # over the sweep's 4 configurations it would be t(0.975, 8): 1.9%)
    assert 0.021 < expected < 0.024
    assert stability_text(rows).splitlines()[-1] == f"median half-width: {expected:.1%}"
    noisy = _report(_sweep(1500.0, 1005.0, run_cv=0.05))
    wider = median_half_width(compare_answers(noisy, noisy))
    assert wider is not None and wider > 4 * expected
    mixed = compare_answers(precise, noisy)
    assert median_half_width(mixed, "a") == pytest.approx(expected)
    assert median_half_width(mixed, "b") == pytest.approx(wider)


def _store(results: list[RunResult], root: Path) -> Path:
    store = SweepStore(root)
    for r in results:
        save(r, store.paths(r.spec, r.replicate).result)
    return root


def test_the_script_exits_by_what_it_found(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    a = _store(_sweep(1500.0, 1005.0), tmp_path / "a")
    b = _store(_sweep(1490.0, 1003.0), tmp_path / "b")
    c = _store(_sweep(1000.0, 1005.0), tmp_path / "c")  # batch 64: equivalent -> one_device
    other = _store(_sweep(1500.0, 1005.0, env=fake_environment("other-box", gpus=2)),
                   tmp_path / "other")
    assert main([str(a), str(b)]) == Exit.OK
    out = capsys.readouterr().out
    assert sum(line.startswith("agree ") for line in out.splitlines()) == 2
    assert "\nmedian half-width: " in out
    assert "\nverdict: the answers hold at every place compared: 2 agree (exit 0)\n" in out
    assert main([str(a), str(c)]) == Exit.REGRESSION
    out = capsys.readouterr().out
    assert (f"disagree              {B64}: A mirrored on 2 devices | B one_device on 1 device "
            f"(equivalent to mirrored on 2 devices)") in out
    assert main([str(a), str(other)]) == Exit.USAGE
    err = capsys.readouterr().err
    assert "share 0 place(s)" in err and "Received: sweep_a=" in err
    assert main([str(a), str(tmp_path / "nowhere")]) == Exit.USAGE
    assert "Received: sweep_b=" in capsys.readouterr().err
