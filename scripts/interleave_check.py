"""Does sharing a process change a configuration's throughput? Own process against
arm of a shared process, interleaved.

    python -m scripts.interleave_check [--rounds 6] [--workload mlp] [--batch 256]
        [--strategy default,one_device,mirrored,central_storage] [--out DIR]

Sweeps measure the in-process configurations one answer compares as arms of one
process (``bench run --interleave``). That is only sound if a configuration runs as
fast as an arm as in a process of its own. Each round runs every configuration in
its own process (``run_isolated``) and all of them as arms of one process
(``run_interleaved``), the order of the two kinds alternating between rounds, so the
machine's drift falls on both. Per configuration the statistic is the per-round log
ratio (arm / own process) of their run figures (median window): its mean with a 95%
t interval over the rounds, and whether that interval lies inside +-5% (shown
equivalent), leaves out 1 (shown different) or neither.

Figures are printed and written to ``OUT/interleave_check.json``, never asserted.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

from bench.cli.common import split_list, writable_dir
from bench.launch.arms import run_interleaved
from bench.launch.launcher import run_isolated
from bench.results.stats.settlement import EQUIVALENT, FASTER, SLOWER, settle_pairs
from bench.results.store import new_sweep_dir
from bench.spec import RunSpec, SpecError

MARGIN = 0.05


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m scripts.interleave_check",
                                description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--workload", default="mlp")
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--strategy", type=split_list,
                   default=["default", "one_device", "mirrored", "central_storage"])
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args(argv)
    try:
        if args.rounds < 2:
            raise ValueError(f"--rounds must be >= 2. Received: --rounds {args.rounds}")
        specs = [RunSpec(workload=args.workload, strategy=s,
                         devices=1 if s in ("default", "one_device") else 2,
                         batch=args.batch) for s in args.strategy]
    except (ValueError, SpecError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    out = writable_dir(args.out or new_sweep_dir("interleave-check"))
    print(f"interleave_check: {', '.join(s.label() for s in specs)}; {args.rounds} rounds; "
          f"load average {os.getloadavg()[0]:.2f}; logs in {out}", flush=True)
    ratios: dict[str, list[float]] = {s.label(): [] for s in specs}
    t0 = time.monotonic()
    for r in range(args.rounds):
        figures: dict[str, dict[str, float]] = {"own": {}, "arm": {}}
        for kind in (("own", "arm") if r % 2 == 0 else ("arm", "own")):
            if kind == "own":
                for spec in specs:
                    res = run_isolated(spec, out / f"own-{r}-{spec.key()}.log")
                    if res.figures:
                        figures["own"][spec.label()] = res.figures.global_throughput
            else:
                rounds = max(s.repeats for s in specs)
                for res in run_interleaved(specs, out / f"arms-{r}.log", rounds=rounds, seed=r):
                    if res.figures:
                        figures["arm"][res.spec.label()] = res.figures.global_throughput
        for label, own in figures["own"].items():
            arm = figures["arm"].get(label)
            if arm:
                ratios[label].append(math.log(arm / own))
        print(f"round {r + 1}/{args.rounds} ({time.monotonic() - t0:.0f} s): " + ", ".join(
            f"{label} own {figures['own'].get(label, 0):,.0f} arm "
            f"{figures['arm'].get(label, 0):,.0f}" for label in ratios), flush=True)
    print(f"\n{'configuration':34} {'arm / own process':>26}  rounds  verdict (+-5%)")
    table = {}
    for label, values in ratios.items():
        if len(values) < 2:
            print(f"{label:34} {'-':>26}  {len(values):6d}  not measured")
            continue
        s = settle_pairs(values, margin=MARGIN)
        verdict = {EQUIVALENT: "same within +-5%", FASTER: "ARM FASTER",
                   SLOWER: "ARM SLOWER"}.get(s.verdict, "not settled")
        print(f"{label:34} {s.ratio:8.3f} [{s.low:.3f}, {s.high:.3f}]  {len(values):6d}  "
              f"{verdict}")
        table[label] = {"log_ratios": values, "ratio": s.ratio, "low": s.low,
                        "high": s.high, "verdict": s.verdict}
    (out / "interleave_check.json").write_text(json.dumps(table, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
