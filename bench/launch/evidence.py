"""Evidence by default: which runs of a sweep profile a few steps after their windows.

A report explains a difference between two configurations ("because ...") only from
both configurations' profiles (``reports.explain``). Which pairs a report will explain
(those beyond the noise, and the best multi-device configuration against the best
single-device one) is known only once the sweep has measured them, so every
configuration is profiled once, in its first run, after the windows, so it never
touches the throughput. Where that run is an arm of a shared process, the arm is
profiled after every arm's windows, alone (``bench.child.arms``). What it costs is
measured in the run (``Breakdown.capture_s``) and summed for the sweep (``cost_line``).

The profile is asked of the run, not written into its spec: the configuration, its
key and its stored spec stay the same, so a profiled run is one of its runs like any
other. ``--profile-steps N`` (a spec field) still profiles every run of a sweep, under
keys of their own; ``--no-profile`` turns the evidence off.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from bench.results.schema import RunResult
from bench.spec import RunSpec
from bench.strategies import STRATEGIES

# Enough steps for the parts' means to settle on small models; the run takes fewer where
# they would last over a second (bench.child.probes.hooks.evidence_step_count), so that
# the profile stays a small share of the run: 0.1-0.4 s per MLP run here.
DEFAULT_STEPS = 5


@dataclass(frozen=True)
class Evidence:
    """How a sweep profiles its runs for the reports' explanations (``steps`` 0: off)."""

    steps: int = DEFAULT_STEPS

    def __post_init__(self) -> None:
        if isinstance(self.steps, bool) or not isinstance(self.steps, int) or self.steps < 0:
            raise ValueError(f"Evidence.steps must be an integer >= 0. Received: "
                             f"steps={self.steps!r}")

    def steps_for(self, spec: RunSpec, replicate: int) -> int:
        """Profiled steps (at most) to ask of run ``replicate`` of ``spec`` (0: none): the
        first run of a training configuration whose steps its main process can see,
        unless its spec profiles every run anyway."""
        if (not self.steps or replicate != 1 or spec.mode != "train" or spec.profile_steps
                or STRATEGIES.get(spec.strategy).no_profile_reason):
            return 0
        return self.steps


OFF = Evidence(steps=0)


def cost_line(results: Sequence[RunResult], wall_s: float) -> str | None:
    """What the profiles of ``results`` cost the sweep: ``evidence: 12 runs profiled
    after their windows, 4.1 s of the sweep's 310 s (1.3%)``; None without profiles."""
    costs = [b.capture_s for r in results
             if r.figures is not None and (b := r.figures.breakdown) is not None]
    if not costs:
        return None
    spent = sum(costs)
    share = f" ({spent / wall_s:.1%})" if wall_s > 0 else ""
    many = len(costs) != 1
    return (f"evidence: {len(costs)} run{'s' if many else ''} profiled after "
            f"{'their' if many else 'its'} windows, {spent:.1f} s of the sweep's {wall_s:.0f} s"
            f"{share} (--no-profile skips it)")
