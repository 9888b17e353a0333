"""Error rates and power of the budget's repeated looks at an answer, by seeded simulation.

    .venv/bin/python -m scripts.sequential_check [--series 1000] [--seed 0]

A budgeted sweep reads each open answer after every session and stops measuring it once
it settles (``bench.adaptive.budget.spend``). This replays that schedule
(``bench.answers.sequential.read_sequentially``, with the report's own decision,
``stats.settlement.settle_pairs``) on seeded series of session log ratios of one comparison, and
prints per case how often it ends in each kind of answer, for the plans the budget uses
(``LookPlan.for_budget``: an hour's ten interim looks at 0.001, a 10-minute sweep's four
at 0.0025, each from a comparison's second session; the last look at 0.04) and for every
look at the full alpha (the budget before it spent alpha):

- at the margin (the true gap exactly +5%): EQUIVALENT and "faster beyond the margin"
  are both wrong; each must stay at or under 5%;
- a 10% gap at the pair noise of the shared sweeps (log-ratio SD 0.075-0.096 on the
  Intel machine's two sweeps): how often it is shown faster beyond the noise, and beyond
  the margin, in the sessions a 10-minute sweep gives an answer (about 6) and in 10.

Prints figures only (no TensorFlow); exit 0.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence

import numpy as np

from bench.answers.sequential import LookPlan, read_sequentially
from bench.results.stats.settlement import EQUIVALENT, FASTER, Settlement, settle_pairs

MARGIN = 0.05
# (label, true ratio, log-ratio SD of a session's pair, sessions)
CASES = (("at the margin, SD 0.03", 1.05, 0.03, 10),
         ("at the margin, SD 0.085", 1.05, 0.085, 10),
         ("10% gap, SD 0.085, 6 sessions", 1.10, 0.085, 6),
         ("10% gap, SD 0.085, 10 sessions", 1.10, 0.085, 10))


def _settle(ratios: Sequence[float], alpha: float) -> Settlement:
    return settle_pairs(list(ratios), margin=MARGIN, alpha=alpha)


def rates(ratio: float, sd: float, sessions: int, series: int, seed: int,
          plan: LookPlan | None) -> dict[str, float]:
    """Shares of the answers the budget's reading gives over ``series`` seeded series."""
    rng = np.random.default_rng(seed)
    data = rng.normal(math.log(ratio), sd, (series, sessions))
    kinds = {"equivalent": 0, "beyond the margin": 0, "shown faster": 0}
    used = 0
    for row in data:
        s, n = read_sequentially([float(x) for x in row], plan, _settle)
        used += n
        kinds["equivalent"] += s.verdict == EQUIVALENT
        kinds["beyond the margin"] += s.verdict == FASTER
        kinds["shown faster"] += s.direction == FASTER
    out = {k: v / series for k, v in kinds.items()}
    out["sessions"] = used / series
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--series", type=int, default=1000, help="series per case and rule")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.series < 10:
        print(f"error: --series must be at least 10. Received: --series {args.series}",
              file=sys.stderr)
        return 2
    print(f"{'case':34s} {'looks':22s} {'equivalent':>10s} {'beyond margin':>13s} "
          f"{'shown faster':>12s} {'sessions':>8s}")
    for i, (label, ratio, sd, sessions) in enumerate(CASES):
        for name, plan in (("10 at 0.001, last 0.04", LookPlan()),
                           ("4 at 0.0025, last 0.04", LookPlan.for_budget(600.0)),
                           ("each at 0.05", None)):
            r = rates(ratio, sd, sessions, args.series, args.seed + i, plan)
            print(f"{label:34s} {name:22s} {r['equivalent']:10.1%} "
                  f"{r['beyond the margin']:13.1%} {r['shown faster']:12.1%} "
                  f"{r['sessions']:8.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
