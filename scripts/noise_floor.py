"""The nightly gate on this machine: its false-alarm rate and its detection power.

    flock /tmp/stratbench-tf.lock .venv/bin/python -m scripts.noise_floor \\
        [--nightlies 10] [--slowed 5] [--runs 2] [--matrix small] [--baseline-nightlies 5]

1. ``--nightlies`` nightlies of unchanged code. Each measures every configuration of
   the matrix (``bench.matrix.BENCHMARK_MATRICES``; ``small`` = two MLP configurations,
   one and two devices) in ``--runs`` separate processes, in rounds, as
   ``bench nightly`` does. Each nightly is then compared, exactly as the nightly
   compares (``bench.regress.compare.compare``, runs labelled with their nightly),
   with a baseline of ``--baseline-nightlies`` other unchanged nightlies (the ones
   before it; the first ones borrow from after). Any ``regressed`` or ``improved``
   time verdict is a false alarm. The minimum detectable change each comparison
   states is recorded; its median per configuration is "the stated MDE".
2. ``--slowed`` nightlies for each size k = 1, 2, 3: every configuration slowed by k
   times its stated MDE (``STRATBENCH_INJECT_SLOWDOWN``: every timed call that much
   longer), each compared with the last ``--baseline-nightlies`` unchanged ones. A
   ``regressed`` time verdict is a detection.

Printed: per configuration, the verdicts of the unchanged comparisons (false alarms,
ok, cannot tell), the run-to-run noise and the stated MDE; per size, the detection
rate. Targets: false alarms at or below alpha; detection at least 90% at 3x.
Figures are printed and written to ``OUT/noise_floor.json``, never asserted. The
load average is printed because other processes on the machine move every figure.
``--analyse DIR`` re-reads the runs of an earlier invocation instead of running.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from bench.env import INJECT_SLOWDOWN_VAR
from bench.hardware import detect
from bench.launch.sweep import run_replicate
from bench.matrix import BENCHMARK_MATRICES, in_rounds
from bench.regress.compare import (
    CANNOT_TELL,
    DEFAULT_ALPHA,
    IMPROVED,
    REGRESSED,
    Thresholds,
    compare,
)
from bench.results.schema import RunResult
from bench.results.store import SweepStore, load, load_sweep, new_sweep_dir
from bench.spec import RunSpec

SIZES = (1, 2, 3)


def load_avg() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} {five:.2f} {fifteen:.2f} (1/5/15 min, {os.cpu_count()} CPUs)"


def run_nightly(specs: list[RunSpec], runs: int, out: Path,
                slowdown: Callable[[RunSpec], float] | None = None) -> list[RunResult]:
    """One nightly: every configuration in ``runs`` processes, in rounds, saved in ``out``."""
    store, results = SweepStore(out), []
    for spec, r in in_rounds(specs, runs):
        if store.has_result(spec, r):  # an interrupted invocation, run again: resume
            results.append(load(store.paths(spec, r).result))
            continue
        f = slowdown(spec) if slowdown else 0.0
        if f:
            os.environ[INJECT_SLOWDOWN_VAR] = f"{f:.4f}"
        else:
            os.environ.pop(INJECT_SLOWDOWN_VAR, None)
        try:
            result = run_replicate(store, spec, r)
        finally:
            os.environ.pop(INJECT_SLOWDOWN_VAR, None)
        tput = f"{result.figures.global_throughput:,.0f} ex/s" if result.figures else \
            f"{result.status}: {(result.reason or '').splitlines()[0]}"
        print(f"  {out.name} {spec.label()} run {r}"
              + (f" (slowed {f:.1%})" if f else "") + f": {tput}", flush=True)
        results.append(result)
    return results


def time_verdicts(baseline: list[list[RunResult]], current: list[RunResult],
                  thresholds: Thresholds, alpha: float) -> dict[str, dict[str, Any]]:
    """Per configuration key: the time verdict, stated MDE, noise of one comparison."""
    base = [r for night in baseline for r in night]
    labels = [k for k, night in enumerate(baseline) for _ in night]
    report = compare(base, current, thresholds=thresholds, alpha=alpha,
                     baseline_groups=labels, current_groups=["tonight"] * len(current))
    out = {}
    for c in report.configs:
        m = c.measure("global_throughput")
        if m is not None:
            out[c.key] = {"label": c.label, "verdict": m.verdict, "mde": m.detectable,
                          "change": m.change, "noise_cv": m.noise_cv,
                          "noise_unit": m.noise_unit, "run_cv": m.run_cv}
        else:
            out[c.key] = {"label": c.label, "verdict": c.verdict, "mde": float("nan"),
                          "change": float("nan"), "noise_cv": None, "noise_unit": "",
                          "run_cv": None}
    return out


def baseline_for(i: int, nights: int, k: int) -> list[int]:
    """The ``k`` unchanged nightlies before ``i`` (the first ones borrow from after)."""
    before = list(range(max(0, i - k), i))
    after = [j for j in range(i + 1, nights)][: k - len(before)]
    return before + after


def parse_args() -> argparse.Namespace:
    """The command line, checked (``ap.error`` exits 2 on a bad value)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nightlies", type=int, default=10, help="unchanged nightlies (N)")
    ap.add_argument("--slowed", type=int, default=5,
                    help="slowed nightlies per size (1x, 2x, 3x the stated MDE)")
    ap.add_argument("--runs", type=int, default=2, help="processes per configuration")
    ap.add_argument("--matrix", default="small", choices=BENCHMARK_MATRICES.names())
    ap.add_argument("--baseline-nightlies", type=int, default=5,
                    help="unchanged nightlies pooled as the baseline (K)")
    ap.add_argument("--threshold", default="5%", help="compare's threshold (default 5%%)")
    ap.add_argument("--alpha", type=float, default=DEFAULT_ALPHA)
    ap.add_argument("--analyse", type=Path, metavar="DIR",
                    help="only analyse the nightlies already in DIR")
    ap.add_argument("--out", type=Path, default=new_sweep_dir("noise"))
    args = ap.parse_args()
    for flag in ("nightlies", "runs", "baseline_nightlies"):
        if getattr(args, flag) < 1:
            ap.error(f"--{flag.replace('_', '-')} must be >= 1. Received: "
                     f"{getattr(args, flag)}")
    if args.nightlies < 2:
        ap.error(f"--nightlies must be >= 2 (one compared with others). "
                 f"Received: {args.nightlies}")
    return args


def unchanged_verdicts(unchanged: list[list[RunResult]], k: int, thresholds: Thresholds,
                       alpha: float) -> dict[str, list[dict[str, Any]]]:
    """Per configuration key, each unchanged nightly's verdict against the ``k`` others
    of its baseline (``baseline_for``)."""
    per_config: dict[str, list[dict[str, Any]]] = {}
    for i, night in enumerate(unchanged):
        base = [unchanged[j] for j in baseline_for(i, len(unchanged), k)]
        for key, v in time_verdicts(base, night, thresholds, alpha).items():
            per_config.setdefault(key, []).append(v)
    return per_config


def slowed_verdicts(nightly: Callable[..., list[RunResult]], slowed_nights: int,
                    last: list[list[RunResult]], stated: dict[str, float],
                    thresholds: Thresholds, alpha: float) -> dict[int, list[dict[str, Any]]]:
    """Per size, the verdicts of ``slowed_nights`` nightlies slowed by that many times
    each configuration's ``stated`` MDE, each compared with the unchanged ``last``."""
    detected: dict[int, list[dict[str, Any]]] = {size: [] for size in SIZES}
    if not slowed_nights:
        return detected
    for size in SIZES:
        def slowed(spec: RunSpec, size: int = size) -> float:
            return size * stated.get(spec.key(), 0.0)

        for j in range(slowed_nights):
            night = nightly(f"slowed{size}x-{j + 1:02d}", slowed)
            for key, v in time_verdicts(last, night, thresholds, alpha).items():
                detected[size].append({**v, "key": key, "injected": size * stated[key]})
    return detected


def false_alarm_rows(per_config: dict[str, list[dict[str, Any]]], stated: dict[str, float]
                     ) -> tuple[list[dict[str, Any]], int, int]:
    """Per configuration, its unchanged comparisons' verdicts (printed as a table row);
    returns the rows, the false alarms and the comparisons in all."""
    print(f"{'configuration':34s} {'compared':>8s} {'false alarms':>13s} {'ok':>4s} "
          f"{'cannot tell':>11s} {'run CV':>7s} {'stated MDE':>10s}")
    alarms_total = compared_total = 0
    rows = []
    for key, vs in per_config.items():
        alarms = sum(v["verdict"] in (REGRESSED, IMPROVED) for v in vs)
        ok = sum(v["verdict"] == "ok" for v in vs)
        unsure = sum(v["verdict"] == CANNOT_TELL for v in vs)
        run_cv = float(np.median([v["run_cv"] for v in vs if v["run_cv"] is not None]))
        alarms_total += alarms
        compared_total += len(vs)
        rows.append({"key": key, "configuration": vs[0]["label"], "compared": len(vs),
                     "false_alarms": alarms, "ok": ok, "cannot_tell": unsure,
                     "run_cv": run_cv, "stated_mde": stated[key], "verdicts": vs})
        print(f"{vs[0]['label']:34s} {len(vs):8d} {alarms:6d} ({alarms / len(vs):4.0%}) "
              f"{ok:4d} {unsure:11d} {run_cv:7.1%} {stated[key]:10.1%}")
    return rows, alarms_total, compared_total


def detection_rates(detected: dict[int, list[dict[str, Any]]],
                    per_config: dict[str, list[dict[str, Any]]], stated: dict[str, float]
                    ) -> dict[int, float]:
    """Per size slowed, the share of its comparisons that said ``regressed`` (printed
    with each configuration's catches)."""
    rates = {}
    for size in SIZES:
        found = detected[size]
        if not found:
            continue
        hits = sum(v["verdict"] == REGRESSED for v in found)
        rates[size] = hits / len(found)
        by_cfg = ", ".join(f"{per_config[key][0]['label']}: injected "
                           f"{size * stated[key]:.0%}, caught "
                           f"{sum(v['verdict'] == REGRESSED for v in found if v['key'] == key)}"
                           f"/{sum(v['key'] == key for v in found)}" for key in per_config)
        print(f"detection at {size}x the stated MDE: {hits} of {len(found)} = "
              f"{rates[size]:.0%} ({by_cfg})")
    if rates:
        print("(target: >= 90% at 3x)")
    return rates


def main() -> int:
    args = parse_args()
    thresholds = Thresholds.parse([args.threshold])
    k = min(args.baseline_nightlies, args.nightlies - 1)
    specs = BENCHMARK_MATRICES.get(args.matrix)(detect())
    out: Path = args.analyse or args.out
    t0 = time.monotonic()
    print(f"load average before: {load_avg()}", flush=True)

    def nightly(name: str, slowdown: Callable[[RunSpec], float] | None = None
                ) -> list[RunResult]:
        if args.analyse:
            return load_sweep(out / name).results
        return run_nightly(specs, args.runs, out / name, slowdown)

    unchanged = [nightly(f"unchanged-{i + 1:02d}") for i in range(args.nightlies)]
    per_config = unchanged_verdicts(unchanged, k, thresholds, args.alpha)
    stated = {key: float(np.nanmedian([v["mde"] for v in vs])) for key, vs in per_config.items()}
    detected = slowed_verdicts(nightly, args.slowed, unchanged[-k:], stated, thresholds,
                               args.alpha)
    print(f"load average after:  {load_avg()}  ({time.monotonic() - t0:.0f} s)")

    print(f"\nmatrix {args.matrix}, {args.runs} runs per configuration per nightly, baseline "
          f"{k} nightlies, threshold {thresholds.default:.0%}, alpha {args.alpha:g}\n")
    rows, alarms_total, compared_total = false_alarm_rows(per_config, stated)
    rate = alarms_total / compared_total if compared_total else float("nan")
    print(f"\nfalse alarms (regressed or improved on unchanged code): {alarms_total} of "
          f"{compared_total} = {rate:.1%} (target <= {args.alpha:.0%})")
    rates = detection_rates(detected, per_config, stated)
    doc = {"matrix": args.matrix, "runs": args.runs, "nightlies": args.nightlies,
           "slowed_per_size": args.slowed, "baseline_nightlies": k,
           "threshold": thresholds.default, "alpha": args.alpha, "configurations": rows,
           "false_alarms": alarms_total, "compared": compared_total, "false_alarm_rate": rate,
           "detection_rate": {f"{s}x": r for s, r in rates.items()},
           "detections": {f"{s}x": v for s, v in detected.items()},
           "units": {"run_cv": "ratio", "stated_mde": "ratio (time per example, + = slower)",
                     "false_alarm_rate": "fraction of comparisons",
                     "detection_rate": "fraction of comparisons"}}
    out.mkdir(parents=True, exist_ok=True)
    (out / "noise_floor.json").write_text(json.dumps(doc, indent=2, default=str) + "\n")
    print(f"written: {out / 'noise_floor.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
