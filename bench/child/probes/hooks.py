"""What a lane adds after a training run's measured windows (``AfterWindows``: the
fingerprint's peak entry, what cost a figure), and how many steps a sweep's evidence
profile takes. Kept out of the measured loop so neither the peak probe nor the profiler
can touch the throughput windows: ``Backend.after_windows`` runs once they returned.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# A sweep's evidence profile (bench.launch.evidence) takes its steps up to this long in
# all (the trace's size, and so the time to write and read it, grows with them), but
# never fewer than EVIDENCE_MIN_STEPS.
EVIDENCE_SECONDS, EVIDENCE_MIN_STEPS = 1.0, 2


@dataclass
class AfterWindows:
    """What the child adds to its payload: the peak entry of the environment
    fingerprint, and problems that cost a figure but not the run (its reason)."""

    peak_entry: dict[str, Any]
    problems: list[str] = field(default_factory=list)

    @property
    def reason(self) -> str | None:
        return "; ".join(self.problems) or None


def evidence_step_count(asked: int, call_s: float, multi_worker: bool) -> int:
    """Calls (profiled steps) of a sweep's evidence profile: ``asked``, fewer where they
    would take over ``EVIDENCE_SECONDS`` at ``call_s`` each (at least
    ``EVIDENCE_MIN_STEPS``). Workers of one run keep
    ``asked``: each times its own steps, and they must profile the same number, since
    their collectives pair up by order."""
    if multi_worker or call_s <= 0:
        return asked
    return min(asked, max(EVIDENCE_MIN_STEPS, int(EVIDENCE_SECONDS / call_s)))
