"""Does a child forked from the pre-imported starter measure what a fresh one does?

    python -m scripts.fork_ab cnn 64 /tmp/fork_ab 6

Pairs of sessions of one place of the CPU preset (its in-process arms and its
MultiWorkerMirrored member), measured together, windows taking turns: in each pair
one session's processes are forked from the starter (``bench.launch.prestart``) and
the other's start afresh, which one alternating. Window r of one session and window r
of the other ran seconds apart, so each arm's log ratio forked/fresh is free of the
machine's drift. Prints each pair's ratios, each arm's mean, and the mean over pairs
with its 95% interval (t over pairs). CPU machines only (on GPUs nothing is forked).
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from pathlib import Path
from typing import IO, Any

import bench.launch.pacing as pacing
from bench.hardware import detect
from bench.launch import prestart
from bench.launch.session import Copy, run_sessions
from bench.matrix import preset_default
from bench.results.stats.distributions import t_ppf

# Those started afresh in the pair being measured: their log names carry this.
_fresh = {"tag": ""}


def _start_child(cmd: Any, *, log: IO[bytes], env: Any, pass_fds: Any = (),
                 lane_ok: bool = False) -> Any:
    return prestart.start_child(cmd, log=log, env=env, pass_fds=pass_fds,
                                lane_ok=lane_ok and _fresh["tag"] not in log.name)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scripts.fork_ab",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("workload", help="a workload of the CPU preset (mlp, cnn, ...)")
    parser.add_argument("batch", type=int, help="its batch (the place's first: its "
                                                "MultiWorkerMirrored member joins)")
    parser.add_argument("out", type=Path, help="a directory for the sessions' logs")
    parser.add_argument("pairs", type=int, help="session pairs to measure")
    args = parser.parse_args(argv)
    workload, batch, out, pairs = args.workload, args.batch, args.out, args.pairs
    if detect().gpus:
        print("fork_ab: nothing is forked on GPUs", file=sys.stderr)
        return 2
    out.mkdir(parents=True, exist_ok=True)
    specs = [s for s in preset_default(detect(), [workload], [batch])
             if s.strategy not in ("parameter_server", "independent")]
    pacing.start_child = _start_child  # the sessions' processes start through it
    per_arm: dict[str, list[float]] = {}
    per_pair: list[float] = []
    for k in range(pairs):
        fresh = "a" if k % 2 else "b"
        _fresh["tag"] = f"/{fresh}{k}."
        t0 = time.monotonic()
        a, b = run_sessions([Copy(specs, out / f"a{k}.log", 100 + k),
                             Copy(specs, out / f"b{k}.log", 200 + k)], rounds=10, builds=5)
        forked, started = (b, a) if fresh == "a" else (a, b)
        logs = []
        for f, g in zip(forked, started, strict=True):
            if not (f.figures and g.figures):
                print(f"pair {k}: {f.spec.label()} {f.status}/{g.status}", flush=True)
                continue
            assert f.figures.startup.preimported_s is not None
            assert g.figures.startup.preimported_s is None
            r = math.log(f.figures.global_throughput / g.figures.global_throughput)
            per_arm.setdefault(f.spec.label(), []).append(r)
            logs.append(r)
            print(f"pair {k} ({time.monotonic() - t0:.0f} s, fresh: {fresh}) "
                  f"{f.spec.label()}: {r:+.4f}", flush=True)
        if logs:
            per_pair.append(statistics.fmean(logs))
    for label, v in per_arm.items():
        sd = f"{statistics.stdev(v):.4f}" if len(v) > 1 else "-"
        print(f"{label:40s} mean log ratio forked/fresh {statistics.fmean(v):+.4f}  "
              f"SD {sd}  n={len(v)}")
    if len(per_pair) > 1:
        m, sd = statistics.fmean(per_pair), statistics.stdev(per_pair)
        half = t_ppf(0.975, len(per_pair) - 1) * sd / math.sqrt(len(per_pair))
        print(f"over {len(per_pair)} pairs (each its arms' mean): forked/fresh "
              f"{math.exp(m) - 1:+.2%} [95%: {math.exp(m - half) - 1:+.2%}, "
              f"{math.exp(m + half) - 1:+.2%}]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
