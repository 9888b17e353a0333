"""Where ``bench compare`` takes each configuration's run-to-run noise from: pooled.

Two runs a side measure a configuration's run-to-run noise with 2 degrees of freedom,
and a t test on 2 df is so wide (t[0.975, 2] = 4.3, against 2.04 at 30 df) that a
sweep compared with another sweep of the same code says "cannot tell" whatever its
noise. The comparison already holds, or can read, more evidence of the same noise:

- the history: the stored sweeps of the same configuration on the same machine
  (``bench.regress.stored``: the last ``HISTORY_SWEEPS`` of them), whose runs varied
  around their own sweep's mean as these vary around theirs. They describe the machine
  before the change, so when the sides keep their own noise (Welch) they count for
  the baseline; they join only when their noise agrees with this comparison's runs;
- the other configurations of its family in the compared results: same workload,
  variant and strategy, chosen before looking at any figure (the same model code
  through the same distribution machinery: the same sources of run-to-run variation;
  devices, batch and knobs move the level, which each group's own mean absorbs).

The estimator is the pooled variance of log run figures (``bench.results.stats.
LogSpread``): squared deviations from each group's own mean (a group = one
configuration in one sweep, side or stored sweep) summed, over the summed degrees of
freedom: the error mean square of a one-way ANOVA. On the log scale a figure's noise
is its CV, which is what a shared machine imposes on configurations alike, and level
differences between groups stay out of it. It carries every contributing group's
degrees of freedom and is unbiased for the variance when the groups share one: hence
the guard.

The guard is the answers' (``bench.results.stats.spread.guarded_pool``, one rule for both):
a configuration joins its family's pool only where its own evidence has enough degrees
of freedom for a two-sided F test at ``NOISE_DIFFERS_ALPHA`` to catch it 3x noisier
than the rest with 80% power (``GUARD_POWER``), and that test does not find it
different; then the one that differs most leaves first, and so on. With 2 runs a side
and no stored sweeps (2 degrees of freedom) no configuration can be guarded, so each
keeps its own: six configurations, one 3x noisier, pooled by a plain F test at 0.01,
called a true -4% change REGRESSED 8.8% of the time (2.0% now; ``python -m
scripts.error_rates``). And pooled or not, a
configuration whose own evidence is the noisier is judged on it, with its own degrees
of freedom (``_pool_family``). Stored sweeps of the same configuration are its own
history: they are tested against its runs here with the F test at
``POOL_GUARD_ALPHA`` and join unless it finds them different.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace

# Pooling, its registry POOLINGS and HISTORY_SWEEPS are in bench.regress.options:
# bench compare's parser offers them as --pool without importing scipy.
from bench.regress.options import Pooling
from bench.results.figures import Figure
from bench.results.schema import RunResult
from bench.results.stats.comparison import RunNoise
from bench.results.stats.runs import run_figure
from bench.results.stats.spread import LogSpread, guarded_pool, noise_differs_p
from bench.spec import RunSpec, workload_label

Grouped = list[tuple[RunResult, Hashable]]  # a run and the group it came from (its sweep)

# Level of the F test that keeps a configuration's stored sweeps out of its evidence:
# its own history, lower than the family's guard, since history wrongly left out costs
# the comparison its degrees of freedom while the same configuration's older runs
# rarely differ by much.
POOL_GUARD_ALPHA = 0.01


def family(spec: RunSpec) -> str:
    """The family a configuration pools its noise with: workload, variant and strategy."""
    return f"{workload_label(spec.workload, spec.size)} {spec.strategy}"


@dataclass(frozen=True)
class PooledNoise:
    """One configuration's run-level noise evidence for one measure, and where it is
    from: ``configurations`` of ``family`` (this one included) and ``history_sweeps``
    stored sweeps of it; ``apart`` says what was left out and why ("" nothing)."""

    noise: RunNoise
    family: str
    configurations: int
    history_sweeps: int
    apart: str = ""

    def describe(self) -> str:
        """E.g. "df 34: 4 configurations of mlp one_device, 6 stored sweeps"."""
        parts = [f"{self.configurations} configuration(s) of {self.family}"
                 if self.configurations > 1 else "its own runs"]
        if self.history_sweeps:
            parts.append(f"{self.history_sweeps} stored sweep(s)")
        text = f"df {self.noise.common.df}: " + ", ".join(parts)
        return f"{text}; {self.apart}" if self.apart else text


@dataclass(frozen=True)
class _Run:
    digest: str  # the same run on both sides, or stored too, counts once
    log: float  # log of the run's figure
    group: Hashable


def _spread(runs: Iterable[_Run]) -> LogSpread:
    runs = list(runs)
    return LogSpread.of([r.log for r in runs], [r.group for r in runs])


@dataclass
class _Evidence:
    """One configuration's spreads for one measure."""

    family: str
    baseline: LogSpread
    current: LogSpread
    common: LogSpread  # both sides, each run once
    history: LogSpread
    history_sweeps: int
    apart: str = ""

    @property
    def total(self) -> LogSpread:
        return self.common + self.history


def pool_noise(baseline: Mapping[str, Grouped], current: Mapping[str, Grouped],
               keys: Sequence[str], measures: Iterable[Figure], *, pooling: Pooling,
               history: Mapping[str, Grouped] | None = None
               ) -> dict[str, dict[str, PooledNoise]]:
    """The noise evidence of each configuration in ``keys`` (present on both sides) for
    each measure, by key then measure name; see the module docstring. ``history`` holds
    each configuration's stored runs with their sweep (``bench.regress.stored``)."""
    digests: dict[int, str] = {}

    def runs(grouped: Grouped, measure: Figure, side: str) -> list[_Run]:
        out = []
        for r, g in grouped:
            w = measure.samples(r.figures) if r.status == "ok" and r.figures else None
            if not w or not all(math.isfinite(v) and v > 0 for v in w):
                continue  # judged without a ratio (compare_measure), no noise to pool
            if id(r) not in digests:  # the stored fields, not to_dict's units (10x slower)
                digests[id(r)] = hashlib.sha256(json.dumps(
                    asdict(r), sort_keys=True, default=str).encode()).hexdigest()
            out.append(_Run(digests[id(r)], math.log(run_figure(w)), (side, g)))
        return out

    out: dict[str, dict[str, PooledNoise]] = {key: {} for key in keys}
    for measure in measures:
        found: dict[str, _Evidence] = {}
        for key in keys:
            b, c = runs(baseline[key], measure, "baseline"), runs(current[key], measure,
                                                                   "current")
            unique = list({r.digest: r for r in reversed(b + c)}.values())
            seen = {r.digest for r in unique}
            stored = [r for r in runs((history or {}).get(key, []), measure, "history")
                      if r.digest not in seen] if pooling.history else []
            found[key] = _guarded(_Evidence(
                family((baseline[key] or current[key])[0][0].spec), _spread(b), _spread(c),
                _spread(unique), _spread(stored), len({r.group for r in stored})))
        families: dict[str, list[str]] = {}
        for key, ev in found.items():
            families.setdefault(ev.family if pooling.family else key, []).append(key)
        for kin in families.values():
            for key, pooled in _pool_family(kin, found).items():
                out[key][measure.name] = pooled
    return out


def _guarded(ev: _Evidence) -> _Evidence:
    """``ev`` without its stored sweeps when their noise differs from its runs' here."""
    p = noise_differs_p(ev.history, ev.common)
    if p is None or p >= POOL_GUARD_ALPHA:
        return ev
    return replace(ev, history=LogSpread(), history_sweeps=0,
                   apart=f"{ev.history_sweeps} stored sweep(s) left out: their noise "
                         f"differs from these runs' (F test p={p:.2g})")


def _pool_family(kin: Sequence[str], found: Mapping[str, _Evidence]
                 ) -> dict[str, PooledNoise]:
    """Each configuration of one family with the others' evidence pooled in, by the
    answers' rule (``stats.spread.guarded_pool``): a configuration whose evidence is too thin
    for the F test to have caught it 3x noisier, or whose noise differs from the rest
    of its family, keeps its own and stays out of the others' pool."""
    pool, apart = guarded_pool({k: found[k].total for k in kin})
    out = {}
    for key in kin:
        ev = found[key]
        members = [] if key in apart else [k for k in kin if k != key and k not in apart]
        own = ev.total.var
        if members and own is not None and pool.var is not None and own > pool.var:
            # Its own evidence is the noisier: judged on it, with its own degrees of
            # freedom (the pool's df beside a larger own variance is the leak the
            # guard cannot close when the configuration is only somewhat noisier).
            members = []
        if key in apart and len(kin) > 1:
            ev = replace(ev, apart="; ".join(filter(None, [
                ev.apart, "its noise was not shown alike its family's (F test, or too few "
                          "degrees of freedom for it to tell): not pooled"])))
        noise = RunNoise(
            baseline=sum((found[k].baseline + found[k].history for k in members),
                         ev.baseline + ev.history),
            current=sum((found[k].current for k in members), ev.current),
            common=sum((found[k].total for k in members), ev.total))
        out[key] = PooledNoise(noise=noise, family=ev.family, configurations=1 + len(members),
                               history_sweeps=ev.history_sweeps, apart=ev.apart)
    return out
