"""Command line: ``python -m bench`` (also installed as ``stratbench``).

Exit codes:
  0   success (every configuration of the sweep has a result; unsupported is fine)
  1   internal error (a bug in stratbench: please report it)
  2   usage error: bad option, unknown name, invalid configuration
  3   the sweep finished but some configurations failed, ran out of memory or timed out
  130 interrupted with Ctrl-C (finished results are kept; re-run to resume)
"""

from __future__ import annotations

import argparse
import datetime as _dt
import importlib
import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bench.errors import BenchError, SpecError
from bench.hardware import detect
from bench.matrix import AXES, PRESETS, expand
from bench.spec import RunSpec
from bench.strategies import STRATEGIES

EXIT_OK, EXIT_INTERNAL, EXIT_USAGE, EXIT_RUN_PROBLEMS, EXIT_INTERRUPTED = 0, 1, 2, 3, 130


class UsageError(BenchError):
    pass


def _split(text: str) -> list[str]:
    items = [t.strip() for t in text.split(",") if t.strip()]
    if not items:
        raise UsageError(f"expected a comma-separated list. Received: {text!r}")
    return items


def _ints(flag: str) -> Callable[[str], list[int]]:
    def parse(text: str) -> list[int]:
        try:
            return [int(t) for t in _split(text)]
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{flag} takes comma-separated integers. Received: {text!r}") from None
    return parse


def _bools(text: str) -> list[bool]:
    table = {"true": True, "on": True, "1": True, "false": False, "off": False, "0": False}
    try:
        return [table[t.lower()] for t in _split(text)]
    except KeyError:
        raise argparse.ArgumentTypeError(
            f"--xla takes a list of on/off values. Received: {text!r}") from None


def _param(text: str) -> tuple[str, Any]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"--param takes KEY=VALUE. Received: {text!r}")
    try:
        return key, json.loads(value)
    except json.JSONDecodeError:
        return key, value


def _add_matrix_args(p: argparse.ArgumentParser) -> None:
    axes = p.add_argument_group("axes (comma-separated lists; the sweep is their product)")
    axes.add_argument("--preset", choices=sorted(PRESETS),
                      help="a named matrix instead of the axes below (default: what "
                           "`make bench` runs on this hardware)")
    axes.add_argument("--workload", type=_split, help="mlp, cnn, resnet50")
    axes.add_argument("--strategy", type=_split, help=", ".join(STRATEGIES.names()))
    axes.add_argument("--devices", type=_ints("--devices"), help="device counts, e.g. 1,2,4")
    axes.add_argument("--batch", type=_ints("--batch"), help="batch sizes (see --batch-mode)")
    axes.add_argument("--size", type=_split, help="workload variant: default, tiny")
    axes.add_argument("--cross-device-ops", type=_split, dest="cross_device_ops",
                      help="mirrored all-reduce: default, hierarchical_copy, "
                           "reduction_to_one_device, nccl")
    axes.add_argument("--precision", type=_split,
                      help="float32, mixed_bfloat16, mixed_float16")
    axes.add_argument("--xla", type=_bools, help="off,on: compile the per-replica step")
    axes.add_argument("--grad-accum", type=_ints("--grad-accum"), dest="grad_accum")
    axes.add_argument("--steps-per-call", type=_ints("--steps-per-call"),
                      dest="steps_per_call")
    axes.add_argument("--data", type=_split, help="synthetic (on device), tfdata")
    axes.add_argument("--workers", type=_ints("--workers"),
                      help="multi_worker_mirrored: worker processes (0 = one per device)")
    axes.add_argument("--ps-tasks", type=_ints("--ps-tasks"), dest="ps_tasks",
                      help="parameter_server: parameter-server tasks (0 = one)")
    axes.add_argument("--workers-per-device", type=_ints("--workers-per-device"),
                      dest="workers_per_device",
                      help="multi_worker_mirrored, independent: processes sharing a device")
    axes.add_argument("--communication", type=_split,
                      help="multi_worker_mirrored collectives: auto, ring, nccl")
    axes.add_argument("--partitioner", type=_split,
                      help="parameter_server variable partitioning: none, fixed, min_size")
    knobs = p.add_argument_group("knobs (one value for the whole sweep)")
    knobs.add_argument("--batch-mode", choices=["global", "per_replica"], dest="batch_mode")
    knobs.add_argument("--repeats", type=int, help="measured windows per configuration")
    knobs.add_argument("--max-seconds", type=float, dest="max_seconds",
                       help="window length bound in seconds")
    knobs.add_argument("--min-steps", type=int, dest="min_steps")
    knobs.add_argument("--max-steps", type=int, dest="max_steps")
    knobs.add_argument("--warmup-steps", type=int, dest="warmup_steps")
    knobs.add_argument("--timeout", type=float, dest="timeout_s",
                       help="hard limit per configuration, seconds")
    knobs.add_argument("--optimizer", choices=["sgd", "adam"])
    knobs.add_argument("--lr", type=float, dest="learning_rate")
    knobs.add_argument("--seed", type=int)
    knobs.add_argument("--gpu-memory-limit-mb", type=int, dest="gpu_memory_limit_mb")
    knobs.add_argument("--profile-steps", type=int, dest="profile_steps",
                       help="profile this many steps after the windows (communication split; "
                            "open with the printed tensorboard command)")
    knobs.add_argument("--param", type=_param, action="append", default=[],
                       help="workload parameter KEY=VALUE (JSON value), e.g. image_size=64")


_KNOBS = ("batch_mode", "repeats", "max_seconds", "min_steps", "max_steps", "warmup_steps",
          "timeout_s", "optimizer", "learning_rate", "seed", "gpu_memory_limit_mb",
          "profile_steps")
_AXES_DEFAULTS: dict[str, list[Any]] = {"devices": [1], "batch": [64]}


def specs_from_args(args: argparse.Namespace) -> list[RunSpec]:
    """The validated configurations an invocation asks for."""
    knobs = {k: getattr(args, k) for k in _KNOBS if getattr(args, k) is not None}
    axes = {a: getattr(args, a) for a in AXES if getattr(args, a, None) is not None}
    if args.preset:
        if axes or args.param:
            raise UsageError(f"--preset {args.preset} cannot be combined with axes "
                             f"({', '.join(sorted(axes)) or '--param'})")
        specs = PRESETS[args.preset](detect())
        return [s.replace(**knobs) for s in specs] if knobs else specs
    if "workload" not in axes or "strategy" not in axes:
        raise UsageError("give --workload and --strategy (or --preset default|smoke)")
    for name, default in _AXES_DEFAULTS.items():
        axes.setdefault(name, default)
    if args.param:
        knobs["params"] = dict(args.param)
    return expand(axes, knobs)


def _default_out() -> Path:
    return Path("results") / f"sweep-{_dt.datetime.now():%Y%m%d-%H%M%S}"


def cmd_run(args: argparse.Namespace) -> int:
    from bench.sweep import run_sweep
    from reports.load import load_sweep
    from reports.summary import LEGEND, format_table

    specs = specs_from_args(args)
    out: Path = args.out or _default_out()
    hw = detect()
    where = (f"{len(hw.gpus)} GPU(s)" if hw.gpus
             else f"CPU only ({hw.cores} cores; device counts are logical devices sharing them)")
    print(f"stratbench: {len(specs)} configuration(s) -> {out}\nmachine: {hw.cpu_model}, {where}")
    outcome = run_sweep(specs, out)
    loaded = load_sweep(out)
    keys = {s.key() for s in specs}
    mine = [r for r in loaded.results if r.key in keys]
    print(f"\nresults: {out / 'results'} ({len(mine)} of {len(specs)} configurations)")
    print(format_table(mine))
    print("\n" + LEGEND)
    for w in loaded.warnings:
        print(f"warning: {w}", file=sys.stderr)
    if outcome.interrupted:
        return EXIT_INTERRUPTED
    # The report never decides the exit code: a report failure is printed and the
    # sweep's results and status stand.
    from reports.cli import report_after_sweep

    report_after_sweep(out)
    if outcome.problems:
        print(f"\n{len(outcome.problems)} configuration(s) failed, ran out of memory or timed "
              f"out; logs in {out / 'logs'}", file=sys.stderr)
        return EXIT_RUN_PROBLEMS
    return EXIT_OK


def cmd_list(args: argparse.Namespace) -> int:
    from bench.launcher import Paths

    hw = detect()
    specs = specs_from_args(args)
    for i, spec in enumerate(specs, 1):
        reason = STRATEGIES.get(spec.strategy).unsupported_reason(spec, hw)
        state = f"unsupported: {reason}" if reason else "will run"
        if args.out and Paths.for_spec(args.out, spec).result.exists():
            state = "done"
        print(f"{i:4d}  {spec.label():55s} {state}")
    print(f"{len(specs)} configuration(s)")
    return EXIT_OK


def cmd_env(args: argparse.Namespace) -> int:
    from bench.env import fingerprint

    print(json.dumps(fingerprint(with_tf=not args.no_tf), indent=2))
    return EXIT_OK


def cmd_show(args: argparse.Namespace) -> int:
    from reports.load import load_sweep
    from reports.summary import LEGEND, format_table, to_frame

    if not args.sweep_dir.is_dir():
        raise UsageError(f"no sweep directory at {args.sweep_dir}")
    loaded = load_sweep(args.sweep_dir)
    for w in loaded.warnings:
        print(f"warning: {w}", file=sys.stderr)
    probes = [r for r in loaded.results if r.allreduce is not None]
    training = [r for r in loaded.results if r.allreduce is None]
    if args.csv:
        print(to_frame(training).to_csv(index=False), end="")
        return EXIT_OK
    if training or not probes:
        print(format_table(training))
        print("\n" + LEGEND)
    if probes:
        from bench.probes.summary import allreduce_table

        print(allreduce_table(probes))
    return EXIT_OK


# Subcommands that live in their own modules. Each module exposes
# ``add_parser(subparsers) -> None`` which registers its subparser and sets
# ``func`` (a callable taking the parsed args and returning an exit code).
# Adding a command = a new module + one line here.
EXTRA_COMMANDS: list[str] = [
    "bench.cmd_history",  # issue 6: history store
    "bench.cmd_compare",  # issue 6: regression compare
    "bench.cmd_nightly",  # issue 6: nightly job (make nightly)
    "reports.cli",  # issue 5: `bench report SWEEP_DIR`
    "bench.cmd_allreduce",  # issue 4: nccl-tests-style all-reduce probe
    "bench.cmd_worker",  # issue 3: one task of a multi-host run
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="stratbench", description="Benchmark TensorFlow distribution strategies.",
        epilog="exit codes: 0 ok, 1 internal error, 2 usage error, 3 some configurations "
               "failed/oom/timeout, 130 interrupted",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run a sweep (each configuration in its own process)")
    _add_matrix_args(run)
    run.add_argument("--out", type=Path, help="sweep directory (re-use it to resume)")
    run.set_defaults(func=cmd_run)
    lst = sub.add_parser("list", help="print the expanded matrix without running it")
    _add_matrix_args(lst)
    lst.add_argument("--out", type=Path, help="mark configurations already done there")
    lst.set_defaults(func=cmd_list)
    env = sub.add_parser("env", help="print the environment fingerprint")
    env.add_argument("--no-tf", action="store_true", help="skip the TensorFlow part")
    env.set_defaults(func=cmd_env)
    show = sub.add_parser("show", help="table of a sweep's results")
    show.add_argument("sweep_dir", type=Path)
    show.add_argument("--csv", action="store_true", help="CSV instead of a table")
    show.set_defaults(func=cmd_show)
    for module in EXTRA_COMMANDS:
        importlib.import_module(module).add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)  # argparse exits with 2 on usage errors
    try:
        return int(args.func(args))
    except (SpecError, UsageError) as exc:
        print(f"stratbench: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # Output piped into e.g. `head`, which closed early: not an error. Point stdout
        # at /dev/null so that the interpreter's final flush does not raise again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except BenchError as exc:
        print(f"stratbench: error: {exc}", file=sys.stderr)
        return EXIT_INTERNAL


if __name__ == "__main__":
    sys.exit(main())
