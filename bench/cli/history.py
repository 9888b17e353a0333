"""``python -m bench history {ingest,list,sweeps,changes}``: the history store on the command
line."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

from bench.cli.ab import fraction
from bench.errors import UsageError
from bench.regress.changes import (
    DEFAULT_ALPHA,
    DEFAULT_MIN_NIGHTS,
    DEFAULT_THRESHOLD,
    describe_step,
    find_changes,
)
from bench.regress.history import SELECTION_KEYS, HistoryError, Selection, open_history


def _selection(text: str | None) -> Selection:
    return Selection.parse(text) if text else Selection()


def cmd_ingest(args: argparse.Namespace) -> int:
    with open_history(args.history) as h:
        for d in args.sweep_dirs:
            rep = h.ingest(d, args.tag)
            print(f"{d}: {rep.added} added, {rep.already} already stored, "
                  f"{len(rep.skipped)} skipped")
            for why in rep.skipped:
                print(f"warning: skipped {why}", file=sys.stderr)
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    with open_history(args.history, create=False) as h:
        rows = h.rows(_selection(args.selection))
    rows = rows[-args.limit:] if args.limit else rows
    if args.json:
        print(json.dumps([asdict(r) for r in rows], indent=2))
        return 0
    print(f"{'id':>5}  {'started (UTC)':25s} {'configuration':42s} {'status':8s} "
          f"{'examples/s':>12s} {'CV':>6s}  {'machine':12s} {'software':12s} {'commit':10s} "
          f"{'tf':8s} sweep")
    for r in rows:
        tput = f"{r.global_throughput:,.1f}" if r.global_throughput is not None else "-"
        cv = f"{r.throughput_cv * 100:.1f}%" if r.throughput_cv is not None else "-"
        sweep = f"{r.sweep_id}" + (f" ({r.tag})" if r.tag else "")
        print(f"{r.id:>5}  {r.started_at:25s} {r.label[:42]:42s} {r.status:8s} {tput:>12s} "
              f"{cv:>6s}  {(r.machine_id or '-')[:12]:12s} {(r.software_id or '-')[:12]:12s} "
              f"{(r.git_commit or '-')[:10]:10s} "
              f"{(r.tf_version or '-')[:8]:8s} {sweep}")
    print(f"{len(rows)} result(s)")
    return 0


def cmd_sweeps(args: argparse.Namespace) -> int:
    with open_history(args.history, create=False) as h:
        sweeps = h.sweeps(_selection(args.selection))
    if args.json:
        print(json.dumps([asdict(s) for s in sweeps], indent=2))
        return 0
    for s in sweeps:
        print(f"{s.id:>5}  {s.started_at:25s} {s.tag or '-':10s} {s.results:4d} result(s)  "
              f"machine {','.join(s.machine_ids)}  {s.path}")
    print(f"{len(sweeps)} sweep(s)")
    return 0


def cmd_changes(args: argparse.Namespace) -> int:
    if not 0 < args.alpha < 1:
        raise UsageError(f"--alpha must be between 0 and 1. Received: --alpha {args.alpha}")
    if args.min_nights < 2:
        raise UsageError(f"--min-nights must be >= 2. Received: --min-nights "
                         f"{args.min_nights}")
    with open_history(args.history, create=False) as h:
        records = h.ab_records(spec_key=args.key, machine_id=args.machine)
    series = find_changes(records, alpha=args.alpha, threshold=args.threshold,
                          min_nights=args.min_nights)
    if args.json:
        print(json.dumps([{"spec_key": s.spec_key, "label": s.label, "machine_id": s.machine_id,
                           "nights": len(s.records),
                           "steps": [{**asdict(step), "change": step.change,
                                      "night": s.records[step.index].started_at,
                                      "session": s.records[step.index].session}
                                     for step in s.steps]} for s in series], indent=2))
        return 0
    for s in series:
        ratios = [r.ratio for r in s.records if r.ratio is not None]
        print(f"{s.label} (machine {s.machine_id or '?'}): {len(s.records)} night(s), "
              f"candidate/baseline {min(ratios):.3f} to {max(ratios):.3f}, "
              f"{len(s.steps) or 'no'} step(s)")
        for step in s.steps:
            print(f"  step: {describe_step(s, step)}")
    if not series:
        print("no A/B nightly in the history yet (bench nightly with sides stores them)")
    return 0


def _guard(fn: Any) -> Any:
    """Store and selection problems are usage errors (exit code 2)."""
    def run(args: argparse.Namespace) -> int:

        try:
            return int(fn(args))
        except HistoryError as exc:
            raise UsageError(str(exc)) from exc
    return run


def add_parser(sub: Any) -> None:
    p = sub.add_parser("history",
                       help="the history store: ingest sweeps, list, filter, A/B ratio steps",
                       description="An SQLite file holding every ingested result, indexed by "
                                   "hardware (machine), software stack (software), git "
                                   "commit, TensorFlow version, spec key, time, and the A/B "
                                   "nightly's sessions (history changes).")
    hsub = p.add_subparsers(dest="history_command", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--history", type=Path, default=None,
                        help="store file (default results/history.sqlite)")
    ing = hsub.add_parser("ingest", parents=[common],
                          help="store the results of sweep directories (idempotent)")
    ing.add_argument("sweep_dirs", type=Path, nargs="+")
    ing.add_argument("--tag", help="label the sweeps, e.g. nightly")
    ing.set_defaults(func=_guard(cmd_ingest))
    sel_help = (f"filters KEY=VALUE[,KEY=VALUE...]; keys: {', '.join(SELECTION_KEYS)} "
                "(commit and key match prefixes; sweep takes an id, a directory, latest or "
                "previous)")
    lst = hsub.add_parser("list", parents=[common], help="stored results, oldest first")
    lst.add_argument("selection", nargs="?", help=sel_help)
    lst.add_argument("--limit", type=int, default=0, help="only the newest N")
    lst.add_argument("--json", action="store_true")
    lst.set_defaults(func=_guard(cmd_list))
    sw = hsub.add_parser("sweeps", parents=[common], help="stored sweeps, oldest first")
    sw.add_argument("selection", nargs="?", help=sel_help)
    sw.add_argument("--json", action="store_true")
    sw.set_defaults(func=_guard(cmd_sweeps))
    ch = hsub.add_parser(
        "changes", parents=[common],
        help="steps in the A/B nightly's candidate/baseline ratio series",
        description="The A/B nightly stores each night's candidate/baseline ratio per "
                    "configuration (drift-free: both sides ran in the same session). This "
                    "looks for lasting steps in each configuration's series on each machine "
                    "that single nights could not call: a permutation test of the largest "
                    "difference of mean log ratio over every split with --min-nights each "
                    "side (segments either side of a step tested again), each night's "
                    "read at --alpha shared among the reads of 40 nights (35 at 3 a "
                    "side), so that a series without a step prints one on some night of "
                    "its first 40 at most --alpha of the time; a step is reported by at "
                    "least --threshold. Prints each step with the test's p-value, what "
                    "single nights said after it and what either side changed that night. "
                    "Exit 0 whatever it finds (a report; the nightly's own exit code "
                    "judges tonight), 2 on a usage error.")
    ch.add_argument("--key", help="only configurations whose spec key starts with this")
    ch.add_argument("--machine", help="only this machine id")
    ch.add_argument("--threshold", type=fraction, default=DEFAULT_THRESHOLD,
                    help="smallest step that counts, 5%% or 0.05 (default %(default)s)")
    ch.add_argument("--alpha", type=float, default=DEFAULT_ALPHA,
                    help="false-alarm probability of a series without a step, over 40 "
                         "nights of reads (default %(default)s)")
    ch.add_argument("--min-nights", type=int, default=DEFAULT_MIN_NIGHTS,
                    help="nights each side of a step (default %(default)s)")
    ch.add_argument("--json", action="store_true")
    ch.set_defaults(func=_guard(cmd_changes))
