"""The sweep's noise, pooled: what a comparison with few runs of its own borrows.

Pairs: the residual of each answer's sessions under the two-way additive model
(session + arm; the ANOVA residual when every session holds every arm). Runs:
each configuration's log run figures around their own mean, per family of
configurations measured alike. A group whose noise differs from the others' (F test)
keeps its own. The model, the guard and their reasons: docs/how-it-decides.md
("Pooled noise").
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

import numpy as np

from bench.results.pairs import process_log_ratio, process_prediction, undisturbed_sessions
from bench.results.schema import RunResult
from bench.results.stats.settlement import SessionRatio
from bench.results.stats.spread import LogSpread, guarded_pool

V = TypeVar("V")


@dataclass(frozen=True)
class Measured:
    """What the pool reads of one configuration (``bench.answers.configs.ConfigView.measured``
    gives it). The pool takes these plain records, not the configuration views, so that
    the views can hold the pool without the two modules importing each other."""

    key: str
    # How its runs were measured: ("arm" | "own", processes), see ConfigView.run_family.
    family: Hashable
    log_runs: tuple[float, ...]  # the log of each run's figure
    sessions: Mapping[str, RunResult]  # its result in each interleaved session, by session
    # Whose session-noise ratio its comparisons share (its workload's), where it was an
    # arm of its sessions' shared process; None for a member in processes of its own,
    # whose own processes' luck its rounds cannot see.
    rounds_pool: Hashable | None = None


@dataclass(frozen=True)
class NoisePool:
    """The pooled noise of one machine's configurations.

    ``pairs``: the variance of one session's log ratio of two arms. ``runs``: of one
    run's log figure, per family of configurations measured alike (``ConfigView.run_family``:
    arms of shared processes, or their own processes, by process count), since a
    process of two workers does not vary as an arm does. Each with its degrees of
    freedom. ``own_pairs`` / ``own_runs``: the configurations whose noise differs from
    the pool's (they keep their own).
    """

    pairs: LogSpread
    runs: Mapping[Hashable, LogSpread]
    own_pairs: frozenset[str] = frozenset()
    own_runs: frozenset[str] = frozenset()
    families: Mapping[str, Hashable] = field(default_factory=dict)
    # The session-noise ratio of each rounds pool (``Measured.rounds_pool``), and each
    # configuration's pool.
    session_ratios: Mapping[Hashable, SessionRatio] = field(default_factory=dict)
    rounds_pools: Mapping[str, Hashable] = field(default_factory=dict)

    def for_pairs(self, a: str, b: str) -> LogSpread | None:
        """What a comparison of arms ``a`` and ``b`` borrows (None: its own only)."""
        if not self.pairs.df or a in self.own_pairs or b in self.own_pairs:
            return None
        return self.pairs

    def for_rounds(self, a: str, b: str) -> SessionRatio | None:
        """The session-noise ratio that a comparison of arms ``a`` and ``b`` reads its
        rounds with (None: they are not arms of one pool, or it has no df)."""
        pool = self.rounds_pools.get(a)
        ratio = self.session_ratios.get(pool) if pool is not None else None
        if pool != self.rounds_pools.get(b) or ratio is None or not ratio.df:
            return None
        return ratio

    def for_runs(self, a: str, b: str) -> LogSpread | None:
        """What a comparison of runs of ``a`` and ``b`` borrows (None: its own only):
        the noisier of their families' pools."""
        if a in self.own_runs or b in self.own_runs:
            return None
        pools = [self.runs.get(self.families.get(k)) for k in (a, b)]
        if any(p is None or not p.df for p in pools):
            return None
        return max((p for p in pools if p is not None), key=lambda p: p.var or 0.0)

    @classmethod
    def of(cls, configs: Iterable[Measured]) -> NoisePool:
        """Pool the noise of ``configs`` (one machine's)."""
        sessions: dict[str, dict[str, RunResult]] = {}
        runs: dict[Hashable, dict[str, LogSpread]] = {}
        families: dict[str, Hashable] = {}
        rounds_pools: dict[str, Hashable] = {}
        for c in configs:
            families[c.key] = c.family
            if c.rounds_pool is not None:
                rounds_pools[c.key] = c.rounds_pool
            if len(c.log_runs) >= 2:
                runs.setdefault(c.family, {})[c.key] = LogSpread.of(c.log_runs)
            for session, result in c.sessions.items():
                sessions.setdefault(session, {})[c.key] = result
        kept = [[rows[i] for i in undisturbed_sessions(rows)]
                for rows in answers_sessions(s for s in sessions.values() if len(s) >= 2)]
        pair_groups = {frozenset(k for s in rows for k in s): spread for rows in kept
                       if len(rows) >= 2 and (spread := pair_spread(rows)).df}
        pairs, odd = guarded_pool(pair_groups)
        ratios: dict[Hashable, SessionRatio] = {}
        for rows in kept:
            found = session_ratio(rows, rounds_pools)
            if found is not None:
                ratios[found[0]] = ratios.get(found[0], SessionRatio()) + found[1]
        own_pairs = {k for g in odd for k in g}
        run_pools: dict[Hashable, LogSpread] = {}
        own_runs: set[str] = set()
        for family, groups in runs.items():
            run_pools[family], odd_runs = guarded_pool(groups)
            own_runs |= odd_runs
        return cls(pairs, run_pools, frozenset(own_pairs), frozenset(own_runs), families,
                   ratios, rounds_pools)


def session_levels(configs: Iterable[Measured]) -> dict[str, float]:
    """Each configuration measured in sessions at its fitted level: the additive model
    (session + configuration, least squares on the log run figures) of its answer's
    sessions, read in the answer's average session (the configuration's effect plus the
    mean session effect), as examples/s. Since the budget measures again only what is
    open, configurations sit in different sessions, and the median of each one's runs
    would rank them by the sessions' luck; the fitted levels compare them as if each had
    sat in every session. Configurations in no session are left out."""
    sessions: dict[str, dict[str, float]] = {}
    for c in configs:
        for session, result in c.sessions.items():
            if result.figures is not None and result.figures.global_throughput > 0:
                sessions.setdefault(session, {})[c.key] = math.log(
                    result.figures.global_throughput)
    out: dict[str, float] = {}
    for rows in answers_sessions(sessions.values()):
        fit = AdditiveFit.of(rows)
        # effect + mean session effect is estimable in a connected answer: the same
        # whichever least-squares solution the solver picks.
        mean_session = float(fit.coef[:fit.sessions].mean())
        out.update({k: math.exp(float(fit.coef[c]) + mean_session)
                    for k, c in fit.column.items()})
    return out


def answers_sessions(sessions: Iterable[Mapping[str, V]]) -> list[list[Mapping[str, V]]]:
    """``sessions`` (each: arm key -> its result) grouped by answer: sessions that share
    an arm, directly or through others, are one answer's (a configuration is measured
    at one place). Its sessions need not hold the same arms: the budget measures again
    only the configurations an answer's open comparisons need."""
    parent: dict[str, str] = {}

    def root(k: str) -> str:
        while parent.setdefault(k, k) != k:
            k = parent[k]
        return k

    rows = list(sessions)
    for s in rows:
        first, *rest = sorted(s)
        for k in rest:
            parent[root(k)] = root(first)
    groups: dict[str, list[Mapping[str, V]]] = {}
    for s in rows:
        groups.setdefault(root(min(s)), []).append(s)
    return list(groups.values())


def session_ratio(sessions: Sequence[Mapping[str, RunResult]],
                  pools: Mapping[str, Hashable]) -> tuple[Hashable, SessionRatio] | None:
    """One answer's evidence on its session-noise ratio (``stats.settlement.SessionRatio``), and
    the pool it adds to: the residual of its sessions' arms of one pool (``pools``;
    members left out), against what their rounds predict for one session's log ratio
    of two arms (``pairs.process_prediction``, each arm against its session's first, as
    ``pair_spread`` reads them; the mean over those). None where fewer than two
    sessions hold two such arms, or the rounds predict nothing."""
    pool = next((pools[k] for s in sessions for k in s if k in pools), None)
    rows = [{k: r for k, r in s.items() if pools.get(k) == pool} for s in sessions]
    rows = [r for r in rows if len(r) >= 2]
    if pool is None or len(rows) < 2:
        return None
    predicted = []
    for s in rows:
        ref, *others = sorted(s)
        for k in others:
            found = process_prediction(s[ref], s[k])
            if found is None:
                return None
            predicted.append(found.var)
    spread = pair_spread(rows)
    if not spread.df:
        return None
    return pool, SessionRatio(spread.ss, spread.df * statistics.fmean(predicted), spread.df)


def pair_spread(sessions: Sequence[Mapping[str, RunResult]]) -> LogSpread:
    """The noise of one answer's sessions (each: arm key -> its result, two arms or
    more): the residual of the two-way additive model of the arms' log levels
    (session + arm, least squares), as the variance of one session's log ratio of two
    arms (2 var(e)). Its degrees of freedom are the levels less the effects fitted,
    N - S - K + 1 for one connected answer: (S-1)(K-1) when every session holds every
    arm (the two-way ANOVA residual), fewer when later sessions hold only the arms
    still open."""
    rows = []
    for s in sessions:
        # Each arm's level against the session's first arm: a session effect, which the
        # model removes anyway.
        ref, *others = sorted(s)
        rows.append({ref: 0.0, **{k: process_log_ratio(s[ref], s[k]) for k in others}})
    fit = AdditiveFit.of(rows)
    df = len(fit.y) - int(np.linalg.matrix_rank(fit.x))
    return LogSpread(2.0 * float(((fit.y - fit.x @ fit.coef) ** 2).sum()), df)


@dataclass(frozen=True)
class AdditiveFit:
    """The two-way additive model (session + configuration) fitted by least squares to
    one answer's sessions, each a mapping of configuration key to its log level there:
    the design ``x`` (a column per session, then per key), the levels ``y``, the
    coefficients, and each key's column."""

    x: np.ndarray
    y: np.ndarray
    coef: np.ndarray
    column: Mapping[str, int]
    sessions: int

    @classmethod
    def of(cls, rows: Sequence[Mapping[str, float]]) -> AdditiveFit:
        """Fit the model to ``rows`` (one mapping a session)."""
        keys = sorted({k for s in rows for k in s})
        column = {k: len(rows) + j for j, k in enumerate(keys)}
        design, levels = [], []
        for i, s in enumerate(rows):
            for k, level in s.items():
                row = np.zeros(len(rows) + len(keys))
                row[i] = row[column[k]] = 1.0
                design.append(row)
                levels.append(level)
        x, y = np.array(design), np.array(levels)
        return cls(x, y, np.linalg.lstsq(x, y, rcond=None)[0], column, len(rows))
