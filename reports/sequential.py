"""The alpha each answer is read at, when a sweep's budget looks at its answers repeatedly.

A budgeted sweep (``bench run --budget``) reads its answers after every session and
stops measuring the ones that settled. Reading at the full alpha each time and stopping
at the first settled look would raise the error rates far above alpha: a comparison
whose true gap sits at the margin, read after each of 2-10 sessions at SD 3%, was called
EQUIVALENT 4.9% of the time in one look and 16.8% when stopped at the first settled one.
So the budget follows a Haybittle-Peto plan (``LookPlan``): each look before the last
reads at a small ``interim`` alpha (0.001, at most ``max_interim`` of them), and the
last look, when the budget is spent, reads what is still open at the alpha left
(``final``: 0.05 - 10 x 0.001 = 0.04). By the union bound, whatever the looks'
correlation, the chance of any false decision per comparison stays at most 0.05;
a clear gap still settles early, and the last look loses little power.

The sweep journals each look (``look`` events: the place and the alpha it was read
at), and ``Looks.of_journal`` gives the report the alpha of each place's last look, so
that the report says what the budget saw. A sweep without look events (no budget: one
look) is read at the full alpha.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from bench.results.stats import DEFAULT_ALPHA, Settlement

LOOK_EVENT = "look"


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


@dataclass(frozen=True)
class Looks:
    """The alpha each place's answer is read at (``default`` where none is recorded)."""

    default: float = DEFAULT_ALPHA
    by_place: Mapping[str, float] = field(default_factory=dict)

    def alpha(self, place: str) -> float:
        return self.by_place.get(place, self.default)

    @classmethod
    def of_journal(cls, events: Iterable[Mapping[str, Any]]) -> Looks:
        """Each place's last recorded look (a sweep's ``sweep.jsonl``)."""
        last = {str(e["where"]): float(e["alpha"]) for e in events
                if e.get("event") == LOOK_EVENT and "where" in e and "alpha" in e}
        return cls(by_place=last)


def look_event(place: str, alpha: float, final: bool) -> dict[str, Any]:
    """The journal line of one look at one place."""
    return {"event": LOOK_EVENT, "where": place, "alpha": alpha, "final": final}


@dataclass(frozen=True)
class Taken:
    """The looks a place's answer has had: ``interim`` ones, and whether its last
    (``final``) one was taken."""

    interim: int = 0
    final: bool = False


def looks_taken(events: Iterable[Mapping[str, Any]]) -> dict[str, Taken]:
    """Each place's looks so far, from a sweep's journal: what a resumed budget continues
    from (its plan's alpha is spent once per sweep, not once per invocation)."""
    out: dict[str, Taken] = {}
    for e in events:
        if e.get("event") != LOOK_EVENT or "where" not in e:
            continue
        where, was = str(e["where"]), out.get(str(e["where"]), Taken())
        out[where] = (Taken(was.interim, True) if e.get("final") else
                      Taken(was.interim + 1, was.final))
    return out


Settle = Callable[[Sequence[float], float], Settlement]


def read_sequentially(log_ratios: Sequence[float], plan: LookPlan | None, settle: Settle
                      ) -> tuple[Settlement, int]:
    """How the budget reads one comparison whose n-th session gave ``log_ratios[n - 1]``:
    a look after each session at ``plan.interim`` (the first ``plan.max_interim``),
    stopping at the first that settles it, and, when the sessions run out, the last look
    at ``plan.final``. ``plan`` None: every look at the full alpha, stopping when settled
    (what the budget did before it spent alpha). Returns the last look's settlement and
    the sessions it rests on. ``settle(ratios, alpha)`` is the report's decision (e.g.
    ``stats.settle_pairs``); a simulation of the budget loop runs it on seeded series."""
    if not log_ratios:
        raise ValueError("a comparison needs one session at least. Received: log_ratios=[]")
    for n in range(1, len(log_ratios) + 1):
        if plan is None:
            s = settle(log_ratios[:n], DEFAULT_ALPHA)
            if s.settled or n == len(log_ratios):
                return s, n
            continue
        if n <= plan.max_interim:
            s = settle(log_ratios[:n], plan.interim)
            if s.settled:
                return s, n
    assert plan is not None
    return settle(log_ratios, plan.final), len(log_ratios)
