"""Seeded simulations of the decisions' error rates, each through the functions the
reports and the gate call (never a copy of them): what a comparison, a place or a
regression check states wrongly, on constructed data whose truth is known.

    python -m scripts.error_rates [--trials N] [--seed S]

prints one line per case: the rate measured, its nominal level, and whether it is at
or under that level within the simulation's binomial error (two standard errors).
``tests/test_error_rates.py`` runs the same cases at fewer trials.

The cases (docs/how-it-decides.md, "Error rates"):

- ``compare``: ``bench compare`` (and the nightly without a side) on six configurations
  of one family, 2 runs a side, one of them 3x noisier than the rest: how often its true
  -4% change (inside the 5% threshold) is called REGRESSED, and how often an unchanged
  one is called REGRESSED or IMPROVED;
- ``place``: five truly equal configurations at one place, 3 runs each: how often any
  of them is set aside as "shown slower beyond the noise" (per place);
- ``margin``: the simplest of five configurations and four exactly at the margin below
  it, 3 runs each: how often some row of the place claims "beyond the margin" or
  "within it" wrongly (per place);
- ``one run``: a configuration measured once (a multi-process one, 3x noisier than the
  arms) against one measured three times, truly equal: how often a direction is stated,
  and, at a true gap exactly at the margin, how often EQUIVALENT is;
- ``member``: an answer whose sessions hold three arms and a multi-worker member 3x
  noisier, beside a quieter answer, the sessions' noise pooled: how often the member's
  interval against an arm misses the true ratio, and how often a gap exactly at the
  margin is called EQUIVALENT;
- ``opening``: the opening place's two arms after three sessions, and a configuration
  of the place that runs alone after them, truly the fastest: how often the place
  settles on another answer (the budget's look waits for every configuration planned
  at a place; without that wait, nearly always).
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bench.adaptive.budget import look
from bench.answers.configs import group_configs, pool_noise
from bench.answers.noise import Measured, NoisePool
from bench.answers.places import answered
from bench.answers.recommend import Recommendation, beaten_by
from bench.answers.runs import views
from bench.answers.sequential import LookPlan, Looks
from bench.launch.launcher import make_result
from bench.regress.compare import IMPROVED, REGRESSED, compare
from bench.results.levels import DEFAULT_ALPHA
from bench.results.schema import Interleaving, RunResult
from bench.results.stats.settlement import (
    DEFAULT_MARGIN,
    EQUIVALENT,
    FASTER,
    SLOWER,
    Settlement,
    settle_pairs,
    settle_runs,
)
from bench.results.store import SweepStore, load_sweep, save
from bench.spec import RunSpec
from reports.report import build_from_results
from tests.helpers import fake_figures

# A fingerprint of one made-up machine: every simulated result is of the same place.
ENVIRONMENT = {"machine_id": "sim", "host": "sim", "cpu_model": "Simulated CPU",
               "cpu_cores": 2, "env_vars": {}}


@dataclass(frozen=True)
class Rate:
    """How often a wrong statement was made: ``count`` of ``trials``, against the
    ``nominal`` rate the decision claims."""

    case: str
    what: str
    count: int
    trials: int
    nominal: float = DEFAULT_ALPHA

    @property
    def rate(self) -> float:
        return self.count / self.trials

    @property
    def bound(self) -> float:
        """The nominal rate plus two binomial standard errors at ``trials``."""
        return self.nominal + 2.0 * math.sqrt(self.nominal * (1 - self.nominal) / self.trials)

    @property
    def holds(self) -> bool:
        return self.rate <= self.bound

    def line(self) -> str:
        verdict = "holds" if self.holds else "EXCEEDS"
        return (f"{self.case:8}  {self.what}: {self.rate:.1%} ({self.count}/{self.trials}); "
                f"nominal {self.nominal:.0%}, bound {self.bound:.1%}: {verdict}")


def _spec(strategy: str, devices: int, batch: int) -> RunSpec:
    return RunSpec(workload="mlp", strategy=strategy, devices=devices, batch=batch,
                   size="tiny", repeats=1, max_seconds=0.3, min_steps=3, max_steps=20,
                   warmup_steps=2, timeout_s=120.0)


def _result(spec: RunSpec, windows: Sequence[float], replicate: int) -> RunResult:
    """An ok result whose windows are ``windows`` (examples/s), the tests' figures around
    them (``tests.helpers.fake_figures``: one made-up figure set for scripts and tests)."""
    figures = fake_figures(tuple(windows), replicas=spec.replicas, batch=spec.global_batch)
    r = make_result(spec, "ok", None, figures=figures, environment=dict(ENVIRONMENT))
    r.replicate = replicate
    return r


# -- compare: a noisier configuration pooled with its family ------------------------------
COMPARE_CONFIGS = [("one_device", 1, b) for b in (32, 64, 128, 256, 512, 1024)]


def compare_case(trials: int, seed: int, change: float) -> Rate:
    """``bench compare`` of two sides of 2 runs each, six configurations of one family at
    2% run noise but the last at 6%, whose throughput changes by ``change`` (the others
    do not). Counts how often that configuration is called REGRESSED (``change`` below 1:
    inside the 5% threshold, so wrongly) or, unchanged, REGRESSED or IMPROVED."""
    rng = np.random.default_rng(seed)
    noisy = COMPARE_CONFIGS[-1]

    def side(factor: float) -> list[RunResult]:
        return [_result(_spec(*c), [40.0 * c[2] * (factor if c == noisy else 1.0) * math.exp(
                    rng.normal(0.0, 0.06 if c == noisy else 0.02))], i + 1)
                for c in COMPARE_CONFIGS for i in range(2)]

    wrong = {REGRESSED} if change < 1 else {REGRESSED, IMPROVED}
    key = _spec(*noisy).key()
    count = 0
    for _ in range(trials):
        report = compare(side(1.0), side(change))
        (config,) = [c for c in report.configs if c.key == key]
        m = config.measure("global_throughput")
        count += m is not None and m.verdict in wrong
    what = (f"a 3x noisier configuration, true {change - 1:+.0%}, called REGRESSED"
            if change < 1 else "an unchanged 3x noisier configuration called a change")
    return Rate("compare", what, count, trials)


# -- place: five equal configurations ------------------------------------------------------
PLACE_CONFIGS = [("default", 1), ("one_device", 1), ("mirrored", 2), ("central_storage", 2),
                 ("mirrored", 4)]


def place_case(trials: int, seed: int) -> Rate:
    """Five configurations of one place, truly equal, 3 runs each at 3% run noise, read
    by the reports (``beaten_by`` over their pooled noise): how often any is set aside
    as shown slower beyond the noise."""
    rng = np.random.default_rng(seed)
    count = 0
    for _ in range(trials):
        results = [_result(_spec(s, d, 256), [1000.0 * math.exp(rng.normal(0.0, 0.03))] * 3,
                           i + 1) for s, d in PLACE_CONFIGS for i in range(3)]
        configs = group_configs(views(results))
        pool_noise(configs)
        count += bool(beaten_by(configs, DEFAULT_MARGIN))
    return Rate("place", "five equal configurations: one set aside as shown slower",
                count, trials)


AT_MARGIN = 1.0 + DEFAULT_MARGIN


# -- margin: several configurations exactly at the margin of the answer -------------------
def _false_margin(s: Settlement, true_ratio: float) -> bool:
    """Whether ``s``'s claim against the margin is false for ``true_ratio`` (beyond it
    where the truth is not strictly beyond, within it where it is not strictly within;
    a truth exactly at the margin makes either false)."""
    bound, truth = math.log1p(s.margin), abs(math.log(true_ratio))
    if s.verdict == EQUIVALENT:
        return truth >= bound - 1e-9
    if s.verdict in (FASTER, SLOWER):
        return truth <= bound + 1e-9 or (s.verdict == FASTER) != (true_ratio > 1.0)
    return False


def margin_place(rng: np.random.Generator, gap: float, runs: int = 3,
                 sd: float = 0.03) -> tuple[Recommendation, dict[str, float]]:
    """One draw: a place of five configurations (``PLACE_CONFIGS``), the first (the
    simplest) at 1,000 examples/s and the other four at 1,000 x ``gap``, ``runs`` runs
    each at ``sd`` run noise, read by the reports; returns its recommendation and each
    configuration's true level by key."""
    levels = {_spec(s, d, 256).key(): 1000.0 * (1.0 if k == 0 else gap)
              for k, (s, d) in enumerate(PLACE_CONFIGS)}
    results = [_result(_spec(s, d, 256),
                       [levels[_spec(s, d, 256).key()] * math.exp(rng.normal(0.0, sd))] * 3,
                       i + 1) for s, d in PLACE_CONFIGS for i in range(runs)]
    (rec,) = build_from_results(results, Path("/simulated")).machines[0] \
        .workloads[0].recommendations
    return rec, levels


def margin_case(trials: int, seed: int, gap: float = 1.0 / AT_MARGIN) -> Rate:
    """``margin_place`` ``trials`` times, four configurations exactly at the margin below
    the simplest: how often some row of the place (a configuration against the answer,
    what the answer's sentence, the short table and the lines print) claims beyond the
    margin or within it, wrongly."""
    rng = np.random.default_rng(seed)
    count = 0
    for _ in range(trials):
        rec, levels = margin_place(rng, gap)
        best = rec.best
        count += best is not None and any(
            _false_margin(s, levels[key] / levels[best.key])
            for key, s in rec.settlements.items())
    return Rate("margin", f"four configurations {gap - 1:+.1%} from the simplest, exactly "
                          f"at the margin: a false margin row", count, trials)


# -- one run: a side whose noise was never measured ----------------------------------------
def one_run_case(trials: int, seed: int, gap: float) -> Rate:
    """A configuration measured once (run noise 6%) against one measured three times
    (2%), through ``settle_runs``: at ``gap`` 1 how often a direction is stated; at a
    gap at the margin how often EQUIVALENT is."""
    rng = np.random.default_rng(seed)
    count = 0
    for _ in range(trials):
        once = [1000.0 * gap * math.exp(rng.normal(0.0, 0.06))]
        thrice = list(1000.0 * np.exp(rng.normal(0.0, 0.02, 3)))
        s = settle_runs(thrice, once)
        count += (s.direction is not None) if gap == 1.0 else (s.verdict == EQUIVALENT)
    what = ("equal: a direction stated" if gap == 1.0 else
            f"a gap of {gap - 1:+.0%}, at the margin: called EQUIVALENT")
    return Rate("one run", what, count, trials)


# -- member: a noisier member of the sessions, pooled --------------------------------------
def _session_result(level: float, session: str) -> RunResult:
    r = _result(_spec("one_device", 1, 32), [level], 1)
    r.interleaved = Interleaving(session, [], 0, 1, 0)
    return r


def _level(result: RunResult) -> float:
    assert result.figures is not None
    return result.figures.global_throughput


def member_comparison(rng: np.random.Generator, gap: float, sessions: int = 5,
                      sd: float = 0.02, member_sd: float = 0.06) -> Settlement:
    """One draw: two answers of three arms each in ``sessions`` sessions, the first with
    a multi-worker member too (its level ``member_sd`` from session to session, the arms'
    ``sd``, ``gap`` above the first arm), pooled as the reports pool them (``NoisePool``);
    returns the member / first-arm settlement."""
    measured: list[Measured] = []
    for a in range(2):
        keys = [f"{a}:arm{k}" for k in range(3)] + (["0:member"] if a == 0 else [])
        by_key: dict[str, dict[str, RunResult]] = {k: {} for k in keys}
        for i in range(sessions):
            luck = rng.normal(0.0, 0.1)  # the session's own level: cancels in its pairs
            for k in keys:
                member = k.endswith("member")
                level = luck + rng.normal(0.0, member_sd if member else sd)
                by_key[k][f"{a}s{i}"] = _session_result(
                    1000.0 * math.exp(level) * (gap if member else 1.0), f"{a}s{i}")
        measured += [Measured(k, ("own", 2) if k.endswith("member") else ("arm", 1), (),
                              by_key[k]) for k in keys]
    pool = NoisePool.of(measured)
    found = {m.key: m.sessions for m in measured}
    ratios = [math.log(_level(found["0:member"][s]) / _level(found["0:arm0"][s]))
              for s in found["0:arm0"]]
    return settle_pairs(ratios, pooled=pool.for_pairs("0:member", "0:arm0"))


def member_case(trials: int, seed: int, gap: float) -> Rate:
    """``member_comparison`` ``trials`` times: at ``gap`` 1 how often its 95% interval
    misses the true ratio; at a gap at the margin how often it is called EQUIVALENT."""
    rng = np.random.default_rng(seed)
    count = 0
    for _ in range(trials):
        s = member_comparison(rng, gap)
        count += (s.decided and not s.low <= gap <= s.high) if gap == 1.0 else (
            s.verdict == EQUIVALENT)
    what = ("a 3x noisier member: its interval misses the true ratio" if gap == 1.0 else
            f"a 3x noisier member {gap - 1:+.0%}, at the margin: called EQUIVALENT")
    return Rate("member", what, count, trials)


# -- opening: a configuration that runs alone, truly fastest --------------------------------
OPENING_ARMS = (("default", 1), ("mirrored", 2))
# Runs alone on GPUs (its processes cannot join a session there): on CPUs it would be a
# session member, but the look waits for whatever the plan runs alone.
ALONE = ("multi_worker_mirrored", 2)
LATER = "2999-01-01T00:00:00+00:00"  # finished after any look of the simulation


def _store_run(out: Path, spec: RunSpec, windows: Sequence[float], replicate: int,
               arms: Sequence[RunSpec] = (), finished_at: str | None = None) -> None:
    """A result of ``spec`` saved where a sweep keeps it; with ``arms``, as one arm of
    the session ``replicate`` of those arms (one process's rounds)."""
    r = _result(spec, windows, replicate)
    if arms:
        r.interleaved = Interleaving(f"s{replicate}", [a.label() for a in arms],
                                     list(arms).index(spec), len(windows), 0)
    r.finished_at = finished_at or r.finished_at
    save(r, SweepStore(out).paths(spec, replicate).result)


def opening_place(rng: np.random.Generator, out: Path, wait: bool) -> bool:
    """One draw of the opening place: default on 1 device and mirrored on 2 as arms of
    three sessions (mirrored truly 20% slower; sessions 20% apart, windows 2%), and
    multi_worker_mirrored on 2, which runs alone after them (as on GPUs), truly 10%
    faster than default (three runs, each at its own level). The budget's look after the
    opening's three sessions (``wait``: with the sweep's plan in hand, so the place waits
    for multi_worker_mirrored; else without it), then the look after its runs; returns
    whether the place's answer is a settled answer other than multi_worker_mirrored,
    which is wrong whatever it claims."""
    arms = [_spec(s, d, 256) for s, d in OPENING_ARMS]
    alone = _spec(*ALONE, 256)
    for n in range(1, 4):
        level = 1000.0 * math.exp(rng.normal(0.0, 0.2))
        for spec, ratio in zip(arms, (1.0, 0.8), strict=True):
            _store_run(out, spec, [level * ratio * math.exp(rng.normal(0.0, 0.02))
                                   for _ in range(3)], n, arms=arms)
    plan = LookPlan.for_budget(600.0)
    planned = [*arms, alone] if wait else []
    look(load_sweep(out).results, out, plan, 100.0, 600.0, lambda _: None, planned=planned)
    for n in range(1, 4):
        level = 1000.0 * 1.1 * math.exp(rng.normal(0.0, 0.2))
        _store_run(out, alone, [level * math.exp(rng.normal(0.0, 0.02)) for _ in range(3)],
                   n, finished_at=LATER)
    results = load_sweep(out).results
    look(results, out, plan, 300.0, 600.0, lambda _: None, planned=planned)
    looks = Looks.of_journal(SweepStore(out).journal_events())
    (rec,) = [rec for ma in answered(results, looks) for _, _, rec in ma.placed()]
    return rec.settled and rec.best is not None and rec.best.key != alone.key()


def opening_case(trials: int, seed: int, wait: bool = True) -> Rate:
    """``opening_place`` ``trials`` times: how often the place settles on an answer that
    is not the configuration that ran alone, the truly fastest."""
    rng = np.random.default_rng(seed)
    count = 0
    for _ in range(trials):
        with tempfile.TemporaryDirectory(prefix="stratbench-opening-") as tmp:
            count += opening_place(rng, Path(tmp), wait)
    rule = "the look waits for it" if wait else "the look does not wait"
    return Rate("opening", f"a run-alone configuration truly fastest, {rule}: another "
                f"settled as the answer", count, trials)


CASES: dict[str, Callable[[int, int], Rate]] = {
    "compare-change": lambda n, seed: compare_case(n, seed, 0.96),
    "compare-same": lambda n, seed: compare_case(n, seed + 1, 1.0),
    "place": place_case,
    "margin": margin_case,
    "one-run-equal": lambda n, seed: one_run_case(n, seed, 1.0),
    "one-run-margin": lambda n, seed: one_run_case(n, seed + 1, AT_MARGIN),
    "member-coverage": lambda n, seed: member_case(n, seed, 1.0),
    "member-margin": lambda n, seed: member_case(n, seed + 1, AT_MARGIN),
    "opening": opening_case,
}


def main(argv: list[str] | None = None) -> int:
    """Print every case's rate; exit 1 when one exceeds its bound."""
    parser = argparse.ArgumentParser(prog="python -m scripts.error_rates",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=2000, help="simulated draws a case")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--case", action="append", choices=sorted(CASES),
                        help="only these cases (repeatable)")
    args = parser.parse_args(argv)
    if args.trials < 1:
        print(f"--trials must be at least 1. Received: {args.trials}", file=sys.stderr)
        return 2
    rates = [CASES[name](args.trials, args.seed) for name in args.case or CASES]
    for r in rates:
        print(r.line(), flush=True)
    return 0 if all(r.holds for r in rates) else 1


if __name__ == "__main__":
    sys.exit(main())

