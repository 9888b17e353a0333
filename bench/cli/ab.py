"""``python -m bench ab``: baseline against candidate, interleaved in one session.

For each configuration given with the usual axes, baseline and candidate runs (each
its own process) alternate in randomized AB/BA pairs until the sequential decision
(``bench.regress.ab``) settles or ``--budget`` is spent. Sides differ by interpreter
(another virtual environment), environment variables and workload parameters; both
default to this environment (an A/A check). ``bench nightly`` runs the same sessions
through ``add_side_args``, ``sides_from_args`` and ``run_ab``.

Exit codes (``bench.exits``): 0 SAME or IMPROVED, 4 REGRESSED, 5 UNKNOWN after the
budget, 3 runs failed, 2 usage error, 1 internal error. With several configurations
a regression wins over failed runs, failed runs over UNKNOWN.
"""

from __future__ import annotations

import argparse
import random
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.cli.common import add_matrix_args, env_var, param, specs_from_args, writable_dir
from bench.errors import UsageError
from bench.launch.interpreter import Interpreter, probe
from bench.launch.sweep import run_replicate
from bench.launch.usermodel import preflight
from bench.regress.options import (
    AB_ALPHA,
    AB_BUDGET_S,
    AB_THRESHOLD,
    BASELINE,
    CANDIDATE,
    PAIR_MODES,
    PAIR_ROUNDS,
)
from bench.results.schema import RunResult
from bench.results.store import SweepStore, new_sweep_dir
from bench.spec import RunSpec

# The sessions' statistics (bench.regress.interleave and what it imports) bring scipy.stats:
# imported when a session runs, so that building the parser does without them.
if TYPE_CHECKING:
    from bench.regress.interleave import PairRunner, Runner, Session, Side

EXIT_CODES = ("exit codes: 0 same or improved, 4 regressed (significant and beyond the "
              "threshold), 5 unknown when the budget is spent (the output says how many "
              "more pairs the measured noise needs), 3 runs failed, 2 usage error, "
              "1 internal error. 4 wins over 3, 3 over 5.")

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|h)?\s*$")
_UNIT_S = {"s": 1.0, "m": 60.0, "h": 3600.0}


def duration(text: str) -> float:
    """``90s``, ``10m``, ``1h`` or plain seconds -> seconds."""
    match = _DURATION.match(text)
    if not match or float(match.group(1)) <= 0:
        raise argparse.ArgumentTypeError(f"a duration is a positive number with s, m or h "
                                         f"(10m). Received: {text!r}")
    return float(match.group(1)) * _UNIT_S[match.group(2) or "s"]


def rounds_count(text: str) -> int:
    """A window count of at least 2 (one pair of mirrored rounds)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 2:
        raise argparse.ArgumentTypeError(f"--rounds must be a whole number >= 2. "
                                         f"Received: {text!r}")
    return value


def fraction(text: str) -> float:
    """``5%`` or ``0.05``."""
    from bench.regress.compare import CompareError, parse_fraction

    try:
        value = parse_fraction(text, "--threshold")
    except CompareError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"--threshold must lie between 0% and 100%. "
                                         f"Received: {text!r}")
    return value


def check_alpha(alpha: float) -> float:
    """``alpha`` of a sequential A/B decision, or a usage error."""
    if not 0 < alpha < 0.5:
        raise UsageError(f"--alpha must be between 0 and 0.5. Received: --alpha {alpha}")
    return alpha


def side_options_given(args: argparse.Namespace) -> bool:
    """True when any --baseline-*/--candidate-* option was given."""
    return any(getattr(args, f"{name}_{what}") for name in (BASELINE, CANDIDATE)
               for what in ("python", "env", "param"))


def sides_from_args(args: argparse.Namespace) -> tuple[Side, Side]:
    """The baseline and candidate sides; an interpreter is probed first (it must import
    TensorFlow and this checkout's child code: a usage error otherwise)."""
    from bench.regress.interleave import Side

    probed: dict[str, Interpreter] = {}
    sides = []
    for name in (BASELINE, CANDIDATE):
        text = getattr(args, f"{name}_python")
        python = None
        if text is not None:
            if text not in probed:
                print(f"ab: checking --{name}-python {text} (imports TensorFlow)", flush=True)
                probed[text] = probe(text, f"--{name}-python")
            python = probed[text]
        sides.append(Side(name, dict(getattr(args, f"{name}_env")),
                          dict(getattr(args, f"{name}_param")), python))
    return sides[0], sides[1]


def run_session(spec: RunSpec, baseline: Side, candidate: Side, runner: Runner | None,
                **options: Any) -> Session:
    """``bench.regress.interleave.run_session``, imported on the first call: ``run_ab``
    calls it by this module's name, which tests replace (fake clocks, runs)."""
    from bench.regress.interleave import run_session as run

    return run(spec, baseline, candidate, runner, **options)


def run_ab(specs: list[RunSpec], sides: tuple[Side, Side], out: Path, *, budget_s: float,
           threshold: float, alpha: float, seed: int | None = None,
           command: str = "ab", pairs: str = "auto",
           rounds: int = PAIR_ROUNDS) -> list[Session]:
    """One A/B session per configuration, printed as it goes (``bench ab``, ``bench
    nightly``); runs are stored in ``out``/baseline and ``out``/candidate.

    ``pairs``: ``windows`` measures each pair in one process with the sides' windows
    interleaved (``rounds`` each), ``duet`` in two live processes taking turns window
    by window (sides that need processes of their own), ``processes`` runs each side
    its own process, ``auto`` takes the first of those the sides can have.
    """
    from bench.regress.window_pairs import pair_mode

    modes: list[str] = []
    for spec in specs:  # a bad parameter is a usage error now, not after the first runs
        for side in sides:
            side.spec(spec)
        try:
            mode, why = pair_mode(pairs, spec, *sides)
        except ValueError as exc:
            raise UsageError(f"--pairs {pairs}: {spec.label()} cannot be measured so: "
                             f"{exc}. Received: --pairs {pairs}") from None
        modes.append(mode)
        for side in sides:
            own = side.spec(spec)
            if own.backend != spec.backend:
                print(f"{command}: the {side.name} trains {spec.label()} as {own.label()} "
                      f"(KERAS_BACKEND={side.env['KERAS_BACKEND']})")
        if pairs == "auto":
            print(f"{command}: {spec.label()}: {why}"
                  + (f" ({rounds} rounds a pair)" if mode != "processes" else ""))
    stores = {side.name: SweepStore(writable_dir(out / side.name)) for side in sides}
    if seed is None:
        seed = random.SystemRandom().randrange(2**31)
    print(f"{command}: baseline = {sides[0].describe()}; candidate = {sides[1].describe()}; "
          f"{len(specs)} configuration(s), budget {budget_s:.0f} s each, threshold "
          f"{threshold:.0%}, alpha {alpha:g}, --order-seed {seed}; results in {out}")

    def runner(spec: RunSpec, side: Side, pair: int) -> RunResult:
        return run_replicate(stores[side.name], spec, pair, env=side.env,
                             python=side.python_path)

    sessions = []
    for i, spec in enumerate(specs):
        s = run_session(spec, *sides, runner, budget_s=budget_s, threshold=threshold,
                        alpha=alpha, seed=seed + i,
                        pairs=pair_runner(modes[i], stores, sides, rounds, seed + i))
        sessions.append(s)
        if s.failed is not None:
            print(f"{spec.label()}: runs failed after {len(s.log_ratios)} pair(s): {s.failed}")
        elif s.decision is not None:
            d = s.decision
            print(f"{spec.label()}: {d.verdict.value.upper()} after {d.pairs} pairs in "
                  f"{s.wall_s:.0f} s: candidate/baseline {d.ratio:.3f} [{d.low:.3f}, "
                  f"{d.high:.3f}]; {d.reason}")
    return sessions


def pair_runner(mode: str, stores: dict[str, SweepStore], sides: tuple[Side, Side],
                rounds: int, seed: int) -> PairRunner | None:
    """The pair runner of ``mode`` (None: each run its own process, run_session's own)."""
    from bench.regress.window_pairs import duet_pairs, window_pairs

    if mode == "windows":
        return window_pairs(stores, sides[0], rounds=rounds, seed=seed)
    if mode == "duet":
        return duet_pairs(stores, {s.name: s for s in sides}, rounds=rounds, seed=seed)
    return None


def cmd_ab(args: argparse.Namespace) -> int:
    from bench.regress.interleave import session_exit

    specs = specs_from_args(args)
    if not specs:
        raise UsageError("the axes name no configuration to compare")
    alpha = check_alpha(args.alpha)
    sides = sides_from_args(args)
    for spec in specs:  # a side's lane or parameters it cannot have: exit 2 before any run
        for side in sides:
            side.spec(spec)
    preflight(specs)  # models of the user's own: one short process builds each (exit 2)
    out: Path = writable_dir(args.out or new_sweep_dir("ab"))
    sessions = run_ab(specs, sides, out, budget_s=args.budget, threshold=args.threshold,
                      alpha=alpha, seed=args.order_seed, pairs=args.pairs,
                      rounds=args.rounds)
    code = session_exit(sessions)
    print(f"ab: exit code {int(code)} ({code.name.lower()})")
    return int(code)


def add_side_args(p: argparse.ArgumentParser) -> None:
    """The sides' options and the session's budget and order (``ab`` and ``nightly``)."""
    sides = p.add_argument_group("sides (env and param repeatable; both sides default to "
                                 "this environment)")
    for name in (BASELINE, CANDIDATE):
        sides.add_argument(f"--{name}-python", metavar="PATH",
                           help=f"interpreter the {name}'s runs start under, e.g. a second "
                                f"virtual environment's bin/python with another TensorFlow "
                                f"(it must import TensorFlow; this checkout is put on its "
                                f"PYTHONPATH)")
        sides.add_argument(f"--{name}-env", type=env_var, action="append", default=[],
                           metavar="KEY=VALUE",
                           help=f"environment variable of the {name}'s runs, e.g. "
                                f"TF_ENABLE_ONEDNN_OPTS=0")
        sides.add_argument(f"--{name}-param", type=param, action="append", default=[],
                           metavar="KEY=VALUE",
                           help=f"workload parameter of the {name} over --param's, e.g. "
                                f"widths=550,550")
    p.add_argument("--budget", type=duration, default=AB_BUDGET_S,
                   help="time for each configuration's pairs: 90s, 10m, 1h (default 10m)")
    p.add_argument("--order-seed", type=int, default=None,
                   help="seed of the AB/BA orders (default: drawn, and printed)")
    p.add_argument("--pairs", choices=PAIR_MODES, default="auto",
                   help="windows: a pair is one process holding both sides, their windows "
                        "interleaved (sides that differ only in --*-param); duet: two live "
                        "processes, one a side, taking turns window by window (sides with "
                        "their own environment or interpreter); processes: each run its own "
                        "process, one after the other; auto (default): the first of these "
                        "the sides can have")
    p.add_argument("--rounds", type=rounds_count, default=PAIR_ROUNDS,
                   help=f"windows of each side in a pair of windows or duet pair (default "
                        f"{PAIR_ROUNDS})")


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "ab", help="compare a baseline with a candidate, interleaved in one session",
        description="For each configuration, run baseline and candidate (each run its own "
                    "process) in randomized AB/BA pairs and decide after each block from "
                    "the pairs' log throughput ratios: REGRESSED / IMPROVED (significant "
                    "and beyond --threshold), SAME (shown within +-threshold, TOST), else "
                    "another block until --budget is spent (UNKNOWN, with the pairs the "
                    "noise says are needed). Alpha is spent over the looks (O'Brien-"
                    "Fleming spending function, union bound), so looking after every "
                    "block keeps the false-alarm rate at or below --alpha. Both sides "
                    "default to this environment: an A/A check.",
        epilog=EXIT_CODES)
    add_matrix_args(p)
    add_side_args(p)
    p.add_argument("--threshold", type=fraction, default=AB_THRESHOLD,
                   help=f"smallest relative change that counts, 5%% or 0.05 (default "
                        f"{AB_THRESHOLD * 100:.0f}%%)")
    p.add_argument("--alpha", type=float, default=AB_ALPHA,
                   help="false-alarm rate per configuration over all looks (default "
                        "%(default)s)")
    p.add_argument("--out", type=Path,
                   help="directory of the runs, baseline/ and candidate/ sweeps (default "
                        "results/ab-<time>)")
    p.set_defaults(func=cmd_ab, needs_tensorflow=True)
