"""Do independent copies measure at the same time? Their stored windows, run by run.

    .venv/bin/python -m scripts.independent_overlap [--runs 5] [--devices 2]

Runs the `independent` baseline (the tiny MLP, 2 windows of 0.3 s, as the suite's test)
``--runs`` times, each its own set of processes, and prints per run whether its figure
is of the copies running together (CONCURRENT, else NOT CONCURRENT), each copy's window
edges in ms from the first window's start, and the share of the first copy's windows
that every copy covered. Prints figures only; exit 0 unless a run fails.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from bench.launch.launcher import run_isolated
from bench.results.combination import ran_concurrently
from bench.results.concurrency import common_span, rate_within, spans
from bench.spec import RunSpec


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--devices", type=int, default=2)
    args = parser.parse_args(argv)
    if args.runs < 1 or args.devices < 2:
        print(f"error: --runs must be >= 1 and --devices >= 2. Received: --runs {args.runs} "
              f"--devices {args.devices}", file=sys.stderr)
        return 2
    spec = RunSpec(workload="mlp", size="tiny", strategy="independent",
                   devices=args.devices, batch=32, repeats=2, max_seconds=0.3, min_steps=3,
                   max_steps=30, warmup_steps=2)
    concurrent = 0
    for i in range(args.runs):
        with tempfile.TemporaryDirectory() as tmp:
            r = run_isolated(spec, Path(tmp) / "run.log", timeout_s=180)
        f = r.figures
        if r.status != "ok" or f is None or not f.tasks:
            print(f"run {i + 1}: {r.status} {r.reason or ''}")
            return 3
        ok = ran_concurrently(f)
        concurrent += ok
        copies = [spans(t.windows) or [] for t in f.tasks]
        t0 = min(s.start for c in copies for s in c)
        span = common_span(copies)
        covered = ""
        if span is not None:
            first = copies[0]
            inside = sum(min(rate_within(c, s.start, s.end)[1] for c in copies)
                         for s in first)
            covered = f"; every copy measured {inside / sum(s.length for s in first):.1%} " \
                      f"of the first copy's windows"
        print(f"run {i + 1}: {'CONCURRENT' if ok else 'NOT CONCURRENT'}{covered}")
        for t, c in zip(f.tasks, copies, strict=True):
            edges = ", ".join(f"[{(s.start - t0) * 1e3:.1f}, {(s.end - t0) * 1e3:.1f}] ms"
                              for s in c)
            print(f"  {t.task}: {edges}")
    print(f"{concurrent} of {args.runs} runs CONCURRENT")
    return 0


if __name__ == "__main__":
    sys.exit(main())
