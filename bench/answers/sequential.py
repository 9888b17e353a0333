"""The alpha each answer is read at, when a sweep's budget looks at its answers repeatedly.

A budgeted sweep (``bench run --budget``) reads its answers after every session and
stops measuring the ones that settled. Reading at the full alpha each time and stopping
at the first settled look would raise the error rates far above alpha: a comparison
whose true gap sits at the margin, read after each of 2-10 sessions at SD 3%, was called
EQUIVALENT 4.9% of the time in one look and 16.8% when stopped at the first settled one.
So the budget follows a Haybittle-Peto plan (``LookPlan``): each look before the last
reads at a small ``interim`` alpha (at most ``max_interim`` of them), and the last look,
when the budget is spent, reads what is still open at the alpha left (``final``). By
the union bound, whatever the looks' correlation, the chance of any false decision per
comparison stays at most 0.05; a clear gap still settles early, and the last look loses
little power.

The interim looks share 0.01 of the 0.05, and their number is planned from the budget
(``LookPlan.for_budget``): a 10-minute sweep on 2 cores reads its places 3-4 times
before its budget ends, so ten looks at 0.001 each left most of that 0.01 unspent, while
3 looks at 0.0033 need t = 17.3 instead of 31.6 at a place's third session. The last
look reads at 0.04 either way. A look at a place counts only where it could settle the
place (``bench.adaptive.budget``: two sessions or more, new ones since its last look):
a look that cannot reject anything spends no error rate, so it needs no share of alpha.

The sweep journals each look (``look`` events: the place and the alpha it was read
at), and ``Looks.of_journal`` gives the report the alpha of each place's last look, so
that the report says what the budget saw. A sweep without look events (no budget: one
look) is read at the full alpha.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from bench.results.levels import DEFAULT_ALPHA
from bench.results.stats.settlement import Settlement

LOOK_EVENT = "look"
SETTLED_EVENT = "settled"  # a place's first settlement, in the sweep's journal
PLAN_EVENT = "look_plan"  # the sweep's LookPlan, journaled before its first look
# The interim looks' share of alpha, whatever their number: the last look reads at
# alpha less this (0.04), as it did with ten looks at 0.001.
INTERIM_SHARE = 0.01
# A budget plans one interim look for each this many seconds, 2 at least and 10 at
# most: a 10-minute sweep on 2 cores, its sessions of 25-60 s coming in rounds, can
# read its answers three or four times (at about 220, 355 and 505 s of 545-565 s).
LOOK_EVERY_S = 150.0


@dataclass(frozen=True)
class LookPlan:
    """A budget's looks: ``max_interim`` at ``interim`` each, then one at ``final``."""

    alpha: float = DEFAULT_ALPHA
    interim: float = 0.001
    max_interim: int = 10

    def __post_init__(self) -> None:
        if not 0 < self.interim * self.max_interim < self.alpha < 0.5:
            raise ValueError(f"the interim looks must leave part of alpha for the last "
                             f"one. Received: alpha={self.alpha!r}, interim={self.interim!r}, "
                             f"max_interim={self.max_interim!r}")

    @property
    def final(self) -> float:
        """The last look's alpha: what the interim looks leave."""
        return self.alpha - self.interim * self.max_interim

    @classmethod
    def for_budget(cls, budget_s: float) -> LookPlan:
        """The plan of a sweep on ``budget_s`` seconds: one interim look for each
        ``LOOK_EVERY_S`` (2 to 10), sharing ``INTERIM_SHARE`` of alpha."""
        looks = max(2, min(10, int(budget_s // LOOK_EVERY_S)))
        return cls(interim=INTERIM_SHARE / looks, max_interim=looks)

    def event(self) -> dict[str, Any]:
        """The journal line that fixes this plan for the sweep (``of_journal``)."""
        return {"event": PLAN_EVENT, "alpha": self.alpha, "interim": self.interim,
                "max_interim": self.max_interim}

    @classmethod
    def of_journal(cls, events: Iterable[Mapping[str, Any]]) -> LookPlan | None:
        """The plan a sweep journaled (its first), None where it journaled none: a
        resumed sweep keeps its plan whatever budget it is resumed with."""
        for e in events:
            if e.get("event") == PLAN_EVENT:
                return cls(float(e["alpha"]), float(e["interim"]), int(e["max_interim"]))
        return None


@dataclass(frozen=True)
class Looks:
    """The alpha each place's answer is read at (``default`` where none is recorded)."""

    default: float = DEFAULT_ALPHA
    by_place: Mapping[str, float] = field(default_factory=dict)
    # A settled place's answer is the one its settling look read: from the results
    # stored by then (ISO time of the settlement, by place). Read again with what the
    # budget measured after it for other places, the machine's noise pool (which every
    # place borrows from) has moved: an MLP place settled at 503 s would read "not
    # settled" at the end, the pool having fallen just below its own variance, which
    # then keeps its own 3 degrees of freedom instead of the pool's 14. A stopped
    # comparison is not tested again (the looks' alpha covers one decision per place).
    settled_at: Mapping[str, str] = field(default_factory=dict)

    def alpha(self, place: str) -> float:
        return self.by_place.get(place, self.default)

    def unsettled(self) -> Looks:
        """These looks without the settlements: every place read from all results."""
        return Looks(self.default, self.by_place)

    @classmethod
    def of_journal(cls, events: Iterable[Mapping[str, Any]]) -> Looks:
        """Each place's last recorded look and its first settlement (a sweep's
        ``sweep.jsonl``; a settlement journaled without its time is read from all
        results, as before it was journaled)."""
        events = list(events)
        last = {str(e["where"]): float(e["alpha"]) for e in events
                if e.get("event") == LOOK_EVENT and "where" in e and "alpha" in e}
        settled: dict[str, str] = {}
        for e in events:
            if e.get("event") == SETTLED_EVENT and "where" in e and "at" in e:
                settled.setdefault(str(e["where"]), str(e["at"]))
        return cls(by_place=last, settled_at=settled)


def look_event(place: str, alpha: float, final: bool, sessions: int | None = None
               ) -> dict[str, Any]:
    """The journal line of one look at one place (``sessions``: the most sessions any of
    its open comparisons had then)."""
    event: dict[str, Any] = {"event": LOOK_EVENT, "where": place, "alpha": alpha,
                             "final": final}
    if sessions is not None:
        event["sessions"] = sessions
    return event


@dataclass(frozen=True)
class Taken:
    """The looks a place's answer has had: ``interim`` ones, whether its last
    (``final``) one was taken, and the sessions it had at its latest (``sessions``)."""

    interim: int = 0
    final: bool = False
    sessions: int = 0


def looks_taken(events: Iterable[Mapping[str, Any]]) -> dict[str, Taken]:
    """Each place's looks so far, from a sweep's journal: what a resumed budget continues
    from (its plan's alpha is spent once per sweep, not once per invocation)."""
    out: dict[str, Taken] = {}
    for e in events:
        if e.get("event") != LOOK_EVENT or "where" not in e:
            continue
        where, was = str(e["where"]), out.get(str(e["where"]), Taken())
        sessions = int(e.get("sessions", was.sessions))
        out[where] = (Taken(was.interim, True, sessions) if e.get("final") else
                      Taken(was.interim + 1, was.final, sessions))
    return out


Settle = Callable[[Sequence[float], float], Settlement]


def read_sequentially(log_ratios: Sequence[float], plan: LookPlan | None, settle: Settle
                      ) -> tuple[Settlement, int]:
    """How the budget reads one comparison whose n-th session gave ``log_ratios[n - 1]``:
    a look after each session from the second (one session has no interval) at
    ``plan.interim`` (the first ``plan.max_interim``), stopping at the first that
    settles it, and, when the sessions run out, the last look
    at ``plan.final``. ``plan`` None: every look at the full alpha, stopping when settled
    (what the budget did before it spent alpha). Returns the last look's settlement and
    the sessions it rests on. ``settle(ratios, alpha)`` is the report's decision (e.g.
    ``stats.settlement.settle_pairs``); a simulation of the budget loop runs it on seeded series."""
    if not log_ratios:
        raise ValueError("a comparison needs one session at least. Received: log_ratios=[]")
    for n in range(1, len(log_ratios) + 1):
        if plan is None:
            s = settle(log_ratios[:n], DEFAULT_ALPHA)
            if s.settled or n == len(log_ratios):
                return s, n
            continue
        if 2 <= n <= plan.max_interim + 1:
            s = settle(log_ratios[:n], plan.interim)
            if s.settled:
                return s, n
    assert plan is not None
    return settle(log_ratios, plan.final), len(log_ratios)
