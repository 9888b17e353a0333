"""One-line and tabular text of stored figures: sweep progress, ``show``, reports."""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path

from bench.results.schema import (
    BREAKDOWN_PARTS,
    AllReduceFigures,
    Breakdown,
    RunResult,
)


def tensorboard_command(logdir: Path | str) -> str:
    """The command that opens ``logdir``'s profiles (and a sweep's HParams dashboard).

    TensorFlow 2.21 no longer installs TensorBoard; the project depends on it (it
    serves the HParams dashboard, and the profile plugin that xprof registers with
    it). In an environment installed before that dependency, xprof alone serves the
    profiles: print what will actually start there.
    """
    if importlib.util.find_spec("tensorboard") is None \
            and importlib.util.find_spec("xprof") is not None:
        return f"xprof server --logdir={logdir} --port=6006"
    return f"tensorboard --logdir {logdir}"


def allreduce_line(ar: AllReduceFigures) -> str:
    """The largest size point's bus bandwidth, e.g. for sweep progress."""
    sized = [p for p in ar.points if not p.label.startswith("gradients:")] or ar.points
    if not sized:
        return f"{ar.implementation}: no points"
    top = max(sized, key=lambda p: p.bytes)
    return (f"{ar.implementation}, {len(ar.points)} points; at {top.label}: "
            f"{top.time_median_s * 1e3:.2f} ms, busbw {top.busbw / 1e9:.3f} GB/s")


def parts_text(b: Breakdown) -> str:
    """``input 1.02 ms (6%), compute 13.7 ms (84%), ...``: every part of a breakdown."""
    return ", ".join(f"{part} {b.seconds(part) * 1e3:.3g} ms "
                     f"({b.seconds(part) / b.step_s if b.step_s > 0 else 0.0:.0%})"
                     for part in BREAKDOWN_PARTS)


def breakdown_line(b: Breakdown) -> str:
    """One line for a run's log and the sweep's progress: the parts of the profiled
    step, what the profile cost and the command that opens it."""
    overhead = (f", profiler overhead x{b.profiler_overhead:.2f}"
                if b.profiler_overhead is not None else "")
    return (f"profile ({b.profiled_steps} steps, {b.loop} loop): {b.step_s * 1e3:.3g} ms "
            f"step = {parts_text(b)}{overhead}, capture {b.capture_s:.1f} s; open it with: "
            f"{tensorboard_command(b.profile_dir)}")


def allreduce_table(results: Sequence[RunResult]) -> str:
    """nccl-tests-like table: one row per point of every all-reduce result."""
    head = (f"{'strategy / implementation':52s} {'n':>2s} {'point':>20s} {'bytes':>11s} "
            f"{'median ms':>10s} {'p90 ms':>9s} {'algbw GB/s':>10s} {'busbw GB/s':>10s}")
    rows = [head, "-" * len(head)]
    for r in results:
        if r.allreduce is None:
            rows.append(f"{r.spec.label():52s} {r.status}: "
                        f"{(r.reason or '').splitlines()[0] if r.reason else ''}")
            continue
        for p in r.allreduce.points:
            rows.append(f"{r.allreduce.implementation[:52]:52s} {r.allreduce.replicas:2d} "
                        f"{p.label:>20s} {p.bytes:11d} {p.time_median_s * 1e3:10.3f} "
                        f"{p.time_p90_s * 1e3:9.3f} {p.algbw / 1e9:10.3f} "
                        f"{p.busbw / 1e9:10.3f}")
    return "\n".join(rows)
