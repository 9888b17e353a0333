"""Does an arm's offset in a process belong to its build? Identical arms, rebuilt or kept.

    flock /tmp/stratbench-tf.lock .venv/bin/python -m scripts.build_offset \\
        [--workload mlp] [--batch 256] [--processes 4] [--blocks 4] [--rounds 10]

Two identical arms (``one_device``) in one process are an A/A pair: their log ratio is
zero but for noise. Each process measures them in ``--blocks`` blocks of ``--rounds``
rounds, the processes alternating between two ways:

- ``rebuilt``: both arms built afresh before each block (``bench.child.arms``, every
  rebuild forced);
- ``kept``: the same two builds measured block after block.

Printed per way: each process's block log ratios (the median of the block's rounds),
the SD of the blocks within a process, and the between-process mean square of the
process means over the within-process one (about 1 when the process adds nothing).
Were the offset the process's, both ways would keep it within a process. Were it the
build's, the kept blocks agree to the windows' noise and the rebuilt ones spread as
far as separate processes do. TensorFlow-heavy: run nothing else meanwhile.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

from bench.launch.arms import run_interleaved
from bench.matrix import block_rounds
from bench.results.pairs import round_log_ratios
from bench.spec import RunSpec

WAYS = {"rebuilt": 1e9, "kept": 0.0}  # the rebuild share that forces or refuses rebuilds


def block_ratios(spec: RunSpec, blocks: int, rounds: int, share: float, seed: int,
                 log: Path) -> list[float] | str:
    """One process's block log ratios (second arm over first), or why it failed."""
    results = run_interleaved([spec, spec], log, rounds=blocks * rounds, seed=seed,
                              builds=blocks, rebuild_share=share)
    if any(r.figures is None for r in results):
        return next(r.reason or r.status for r in results if r.figures is None)
    ratios = round_log_ratios(results[0], results[1])
    out, start = [], 0
    for size in block_rounds(blocks * rounds, blocks):
        out.append(statistics.median(ratios[start:start + size]))
        start += size
    return out


def summary(processes: list[list[float]]) -> str:
    """The within-process SD of the blocks and the between/within mean-square ratio."""
    if len(processes) < 2:
        return "fewer than 2 processes"
    within = statistics.fmean(statistics.variance(p) for p in processes)
    m = len(processes[0])
    between = m * statistics.variance([statistics.fmean(p) for p in processes])
    return (f"blocks within a process SD {within ** 0.5:.4f}; process means "
            f"{', '.join(f'{statistics.fmean(p):+.3f}' for p in processes)}; "
            f"between/within {between / within:.2f}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m scripts.build_offset",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--workload", default="mlp")
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--processes", type=int, default=4, help="per way")
    p.add_argument("--blocks", type=int, default=4)
    p.add_argument("--rounds", type=int, default=10, help="per block")
    p.add_argument("--window-s", type=float, default=0.5)
    args = p.parse_args(argv)
    if args.processes < 2 or args.blocks < 2 or args.rounds < 2:
        p.error(f"--processes, --blocks and --rounds must be at least 2. Received: "
                f"{args.processes}, {args.blocks}, {args.rounds}")
    spec = RunSpec(workload=args.workload, strategy="one_device", devices=1,
                   batch=args.batch, max_seconds=args.window_s, max_steps=100_000)
    found: dict[str, list[list[float]]] = {w: [] for w in WAYS}
    with tempfile.TemporaryDirectory(prefix="build-offset-") as tmp:
        for n in range(1, args.processes + 1):
            for way, share in WAYS.items():  # alternated: the machine's drift on both
                got = block_ratios(spec, args.blocks, args.rounds, share, n,
                                   Path(tmp) / f"{way}{n}.log")
                if isinstance(got, str):
                    print(f"process {n} {way}: failed: {got}", flush=True)
                    continue
                found[way].append(got)
                print(f"process {n} {way}: " + ", ".join(f"{x:+.3f}" for x in got), flush=True)
    for way, processes in found.items():
        print(f"{way}: {summary(processes)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
