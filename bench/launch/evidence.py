"""Evidence by default: which runs of a sweep profile a few steps after their windows.

A report explains a difference between two configurations ("because ...") only from
both configurations' profiles (``reports.explain``). Which pairs a report will explain
(those beyond the noise, and the best multi-device configuration against the best
single-device one) is known only once the sweep has measured them, so every
configuration is profiled once, in its first run, after the windows, so it never
touches the throughput. Where that run is an arm of a shared process, the arm is
profiled after every arm's windows, alone (``bench.child.arms``). What it costs is
measured in the run (``Breakdown.capture_s``) and summed for the sweep
(``bench.launch.sweep.cost_line``).

The profile is asked of the run, not written into its spec: the configuration, its
key and its stored spec stay the same, so a profiled run is one of its runs like any
other. ``--profile-steps N`` (a spec field) still profiles every run of a sweep, under
keys of their own; ``--no-profile`` turns the evidence off.
"""

from __future__ import annotations

from dataclasses import dataclass

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

