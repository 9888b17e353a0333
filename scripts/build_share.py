"""Is a session's process a unit beyond its builds? The nested ANOVA of a sweep's pairs.

    python -m scripts.build_share SWEEP_DIR [SWEEP_DIR ...]
    python -m scripts.build_share --simulate [--seed N]

A sweep's sessions build their arms afresh for each block of rounds, and the report
reads each build as a pair of its own (``bench.results.pairs.units``). That holds when
an arm's offset belongs to its build and not to its process. This script tests it on
the sweeps' own data: for every comparison of two arms (each place's arms against its
first) measured in two or more sessions of two or more builds, the builds' log ratios
nested in their processes (one-way random-effects ANOVA):

- within: the builds of one process around their process's mean (what the pairs'
  interval assumes all the noise is);
- between: the processes' means around the grand mean, scaled to one build. Were a
  process to add an offset of its own, this would exceed the within mean square.

Printed per comparison: processes, builds, both mean squares, F and its p-value
(upper tail). Then all comparisons together: every between and within sum of squares
divided by its comparison's within mean square, summed (about F with the summed
degrees of freedom; the comparisons of one place share arms, so it is a summary, not
an exact test), and Fisher's combination of the p-values. Nothing is asserted.

``--simulate``: what reading builds as pairs would cost. Seeded series of 3 sessions of
3 builds, a share of the variance (the intraclass correlation) belonging to the session:
the coverage of the report's interval (96%, the budget's last look) when each build is
a pair, and when each session is (the mean of its builds).
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy import stats as sps

from bench.results.pairs import build_log_ratio, units
from bench.results.schema import RunResult
from bench.results.store import load_sweep


@dataclass(frozen=True)
class Nested:
    """One comparison's builds (log ratios), grouped by process."""

    label: str
    processes: list[list[float]]

    @property
    def df_between(self) -> int:
        return len(self.processes) - 1

    @property
    def df_within(self) -> int:
        return sum(len(p) - 1 for p in self.processes)

    def sums(self) -> tuple[float, float]:
        """The between and within sums of squares (builds as the observations)."""
        grand = statistics.fmean(x for p in self.processes for x in p)
        between = sum(len(p) * (statistics.fmean(p) - grand) ** 2 for p in self.processes)
        within = sum((x - statistics.fmean(p)) ** 2 for p in self.processes for x in p)
        return between, within

    def test(self) -> tuple[float, float, float, float]:
        """MS between, MS within, F and its upper-tail p-value."""
        between, within = self.sums()
        ms_b, ms_w = between / self.df_between, within / self.df_within
        f = ms_b / ms_w if ms_w > 0 else math.inf
        return ms_b, ms_w, f, float(sps.f.sf(f, self.df_between, self.df_within))


def comparisons(results: Sequence[RunResult], sweep: str) -> list[Nested]:
    """Every pair of arms (against each session's first arm) measured in two or more
    processes of two or more builds each."""
    sessions: dict[str, dict[str, RunResult]] = defaultdict(dict)
    for r in results:
        if r.interleaved is not None and r.figures is not None and r.status == "ok":
            sessions[r.interleaved.session][r.key] = r
    found: dict[tuple[str, str], list[list[float]]] = defaultdict(list)
    labels: dict[tuple[str, str], str] = {}
    for arms in sessions.values():
        keys = sorted(arms)
        ref = keys[0]
        for k in keys[1:]:
            a, b = units(arms[ref]), units(arms[k])
            if len(a) < 2 or len(a) != len(b):
                continue
            found[(ref, k)].append([build_log_ratio(x, y) for x, y in zip(a, b, strict=True)])
            spec, other = arms[ref].spec, arms[k].spec
            labels[(ref, k)] = (f"{sweep} {spec.workload} b{spec.batch}: {other.strategy} "
                                f"n={other.devices} / {spec.strategy} n={spec.devices}")
    return [Nested(labels[key], procs) for key, procs in found.items() if len(procs) >= 2]


def simulate(shares: Sequence[float] = (0.0, 0.25, 0.6), sessions: int = 3, builds: int = 3,
             alpha: float = 0.04, series: int = 20_000, seed: int = 1) -> list[str]:
    """Coverage of the interval with builds, or sessions, as the pairs (see ``--simulate``)."""
    rng = np.random.default_rng(seed)
    n = sessions * builds
    lines = [f"{sessions} sessions of {builds} builds, {series} series a row, "
             f"{1 - alpha:.0%} intervals: coverage (mean half-width in build SDs)",
             f"{'session share':>13} {'builds as pairs':>18} {'sessions as pairs':>18}"]
    for share in shares:
        within = 1.0
        between = math.sqrt(share / (1.0 - share)) * within
        y = (between * rng.standard_normal((series, sessions, 1))
             + within * rng.standard_normal((series, sessions, builds)))
        means = y.mean(axis=2)
        as_builds = y.reshape(series, n)
        cells = []
        for values, df, count in ((as_builds, n - 1, n), (means, sessions - 1, sessions)):
            half = sps.t.ppf(1 - alpha / 2, df) * values.std(axis=1, ddof=1) / math.sqrt(count)
            covered = np.abs(values.mean(axis=1)) <= half
            cells.append(f"{covered.mean():.1%} ({half.mean():.2f})")
        lines.append(f"{share:>13.2f} {cells[0]:>18} {cells[1]:>18}")
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m scripts.build_share",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("sweeps", nargs="*", type=Path)
    p.add_argument("--simulate", action="store_true",
                   help="the coverage of builds or sessions read as pairs, seeded series")
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args(argv)
    if args.simulate:
        print("\n".join(simulate(seed=args.seed)))
        return 0
    if not args.sweeps:
        p.error("give one sweep directory or more, or --simulate")
    found: list[Nested] = []
    for d in args.sweeps:
        if not d.is_dir():
            p.error(f"not a sweep directory. Received: {d}")
        found += comparisons(load_sweep(d).results, d.name)
    if not found:
        print("no comparison has two or more sessions of two or more builds")
        return 0
    print(f"{'comparison':62} {'proc':>4} {'builds':>6} {'MS between':>10} {'MS within':>9} "
          f"{'F':>6} {'p':>6}")
    scaled_b = scaled_w = 0.0
    df_b = df_w = 0
    ps: list[float] = []
    for n in found:
        ms_b, ms_w, f, pv = n.test()
        print(f"{n.label:62} {len(n.processes):>4} {sum(map(len, n.processes)):>6} "
              f"{ms_b:>10.5f} {ms_w:>9.5f} {f:>6.2f} {pv:>6.3f}")
        between, within = n.sums()
        if ms_w > 0:
            scaled_b += between / ms_w
            scaled_w += within / ms_w
            df_b, df_w = df_b + n.df_between, df_w + n.df_within
            ps.append(max(pv, 1e-300))
    if df_b and df_w:
        f_all = (scaled_b / df_b) / (scaled_w / df_w)
        fisher = -2.0 * sum(math.log(x) for x in ps)
        print(f"all {len(ps)} comparisons: between/within {f_all:.2f} on ({df_b}, {df_w}) "
              f"degrees of freedom, p {float(sps.f.sf(f_all, df_b, df_w)):.3f}; Fisher's "
              f"combination p {float(sps.chi2.sf(fisher, 2 * len(ps))):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
