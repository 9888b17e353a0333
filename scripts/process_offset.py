"""Where a process's own offset comes from, and which ways of pairing remove it.

    python -m scripts.process_offset [--workloads mlp,cnn] [--pairs 8] [--windows 6]
        [--conditions separate,separate-noaslr,...] [--out DIR]

An A/B comparison whose sides need processes of their own (another environment or
interpreter) pays each process's own luck in every pair. This script runs A/A pairs
(both sides identical) under each condition, the conditions interleaved pair by pair
so that the machine's drift over the session falls on all of them, and prints per
condition:

- the pair statistic's SD (log candidate/baseline; what a gate's interval is made of),
  with its 95% interval;
- the windows' own noise inside a process (SD of log window throughput) and, for
  paired windows, of the round ratios;
- the offset SD left over: the pair SD that the windows' noise does not explain;
- the seconds a pair costs, and the pairs and minutes a 10% change then needs (two-sided
  alpha 0.05, power 0.9: n = ((1.96 + 1.28) SD / log 1.1)^2).

Conditions (``--conditions``, default all): ``separate`` (each side its own process,
one after the other: today's environment and interpreter sides), ``duet`` (two live
processes taking turns window by window, ``bench.launch.duet``), ``one-process`` (both
sides as arms of one process: what sides differing only in parameters get, the
floor), and the cures for the first two: ``-noaslr`` (address-space layout fixed with
``setarch -R``), ``-hashseed`` (``PYTHONHASHSEED=0``), ``-pinned`` (TensorFlow's
thread pools fixed by ``TF_NUM_INTRAOP_THREADS`` / ``TF_NUM_INTEROP_THREADS``),
``-all`` (the three together), ``separate-long`` (twice the windows a process).
Figures are printed and written to ``OUT/process_offset.json``; nothing is asserted.
TensorFlow-heavy: run nothing else meanwhile.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from bench.launch.arms import run_interleaved
from bench.launch.duet import run_duet
from bench.launch.launcher import run_isolated
from bench.results.pairs import process_log_ratio, round_log_ratios
from bench.results.schema import RunResult
from bench.results.stats.runs import run_figure, throughput_runs
from bench.results.store import SweepStore, new_sweep_dir
from bench.spec import RunSpec

Z_ALPHA, Z_POWER = 1.96, 1.2816
CHANGE = math.log(1.10)

CURES: dict[str, dict[str, str]] = {
    "": {},
    "-hashseed": {"PYTHONHASHSEED": "0"},
    "-pinned": {"TF_NUM_INTRAOP_THREADS": str(os.cpu_count() or 1),
                "TF_NUM_INTEROP_THREADS": "1"},
    "-noaslr": {},
    "-all": {"PYTHONHASHSEED": "0", "TF_NUM_INTRAOP_THREADS": str(os.cpu_count() or 1),
             "TF_NUM_INTEROP_THREADS": "1"},
}
NO_ASLR = ("-noaslr", "-all")
CONDITIONS = ("separate", "separate-noaslr", "separate-hashseed", "separate-pinned",
              "separate-all", "separate-long", "duet", "duet-all", "one-process")
WORKLOAD_BATCH = {"mlp": 256, "cnn": 64, "resnet50": 16}


@dataclass
class Cell:
    """One condition of one workload: its pairs and what each cost."""

    workload: str
    condition: str
    log_ratios: list[float] = field(default_factory=list)
    window_sds: list[float] = field(default_factory=list)  # per process
    round_sds: list[float] = field(default_factory=list)  # per paired session
    pair_s: list[float] = field(default_factory=list)
    windows: int = 0
    failed: list[str] = field(default_factory=list)

    def summary(self) -> dict[str, float | int | None]:
        n = len(self.log_ratios)
        sd = statistics.stdev(self.log_ratios) if n >= 3 else None
        low = high = None
        if sd is not None:
            from scipy import stats as sps  # the CI of an SD: chi-square

            low = sd * math.sqrt((n - 1) / sps.chi2.ppf(0.975, n - 1))
            high = sd * math.sqrt((n - 1) / sps.chi2.ppf(0.025, n - 1))
        win = statistics.median(self.window_sds) if self.window_sds else None
        rnd = statistics.median(self.round_sds) if self.round_sds else None
        # What the windows alone give the statistic: a median of W windows (paired or
        # not) has about 1.25x the mean's SD.
        if rnd is not None:
            from_windows = 1.25 * rnd / math.sqrt(self.windows)
        elif win is not None:
            from_windows = 1.25 * win * math.sqrt(2.0 / self.windows)
        else:
            from_windows = None
        offset = (math.sqrt(max(0.0, sd * sd - from_windows * from_windows))
                  if sd is not None and from_windows is not None else None)
        cost = statistics.median(self.pair_s) if self.pair_s else None
        need = math.ceil(((Z_ALPHA + Z_POWER) * sd / CHANGE) ** 2) if sd else None
        return {"pairs": n, "sd": sd, "sd_low": low, "sd_high": high, "window_sd": win,
                "round_sd": rnd, "from_windows": from_windows, "offset_sd": offset,
                "pair_s": cost, "pairs_for_10pct": need,
                "minutes_for_10pct": need * cost / 60 if need and cost else None,
                "failed": len(self.failed)}


def figure(result: RunResult) -> float | None:
    runs = throughput_runs([result])
    return run_figure(runs[0]) if runs else None


def window_sd(result: RunResult) -> float | None:
    if result.figures is None or len(result.figures.windows) < 2:
        return None
    return statistics.stdev(math.log(w.global_throughput) for w in result.figures.windows)


def no_aslr_python(tmp: Path) -> str:
    """A wrapper that starts this interpreter with address-space randomisation off."""
    wrapper = tmp / "python-noaslr"
    wrapper.write_text(f'#!/bin/sh\nexec setarch "$(uname -m)" -R {sys.executable} "$@"\n',
                       encoding="utf-8")
    wrapper.chmod(0o755)
    return str(wrapper)


def measure(cell: Cell, spec: RunSpec, out: Path, pair: int, noaslr: str) -> None:
    """One A/A pair of ``cell``'s condition, added to it."""
    kind, _, cure = cell.condition.partition("-")
    cure = f"-{cure}" if cure else ""
    env = CURES.get(cure, {})
    python = noaslr if cure in NO_ASLR else None
    windows = cell.windows
    store = SweepStore(out / cell.workload / cell.condition)
    logs = [store.paths(spec, 2 * pair + side).log for side in (0, 1)]
    t = time.monotonic()
    if kind == "separate":
        order = logs if pair % 2 else logs[::-1]
        results = [run_isolated(spec.replace(repeats=windows), log, env=env, python=python)
                   for log in order]
        figs = [figure(r) for r in results]
        if None in figs:
            cell.failed.append(next(r.reason or r.status for r in results if r.figures is None))
            return
        cell.log_ratios.append(math.log(figs[1] / figs[0]))  # type: ignore[operator]
        cell.window_sds += [x for r in results if (x := window_sd(r)) is not None]
    else:
        if kind == "duet":
            results = run_duet([spec, spec], logs, rounds=windows, seed=pair,
                               envs=(env, env), pythons=(python, python))
        else:
            results = run_interleaved([spec, spec], logs[0], rounds=windows, seed=pair,
                                      env=env, python=python)
        if any(r.figures is None for r in results):
            cell.failed.append(next(r.reason or r.status for r in results if r.figures is None))
            return
        cell.log_ratios.append(process_log_ratio(results[0], results[1]))
        cell.round_sds.append(statistics.stdev(round_log_ratios(results[0], results[1])))
        cell.window_sds += [x for r in results if (x := window_sd(r)) is not None]
    cell.pair_s.append(time.monotonic() - t)


def fmt(value: float | int | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def table(cells: list[Cell]) -> str:
    head = (f"{'workload':8} {'condition':18} {'pairs':>5} {'pair SD [95%]':>22} "
            f"{'window SD':>9} {'round SD':>8} {'offset':>7} {'s/pair':>6} "
            f"{'pairs@10%':>9} {'min@10%':>7}")
    lines = [head, "-" * len(head)]
    for c in cells:
        s = c.summary()
        ci = f"{fmt(s['sd'], '.3f')} [{fmt(s['sd_low'], '.3f')}, {fmt(s['sd_high'], '.3f')}]"
        lines.append(f"{c.workload:8} {c.condition:18} {s['pairs']:>5} {ci:>22} "
                     f"{fmt(s['window_sd'], '.3f'):>9} {fmt(s['round_sd'], '.3f'):>8} "
                     f"{fmt(s['offset_sd'], '.3f'):>7} {fmt(s['pair_s'], '.1f'):>6} "
                     f"{fmt(s['pairs_for_10pct'], 'd'):>9} "
                     f"{fmt(s['minutes_for_10pct'], '.1f'):>7}"
                     + (f"  ({s['failed']} failed)" if s['failed'] else ""))
    return "\n".join(lines)


def csv_list(choices: tuple[str, ...] | None) -> Callable[[str], list[str]]:
    def parse(text: str) -> list[str]:
        items = [x.strip() for x in text.split(",") if x.strip()]
        bad = [x for x in items if choices is not None and x not in choices]
        if bad or not items:
            raise argparse.ArgumentTypeError(f"choose from {', '.join(choices or ())}. "
                                             f"Received: {text!r}")
        return items
    return parse


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m scripts.process_offset",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--workloads", type=csv_list(tuple(WORKLOAD_BATCH)), default=["mlp"])
    p.add_argument("--conditions", type=csv_list(CONDITIONS), default=list(CONDITIONS))
    p.add_argument("--pairs", type=int, default=8)
    p.add_argument("--windows", type=int, default=6)
    p.add_argument("--window-s", type=float, default=0.5)
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args(argv)
    if args.pairs < 3 or args.windows < 2:
        p.error(f"--pairs >= 3 and --windows >= 2. Received: --pairs {args.pairs} "
                f"--windows {args.windows}")
    out = args.out or new_sweep_dir("process-offset")
    out.mkdir(parents=True, exist_ok=True)
    print(f"process_offset: {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} CPUs; TF_ENABLE_ONEDNN_OPTS="
          f"{os.environ.get('TF_ENABLE_ONEDNN_OPTS', '(default)')}; {args.pairs} A/A pairs "
          f"per condition, {args.windows} windows of {args.window_s} s a process; out {out}",
          flush=True)
    cells = [Cell(w, c, windows=args.windows * (2 if c == "separate-long" else 1))
             for w in args.workloads for c in args.conditions]
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        noaslr = no_aslr_python(Path(tmp))
        for pair in range(1, args.pairs + 1):
            for cell in cells:  # every condition once a round: drift falls on all
                spec = RunSpec(workload=cell.workload, strategy="one_device", devices=1,
                               batch=WORKLOAD_BATCH[cell.workload], max_seconds=args.window_s)
                measure(cell, spec, out, pair, noaslr)
                last = f"{cell.log_ratios[-1]:+.3f}" if cell.log_ratios else "-"
                print(f"[{time.monotonic() - t0:6.0f} s] pair {pair}/{args.pairs} "
                      f"{cell.workload} {cell.condition}: {last}", flush=True)
            (out / "process_offset.json").write_text(json.dumps(
                {"cells": [{**asdict(c), "summary": c.summary()} for c in cells]}, indent=1),
                encoding="utf-8")
    print(table(cells))
    print(f"wall {time.monotonic() - t0:.0f} s; written {out / 'process_offset.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
