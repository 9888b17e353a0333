"""The first pass a budget buys: which configurations a sweep measures once, which it
leaves out, and why.

On GPUs the default preset's matrix (every strategy on 1..N GPUs, two batches) costs
far more than `make bench`'s ten minutes, so the first pass is planned from it:

- what is worth measuring (``worth_reason``, from each strategy's traits in the
  registry): one single-device reference (the lowest ``single_device_rank``); each
  strategy at its ``sweep_devices`` (mirrored at the powers of two and on all GPUs,
  the multi-process ones at 2 and all); a strategy that keeps its variables on the host
  only where the cards have no link of their own, since elsewhere it copies what an
  all-reduce would send over NVLink across PCIe instead; nothing the strategy cannot
  train with the workload's layers (``batch_norm_reason``: CentralStorage and
  BatchNormalization with 2+ replicas);
- what the budget pays for (``plan_first_pass``): in order of what answers most (the
  reference and the full machine, then 2 GPUs, then the rest; the plainer strategy
  first; the first batch before the second), each configuration is priced
  (``bench.adaptive.pricing``) and kept while the first pass still fits. The reference
  is bought only together with something at its batch to compare it with.

Everything left out is listed with its reason; nothing is dropped silently. On a CPU
the preset is sized by hand for 2 cores and is kept whole.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from bench.adaptive.pricing import Price, Pricer, unit_price
from bench.hardware import Hardware
from bench.launch.groups import sweep_units
from bench.launch.session import MIN_ROUNDS
from bench.results.schema import RunResult
from bench.spec import RunSpec
from bench.strategies import STRATEGIES

# What `make bench` gives the sweep by default (Makefile: BENCH_BUDGET_S less
# BENCH_REPORT_S, less the all-reduce probe it runs first, about 20 s).
MAKE_BENCH_S = 600.0
MAKE_BENCH_REPORT_S = 15.0
MAKE_BENCH_PROBE_S = 20.0
MAKE_BENCH_SWEEP_S = MAKE_BENCH_S - MAKE_BENCH_REPORT_S - MAKE_BENCH_PROBE_S

STATES = ("will run", "unsupported", "left out", "done")


@dataclass(frozen=True)
class Planned:
    """One configuration of the matrix and what the first pass does with it."""

    spec: RunSpec
    state: str
    reason: str | None = None
    price: Price | None = None

    def __post_init__(self) -> None:
        if self.state not in STATES:
            raise ValueError(f"Planned.state must be one of {', '.join(STATES)}. "
                             f"Received: state={self.state!r}")

    def text(self) -> str:
        """The listing's state column."""
        if self.state == "will run":
            return "will run" + (f", {self.price.text()}" if self.price else "")
        return f"{self.state}: {self.reason}" if self.reason else self.state


@dataclass(frozen=True)
class FirstPass:
    """The priced first pass of a sweep: every configuration in the matrix's order."""

    entries: list[Planned]
    budget_s: float
    estimate_s: float  # the first pass of what will run, sessions priced as they run
    priced: bool  # False: nothing was priced (a CPU machine: the preset stays whole)
    where: str = ""
    budget_note: str = ""
    sources: dict[str, int] = field(default_factory=dict)
    # Paid once by the pass's first run (what, seconds), inside ``estimate_s``.
    one_time: list[tuple[str, float]] = field(default_factory=list)

    @property
    def runs(self) -> list[RunSpec]:
        """What the first pass runs: the kept configurations, and the unsupported and
        done ones (recorded or skipped as any sweep does)."""
        return [e.spec for e in self.entries if e.state != "left out"]

    @property
    def left_out(self) -> list[Planned]:
        return [e for e in self.entries if e.state == "left out"]

    @property
    def fits(self) -> bool:
        return self.estimate_s <= self.budget_s

    def summary(self, left_out: bool = True) -> list[str]:
        """Lines saying what runs, in how long against the budget, and (``left_out``)
        what was left out with why, by reason (empty where nothing was priced)."""
        if not self.priced:
            return []
        count = {s: sum(e.state == s for e in self.entries) for s in STATES}
        counts = ", ".join(f"{n} {s}" for s, n in count.items() if n)
        how = ", ".join(f"{n} {s}" for s, n in self.sources.items())
        lines = [f"{len(self.entries)} configuration(s): {counts}",
                 f"first pass on {self.where}: ~{self.estimate_s:.0f} s estimated ({how}); "
                 f"{'fits' if self.fits else 'does NOT fit'} the budget of "
                 f"{self.budget_s:.0f} s{self.budget_note}"]
        lines += [f"  of which once, before the first step: ~{s:.0f} s for {what}"
                  for what, s in self.one_time]
        left = self.left_out
        if left and left_out:
            lines.append(f"left out of the first pass ({len(left)}), by reason:")
            by_reason: dict[str, list[str]] = {}
            for e in left:
                by_reason.setdefault(e.reason or "", []).append(e.spec.label())
            lines += [f"  {why}: {', '.join(labels)}" for why, labels in by_reason.items()]
        return lines


def reference_strategy(specs: Iterable[RunSpec]) -> str | None:
    """The single-device reference among ``specs``' strategies: the lowest
    ``single_device_rank`` (one_device before default)."""
    ranked = [(f.single_device_rank, s.strategy) for s in specs
              if (f := STRATEGIES.get(s.strategy)).single_device_rank is not None]
    return min(ranked)[1] if ranked else None


def worth_reason(spec: RunSpec, gpus: int, reference: str | None,
                 links: Sequence[Mapping[str, str]]) -> str | None:
    """Why the default sweep on ``gpus`` GPUs does not measure ``spec`` (None: it is
    worth its price). ``links``: the cards' pairs as ``bench.hardware.topology_links``
    gives them."""
    factory = STRATEGIES.get(spec.strategy)
    if factory.single_device_rank is not None and spec.strategy != reference:
        return (f"the same computation on one GPU as the single-device reference "
                f"({reference})")
    # Before the links: a configuration that cannot train at all here is no question of
    # which is faster.
    cannot = factory.batch_norm_reason(spec)
    if cannot:
        return f"{cannot}; asked for with --strategy it still runs (a fixed stack trains it)"
    if factory.variables_on_host:
        if spec.devices == 1:
            return (f"on one GPU TensorFlow keeps {spec.strategy}'s variables on that GPU: "
                    f"the same computation as the single-device reference ({reference})")
        linked = sorted({p["link"] for p in links if p["link"].startswith("NV")})
        if linked:
            return (f"it keeps the variables on the CPU, so every step copies them to each "
                    f"GPU and the gradients back over PCIe, while these GPUs all-reduce "
                    f"over their own links ({', '.join(linked)}): it cannot win here "
                    f"(it is measured where the GPUs have no link of their own)")
    counts = factory.sweep_devices(gpus)
    if spec.devices not in counts:
        at = f"at {', '.join(map(str, counts))}" if counts else "from 2"
        return (f"the default sweep measures {spec.strategy} {at} GPU(s) "
                f"({factory.sweep_devices_why}); ask for other counts with --devices")
    return None


def priority(spec: RunSpec, gpus: int, batches: Sequence[int]) -> tuple[int, int, int, int]:
    """The order the budget buys in: the first batch before the next; the reference and
    the full machine, then 2 GPUs, then the counts between; the plainer strategy first."""
    tier = 0 if spec.devices in (1, gpus) else 1 if spec.devices == 2 else 2
    return (batches.index(spec.batch), tier, STRATEGIES.get(spec.strategy).plainness,
            spec.devices)


def plan_first_pass(specs: Sequence[RunSpec], hw: Hardware, *, budget_s: float,
                    preset: bool, results: Sequence[RunResult] = (),
                    links: Sequence[Mapping[str, str]] = (), interleave: bool = True,
                    runs: int = 1, evidence_steps: int = 0, budget_note: str = ""
                    ) -> FirstPass:
    """The first pass of ``specs`` that ``budget_s`` seconds pay for on ``hw``.

    ``preset``: the specs are the default preset's matrix, and only what is worth
    measuring (``worth_reason``) is considered; otherwise every supported one is.
    ``results``: what the sweep stored so far (measured prices; a configuration with a
    stored run costs the first pass nothing). ``runs``: runs of each configuration the
    pass makes (an explicit ``--runs``). On a machine without GPUs nothing is priced or
    left out.
    """
    entries = {s.key(): _unsupported_or(s, hw) for s in specs}
    if not hw.gpus:
        return FirstPass(list(entries.values()), budget_s, 0.0, priced=False)
    pricer = Pricer(hw, results, evidence_steps)
    done = {r.key for r in results}
    gpus = len(hw.gpus)
    reference = reference_strategy(specs)
    candidates: list[RunSpec] = []
    for spec in specs:
        if entries[spec.key()].state != "will run":
            continue
        why = worth_reason(spec, gpus, reference, links) if preset else None
        if why:
            entries[spec.key()] = Planned(spec, "left out", why)
        else:
            candidates.append(spec)
    batches = list(dict.fromkeys(s.batch for s in specs))
    prices = {s.key(): pricer.price(s) for s in candidates}
    buyer = _Buyer(entries, prices, pricer.one_time(), done, batches, budget_s, runs,
                   interleave)
    for spec in sorted(candidates, key=lambda s: priority(s, gpus, batches)):
        buyer.consider(spec, preset and spec.strategy == reference and spec.devices == 1)
    buyer.leave_out_waiting(candidates)
    for key in done & entries.keys():
        if entries[key].state == "will run":
            entries[key] = Planned(entries[key].spec, "done", None, entries[key].price)
    sources: dict[str, int] = {}
    for s in buyer.chosen:
        src = prices[s.key()].source
        sources[src] = sources.get(src, 0) + 1
    names = sorted({g.name for g in hw.gpus})
    return FirstPass(list(entries.values()), budget_s, buyer.spent, priced=True,
                     where=f"{gpus} GPU(s) ({', '.join(names)})", budget_note=budget_note,
                     sources=sources, one_time=buyer.one_time if buyer.chosen else [])


@dataclass
class _Buyer:
    """The first pass bought configuration by configuration, in ``priority``'s order:
    ``entries`` (by key) say what became of each, ``chosen`` what is bought, ``spent``
    what it costs."""

    entries: dict[str, Planned]
    prices: dict[str, Price]
    one_time: list[tuple[str, float]]
    done: set[str]
    batches: list[int]
    budget_s: float
    runs: int
    interleave: bool
    chosen: list[RunSpec] = field(default_factory=list)
    spent: float = 0.0
    short_of: int | None = None  # the first batch the budget could not pay in full
    # The preset's single-device reference is what the others at its batch are compared
    # with: alone it answers nothing. Unless one is in already, it waits for the first
    # configuration of its batch that the budget pays for beside it, and the two are
    # bought together; one that none joins is left out. (An explicit sweep's axes are
    # the user's: kept as asked.)
    waiting: dict[int, RunSpec] = field(default_factory=dict)  # batch -> its reference

    def cost(self, chosen: Sequence[RunSpec]) -> float:
        """The first pass of ``chosen``: what is not done yet, as it runs."""
        todo = [s for s in chosen if s.key() not in self.done]
        units = sweep_units(todo) if self.interleave else [(s,) for s in todo]
        fixed = sum(s for _, s in self.one_time) if todo else 0.0  # the first run pays it
        return fixed + self.runs * sum(
            unit_price([session_price(self.prices[s.key()], s, len(u)) for s in u])
            for u in units)

    def consider(self, spec: RunSpec, reference: bool) -> None:
        """Buy ``spec`` (with the reference waiting at its batch) if the budget pays,
        else leave it out with why. ``reference``: it is the preset's single-device
        reference, which waits for a partner."""
        rank = self.batches.index(spec.batch)
        if self.short_of is not None and rank > self.short_of:
            self.entries[spec.key()] = Planned(
                spec, "left out", f"batch {spec.batch} comes after every configuration of "
                f"batch {self.batches[self.short_of]} is in, and the budget could not pay "
                f"for them all", self.prices[spec.key()])
            return
        if reference and spec.key() not in self.done and spec.batch not in self.waiting \
                and not any(c.batch == spec.batch for c in self.chosen):
            self.waiting[spec.batch] = spec
            return
        partner = self.waiting.get(spec.batch)
        buying = [spec] if partner is None else [partner, spec]
        with_it = self.cost([*self.chosen, *buying])
        if with_it <= self.budget_s:
            self.chosen += buying
            self.spent = with_it
            self.waiting.pop(spec.batch, None)
            for s in buying:
                self.entries[s.key()] = Planned(s, "done" if s.key() in self.done
                                                else "will run", None, self.prices[s.key()])
        else:
            self.short_of = rank if self.short_of is None else self.short_of
            beside = f" and the reference ({partner.strategy}) beside it" if partner else ""
            budget_s, spent = self.budget_s, self.spent
            self.entries[spec.key()] = Planned(
                spec, "left out", f"the budget cannot pay for it{beside}: "
                f"~{with_it - spent:.0f} s more, {budget_s - spent:.0f} s of {budget_s:.0f} s "
                f"left", self.prices[spec.key()])

    def leave_out_waiting(self, candidates: Sequence[RunSpec]) -> None:
        """Every reference still waiting for a partner: left out, with why."""
        for batch, spec in self.waiting.items():
            why = ("the budget cannot pay for any of the others beside it"
                   if any(s.batch == batch and s.key() != spec.key() for s in candidates)
                   else "no other is worth measuring")
            self.entries[spec.key()] = Planned(
                spec, "left out", f"the single-device reference answers nothing alone, and "
                f"nothing else at batch {batch} is planned to run ({why})",
                self.prices[spec.key()])


def session_price(price: Price, spec: RunSpec, arms: int) -> Price:
    """``price`` as the first pass pays it: an arm of a session (``arms`` above 1) at
    ``MIN_ROUNDS`` windows, where the budget stops its rounds at the latest (the
    opening's at the first third of the budget); a run of its own at its repeats."""
    if arms < 2 or spec.repeats <= MIN_ROUNDS:
        return price
    return replace(price, windows_s=price.windows_s * MIN_ROUNDS / spec.repeats)


def _unsupported_or(spec: RunSpec, hw: Hardware) -> Planned:
    reason = STRATEGIES.get(spec.strategy).unsupported_reason(spec, hw)
    return Planned(spec, "unsupported", reason) if reason else Planned(spec, "will run")
