"""What Keras ``fit`` costs over the custom loop, per configuration (pure, from stored runs).

A user who trains with ``model.fit`` wants the number for ``fit``, and what writing a
custom loop would gain. Results are paired by everything but the loop (the spec with
``loop`` set back to ``custom``, on one machine): the configuration's ``custom`` runs
against its ``fit`` runs, compared with ``bench.results.stats.comparison.compare_runs`` (the run
is the unit of replication; the interval comes from the run-to-run noise of both
sides). ``ratio`` = fit / custom throughput; a tie is a tie: a difference the runs
cannot tell apart is reported as such, never as a cost.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from bench.env import stored_machine_id
from bench.results.schema import RunResult
from bench.results.stats.comparison import RunComparison, compare_runs
from bench.results.stats.runs import throughput_runs


@dataclass(frozen=True)
class LoopCost:
    """One configuration measured with both loops (or why ``fit`` has no figure).

    ``label`` is the configuration's label with the custom loop (``mlp mirrored n=2
    b=256``); ``comparison`` is fit vs custom (ratio = fit / custom), None when a side
    has no successful run, then ``note`` says why (e.g. fit's ``unsupported`` reason).
    """

    machine: str
    strategy: str
    label: str
    custom_runs: int
    fit_runs: int
    comparison: RunComparison | None
    note: str = ""

    @property
    def ratio(self) -> float | None:
        """fit / custom throughput (geometric means of the run figures)."""
        return self.comparison.ratio if self.comparison else None

    @property
    def custom_gain(self) -> float | None:
        """What a custom loop gains over fit: custom / fit - 1 (0.2 = 20% faster)."""
        return None if self.comparison is None else 1.0 / self.comparison.ratio - 1.0

    @property
    def significant(self) -> bool:
        return bool(self.comparison and self.comparison.significant)


def _pair_key(r: RunResult) -> tuple[str, str]:
    return (stored_machine_id(r.environment) or "unknown",
            r.spec.replace(loop="custom").key())


def _why_none(results: list[RunResult], loop: str) -> str:
    if not results:
        return f"no {loop} run"
    failed = [r for r in results if r.status != "ok"]
    reasons = sorted({f"{r.status}: {r.reason}" for r in failed})
    return f"{loop}: " + ("; ".join(reasons) if reasons else "no windows stored")


def loop_costs(results: Iterable[RunResult], *, alpha: float = 0.05) -> list[LoopCost]:
    """fit vs custom loop for every configuration measured with ``fit``, in input order.

    Configurations measured with the custom loop only are left out (nothing to
    compare); those whose fit runs did not succeed are kept with the reason.
    """
    groups: dict[tuple[str, str], dict[str, list[RunResult]]] = {}
    for r in results:
        if r.spec.mode != "train":
            continue
        groups.setdefault(_pair_key(r), {"custom": [], "fit": []})[r.spec.loop].append(r)
    out = []
    for (machine, _), sides in groups.items():
        if not sides["fit"]:
            continue
        spec = sides["fit"][0].spec.replace(loop="custom")
        custom, fit = throughput_runs(sides["custom"]), throughput_runs(sides["fit"])
        comparison = compare_runs(custom, fit, alpha=alpha) if custom and fit else None
        note = comparison.note if comparison else "; ".join(
            _why_none(sides[loop], loop) for loop, runs in (("custom", custom), ("fit", fit))
            if not runs)
        out.append(LoopCost(machine=machine, strategy=spec.strategy, label=spec.label(),
                            custom_runs=len(custom), fit_runs=len(fit),
                            comparison=comparison, note=note))
    return out


def cost_line(cost: LoopCost) -> str:
    """One sentence for a report, e.g. ``mlp mirrored n=2 b=256: fit runs at 0.81x the
    custom loop [0.77, 0.85] (3 v 3 runs); a custom loop would gain 23%``."""
    c = cost.comparison
    if c is None:
        return f"{cost.label}: no fit vs custom comparison ({cost.note})"
    runs = f"({cost.fit_runs} v {cost.custom_runs} runs)"
    if c.p_value is None:
        return (f"{cost.label}: fit at {c.ratio:.2f}x the custom loop {runs}; the noise is "
                f"not measured with one run a side, so this is not a finding")
    interval = f"[{c.low:.2f}, {c.high:.2f}]"
    if not c.significant:
        return (f"{cost.label}: fit and the custom loop are tied, {c.ratio:.2f}x {interval} "
                f"{runs}; this comparison detects differences of {c.mde:.0%} or more")
    gain = cost.custom_gain or 0.0
    verb = "would gain" if gain > 0 else "would lose"
    return (f"{cost.label}: fit runs at {c.ratio:.2f}x the custom loop {interval} {runs}; "
            f"a custom loop {verb} {abs(gain):.0%}")
