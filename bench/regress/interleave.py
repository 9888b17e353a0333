"""One A/B session: baseline and candidate runs interleaved in randomized pairs, decided
sequentially within a time budget (the statistics are ``bench.regress.ab``).

A side is what differs between baseline and candidate: the interpreter its runs start
under (another virtual environment), environment variables set in the run's processes
and workload parameters over the configuration's. Each run is
its own process (the runner: ``bench.launch.sweep.run_replicate`` at the CLI, a fake
in tests). Pairs are run in blocks up to the plan's next look, the pairs of a block
alternating AB and BA from a seeded random start, so that a trend inside the session
adds noise to the ratios and no bias. The run's figure is the median of its window
throughputs (``bench.results.stats.runs.run_figure``); higher is better.

The plan (how many pairs, hence where alpha is spent) is fixed after the first block:
the budget divided by the time a pair took so far. Runs slower than that end the
session early, with a last look that spends the alpha left (``Plan.final_alpha``).
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from bench.exits import Exit
from bench.launch.interpreter import Interpreter
from bench.regress.ab import (
    DEFAULT_ALPHA,
    DEFAULT_BLOCK_PAIRS,
    DEFAULT_BUDGET_S,
    DEFAULT_MIN_PAIRS,
    DEFAULT_THRESHOLD,
    Decision,
    Plan,
    Verdict,
    decide,
    pairs_for_budget,
)
from bench.regress.options import BASELINE, CANDIDATE
from bench.results.schema import RunResult
from bench.results.stats.runs import run_figure, throughput_runs
from bench.spec import RunSpec, lane_of, on_lane

# Quick runs (a tiny model) would plan thousands of looks; past a few hundred pairs a
# comparison has its answer or the noise is the problem, not the budget.
MAX_PLANNED_PAIRS = 400


@dataclass(frozen=True)
class Side:
    """What one side sets over the configuration: the interpreter (None: this one),
    environment variables, workload params."""

    name: str
    env: Mapping[str, str] = field(default_factory=dict)
    params: Mapping[str, Any] = field(default_factory=dict)
    python: Interpreter | None = None

    @property
    def python_path(self) -> str | None:
        """The interpreter the side's runs start under (None: this one)."""
        return self.python.path if self.python is not None else None

    def spec(self, spec: RunSpec) -> RunSpec:
        """``spec`` with this side's workload parameters (validated by RunSpec), on the
        lane its KERAS_BACKEND names (``on_lane``: SpecError where it has none)."""
        out = spec.replace(params={**spec.params, **self.params}) if self.params else spec
        lane = lane_of(self.env)
        return out if lane is None else on_lane(out, lane)

    def describe(self) -> str:
        """``python /venv/bin/python (TensorFlow 2.16.1, ...), K=V, ...``."""
        items = [f"python {self.python.describe()}"] if self.python is not None else []
        items += [f"{k}={v}" for k, v in {**self.env, **self.params}.items()]
        return ", ".join(items) or "this environment"

    def identity(self) -> dict[str, Any]:
        """What the history stores of the side (with its runs' own fingerprints)."""
        return {"python": self.python.identity() if self.python is not None else None,
                "env": dict(self.env), "params": dict(self.params)}


# (the side's spec, the side, pair number from 1) -> the run's result
Runner = Callable[[RunSpec, Side, int], RunResult]


@dataclass(frozen=True)
class PairOutcome:
    """One pair's statistic, log(candidate / baseline), or why the pair has none.

    ``environments``: each side's fingerprint as its run reported it.
    """

    log_ratio: float | None
    environments: dict[str, dict[str, Any]] = field(default_factory=dict)
    failed: str | None = None


# (each side's spec by side name, "AB" or "BA", pair number from 1) -> the pair
PairRunner = Callable[[Mapping[str, RunSpec], str, int], PairOutcome]


def process_pairs(runner: Runner, baseline: Side, candidate: Side) -> PairRunner:
    """Pairs of two runs, each its own process, in the pair's order; the statistic is
    the log ratio of the runs' figures."""
    def run(specs: Mapping[str, RunSpec], order: str, pair: int) -> PairOutcome:
        figures: dict[str, float] = {}
        envs: dict[str, dict[str, Any]] = {}
        for side in ((baseline, candidate) if order == "AB" else (candidate, baseline)):
            result = runner(specs[side.name], side, pair)
            value = _figure(result)
            if value is None:
                return PairOutcome(None, envs, f"{side.name} run of pair {pair} gave no "
                                               f"figure: {result.status} "
                                               f"{result.reason or ''}".strip())
            figures[side.name] = value
            envs[side.name] = dict(result.environment or {})
        return PairOutcome(math.log(figures[CANDIDATE] / figures[BASELINE]), envs)
    return run


@dataclass
class Session:
    """One configuration's A/B session: its pairs so far and the last decision.

    ``failed`` names a run that gave no figure (the session then stops: exit 3).
    """

    spec: RunSpec
    baseline: Side
    candidate: Side
    log_ratios: list[float] = field(default_factory=list)
    orders: list[str] = field(default_factory=list)  # "AB" or "BA", one a pair
    plan: Plan | None = None
    decision: Decision | None = None
    failed: str | None = None
    wall_s: float = 0.0
    # Each side's first measured run's fingerprint (its interpreter, TensorFlow, machine):
    # what the runs themselves say they ran on, stored with the session's ratio.
    environments: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def exit_code(self) -> Exit:
        if self.failed is not None:
            return Exit.RUNS_FAILED
        if self.decision is None:
            raise ValueError(f"session of {self.spec.label()} has no decision yet. "
                             f"Received: pairs={len(self.log_ratios)}")
        return self.decision.exit_code


def _figure(result: RunResult) -> float | None:
    runs = throughput_runs([result])
    return run_figure(runs[0]) if runs else None


def run_session(spec: RunSpec, baseline: Side, candidate: Side, runner: Runner | None, *,
                budget_s: float = DEFAULT_BUDGET_S, threshold: float = DEFAULT_THRESHOLD,
                alpha: float = DEFAULT_ALPHA, seed: int = 0,
                echo: Callable[[str], None] = print,
                clock: Callable[[], float] = time.monotonic,
                pairs: PairRunner | None = None) -> Session:
    """Run pairs until the sequential decision settles or the budget is spent.

    A pair is two runs of ``runner``, each its own process (``process_pairs``), unless
    ``pairs`` measures pairs another way (both sides in one process: window_pairs).
    """
    if budget_s <= 0:
        raise ValueError(f"the budget must be > 0 s. Received: budget_s={budget_s!r}")
    rng = random.Random(seed)
    session = Session(spec, baseline, candidate)
    specs = {BASELINE: baseline.spec(spec), CANDIDATE: candidate.spec(spec)}
    if pairs is None:
        if runner is None:
            raise ValueError("a session needs a runner or a pair runner. Received: neither")
        pairs = process_pairs(runner, baseline, candidate)
    pair_runner = pairs
    t0 = clock()

    def elapsed() -> float:
        return clock() - t0

    def run_pair() -> bool:
        # Alternate within a block from a random start: AB then BA, or BA then AB.
        done = session.orders
        if len(done) % DEFAULT_BLOCK_PAIRS == 0:
            order = rng.choice(("AB", "BA"))
        else:
            order = "BA" if done[-1] == "AB" else "AB"
        outcome = pair_runner(specs, order, len(done) + 1)
        for name, env in outcome.environments.items():
            session.environments.setdefault(name, env)
        if outcome.log_ratio is None:
            session.failed = outcome.failed or f"pair {len(done) + 1} gave no ratio"
            return False
        done.append(order)
        session.log_ratios.append(outcome.log_ratio)
        return True

    def budget_allows_a_pair() -> bool:
        return elapsed() * (1.0 + 1.0 / len(session.log_ratios)) <= budget_s

    # The first block measures how long a pair takes; the plan follows from it.
    while len(session.log_ratios) < DEFAULT_BLOCK_PAIRS:
        if not run_pair():
            session.wall_s = elapsed()
            return session
    pair_s = elapsed() / len(session.log_ratios)
    max_pairs = max(len(session.log_ratios),
                    min(MAX_PLANNED_PAIRS, pairs_for_budget(budget_s, pair_s, runs_per_pair=1)))
    plan = Plan(max_pairs=max_pairs, threshold=threshold, alpha=alpha,
                min_pairs=min(DEFAULT_MIN_PAIRS, max_pairs))
    session.plan = plan
    echo(f"{spec.label()}: a pair takes {pair_s:.1f} s; the {budget_s:.0f} s budget plans "
         f"{max_pairs} pairs: a look after {plan.min_pairs}, then every "
         f"{plan.block_pairs} up to {max_pairs}")
    for look in plan.looks:
        while len(session.log_ratios) < look and budget_allows_a_pair():
            if not run_pair():
                session.wall_s = elapsed()
                return session
        n = len(session.log_ratios)
        if n < plan.min_pairs:
            # The budget ended before the first look: no alpha was spent, so one look
            # at the pairs there are may spend all of it.
            plan = session.plan = replace(plan, min_pairs=n, max_pairs=n)
        session.decision = d = decide(session.log_ratios, plan, final=n < look)
        echo(f"{spec.label()}: {n} pairs, candidate/baseline {d.ratio:.3f} "
             f"[{d.low:.3f}, {d.high:.3f}], log-ratio SD {d.sd_log:.3f}, "
             f"{elapsed():.0f} s: {d.verdict.value}")
        if d.verdict is not Verdict.CONTINUE:
            break
    session.wall_s = elapsed()
    return session


def session_exit(sessions: list[Session]) -> Exit:
    """One exit code for several configurations: a regression wins over failed runs,
    failed runs over UNKNOWN (as in ``bench compare``)."""
    codes = {s.exit_code for s in sessions}
    for code in (Exit.REGRESSION, Exit.RUNS_FAILED, Exit.CANNOT_TELL):
        if code in codes:
            return code
    return Exit.OK
