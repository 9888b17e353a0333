"""A sweep's budget: more runs where answers are open, until settled or out of time."""

from __future__ import annotations

import copy
import dataclasses
import random
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from bench.adaptive import budget as budget_mod
from bench.adaptive import sweep as sweep_mod
from bench.answers.places import Place, places
from bench.answers.sequential import LookPlan, Looks
from bench.launch.evidence import OFF
from bench.launch.sweep import Replication, SweepOutcome
from bench.results.schema import Breakdown, Interleaving, RunResult
from bench.results.store import SweepStore, load_sweep, save
from bench.spec import RunSpec
from reports.answers import answers_lines
from reports.report import build_from_results
from tests.helpers import fake_figures, fake_result, replicated

ONE = RunSpec(workload="mlp", strategy="one_device", devices=1, batch=32, size="tiny")
TWO = ONE.replace(strategy="mirrored", devices=2)


def _store(out: Path, spec: RunSpec, replicate: int, windows: Sequence[float],
           session: str | None = None, arms: Sequence[RunSpec] = (ONE, TWO),
           finished_at: str | None = None) -> RunResult:
    result = fake_result("ok")
    result.finished_at = finished_at or result.finished_at
    result.spec, result.key, result.replicate = spec, spec.key(), replicate
    result.replicas, result.wall_s = spec.replicas, 10.0
    result.figures = fake_figures(tuple(windows), replicas=spec.replicas)
    if session:
        result.interleaved = Interleaving(session, [a.label() for a in arms],
                                          list(arms).index(spec), len(windows), 0)
    save(result, SweepStore(out).paths(spec, replicate).result)
    return result


class FakeSweep:
    """Stands in for run_sweep: the next replicate of each spec, the answer's two
    configurations as arms of one process (mirrored 1.5x one_device, 1% noise)."""

    def __init__(self, out: Path, clock: list[float]) -> None:
        self.out, self.clock, self.calls = out, clock, 0
        self.rng = random.Random(1)

    def __call__(self, specs: Sequence[RunSpec], out: Path, *, echo: Any,
                 replication: Replication, interleave: bool, **_: Any) -> SweepOutcome:
        self.calls += 1
        self.clock[0] += 25.0
        level = 1000 * self.rng.lognormvariate(0, 0.3)
        ran = [_store(out, s, replication.runs,
                      [level * (1.5 if s == TWO else 1.0) * self.rng.lognormvariate(0, 0.01)
                       for _ in range(4)], f"p{replication.runs}") for s in specs]
        return SweepOutcome(out, ran)


def _noisy_first_runs(out: Path) -> None:
    # Two separate processes each, 40% apart from each other: nothing is settled.
    for r, level in ((1, 700.0), (2, 1300.0)):
        _store(out, ONE, r, [level] * 3)
        _store(out, TWO, r, [level * 1.5 * (0.6 if r == 1 else 1.4)] * 3)


def _spending(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, at: float
              ) -> tuple[FakeSweep, list[str], Callable[[], list[Any]]]:
    """Two noisy first runs stored and the sweep faked from clock time ``at``: the fake,
    the lines the budget says, and a call that spends 600 s on ONE and TWO."""
    _noisy_first_runs(tmp_path)
    clock = [at]
    fake = FakeSweep(tmp_path, clock)
    monkeypatch.setattr(budget_mod, "run_sweep", fake)
    lines: list[str] = []

    def spend() -> list[Any]:
        return budget_mod.spend([ONE, TWO], tmp_path, budget_s=600, started=0.0,
                                interleave=True, echo=lines.append, clock=lambda: clock[0])
    return fake, lines, spend


def test_open_answers_get_sessions_until_settled(monkeypatch: pytest.MonkeyPatch,
                                                 tmp_path: Path) -> None:
    fake, lines, spend = _spending(monkeypatch, tmp_path, 0.0)
    plan = LookPlan.for_budget(600)
    outcomes = spend()
    where = "[test] mlp[tiny], global batch 32"
    assert lines[0] == (f"budget: a look (alpha {plan.interim:.2g}) after 0 s of 600 s at 1 "
                        f"of the 1 answer(s) not settled: 0 settled; open: {where}")
    assert lines[-2].endswith(": 1 settled")
    assert lines[-1] == f"budget: settled after 75 s (alpha {plan.interim:.2g}): {where}"
    # A look after each session, each at the interim alpha, with one session more than the
    # last: at 0.05 the same sessions settle after 2, at 0.0025 after 3 (two shared
    # processes, then a third for the t quantile at the interim alpha).
    events = SweepStore(tmp_path).journal_events()
    assert LookPlan.of_journal(events) == plan
    looked = [(e["alpha"], e["sessions"]) for e in events if e.get("event") == "look"]
    assert looked == [(plan.interim, n) for n in (2, 3, 4, 5)], looked
    assert fake.calls == len(outcomes) == 3
    from bench.answers.sequential import Looks
    from bench.results.store import load_sweep

    # The report reads the answer at its last look's alpha.
    looks = Looks.of_journal(events)
    assert list(looks.by_place) == [where]
    assert looks.alpha(where) == plan.interim
    still, places = budget_mod.open_answers(load_sweep(tmp_path).results, looks)
    assert (still, places) == ([], [where])
    report = build_from_results(load_sweep(tmp_path).results, tmp_path, looks=looks)
    (rec,) = report.machines[0].workloads[0].recommendations
    assert rec.deciding is not None and rec.deciding.evidence == "pairs"
    assert rec.alpha == plan.interim


def test_a_session_that_would_overrun_the_budget_is_not_started(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake, lines, spend = _spending(monkeypatch, tmp_path, 590.0)
    outcomes = spend()
    assert outcomes == [] and fake.calls == 0
    assert "would overrun the budget; the last look (alpha 0.04) settles 0 of the 1 open " \
        "answer(s)" in lines[-1]
    from bench.answers.sequential import Looks

    events = [e for e in SweepStore(tmp_path).journal_events() if e.get("event") == "look"]
    assert [e["final"] for e in events] == [False, True]  # a first look, then the last
    assert Looks.of_journal(events).by_place == {events[0]["where"]: pytest.approx(0.04)}


@pytest.mark.parametrize("at", [0.0, 590.0])
def test_an_answer_the_last_look_left_open_is_closed_and_the_sweep_says_what_to_do(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, at: float) -> None:
    """Settled within the budget (from 0 s), nothing is left to say. Left open by the last
    look (from 590 s), the sweep says so and what to do: that look spent the place's
    alpha, so the same sweep resumed with a longer budget measures it no more (no
    session, no look), and only a new sweep can settle it."""
    fake, lines, spend = _spending(monkeypatch, tmp_path, at)
    spend()
    events = SweepStore(tmp_path).journal_events()
    line = budget_mod.open_line(events)
    assert (line is None) == (at == 0.0)
    if line is None:
        return
    assert line.startswith("1 answer(s) not settled, and their last look closed them")
    assert "new sweep with a longer budget into a new directory" in line
    looks = len([e for e in events if e.get("event") == "look"])
    resumed = budget_mod.spend([ONE, TWO], tmp_path, budget_s=3600, started=590.0,
                               interleave=True, echo=lines.append, clock=lambda: 600.0)
    assert resumed == [] and fake.calls == 0
    after = SweepStore(tmp_path).journal_events()
    assert len([e for e in after if e.get("event") == "look"]) == looks
    assert budget_mod.open_line(after) == line


@pytest.mark.parametrize("open_one", ["mirrored", "multi_worker_mirrored"])
def test_an_open_answer_measures_again_only_what_its_open_comparisons_need(
        open_one: str) -> None:
    # one_device leads; one of mirrored (in-process) and multi_worker_mirrored (its own
    # processes, taking turns in a session) is 20% noisy around it (open), the other
    # clearly slower (settled).
    results = [*replicated("one_device", 1, 32, 1000.0, run_cv=0.01)]
    for strategy in ("mirrored", "multi_worker_mirrored"):
        level, cv = (990.0, 0.2) if strategy == open_one else (500.0, 0.01)
        results += replicated(strategy, 2, 32, level, run_cv=cv)
    (place,) = places(results)
    assert place.is_open
    keys = {r.spec.strategy: r.key for r in results}
    # Two open configurations of a session: a session of those two only.
    assert set(budget_mod.to_measure(place)) == {keys["one_device"], keys[open_one]}


def test_a_lone_open_arm_is_measured_with_its_sessions_other_arms() -> None:
    # Open: one_device against a configuration that never joins a session. one_device
    # alone would run in a process of its own; it stays an arm of its session.
    specs = {s.key(): s for s in (ONE, TWO, TWO.replace(strategy="parameter_server"))}
    ps = TWO.replace(strategy="parameter_server").key()
    lone = Place("x", True, (ONE.key(), ps), specs)
    assert set(budget_mod.to_measure(lone)) == {ONE.key(), TWO.key(), ps}
    pair = Place("x", True, (ONE.key(), TWO.key()), specs)
    assert set(budget_mod.to_measure(pair)) == {ONE.key(), TWO.key()}


def test_a_configuration_that_sat_sessions_out_rejoins_at_its_answers_next_number(
        tmp_path: Path) -> None:
    three = TWO.replace(strategy="central_storage")
    store = SweepStore(tmp_path)
    for r in (1, 2, 3, 4):
        _store(tmp_path, ONE, r, [1000.0] * 3)
        _store(tmp_path, TWO, r, [1500.0] * 3)
    for r in (1, 2):  # settled after two sessions, then open again
        _store(tmp_path, three, r, [900.0] * 3)
    other = ONE.replace(batch=64)
    _store(tmp_path, other, 1, [1000.0] * 3)
    spec_of = {s.key(): s for s in (ONE, TWO, three, other)}
    still = [budget_mod.OpenAnswer("32", (ONE.key(), TWO.key(), three.key())),
             budget_mod.OpenAnswer("64", (other.key(),))]
    last_run = {a.where: budget_mod._last_run(a, spec_of, store) for a in still}
    assert last_run == {"32": 4, "64": 1}
    nexts = budget_mod._next_runs(still, set(spec_of), spec_of, last_run)
    assert {n: {s.key() for s in specs} for n, specs in nexts.items()} == {
        5: {ONE.key(), TWO.key(), three.key()}, 2: {other.key()}}
    # Only the keys the budget affords.
    assert budget_mod._next_runs(still, {three.key()}, spec_of, last_run) == {5: [three]}


def _costs(windows: dict[str, float]) -> dict[str, budget_mod.Cost]:
    """Costs of configurations that are all windows (no start-up): priced at their sum."""
    return {k: budget_mod.Cost(v) for k, v in windows.items()}


def test_open_answers_are_taken_cheapest_first_as_far_as_the_budget_goes() -> None:
    def answer(*keys: str) -> budget_mod.OpenAnswer:
        return budget_mod.OpenAnswer("x", keys)

    cost = {"a": 10.0, "b": 20.0, "c": 100.0, "d": 5.0}
    specs = {k: ONE for k in cost}
    still = [answer("c"), answer("a", "b"), answer("d")]
    margin = budget_mod.COST_MARGIN
    keys, cheapest = budget_mod._affordable(still, specs, _costs(cost), 40.0, {})
    assert keys == {"a", "b", "d"} and cheapest == pytest.approx(5.0 * margin)
    keys, cheapest = budget_mod._affordable(still, specs, _costs(cost), 4.0, {})
    assert keys == set() and cheapest == pytest.approx(5.0 * margin)
    # Priced with the margin, 35 s of last runs do not fit in 35 s: d alone goes.
    keys, _ = budget_mod._affordable(still, specs, _costs(cost), 35.0, {})
    assert keys == {"d"}


def _measured(spec: RunSpec, replicate: int, session: str, wall_s: float, window_s: float,
              together: int = 1, profile: tuple[int, float, float] | None = None,
              started: str = "2026-11-29T11:09:38") -> RunResult:
    """A run of ``spec`` measured as an arm of ``session`` (``together`` sessions
    measured in one go of ``wall_s``): ten windows of ``window_s`` in all, and where
    ``profile`` (steps, step_s, capture_s) an evidence profile after them."""
    result = fake_result()
    result.spec, result.key, result.replicate = spec, spec.key(), replicate
    result.wall_s, result.started_at = wall_s, started
    assert result.figures is not None
    result.figures.windows = [dataclasses.replace(result.figures.windows[0], index=i,
                                                  wall_s=window_s / 10) for i in range(10)]
    if profile is not None:
        result.figures.breakdown = Breakdown(step_s=profile[1], input_s=0.0, compute_s=0.0,
                                             communication_s=0.0, host_s=0.0, idle_s=0.0,
                                             input_share=0.0, compute_share=0.0,
                                             communication_share=0.0, host_share=0.0,
                                             idle_share=0.0, profiled_steps=profile[0],
                                             capture_s=profile[2])
    result.interleaved = Interleaving(session, ["a", "b", "c"], 0, 10, together=together)
    return result


def test_a_session_pays_its_windows_and_its_start_up_once() -> None:
    """A session of fewer arms than the last pays the start-up all the same: priced
    per arm, an answer down to two of its five configurations was priced at two
    fifths of its session (start-up and builds included), and a sweep overran."""
    arms = [_measured(ONE.replace(batch=b, repeats=10), 3, "s1", 40.0, 5.0)
            for b in (8, 16, 32, 64, 128)]
    costs = budget_mod.last_costs(arms)
    assert costs[arms[0].key] == budget_mod.Cost(5.0, 40.0 - 5 * 5.0, 10)
    two = budget_mod.NextRuns.of(4, [arms[0].key, arms[1].key],
                                 {a.key: a.spec for a in arms}, costs)
    assert budget_mod.priced([two], 1) == pytest.approx(
        budget_mod.COST_MARGIN * (2 * 5.0 + 15.0))
    assert budget_mod.priced([two], 1) > budget_mod.COST_MARGIN * 40.0 * 2 / 5  # even split
    # Of two answers at different run numbers, each session pays its own start-up.
    a, b = budget_mod.Cost(5.0, 20.0), budget_mod.Cost(3.0, 10.0)
    still = [budget_mod.OpenAnswer("x", ("a",)), budget_mod.OpenAnswer("y", ("b",))]
    keys, cheapest = budget_mod._affordable(still, {"a": TWO, "b": TWO}, {"a": a, "b": b},
                                            38.0 * budget_mod.COST_MARGIN, {"x": 1, "y": 2})
    assert keys == {"a", "b"} and cheapest == pytest.approx(budget_mod.COST_MARGIN * 13.0)
    keys, _ = budget_mod._affordable(still, {"a": TWO, "b": TWO}, {"a": a, "b": b},
                                     37.0 * budget_mod.COST_MARGIN, {"x": 1, "y": 2})
    assert keys == {"a"}


def test_a_session_alone_after_a_pair_is_priced_at_the_pair_s_fixed_time() -> None:
    """MobileNetV2 at batch 256, as a sweep measured it: two sessions measured together in 203 s,
    each with a default and a mirrored arm (33 s and 31 s of windows) and a central
    storage arm that measured nothing (unsupported once built), the first run's arms
    profiled after their windows. The next session ran alone in 117 s. Read as half the
    pair's wall time less three arms' windows, it was priced at 75 s, and the sweep's
    last session overran the budget by 10 s; read as the pair's whole time besides its
    windows and profiles, it is priced above what it took."""
    default, mirrored = ONE.replace(batch=256, repeats=10), TWO.replace(batch=256, repeats=10)
    cs = TWO.replace(batch=256, strategy="central_storage", repeats=10)
    pair = []
    for run in (1, 2):
        profile = (5, 1.09, 3.0) if run == 1 else None
        pair += [_measured(default, run, f"s{run}", 203.3, 33.0, 2, profile),
                 _measured(mirrored, run, f"s{run}", 203.3, 31.0, 2, profile)]
        unsupported = fake_result("unsupported")
        unsupported.spec, unsupported.key, unsupported.replicate = cs, cs.key(), run
        unsupported.wall_s, unsupported.started_at = 203.3, "2026-11-29T11:09:38"
        unsupported.interleaved = Interleaving(f"s{run}", ["a", "b", "c"], 2, 10, together=2)
        pair.append(unsupported)
    by_key = {r.key: r.spec for r in pair}
    costs = budget_mod.last_costs(pair)
    fixed = 203.3 - 2 * (33.0 + 31.0) - 2 * (5 * 1.09 + 3.0)
    assert costs[default.key()] == budget_mod.Cost(pytest.approx(33.0),
                                                   pytest.approx(fixed), 10)
    alone = budget_mod.priced([budget_mod.NextRuns.of(3, list(by_key), by_key, costs)], 1)
    assert alone == pytest.approx(budget_mod.COST_MARGIN * (64.0 + fixed))
    assert alone >= 116.6  # what it took
    # The share of the pair (the price before): below it.
    share = 203.3 / 2 - 3 * 33.0 + 64.0
    assert budget_mod.COST_MARGIN * share < 116.6


def test_sessions_measured_together_pay_the_largest_fixed_part_once_per_group() -> None:
    """The next sessions of one run number are measured two at a time on 2 cores: two
    answers' sessions together pay their windows and the larger fixed part, three pay
    the two largest (whichever two the sweep pairs, no grouping pays more); sessions of
    different run numbers, and runs in processes of their own, pay each their own."""
    cost = {"a": budget_mod.Cost(10.0, 40.0), "b": budget_mod.Cost(20.0, 30.0),
            "c": budget_mod.Cost(5.0, 50.0)}
    specs = {k: TWO for k in cost}

    def price(numbers: dict[str, int], together: int, specs: dict[str, RunSpec] = specs
              ) -> float:
        runs = [budget_mod.NextRuns.of(n, [k], specs, cost) for k, n in numbers.items()]
        return budget_mod.priced(runs, together) / budget_mod.COST_MARGIN

    assert price({"a": 3, "b": 3}, 2) == pytest.approx(30.0 + 40.0)
    assert price({"a": 3, "b": 3}, 1) == pytest.approx(30.0 + 40.0 + 30.0)
    assert price({"a": 3, "b": 4}, 2) == pytest.approx(30.0 + 40.0 + 30.0)
    assert price({"a": 3, "b": 3, "c": 3}, 2) == pytest.approx(35.0 + 50.0 + 40.0)
    alone = {**specs, "c": TWO.replace(strategy="independent")}
    assert price({"a": 3, "c": 3}, 2, alone) == pytest.approx(15.0 + 40.0 + 50.0)
    # The budget buys both answers where the pair fits, one where only it does.
    still = [budget_mod.OpenAnswer("x", ("a",)), budget_mod.OpenAnswer("y", ("b",))]
    for left, bought in ((70.0, {"a", "b"}), (69.0, {"a"})):
        keys, cheapest = budget_mod._affordable(still, specs, cost,
                                                left * budget_mod.COST_MARGIN,
                                                {"x": 2, "y": 2}, together=2)
        assert keys == bought and cheapest == pytest.approx(50.0 * budget_mod.COST_MARGIN)


def test_the_answers_with_fewest_sessions_then_the_cheapest_get_the_budget() -> None:
    cost = {"resnet": 50.0, "cnn": 24.0, "mlp": 20.0}
    specs = {k: ONE for k in cost}
    margin = budget_mod.COST_MARGIN

    def pick(sessions: dict[str, int]) -> set[str]:
        still = [budget_mod.OpenAnswer(k, (k,)) for k in ("resnet", "cnn", "mlp")]
        keys, cheapest = budget_mod._affordable(still, specs, _costs(cost),
                                                80.0 * margin, sessions)
        assert cheapest == pytest.approx(20.0 * margin)  # whatever the order
        return keys

    # As many sessions each: the cheapest first, as far as the time goes.
    assert pick({"resnet": 2, "cnn": 2, "mlp": 2}) == {"cnn", "mlp"}
    # ResNet50 a session behind: its session goes first, then the cheapest that fits.
    assert pick({"resnet": 2, "cnn": 3, "mlp": 3}) == {"resnet", "mlp"}
    # The CNN a session behind: before the MLP's next, however cheap that is.
    assert pick({"resnet": 3, "cnn": 2, "mlp": 3}) == {"cnn", "mlp"}
    assert pick({"resnet": 1, "cnn": 3, "mlp": 2}) == {"resnet", "mlp"}


def test_at_equal_sessions_the_place_with_fewest_configurations_goes_first() -> None:
    """Fewest sessions, then fewest configurations (comparisons to settle), then the
    cheapest: a dear place of three configurations is not starved by cheap places of
    eight, and between places alike the cheapest still goes first."""
    cost = {"resnet": 90.0, "cnn": 40.0, "mlp": 45.0}
    specs = {k: ONE for k in cost}
    margin = budget_mod.COST_MARGIN

    def pick(members: dict[str, int], sessions: dict[str, int]) -> set[str]:
        still = [budget_mod.OpenAnswer(k, (k,), members[k]) for k in ("resnet", "cnn", "mlp")]
        keys, _ = budget_mod._affordable(still, specs, _costs(cost), 135.0 * margin,
                                         sessions)
        return keys

    ones = {"resnet": 1, "cnn": 1, "mlp": 1}
    # ResNet50's place has 3 configurations, the others 7 and 8: it goes first, then the
    # cheapest that still fits.
    assert pick({"resnet": 3, "cnn": 7, "mlp": 8}, ones) == {"resnet", "cnn"}
    # As many configurations each: cheapest first, and the dear one waits.
    assert pick({"resnet": 3, "cnn": 3, "mlp": 3}, ones) == {"cnn", "mlp"}
    # Fewest sessions still comes before fewest configurations.
    assert pick({"resnet": 3, "cnn": 7, "mlp": 8},
                {"resnet": 2, "cnn": 1, "mlp": 1}) == {"cnn", "mlp"}


def test_each_place_s_first_settlement_is_printed_and_journaled_once(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _, lines, spend = _spending(monkeypatch, tmp_path, 100.0)
    spend()
    events = SweepStore(tmp_path).journal_events()
    first = budget_mod.settled_events(events)
    (where,) = first
    # Settled at the look after the third session: 100 s + 3 sessions of 25 s.
    assert first[where] == pytest.approx(175.0)
    assert [e["event"] for e in events].count(budget_mod.SETTLED_EVENT) == 1
    assert (f"budget: settled after 175 s (alpha {LookPlan.for_budget(600).interim:.2g}): "
            f"{where}") in lines
    assert budget_mod.settlement_line(events, 2) == (
        f"first settled: {where} after 175 s; 1 of 2 answers not settled")
    # Resumed: already settled, nothing journaled again.
    spend()
    again = SweepStore(tmp_path).journal_events()
    assert [e["event"] for e in again].count(budget_mod.SETTLED_EVENT) == 1


def test_a_sweep_that_settles_nothing_says_so() -> None:
    assert budget_mod.settlement_line([], 5) == "first settled: none; 5 of 5 answers not settled"
    event = budget_mod.settled_event
    events = [event("b", 300.0, 0.04), event("a", 120.4, 0.001),
              event("a", 500.0, 0.04)]  # only a place's first counts
    assert budget_mod.settlement_line(events, 3) == (
        "first settled: a after 120 s; b after 300 s; 1 of 3 answers not settled")


def test_a_budgeted_sweep_runs_shared_arms_first_then_says_its_provisional_answers(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # What bench run --budget does, phase by phase, without TensorFlow: the answer's
    # session (its in-process configurations, and MultiWorkerMirrored beside them), the
    # provisional answers, the parameter servers alone, the planned passes (an
    # explicit --runs 2), then the budget.
    member = ONE.replace(strategy="multi_worker_mirrored", devices=2)
    alone = ONE.replace(strategy="parameter_server", devices=2)
    calls: list[tuple[list[str], int]] = []

    def fake(specs: Sequence[RunSpec], out: Path, *, replication: Replication,
             **_: Any) -> SweepOutcome:
        calls.append(([s.strategy for s in specs], replication.runs))
        return SweepOutcome(out, [_store(out, s, replication.runs, [1000.0] * 3)
                                  for s in specs])

    monkeypatch.setattr(sweep_mod, "run_sweep", fake)
    monkeypatch.setattr(budget_mod, "run_sweep", fake)
    lines: list[str] = []
    outcome = sweep_mod.budgeted_sweep(
        [ONE, TWO, member, alone], tmp_path, budget_s=1.0, started=time.monotonic(),
        interleave=True, evidence=OFF, passes=Replication(runs=2), show=answers_lines,
        echo=lines.append)
    session = ["one_device", "mirrored", "multi_worker_mirrored"]
    assert calls == [(session, 1), (["parameter_server"], 1), ([*session, "parameter_server"], 2)]
    assert len(outcome.ran) == 8 and not outcome.interrupted
    assert lines[0].startswith("budget 1 s: the answer that can settle first, then "
                               "provisional answers after each answer's first session")
    assert lines[1].startswith("\nprovisional answers (") and "still to come" in lines[1]
    assert lines[2].startswith("  mlp[tiny], batch 32: ")  # what the answer is worth
    assert lines[4].split()[:3] == ["place", "answer", "kind"]  # the answers' table
    assert lines[-1].startswith("budget: ")  # then the budget's looks


def _session(out: Path, pair: tuple[RunSpec, RunSpec], n: int, ratio: float,
             noise: float, finished_at: str | None = None) -> None:
    """Session ``n`` of ``pair`` (both arms of one process): the second arm ``ratio``
    times the first, each window ``noise`` apart (seeded by the session)."""
    rng = random.Random(n * 100 + pair[0].batch)
    level = 1000.0 * rng.lognormvariate(0, 0.2)
    for arm, spec in enumerate(pair):
        windows = [level * (ratio if arm else 1.0) * rng.lognormvariate(0, noise)
                   for _ in range(4)]
        _store(out, spec, n, windows, f"b{pair[0].batch}-s{n}", pair, finished_at)


def test_a_settled_answer_is_read_as_its_settling_look_read_it(tmp_path: Path) -> None:
    """Results finished after a place settled (here a contradicting session; in a
    sweep, other places' shortened sessions, which widen the noise pool it borrows) do
    not unsettle it: the report, and the budget's last look, read it from the results
    stored by its settlement. Without the settlement's time, all results are read."""
    from bench.results.store import load_sweep

    clear = (ONE.replace(batch=64), TWO.replace(batch=64))  # 1.5x at 1%
    plan = LookPlan.for_budget(600.0)
    for n in (1, 2, 3):
        _session(tmp_path, clear, n, 1.5, 0.01)
    before = load_sweep(tmp_path).results
    (at_look,) = places(before, Looks(default=plan.interim))
    shown = answers_lines(before, Looks(default=plan.interim))
    assert not at_look.is_open
    assert budget_mod.look(before, tmp_path, plan, 10.0, 600.0, lambda _: None) == []
    _session(tmp_path, clear, 4, 0.7, 0.01, finished_at="2999-01-01T00:00:00+00:00")
    results = load_sweep(tmp_path).results
    looks = Looks.of_journal(SweepStore(tmp_path).journal_events())
    assert looks.settled_at.keys() == {at_look.where}
    (read,) = places(results, looks)
    # The same answer, saying that the later session's two runs were not read.
    note = " (as settled: 2 later runs of this place not read)"
    now = answers_lines(results, looks)
    assert [line.replace(note, "") for line in now] == shown and not read.is_open
    assert sum(note in line for line in now) == 1 and not any(note in s for s in shown)
    assert budget_mod.open_answers(results, looks)[0] == []
    (again,) = places(results, looks.unsettled())  # what the fix stops
    assert again.is_open and answers_lines(results, looks.unsettled()) != shown
    assert len(budget_mod.open_answers(results, looks.unsettled())[0]) == 1


def test_a_look_reads_only_the_places_it_could_settle(tmp_path: Path) -> None:
    """A look spends alpha only where it can settle: a place with two sessions or more
    and more than at its last look. A place read settled is journaled settled once and
    is neither measured nor looked at again; the others stay open."""
    close = (ONE, TWO)  # 1% apart at 20% noise: open at any look here
    clear = (ONE.replace(batch=64), TWO.replace(batch=64))  # 1.5x at 1%
    plan, lines = LookPlan.for_budget(600.0), []
    for n in (1, 2):
        _session(tmp_path, close, n, 1.01, 0.2)
    _session(tmp_path, clear, 1, 1.5, 0.01)

    def looked() -> list[tuple[str, int]]:
        return [(e["where"].rsplit(" ", 1)[-1], e["sessions"])
                for e in SweepStore(tmp_path).journal_events() if e.get("event") == "look"]

    def look() -> list[budget_mod.OpenAnswer]:
        return budget_mod.look(load_sweep(tmp_path).results, tmp_path, plan, 10.0, 600.0,
                               lines.append)

    from bench.results.store import load_sweep

    still = look()  # batch 32 has two sessions, batch 64 one: no look can settle it
    assert looked() == [("32", 2)]
    assert sorted((a.where.rsplit(" ", 1)[-1], a.sessions) for a in still) == [("32", 2),
                                                                               ("64", 1)]
    assert len(look()) == 2 and looked() == [("32", 2)]  # no new session: no new look
    for n in (2, 3):
        _session(tmp_path, clear, n, 1.5, 0.01)
    still = look()
    assert looked() == [("32", 2), ("64", 3)]
    assert [a.where.rsplit(" ", 1)[-1] for a in still] == ["32"]
    assert lines[-1].startswith("budget: settled after 10 s (alpha 0.0025): ")
    assert lines[-1].endswith("global batch 64")
    look()  # nothing new: the settled place is not read again
    assert looked() == [("32", 2), ("64", 3)]
    assert budget_mod.settled_events(SweepStore(tmp_path).journal_events()).keys() == {
        still[0].where.replace("32", "64")}


def test_a_look_waits_for_every_configuration_planned_at_the_place(tmp_path: Path) -> None:
    """A configuration that runs alone comes after the sessions; a look before it ran
    would settle the place without it, for good. The place waits (no look, no alpha
    spent) until it has a result, then a look settles it with it in. A planned
    baseline (independent copies: a ceiling, not a choice) does not hold a place."""
    from bench.results.store import load_sweep

    clear = (ONE.replace(batch=64), TWO.replace(batch=64))  # 1.5x at 1%
    alone = ONE.replace(strategy="parameter_server", devices=2, batch=64)
    baseline = ONE.replace(strategy="independent", devices=2, batch=64)
    plan = LookPlan.for_budget(600.0)
    for n in (1, 2, 3):
        _session(tmp_path, clear, n, 1.5, 0.01)

    def look(planned: Sequence[RunSpec]) -> list[budget_mod.OpenAnswer]:
        return budget_mod.look(load_sweep(tmp_path).results, tmp_path, plan, 10.0, 600.0,
                               lambda _: None, planned=planned)

    def looks() -> int:
        return sum(e.get("event") == "look" for e in SweepStore(tmp_path).journal_events())

    (waiting,) = look([*clear, alone, baseline])
    assert waiting.waiting == 1 and looks() == 0
    for n in (1, 2, 3):  # clearly slower, in runs of its own
        _store(tmp_path, alone, n, [300.0 + n, 305.0, 298.0, 302.0])
    assert look([*clear, alone, baseline]) == [] and looks() == 1


def test_a_planned_baseline_alone_does_not_hold_a_look(tmp_path: Path) -> None:
    clear = (ONE.replace(batch=64), TWO.replace(batch=64))
    baseline = ONE.replace(strategy="independent", devices=2, batch=64)
    for n in (1, 2, 3):
        _session(tmp_path, clear, n, 1.5, 0.01)
    still = budget_mod.look(load_sweep(tmp_path).results, tmp_path,
                            LookPlan.for_budget(600.0), 10.0, 600.0, lambda _: None,
                            planned=[*clear, baseline])
    assert still == []


@pytest.mark.parametrize("wall_s, sessions", [(150.0, 3), (250.0, 2)])
def test_the_sweep_opens_with_the_answer_of_fewest_configurations(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, wall_s: float, sessions: int
        ) -> None:
    """Chosen before any figure: the unit of fewest configurations (ResNet50's two arms
    in the CPU preset) runs three sessions first, each only where the last one's wall
    time says it ends within the first third of the budget (600 s: 200 s), then a look;
    then the other answers' first sessions."""
    three = [ONE.replace(batch=64), TWO.replace(batch=64),
             ONE.replace(batch=64, strategy="central_storage", devices=2)]
    two = [ONE, TWO]
    calls: list[tuple[list[int], int]] = []
    untils: set[float | None] = set()

    def fake(specs: Sequence[RunSpec], out: Path, *, replication: Replication,
             **kwargs: Any) -> SweepOutcome:
        calls.append(([s.batch for s in specs], replication.runs))
        untils.add(kwargs.get("windows_until"))
        ran = [_store(out, s, r, [1000.0 * (1.5 if s.devices == 2 else 1)] * 3)
               for r in range(replication.first, replication.runs + 1) for s in specs]
        for r in ran:
            r.wall_s = wall_s
        return SweepOutcome(out, ran)

    monkeypatch.setattr(sweep_mod, "run_sweep", fake)
    monkeypatch.setattr(budget_mod, "run_sweep", fake)
    monkeypatch.setattr(sweep_mod, "spend", lambda *a, **k: [])
    assert sweep_mod.opening_unit([tuple(three), tuple(two), tuple(two[::-1])]) == tuple(two)
    lines: list[str] = []
    started = time.monotonic()
    sweep_mod.budgeted_sweep([*three, *two], tmp_path, budget_s=600.0,
                             started=started, interleave=True, evidence=OFF,
                             show=answers_lines, echo=lines.append)
    # The opening's sessions' rounds stop at the end of the budget's first third, the
    # first pass's at its end, less what a session spends after its windows.
    assert untils == {started + 200.0, started + 600.0 - budget_mod.ENDS_S}
    # The first two sessions measured together (one call), the third priced alone; the
    # other answer's first two sessions together.
    assert calls == [*[([32, 32], n) for n in range(2, sessions + 1)], ([64, 64, 64], 2)]
    stops = [line for line in lines if line.startswith("the opening stops")]
    assert len(stops) == (sessions < 3)
    provisional = next(line for line in lines if "provisional answers (" in line)
    assert f"2 sessions each, measured together, {sessions} of the opening's" in provisional


@pytest.mark.parametrize("ratio, noise, wall_s, sessions, looks", [
    (1.5, 0.01, 10.0, 3, 1),   # clear: settled at the look after the third session
    (1.01, 0.2, 10.0, 4, 2),   # open: a fourth session and a look, then half the plan's
    (1.01, 0.2, 80.0, 3, 1),   # open, but a fourth would end after the first third
])
def test_an_open_opening_takes_another_session_within_the_first_third(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, ratio: float, noise: float,
        wall_s: float, sessions: int, looks: int) -> None:
    """The opening looks after its third session and, while its answer is open, takes
    another session and look where one ends within the first third (600 s: 200 s) and
    half of the plan's interim looks are not spent (600 s: 4 looks, so 2)."""
    clock = [0.0]
    calls: list[int] = []

    def fake(specs: Sequence[RunSpec], out: Path, *, replication: Replication,
             **_: Any) -> SweepOutcome:
        calls.append(replication.runs)
        mine = range(replication.first, replication.runs + 1)
        # Sessions measured together build side by side: the pair takes about what one
        # alone does, besides its windows.
        clock[0] += wall_s
        for n in mine:
            _session(out, (ONE, TWO), n, ratio, noise)
        ran = [r for r in load_sweep(out).results if r.replicate in mine]
        for r in ran:
            r.wall_s = wall_s
            assert r.interleaved is not None
            r.interleaved.together = len(mine)
        return SweepOutcome(out, ran)

    from bench.results.store import load_sweep

    monkeypatch.setattr(sweep_mod, "run_sweep", fake)
    lines: list[str] = []
    plan = LookPlan.for_budget(600.0)
    assert plan.max_interim == 4
    sweep_mod._open_with([ONE, TWO], tmp_path, budget_s=600.0, started=0.0, evidence=OFF,
                         plan=plan, planned=[ONE, TWO], echo=lines.append,
                         clock=lambda: clock[0])
    assert calls == list(range(2, sessions + 1))  # the first two together
    taken = [e["sessions"] for e in SweepStore(tmp_path).journal_events()
             if e.get("event") == "look"]
    assert taken == list(range(3, 3 + looks))
    settled = budget_mod.settled_events(SweepStore(tmp_path).journal_events())
    assert bool(settled) == (ratio > 1.2)
    assert any(line.startswith("the opening stops at 3") for line in lines) == (wall_s > 50)


@pytest.mark.parametrize("alone_planned", [False, True])
def test_an_opening_whose_place_has_a_configuration_to_run_alone_stops_without_a_look(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, alone_planned: bool) -> None:
    """A clear opening settles at its look after three sessions; with a parameter-server
    run planned at its place (it runs alone, later) there is no look and no further
    session: its answer is read once that configuration has run."""
    clock = [0.0]

    def fake(specs: Sequence[RunSpec], out: Path, *, replication: Replication,
             **_: Any) -> SweepOutcome:
        clock[0] += 10.0
        for n in range(replication.first, replication.runs + 1):
            _session(out, (ONE, TWO), n, 1.5, 0.01)
        return SweepOutcome(out, load_sweep(out).results)

    monkeypatch.setattr(sweep_mod, "run_sweep", fake)
    alone = ONE.replace(strategy="parameter_server", devices=2)
    lines: list[str] = []
    sweep_mod._open_with([ONE, TWO], tmp_path, budget_s=600.0, started=0.0, evidence=OFF,
                         plan=LookPlan.for_budget(600.0),
                         planned=[ONE, TWO, *([alone] if alone_planned else [])],
                         echo=lines.append, clock=lambda: clock[0])
    events = SweepStore(tmp_path).journal_events()
    looks = [e for e in events if e.get("event") == "look"]
    assert len(looks) == (0 if alone_planned else 1)
    assert bool(budget_mod.settled_events(events)) != alone_planned
    assert any("waits for its configurations that run alone" in line
               for line in lines) == alone_planned
    assert clock[0] == 20.0  # three sessions: the first two together, then one


def test_a_resumed_opening_goes_on_past_the_sessions_it_stored(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Interrupted after its first session, the opening resumes with its second and
    third: a session the store already holds is skipped, not taken for one that could
    not run."""
    calls: list[int] = []

    def fake(specs: Sequence[RunSpec], out: Path, *, replication: Replication,
             **_: Any) -> SweepOutcome:
        calls.append((replication.first, replication.runs))
        # Run 1 was stored before the interruption: skipped, the others run.
        return SweepOutcome(out, [_store(out, s, r, [1000.0] * 3)
                                  for r in range(max(2, replication.first),
                                                 replication.runs + 1) for s in specs],
                            skipped=list(specs) if replication.first == 1 else [])

    monkeypatch.setattr(sweep_mod, "run_sweep", fake)
    outcome = sweep_mod._open_with([ONE, TWO], tmp_path, budget_s=600.0,
                                   started=time.monotonic(), evidence=OFF,
                                   plan=LookPlan.for_budget(600.0),
                                   planned=[ONE, TWO], echo=lambda _: None)
    assert calls == [(1, 2), (3, 3)] and len(outcome.ran) == 4


def test_a_budget_of_0_turns_it_off_and_a_bad_one_names_the_value() -> None:
    import argparse

    from bench.cli.run import budget_duration

    assert budget_duration("0") == 0.0 and budget_duration("10m") == 600.0
    with pytest.raises(argparse.ArgumentTypeError, match="Received: '-5s'"):
        budget_duration("-5s")


def _heavy(spec: RunSpec, step_s: float, launch_s: float = 20.0) -> RunResult:
    """A measured run of ``spec`` whose steps take ``step_s``."""
    result = _measured(spec, 1, "h1", 100.0, 30.0)
    assert result.figures is not None
    result.figures.step_time = dataclasses.replace(result.figures.step_time, median_s=step_s)
    result.figures.startup = dataclasses.replace(result.figures.startup,
                                                 launch_to_first_step_s=launch_s)
    return result


def test_a_first_run_is_priced_from_its_workload_s_measured_steps() -> None:
    """A window lasts its max_seconds, or min_steps steps where those take longer: at a
    second a step (MobileNetV2 at batch 256 on 2 cores) ten rounds of two arms are not
    10 s but 60 s. A session pays the workload's largest fixed part, a run of its own
    the longest launch to first step; a workload never measured has no price."""
    knobs = {"max_seconds": 0.5, "min_steps": 3, "max_steps": 400, "repeats": 10}
    default = ONE.replace(batch=256, **knobs)
    mirrored = TWO.replace(batch=256, **knobs)
    measured = [_heavy(default, 1.0), _heavy(mirrored, 0.9)]
    fixed = 100.0 - 2 * 30.0
    m = budget_mod.COST_MARGIN
    # Both at 1 s a step (the slowest per example): 3 s windows.
    assert budget_mod.first_price([default, mirrored], measured) == pytest.approx(
        m * (fixed + 2 * 10 * 3.0))
    assert budget_mod.first_price([default, mirrored], measured, sessions=2,
                                  rounds=2) == pytest.approx(m * (fixed + 2 * 2 * 2 * 3.0))
    # At batch 16 a step takes 1/16 s: the window is its max_seconds.
    small = [default.replace(batch=16), mirrored.replace(batch=16)]
    assert budget_mod.first_price(small, measured) == pytest.approx(m * (fixed + 2 * 10 * 0.5))
    alone = TWO.replace(strategy="independent", batch=64, **{**knobs, "repeats": 20})
    assert budget_mod.first_price([alone], measured) == pytest.approx(
        m * (20.0 + 20 * 0.75))
    assert budget_mod.first_price([alone.replace(workload="cnn")], measured) is None


def test_the_first_pass_leaves_out_what_the_budget_no_longer_pays_for(
        tmp_path: Path) -> None:
    """After the opening, a user's model slower than the preset's points were sized for:
    a unit of its workload whose least price does not fit the time left is left out and
    said, with the way to measure it; one that fits runs; a workload with nothing
    measured to price it from is priced by a first guess from its FLOPs."""
    knobs = {"max_seconds": 0.5, "min_steps": 3, "max_steps": 400, "repeats": 20}
    ps = TWO.replace(strategy="parameter_server", batch=64, **knobs)
    independent = TWO.replace(strategy="independent", batch=64, **knobs)
    other = ps.replace(workload="cnn")
    result = _heavy(ONE.replace(batch=64, **knobs), 0.64)  # 2 s windows: 40 s a run
    save(result, SweepStore(tmp_path).paths(result.spec, 1).result)
    lines: list[str] = []
    price = budget_mod.COST_MARGIN * (20.0 + 20 * 3 * 0.64)
    kept = sweep_mod._within([ps, independent, other], tmp_path, 1.5 * price, 1, True,
                             lines.append)
    assert kept == [([ps], pytest.approx(price)), ([other], 0.0)]
    assert len(lines) == 1 and independent.label() in lines[0]
    assert f"(~{price:.0f} s)" in lines[0] and "BENCH_BUDGET_S" in lines[0]
    lines.clear()
    kept = sweep_mod._within([ps, independent, other], tmp_path, 2 * price, 1, True,
                             lines.append)
    assert [unit for unit, _ in kept] == [[ps], [independent]]
    assert len(lines) == 1 and other.label() in lines[0] and "a first guess" in lines[0]
    lines.clear()
    guess = sweep_mod.first_guess_s([other], 1)
    kept = sweep_mod._within([ps, independent, other], tmp_path, 2 * price + guess, 1, True,
                             lines.append)
    assert [unit for unit, _ in kept] == [[ps], [independent], [other]]
    assert lines == []
    # Resumed with the parameter-server run stored: it costs nothing (run_sweep runs
    # only what is missing), so the independent copies fit where they did not.
    done = _heavy(ps, 0.64)
    save(done, SweepStore(tmp_path).paths(ps, 1).result)
    kept = sweep_mod._within([ps, independent, other], tmp_path, 1.5 * price, 1, True,
                             lines.append)
    assert kept == [([ps], 0.0), ([independent], pytest.approx(price)), ([other], 0.0)]
    assert lines == []


def test_where_no_whole_session_fits_a_shorter_one_takes_the_time_left() -> None:
    """A MobileNetV2 sweep stopped 114 s before its budget's end, its next session priced
    at 116 s. A session whose rounds stop at the budget's end costs its fixed part and
    two rounds at least: where that fits, the first open answer in the budget's order
    gets it; where not even that fits, none does."""
    m = budget_mod.COST_MARGIN
    cost = {"a": budget_mod.Cost(60.0, 50.0, 10), "b": budget_mod.Cost(40.0, 30.0, 10)}
    specs = {k: TWO.replace(repeats=10) for k in cost}
    still = [budget_mod.OpenAnswer("x", ("a",), 2), budget_mod.OpenAnswer("y", ("b",), 3)]
    assert cost["a"].at(2) == budget_mod.Cost(12.0, 50.0, 2)
    assert cost["a"].at(20) == budget_mod.Cost(120.0, 50.0, 20)
    assert budget_mod.Cost(60.0, 50.0).at(2) == budget_mod.Cost(60.0, 50.0)  # not known
    # Whole, x costs 121 s and y 77 s: neither fits 70 s.
    assert budget_mod._affordable(still, specs, cost, 70.0, {"x": 2, "y": 2})[0] == set()
    # Fewest sessions first, then fewest configurations: x, at least 62 s.
    assert budget_mod._shorter(still, specs, cost, 70.0, {"x": 2, "y": 2}) == {"a"}
    assert budget_mod._shorter(still, specs, cost, 62.0 * m, {"x": 2, "y": 2}) == {"a"}
    # x does not fit even short, y does (at least 38 s).
    assert budget_mod._shorter(still, specs, cost, 50.0, {"x": 2, "y": 2}) == {"b"}
    assert budget_mod._shorter(still, specs, cost, 38.0 * m - 0.1, {"x": 2, "y": 2}) == set()
    # y a session behind goes first.
    assert budget_mod._shorter(still, specs, cost, 70.0, {"x": 3, "y": 2}) == {"b"}


def test_the_budget_s_sessions_stop_their_rounds_before_its_end(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Every session the budget starts is told when its rounds must stop (the budget's
    end less what a session spends after its windows); with no whole session left to
    afford, a shorter one is started and said."""
    fake, lines, spend = _spending(monkeypatch, tmp_path, at=470.0)
    # Whole (three rounds), the next session costs 165 s; with two, 128 s: 130 s left
    # take it, and the 105 s left after it (the fake's sessions take 25 s) take none.
    monkeypatch.setattr(budget_mod, "last_costs", lambda results: {
        ONE.key(): budget_mod.Cost(60.0, 50.0, 3), TWO.key(): budget_mod.Cost(40.0, 30.0, 3)})
    untils: list[float | None] = []
    inner = budget_mod.run_sweep

    def recording(*args: Any, **kwargs: Any) -> SweepOutcome:
        untils.append(kwargs.get("windows_until"))
        return inner(*args, **kwargs)

    monkeypatch.setattr(budget_mod, "run_sweep", recording)
    spend()
    assert untils == [600.0 - budget_mod.ENDS_S] and fake.calls == 1
    assert any("next session (~165 s) would overrun the budget; a shorter one, its rounds "
               "stopping at the budget's end" in line for line in lines), lines


def test_each_first_pass_unit_leaves_the_units_after_it_their_least_price(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The first pass measures its units one by one, each unit's rounds stopping early
    enough that the units after it still get their least price: a first unit measured
    whole must not leave the next to start after the budget's end. Units of a workload
    with nothing measured have no price and reserve nothing."""
    opening = [ONE, TWO]
    b64 = [ONE.replace(batch=64), TWO.replace(batch=64)]
    b128 = [ONE.replace(batch=128), TWO.replace(batch=128)]
    cnn = [s.replace(workload="cnn") for s in b64]
    calls: list[tuple[tuple[str, int], float | None]] = []

    def fake(specs: Sequence[RunSpec], out: Path, *, replication: Replication,
             **kwargs: Any) -> SweepOutcome:
        calls.append(((specs[0].workload, specs[0].batch), kwargs.get("windows_until")))
        ran = [_store(out, s, r, [1000.0 * (1.5 if s.devices == 2 else 1)] * 3)
               for r in range(replication.first, replication.runs + 1) for s in specs]
        return SweepOutcome(out, ran)

    monkeypatch.setattr(sweep_mod, "run_sweep", fake)
    monkeypatch.setattr(sweep_mod, "spend", lambda *a, **k: [])
    started = time.monotonic()
    sweep_mod.budgeted_sweep([*opening, *b64, *b128, *cnn], tmp_path, budget_s=600.0,
                             started=started, interleave=True, evidence=OFF,
                             echo=lambda _: None)
    first = {unit: until for unit, until in calls if unit != ("mlp", 32)}
    # What the first pass was planned from: the opening's runs.
    opened = [r for r in load_sweep(tmp_path).results if r.spec.batch == 32]
    end = started + 600.0 - budget_mod.ENDS_S
    least = budget_mod.first_price(b128, opened, 2, 2)
    assert budget_mod.first_price(cnn, opened, 2, 2) is None
    assert least is not None and least > 0
    assert first[("mlp", 64)] == pytest.approx(end - least, abs=1.0)
    assert first[("mlp", 128)] == pytest.approx(end) and first[("cnn", 64)] == pytest.approx(end)


def test_a_first_pass_phase_with_nothing_priced_runs_in_one_call(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The preset's own workloads have nothing measured to price them from after the
    opening: their phase runs as one call (one progress count), its rounds stopping
    before the budget's end."""
    cnn = [s.replace(workload="cnn", batch=b) for b in (64, 128) for s in (ONE, TWO)]
    calls: list[tuple[list[tuple[str, int]], float | None]] = []

    def fake(specs: Sequence[RunSpec], out: Path, *, replication: Replication,
             **kwargs: Any) -> SweepOutcome:
        calls.append(([(s.workload, s.batch) for s in specs], kwargs.get("windows_until")))
        return SweepOutcome(out, [_store(out, s, r, [1000.0] * 3)
                                  for r in range(replication.first, replication.runs + 1)
                                  for s in specs])

    monkeypatch.setattr(sweep_mod, "run_sweep", fake)
    monkeypatch.setattr(sweep_mod, "spend", lambda *a, **k: [])
    started = time.monotonic()
    sweep_mod.budgeted_sweep([ONE, TWO, *cnn], tmp_path, budget_s=600.0, started=started,
                             interleave=True, evidence=OFF, echo=lambda _: None)
    phase = [c for c in calls if c[0][0][0] == "cnn"]
    assert len(phase) == 1 and len(phase[0][0]) == 4
    assert phase[0][1] == pytest.approx(started + 600.0 - budget_mod.ENDS_S)


def test_a_run_of_its_own_is_priced_from_the_launch_of_a_process_like_its_own() -> None:
    """Independent copies start a one-device process each: an eight-GPU (here two-device)
    process's long launch is not theirs; without a process like theirs measured, the
    longest launch prices them."""
    knobs = {"max_seconds": 0.5, "min_steps": 3, "max_steps": 400, "repeats": 20}
    one = ONE.replace(batch=64, **knobs)
    wide = TWO.replace(batch=64, **knobs)
    alone = TWO.replace(strategy="independent", batch=64, **knobs)
    m = budget_mod.COST_MARGIN
    both = [_heavy(one, 0.01, launch_s=20.0), _heavy(wide, 0.01, launch_s=80.0)]
    assert budget_mod.first_price([alone], both) == pytest.approx(m * (20.0 + 20 * 0.5))
    assert budget_mod.first_price([alone], both[1:]) == pytest.approx(m * (80.0 + 20 * 0.5))


def test_a_once_per_machine_jit_stays_out_of_the_next_runs_prices() -> None:
    """The driver's JIT a cold CUDA cache cost the first run (``Warmup.jit_s``) is paid
    once per machine: neither the configuration's measured warm-up, nor its session's
    fixed part, nor a run of its own's launch carries it into the next price."""
    from bench.adaptive.pricing import measured_price

    knobs = {"max_seconds": 0.5, "min_steps": 3, "max_steps": 400, "repeats": 20}
    one = ONE.replace(batch=64, **knobs)
    plain = _heavy(one, 0.01, launch_s=170.0)
    jit = copy.deepcopy(plain)
    assert jit.figures is not None and plain.figures is not None
    jit.figures.warmup = dataclasses.replace(jit.figures.warmup, jit_s=150.0)
    assert measured_price(plain).warmup_s - measured_price(jit).warmup_s == \
        pytest.approx(min(150.0, plain.figures.warmup.total_s))
    assert budget_mod.Cost.of(plain).fixed_s - budget_mod.Cost.of(jit).fixed_s == \
        pytest.approx(min(150.0, budget_mod.Cost.of(plain).fixed_s))
    alone = TWO.replace(strategy="independent", batch=64, **knobs)
    m = budget_mod.COST_MARGIN
    assert budget_mod.first_price([alone], [jit]) == pytest.approx(m * (20.0 + 20 * 0.5))
    assert budget_mod.first_price([alone], [plain]) == pytest.approx(m * (170.0 + 20 * 0.5))


def test_a_read_settles_only_with_new_sessions(tmp_path: Path) -> None:
    """A place read at a look and left open is not read again on the same sessions
    (the queue may skip it while others run): that read would spend alpha no look
    counted, and might settle. With one more session it is looked at and settles."""
    from bench.answers.sequential import look_event

    clear = (ONE.replace(batch=64), TWO.replace(batch=64))  # 1.5x at 1%: clear at 3
    plan = LookPlan.for_budget(600.0)
    for n in (1, 2, 3):
        _session(tmp_path, clear, n, 1.5, 0.01)

    def look() -> list[budget_mod.OpenAnswer]:
        return budget_mod.look(load_sweep(tmp_path).results, tmp_path, plan, 10.0, 600.0,
                               lambda _: None)

    (answer,) = places(load_sweep(tmp_path).results, Looks(default=plan.interim))
    assert not answer.is_open  # the three sessions read settled at the look's alpha
    store = SweepStore(tmp_path)
    store.journal(look_event(answer.where, plan.interim, final=False, sessions=3))
    (still,) = look()  # read once at these three sessions already: open, no look
    assert still.sessions == 3
    assert budget_mod.settled_events(store.journal_events()) == {}
    _session(tmp_path, clear, 4, 1.5, 0.01)
    assert look() == []
    assert budget_mod.settled_events(store.journal_events()).keys() == {answer.where}
