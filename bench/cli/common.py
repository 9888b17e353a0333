"""Argument parsing shared by the subcommands: list types, the matrix options, specs."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.errors import BenchError
from bench.hardware import detect
from bench.matrix import AXES, PRESETS, expand_axes
from bench.spec import RunSpec
from bench.strategies import STRATEGIES


class UsageError(BenchError):
    """A command-line problem the user can fix (exit 2)."""


def split_list(text: str) -> list[str]:
    """``"a, b"`` -> ``["a", "b"]``; an empty item (``1,,2``, a trailing comma) is an
    error rather than skipped: it is usually a value that went missing."""
    items = [t.strip() for t in text.split(",")]
    if not all(items):
        raise argparse.ArgumentTypeError(
            f"expected a comma-separated list without empty items. Received: {text!r}")
    return items


def writable_dir(path: Path, flag: str = "--out") -> Path:
    """``path`` as a directory this process can write in (created if missing).

    A file there, a parent that is a file, or a directory that cannot be written are
    usage errors (exit 2) instead of a traceback halfway through a sweep.
    """
    if path.exists() and not path.is_dir():
        raise UsageError(f"{flag} must name a directory, but {path} is a file. "
                         f"Received: {flag}={path}")
    try:
        path.mkdir(parents=True, exist_ok=True)
        # The real test: os.access() answers yes for root even on read-only mounts.
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as exc:
        raise UsageError(f"{flag} must be a directory this user can write in: "
                         f"{exc.strerror or exc}. Received: {flag}={path}") from None
    return path


def int_list(flag: str) -> Callable[[str], list[int]]:
    def parse(text: str) -> list[int]:
        try:
            return [int(t) for t in split_list(text)]
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{flag} takes comma-separated integers. Received: {text!r}") from None
    return parse


def bool_list(text: str) -> list[bool]:
    table = {"true": True, "on": True, "1": True, "false": False, "off": False, "0": False}
    try:
        return [table[t.lower()] for t in split_list(text)]
    except KeyError:
        raise argparse.ArgumentTypeError(
            f"--xla takes a list of on/off values. Received: {text!r}") from None


def param(text: str) -> tuple[str, Any]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"--param takes KEY=VALUE. Received: {text!r}")
    try:
        return key, json.loads(value)
    except json.JSONDecodeError:
        return key, value


def add_matrix_args(p: argparse.ArgumentParser) -> None:
    axes = p.add_argument_group("axes (comma-separated lists; the sweep is their product)")
    axes.add_argument("--preset", choices=sorted(PRESETS),
                      help="a named matrix instead of the axes below (default: what "
                           "`make bench` runs on this hardware)")
    axes.add_argument("--workload", type=split_list, help="mlp, cnn, resnet50")
    axes.add_argument("--strategy", type=split_list, help=", ".join(STRATEGIES.names()))
    axes.add_argument("--devices", type=int_list("--devices"), help="device counts, e.g. 1,2,4")
    axes.add_argument("--batch", type=int_list("--batch"), help="batch sizes (see --batch-mode)")
    axes.add_argument("--size", type=split_list, help="workload variant: default, tiny")
    axes.add_argument("--cross-device-ops", type=split_list, dest="cross_device_ops",
                      help="mirrored all-reduce: default, hierarchical_copy, "
                           "reduction_to_one_device, nccl")
    axes.add_argument("--precision", type=split_list,
                      help="float32, mixed_bfloat16, mixed_float16")
    axes.add_argument("--xla", type=bool_list, help="off,on: compile the per-replica step")
    axes.add_argument("--grad-accum", type=int_list("--grad-accum"), dest="grad_accum")
    axes.add_argument("--steps-per-call", type=int_list("--steps-per-call"),
                      dest="steps_per_call")
    axes.add_argument("--data", type=split_list, help="synthetic (on device), tfdata")
    axes.add_argument("--loop", type=split_list, help="custom (the harness's loop), fit (Keras)")
    axes.add_argument("--keras", type=int_list("--keras"), help="3, 2 (tf_keras: the keras2 extra)")
    axes.add_argument("--workers", type=int_list("--workers"),
                      help="multi_worker_mirrored: worker processes (0 = one per device)")
    axes.add_argument("--ps-tasks", type=int_list("--ps-tasks"), dest="ps_tasks",
                      help="parameter_server: parameter-server tasks (0 = one)")
    axes.add_argument("--workers-per-device", type=int_list("--workers-per-device"),
                      dest="workers_per_device",
                      help="multi_worker_mirrored, independent: processes sharing a device")
    axes.add_argument("--communication", type=split_list,
                      help="multi_worker_mirrored collectives: auto, ring, nccl")
    axes.add_argument("--partitioner", type=split_list,
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
    knobs.add_argument("--param", type=param, action="append", default=[],
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
    expansion = expand_axes(axes, knobs)
    print_notes(expansion.notes)
    return expansion.specs


def print_notes(notes: list[str]) -> None:
    """One line per axis value dropped for some strategies (stderr: not the results)."""
    for note in notes:
        print(f"stratbench: note: {note}", file=sys.stderr)
