"""Measure the noise floor and the false-positive rate of `bench compare` on this machine.

    .venv/bin/python scripts/noise_floor.py [--runs 3] [--repeats 6] [--max-seconds 0.5]

Runs every configuration (MLP b256, CNN b64, ResNet50 32x32/10 classes b16, each under
mirrored on 1 and 2 devices) ``--runs`` times, in rounds (every configuration once,
then again), each run a fresh process with ``--repeats`` windows. Prints, per
configuration:

- within-run CV: std/mean of the window throughputs of one run (median over runs);
  this is the noise floor `compare` reports;
- between-run CV: std/mean of the runs' median throughputs;
- same-code comparisons: every pair of runs compared with the defaults of
  `bench compare` (Mann-Whitney U, alpha 0.05, 5% threshold); any throughput verdict
  other than unchanged is a false positive (the code did not change);
- pooled: each run against all the others pooled as the baseline (what
  `bench nightly --baseline-runs N` does), where compare also knows the run-to-run spread.

Figures are printed, never asserted. The load average before and after is printed
because other processes on the machine move every figure.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.launch.sweep import run_sweep  # noqa: E402
from bench.regress.compare import Report, Thresholds, compare  # noqa: E402
from bench.results.schema import RunResult  # noqa: E402
from bench.results.store import load_sweep  # noqa: E402
from bench.spec import RunSpec  # noqa: E402

WORKLOADS = (("mlp", 256, {}), ("cnn", 64, {}),
             ("resnet50", 16, {"image_size": 32, "classes": 10}))


def specs(repeats: int, max_seconds: float, devices: list[int]) -> list[RunSpec]:
    return [RunSpec(workload=w, strategy="mirrored", devices=n, batch=b, params=p,
                    repeats=repeats, max_seconds=max_seconds, min_steps=3,
                    max_steps=100_000, warmup_steps=3, timeout_s=600.0)
            for w, b, p in WORKLOADS for n in devices]


def throughput_verdict(report: Report) -> str:
    (cfg,) = report.configs
    return next(m.verdict for m in cfg.metrics if m.metric == "throughput")


def load_avg() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} {five:.2f} {fifteen:.2f} (1/5/15 min, {os.cpu_count()} CPUs)"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3, help="processes per configuration")
    ap.add_argument("--repeats", type=int, default=6, help="windows per run")
    ap.add_argument("--max-seconds", type=float, default=0.5, help="window length, s")
    ap.add_argument("--devices", default="1,2")
    ap.add_argument("--threshold", default="5%",
                    help="compare's threshold for the false-positive count (default 5%%)")
    ap.add_argument("--analyse", type=Path, metavar="DIR",
                    help="only analyse the runs already in DIR (run1, run2, ...)")
    ap.add_argument("--out", type=Path,
                    default=ROOT / "results" / f"noise-{time.strftime('%Y%m%d-%H%M%S')}")
    args = ap.parse_args()
    matrix = specs(args.repeats, args.max_seconds,
                   [int(d) for d in args.devices.split(",")])
    if args.analyse:
        args.out = args.analyse
        args.runs = len(list(args.out.glob("run*")))
    else:
        print(f"load average before: {load_avg()}", flush=True)
        t0 = time.monotonic()
        for i in range(args.runs):
            out = run_sweep(matrix, args.out / f"run{i + 1}",
                            echo=lambda m: print(m, flush=True))
            if out.interrupted:
                return 130
        print(f"load average after:  {load_avg()}  ({time.monotonic() - t0:.0f} s)")

    by_key: dict[str, list[RunResult]] = {}
    for i in range(args.runs):
        for r in load_sweep(args.out / f"run{i + 1}").results:
            if r.status == "ok" and r.figures is not None:
                by_key.setdefault(r.spec.key(), []).append(r)
    rows, comparisons, false_pos, pooled_n, pooled_fp = [], 0, 0, 0, 0
    thresholds = Thresholds.parse([args.threshold])
    print(f"\n{'configuration':34s} {'runs':>4s} {'within-run CV':>14s} "
          f"{'between-run CV':>15s} {'median ex/s':>12s} {'pairwise flags':>15s} "
          f"{'pooled flags':>13s}")
    for spec in matrix:
        runs = by_key.get(spec.key(), [])
        if not runs:
            print(f"{spec.label():34s} no successful run")
            continue
        within = float(np.median([r.figures.throughput_cv for r in runs if r.figures]))
        medians = [r.figures.global_throughput for r in runs if r.figures]
        between = float(np.std(medians, ddof=1) / np.mean(medians)) if len(runs) > 1 else 0.0
        flags = []
        for a, b in itertools.combinations(runs, 2):
            flags.append(throughput_verdict(compare([a], [b], thresholds=thresholds)))
        n_false = sum(v in ("regressed", "improved") for v in flags)
        comparisons += len(flags)
        false_pos += n_false
        pooled = [throughput_verdict(compare([o for o in runs if o is not r], [r],
                                             thresholds=thresholds))
                  for r in runs] if len(runs) > 2 else []
        p_false = sum(v in ("regressed", "improved") for v in pooled)
        pooled_n += len(pooled)
        pooled_fp += p_false
        rows.append({"configuration": spec.label(), "key": spec.key(), "runs": len(runs),
                     "within_run_cv": within, "between_run_cv": between,
                     "median_throughput": float(np.median(medians)),
                     "run_medians": medians, "same_code_verdicts": flags,
                     "pooled_verdicts": pooled})
        print(f"{spec.label():34s} {len(runs):4d} {within * 100:13.1f}% "
              f"{between * 100:14.1f}% {np.median(medians):12,.1f} "
              f"{n_false:>7d} of {len(flags):<3d}   {p_false:>5d} of {len(pooled):<3d}")
    rate = false_pos / comparisons if comparisons else float("nan")
    pooled_rate = pooled_fp / pooled_n if pooled_n else float("nan")
    print(f"\nfalse positives (throughput flagged regressed or improved, same code; "
          f"threshold {thresholds.default:.0%}):\n"
          f"  one run vs one run:        {false_pos} of {comparisons} = {rate:.0%}\n"
          f"  one run vs the others pooled: {pooled_fp} of {pooled_n} = {pooled_rate:.0%}")
    (args.out / f"noise_floor-{thresholds.default:.0%}.json").write_text(json.dumps(
        {"rows": rows, "comparisons": comparisons, "false_positives": false_pos,
         "rate": rate, "pooled_comparisons": pooled_n, "pooled_false_positives": pooled_fp,
         "pooled_rate": pooled_rate, "repeats": args.repeats,
         "max_seconds": args.max_seconds, "threshold": thresholds.default,
         "units": {"within_run_cv": "ratio", "between_run_cv": "ratio",
                   "median_throughput": "examples/s (global)"}}, indent=2) + "\n")
    print(f"written: {args.out / f'noise_floor-{thresholds.default:.0%}.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
