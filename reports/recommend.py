"""The answers in sentences: what to use at each place, and why.

The decision is ``bench.answers.recommend``'s; this module writes it out. An answer's
"because" comes only from both configurations' profiles (``reports.explain``). The
rules, and why they are so: docs/how-it-decides.md ("The answer").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from bench.answers.basis import Basis
from bench.answers.configs import ConfigView, Ratio, settle_of
from bench.answers.recommend import (
    ALONE,
    STANDS,
    Candidates,
    Recommendation,
    WorkloadAnswer,
    circle_of,
    hardest_open,
    is_choice,
    open_comparisons,
    super_ideal,
)
from bench.answers.runs import Machine
from bench.answers.scaling import Scaling
from bench.results.levels import DEFAULT_ALPHA
from bench.results.stats.settlement import (
    EQUIVALENT,
    FASTER,
    NOT_SETTLED,
    PAIRS,
    SLOWER,
    Settlement,
    level,
)
from reports.columns import change_ci, fmt_rate, pct_ci, times_ci
from reports.explain import because, compared, why_not
from reports.verdicts import measured_cause


def devices(n: int) -> str:
    return f"{n} device" if n == 1 else f"{n} devices"



def phrased(r: Recommendation) -> Recommendation:
    """``r`` with its sentences, written from what it was decided from (``r.basis``):
    the answer in full (``text``) and a line for every other configuration (``others``:
    one per other strategy, those without a successful run, the super-ideal ones, the
    per-worker batches, the baselines)."""
    basis = r.basis
    if basis is None:
        raise ValueError(f"a recommendation is written from its basis. Received: "
                         f"basis=None at {r.ranking.label!r}")
    found = Candidates.of(r.ranking)
    scaling, machine = basis.scaling, basis.machine
    flagged = [(c, x) for c in found.candidates if (x := super_ideal(c, scaling)) is not None]
    others = [_super_ideal_line(c, x, scaling[c.key], machine) for c, x in flagged]
    others += [_per_worker_line(c, r.pool or found.everything, r.margin, r.alpha)
               for c in found.apart]
    others += [f"{c.choice}: {fmt_rate(c.throughput or 0)} examples/s, the no-communication "
               f"ceiling (a baseline, not a way to train one model)"
               for c in sorted(found.ceilings, key=lambda c: c.replicas)]
    best = r.best
    if best is None:
        text = _circle_text(r) if r.kind == NOT_SETTLED else _no_answer(found)
        return replace(r, text=text, others=others)
    per_strategy: dict[str, ConfigView] = {}
    for c in sorted(found.candidates, key=lambda c: -c.speed):
        per_strategy.setdefault(c.strategy, c)
    lines = [_other_line(c, best, r.settlements.get(c.key), r.margin, basis)
             for st, c in per_strategy.items() if st != best.strategy]
    for strategy in sorted({c.strategy for c in r.ranking.configs() if is_choice(c)}
                           - {c.strategy for c in found.choices}):
        lines.append(f"{strategy}: no successful run (see the failures below)")
    return replace(r, text=_answer(r, found.candidates, scaling.get(best.key, Scaling()),
                                   machine), others=lines + others)


def _no_answer(found: Candidates) -> str:
    """Why a ranking has no configuration to recommend."""
    if found.ceilings and not found.choices:
        return "only the no-communication baseline ran"
    if found.choices:
        return "no configuration to recommend: every successful one is listed below"
    return "no successful run (see the runs without figures)"


def _circle_text(r: Recommendation) -> str:
    """NOT SETTLED with no answer: the circle the evidence runs in, named."""
    assert r.fastest is not None
    by_key = {c.key: c for c in r.unsettled}
    steps = [f"{r.beaten[k][0].choice} is shown faster than {by_key[k].choice} "
             f"({change_of(r.beaten[k][1].flipped())})"
             for k in circle_of(r.fastest.key, r.beaten)]
    return (f"NOT SETTLED: the evidence runs in a circle: {'; '.join(steps)}. No "
            f"configuration can be the answer until more measurement breaks the circle")


def workload_lines(w: WorkloadAnswer) -> list[str]:
    """The answers only, one per batch setting, each saying what was shown:
    ``global batch 64: one_device on 1 device (1,104 examples/s; equivalent within
    +-5% to mirrored on 2 devices, the simplest wins; run-to-run cv 4% (3 runs
    each))``."""
    return [answer_line(r) for r in w.recommendations]


def answer_line(r: Recommendation) -> str:
    """One answer in a sentence: what ``--explain`` and the reports' collapsed details show
    under the answers' table (``reports.answers``), and what stability compares."""
    if r.best is None:
        return f"{r.ranking.label}: {r.text}"
    m = f"+-{r.margin:.0%}"
    head = f"{r.ranking.label}: {r.best.choice} ({fmt_rate(r.best.throughput or 0)} examples/s"
    d = r.deciding
    if r.best in r.super_ideal:  # flagged where it is read, never dropped
        head += f"; super-ideal: above the {r.best.replicas}x ideal, see the report"
    if r.kind == ALONE or d is None:
        return f"{head}; the only configuration measured; {r.noise})"
    if r.kind == FASTER:
        assert r.runner is not None
        return (f"{head}; faster beyond the noise than {r.runner.choice}, "
                f"{change_of(d.flipped())}{_against_margin(d)}; {r.noise})")
    slower = _beaten_phrase(r)
    if r.kind == EQUIVALENT:
        return (f"{head}; equivalent within {m} to {_listed([c.choice for c in r.equivalent])}"
                f", the simplest wins{slower}; {r.noise})")
    if r.kind == STANDS:
        return (f"{head}; stands: {_listed([_bounded_phrase(c, r) for c in r.bounded])} "
                f"not settled against it, but shown not to beat it by more than {m}, and "
                f"no simpler{slower}; {r.noise})")
    open_ = _listed([f"{c.choice} {change_of(s)}" for c, s in open_comparisons(r)])
    return (f"{r.ranking.label}: NOT SETTLED at this precision, {r.best.choice} for now "
            f"({fmt_rate(r.best.throughput or 0)} examples/s; no configuration is shown "
            f"faster; not settled against it: {open_} (neither beyond the noise nor within "
            f"{m}){slower}; {_needed(r)}; {r.noise})")


def _against_margin(s: Settlement) -> str:
    """What a comparison shown beyond the noise says about the margin."""
    m = f"+-{s.margin:.0%}"
    if s.verdict in (FASTER, SLOWER):
        return f", beyond the {m} margin too"
    if s.verdict == EQUIVALENT:
        return f", by less than the margin (shown within {m})"
    return f"; not yet shown beyond the {m} margin"


def _beaten_phrase(r: Recommendation) -> str:
    """``; shown slower beyond the noise: default on 1 device -7% [-11%, -4%] vs
    central_storage on 2 devices`` for the candidates set aside by a gap the margin
    does not yet call (those beyond it are in the report's list)."""
    near = [(c, by, s) for c in r.ranking.ok_configs() if c.key in r.beaten
            for by, s in (r.beaten[c.key],) if s.verdict != SLOWER]
    if not near:
        return ""
    return "; shown slower beyond the noise: " + _listed(
        [f"{c.choice} {change_of(s)} vs {by.choice}" for c, by, s in near])


def _bounded_phrase(c: ConfigView, r: Recommendation) -> str:
    """``central_storage on 2 devices -5% [90%: -7%, -3%] vs default on 1 device``."""
    assert r.best is not None
    s = r.settlements.get(c.key)
    return f"{c.choice} {shown_change(s) if s else '-'} vs {r.best.choice}"



def _super_ideal_line(c: ConfigView, r: Ratio, sc: Scaling, machine: Machine) -> str:
    n = c.replicas
    beyond = ("beyond the noise" if r.low is not None and r.low > n else
              "though its interval reaches the ideal" if r.low is not None else
              "with one run a side, so the noise is not measured")
    meaning = (
        f"on logical devices sharing the same cores more than {n}x cannot come from the "
        f"hardware: the single-device baseline ran slowed (a disturbed run) or uses the "
        f"cores far worse; re-run both before relying on it" if machine.cpu_only else
        "a super-linear speed-up: each device's share of the work got cheaper (the split "
        "batch fits caches or memory better), or the single-device baseline ran slowed; "
        "check that baseline before relying on it")
    return (f"{c.choice}: super-ideal, {times_ci(r)} {sc.one_device_name} on 1 device, above "
            f"the {n}x ideal of {devices(n)} ({beyond}): {meaning}. Kept in the ranking")


def _listed(items: Sequence[str], limit: int = 3) -> str:
    """``a, b and c`` / ``a, b, c and 4 more``."""
    shown = list(items[:limit])
    rest = len(items) - len(shown)
    if rest:
        return f"{', '.join(shown)} and {rest} more"
    return shown[0] if len(shown) == 1 else f"{', '.join(shown[:-1])} and {shown[-1]}"


def _as_ratio(s: Settlement, shown: bool = False) -> Ratio:
    """The Settlement's 95% interval (``shown``: the 90% one equivalence is shown by)."""
    low, high = (s.eq_low, s.eq_high) if shown else (s.low, s.high)
    return Ratio(s.ratio, low if s.decided else None, high if s.decided else None,
                 s.verdict in (FASTER, SLOWER), None)


def evidence_of(s: Settlement) -> str:
    """What an interval rests on: ``3 and 2 runs`` or ``4 sessions measuring both, ...``
    (a session: the arms' process, with any member's processes beside it)."""
    pooled = (f"; noise pooled over the sweep's configurations, {s.pooled_df:.0f} degrees of "
              f"freedom" if s.pooled_df is not None else
              f"; noise their rounds predict, guarded by the workload's sessions, "
              f"{s.rounds_df:.0f} degrees of freedom" if s.rounds_df is not None else "")
    if s.evidence == PAIRS:
        return f"{s.sizes[0]} sessions measuring both, windows interleaved{pooled}"
    return f"{s.sizes[1]} and {s.sizes[0]} runs{pooled}"


def change_of(s: Settlement) -> str:
    """``-3% [-9%, +4%]`` (the 95% interval); another level is named: ``[96%: ...]``
    (a budget's look reads at its own alpha, ``bench.answers.sequential``)."""
    text = change_ci(_as_ratio(s))
    if not s.decided or s.alpha == DEFAULT_ALPHA:
        return text
    return text.replace(" [", f" [{level(1 - s.alpha)}: ", 1)


def shown_change(s: Settlement) -> str:
    """``-2% [90%: -4%, +0%]``: the interval an equivalence test puts inside the margin."""
    text = change_ci(_as_ratio(s, shown=True))
    return text.replace(" [", f" [{level(1 - 2 * s.alpha)}: ", 1) if s.decided else text



def _needed(r: Recommendation) -> str:
    """What would settle an answer: the plan of its hardest open comparison."""
    hardest = hardest_open(r)
    return hardest[1].plan if hardest is not None else ""


def _scaling_phrase(best: ConfigView, sc: Scaling, machine: Machine) -> str:
    if best.replicas <= 1:
        return ""
    n = best.replicas
    if best.batch_mode == "per_replica" and sc.weak_eff_vs_one is not None:
        return (f", {times_ci(sc.weak_eff_vs_one.scaled(1 / n))} {sc.one_device_name} on 1 "
                f"device at the same per-replica batch, {pct_ci(sc.weak_eff_vs_one)} "
                f"weak-scaling efficiency")
    if sc.speedup_vs_one is not None:
        text = (f", {times_ci(sc.speedup_vs_one)} {sc.one_device_name} on 1 device, "
                f"{pct_ci(sc.speedup_vs_one.scaled(n))} efficiency")
        if machine.cpu_only and sc.speedup_vs_one.value > 1.0:
            # Logical devices add no hardware: what a speed-up means there.
            text += (f" (on logical devices sharing the same cores a speed-up is no added "
                     f"hardware: the one-device configuration uses the cores less well "
                     f"than {n} devices do)")
        return text
    if sc.speedup is not None and sc.strong_eff is not None:
        return (f", {times_ci(sc.speedup)} itself on 1 device, {pct_ci(sc.strong_eff)} "
                f"efficiency")
    return ""


def _answer(r: Recommendation, candidates: list[ConfigView], sc: Scaling,
            machine: Machine) -> str:
    best, fastest = r.best, r.fastest
    assert best is not None and fastest is not None
    m = f"+-{r.margin:.0%}"
    text = (f"{best.choice}: {fmt_rate(best.throughput or 0)} examples/s"
            f"{_scaling_phrase(best, sc, machine)}.")
    if r.kind == ALONE:
        text += " The only configuration measured at this batch: nothing to compare it with."
    elif r.kind == FASTER:
        d, runner = r.deciding, r.runner
        assert d is not None and runner is not None
        beyond_margin = all(x.verdict == SLOWER for x in r.settlements.values())
        text += ((f" Faster beyond the noise and by more than the {m} margin than every "
                  f"other configuration: " if beyond_margin else
                  f" Faster beyond the noise than every other configuration, not by more "
                  f"than the {m} margin everywhere: ")
                 + f"the next best, {runner.choice}, is {change_of(d)}{_against_margin(d)} "
                 f"({level(1 - d.alpha)} interval from {evidence_of(d)}).")
    elif r.kind == EQUIVALENT:
        shown = [f"{c.choice} {shown_change(r.settlements[c.key])}" for c in r.equivalent]
        test = "an equivalence test: the interval lies inside the margin"
        text += (f" Equivalent within {m} to {_listed(shown)} (each vs {best.choice}, shown "
                 f"by {test}), and no configuration is shown faster than it beyond the "
                 f"noise; the simplest of them is chosen"
                 + (f" (the fastest measured is {fastest.choice}, "
                    f"{fmt_rate(fastest.throughput or 0)} examples/s)." if best is not fastest
                    else ", and it is also the fastest measured."))
    elif r.kind == STANDS:
        text += ((f" Equivalent within {m} to {_listed([c.choice for c in r.equivalent])}, "
                  f"the simplest wins." if r.equivalent else "")
                 + f" Not every comparison is settled, but none can change this answer: "
                 f"{_listed([_bounded_phrase(c, r) for c in r.bounded])} "
                 f"{'is' if len(r.bounded) == 1 else 'are'} shown not to beat it by more "
                 f"than the {m} margin (the upper end of the {level(1 - 2 * r.alpha)} "
                 f"interval), and no simpler: "
                 f"slower or within the margin, {best.choice} is the answer either way.")
    else:
        open_ = [f"{c.choice} ({change_of(s)} vs {best.choice})" for c, s in open_comparisons(r)]
        text = (f"NOT SETTLED at this precision; for now {text} "
                f"{_listed(open_)} {'is' if len(open_) == 1 else 'are'} neither shown faster "
                f"nor slower beyond the noise nor shown within {m}, so this is the simplest of "
                f"the configurations that no other is shown faster than, not an answer: "
                f"{_needed(r)}.")
    near = _beaten_phrase(r)
    if near and r.kind != FASTER:
        text += f" Set aside,{near.removeprefix(';')} (not yet shown beyond the {m} margin)."
    slower_multi = [c for c in candidates if c.replicas > 1 and c.key in r.settlements
                    and r.settlements[c.key].verdict == SLOWER]
    if best.replicas == 1 and slower_multi and r.settled:
        top = max(slower_multi, key=lambda c: c.speed)
        s = r.settlements[top.key]
        cause = because(top, fastest)
        text += (f" More devices do not pay off: the best multi-device configuration "
                 f"({top.choice}) is {change_of(s)} vs {fastest.choice}, slower beyond the noise"
                 + (" (expected on logical CPU devices sharing the same cores)"
                    if machine.cpu_only else "")
                 + (f", because {cause}." if cause else f"; {why_not(top, fastest)}."))
    elif best.replicas == 1 and (multi := [c for c in candidates if c.replicas > 1]):
        # The best multi-device configuration against the single-device answer is
        # explained even where the runs do not call them apart: what its profile shows.
        top = max(multi, key=lambda c: c.speed)
        found = compared(top, best)
        if found:
            text += (f" Against the best multi-device configuration ({top.choice}), by "
                     f"their profiles: {found}.")
    if best in r.super_ideal:
        text += (f" Flagged super-ideal: its speed-up is above the {best.replicas}x that "
                 f"{devices(best.replicas)} can give (what that means is below).")
    return f"{text} Noise: {r.noise}."



def _other_line(c: ConfigView, best: ConfigView, s: Settlement | None, margin: float,
                inputs: Basis) -> str:
    """One other configuration's line, from its comparison with the answer (``s``:
    c / best, as the answer read it)."""
    head = f"{c.strategy} (best {fmt_rate(c.throughput or 0)} examples/s on {devices(c.replicas)})"
    if s is None:
        return head
    m = f"+-{margin:.0%}"
    if s.verdict == EQUIVALENT:
        return f"{head}: {shown_change(s)} vs {best.choice}, shown within {m} (equivalent)"
    if s.verdict == NOT_SETTLED and s.direction is None:
        return f"{head}: {change_of(s)} vs {best.choice}, not settled at this precision ({s.plan})"
    if s.direction == FASTER:
        return (f"{head}: {change_of(s)} vs {best.choice}, faster beyond the noise"
                f"{_against_margin(s)}")
    if s.verdict == NOT_SETTLED:
        return (f"{head}: {change_of(s)} vs {best.choice}, slower beyond the noise"
                f"{_against_margin(s)}")
    slower = (f"{head}: {1 - s.ratio:.0%} slower [{1 - s.high:.0%}-{1 - s.low:.0%}] than "
              f"{best.choice}, beyond the noise")
    # "because" is followed by the two profiles' difference only (reports.explain); a
    # measurement of the slower side alone is stated, not given as the cause.
    cause = because(c, best)
    if cause is not None:
        return f"{slower}, because {cause}"
    seen = measured_cause(c, inputs)
    return f"{slower}{f'; {seen}' if seen else ''}; {why_not(c, best)}"



def _per_worker_line(c: ConfigView, pool: Sequence[ConfigView], margin: float,
                     alpha: float) -> str:
    """A per-worker-batch configuration, labelled, against equal per-device work."""
    text = (f"{c.choice}: {fmt_rate(c.throughput or 0)} examples/s with a batch of "
            f"{c.per_replica_batch} per worker ({c.replicas} workers step asynchronously: "
            f"weak scaling, {c.replicas * c.per_replica_batch} examples per round), so it is "
            f"ranked apart from the synchronous strategies")
    same_work = [s for s in pool if s.ok and is_choice(s) and not s.batch_per_worker
                 and s.replicas == c.replicas and s.per_replica_batch == c.per_replica_batch]
    if not same_work:
        return (f"{text}; no synchronous configuration with {c.per_replica_batch} examples "
                f"per device on {devices(c.replicas)} in this sweep to compare it with")
    ref = max(same_work, key=lambda s: s.throughput or 0.0)
    s = settle_of(c, ref, margin, alpha)
    verdict = ("not compared" if s is None else
               f"{s.verdict} beyond the noise" if s.verdict in (FASTER, SLOWER) else
               f"shown within +-{margin:.0%}" if s.verdict == EQUIVALENT else
               f"not settled at this precision ({s.plan})")
    return (f"{text}; on equal per-device work it is {change_of(s) if s else '-'} vs "
            f"{ref.choice} at global batch {ref.global_batch}, {verdict}")


