"""Argument parsing shared by the subcommands: list types, the matrix options, specs."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.errors import UsageError
from bench.hardware import detect
from bench.matrix import AXES, PRESET_AXES, PRESETS, expand_axes
from bench.registry import Registry
from bench.spec import RunSpec, SpecField, declaration
from bench.strategies import STRATEGIES
from workloads import WORKLOADS


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


def add_explain(p: argparse.ArgumentParser) -> None:
    """``--explain``, on every command that prints answers."""
    p.add_argument("--explain", action="store_true",
                   help="after the answers' table, each answer in full: what was shown, "
                        "against what, and what would settle it")


def positive_int(text: str) -> int:
    """A whole number above 0 (``--width``)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number above 0. Received: {text!r}")
    return value


def add_width(p: argparse.ArgumentParser) -> None:
    """``--width``, on every command that prints the answers' table."""
    p.add_argument("--width", type=positive_int, default=None,
                   help="columns the answers' table may take: where a row is wider, it "
                        "folds onto two lines, every cell kept (default: COLUMNS, else "
                        "the terminal's width; printed to a file or a pipe, as wide as "
                        "the cells)")


def answers_width(given: int | None) -> int | None:
    """The columns the answers may take: ``given`` (``--width``), else the environment's
    COLUMNS, else the terminal's width where stdout is one; None (as wide as the cells)
    for a file or a pipe, so that a log keeps one line a row."""
    if given is not None:
        return given
    with contextlib.suppress(ValueError):
        if (columns := int(os.environ.get("COLUMNS", ""))) > 0:
            return columns
    if sys.stdout.isatty():
        with contextlib.suppress(OSError):
            return os.get_terminal_size(sys.stdout.fileno()).columns
    return None


def on_off(text: str) -> bool:
    """``on``/``off`` (or true/false, 1/0) as a bool; KeyError otherwise."""
    table = {"true": True, "on": True, "1": True, "false": False, "off": False, "0": False}
    return table[text.lower()]


# How one CLI value of a spec field's type is read, and what the error calls it.
_SCALARS: dict[type, tuple[Callable[[str], Any], str]] = {
    str: (str, "values"), int: (int, "integers"), float: (float, "numbers"),
    bool: (on_off, "on/off values"),
}


def list_of(kind: type, flag: str) -> Callable[[str], list[Any]]:
    """A parser of ``flag``'s comma-separated list of ``kind`` values."""
    convert, what = _SCALARS[kind]

    def parse(text: str) -> list[Any]:
        try:
            return [convert(t) for t in split_list(text)]
        except (KeyError, ValueError):
            raise argparse.ArgumentTypeError(
                f"{flag} takes comma-separated {what}. Received: {text!r}") from None
    return parse


def int_list(flag: str) -> Callable[[str], list[int]]:
    return list_of(int, flag)


def param(text: str) -> tuple[str, Any]:
    """``KEY=VALUE`` with a JSON value; a bare comma list is a JSON list
    (``widths=550,550`` is ``widths=[550,550]``); anything else stays a string."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"--param takes KEY=VALUE. Received: {text!r}")
    for candidate in (value, f"[{value}]" if "," in value else None):
        if candidate is not None:
            with contextlib.suppress(json.JSONDecodeError):
                return key, json.loads(candidate)
    return key, value


def env_var(text: str) -> tuple[str, str]:
    """``KEY=VALUE`` of an environment variable (the value may be empty)."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"an environment variable is KEY=VALUE. "
                                         f"Received: {text!r}")
    return key, value


# Fields whose values are a registry's names: "{choices}" in their help lists those.
_REGISTRIES: dict[str, Registry[Any]] = {"workload": WORKLOADS, "strategy": STRATEGIES}


def _help(f: SpecField) -> str | None:
    registry = _REGISTRIES.get(f.name)
    choices = registry.names() if registry is not None else f.info.choices
    return f.info.help.format(choices=", ".join(map(str, choices))) or None


def _kind(f: SpecField, spec_type: type[RunSpec]) -> type:
    if f.type not in _SCALARS:
        raise TypeError(f"{spec_type.__name__}.{f.name} is declared cli={f.info.cli!r}, but "
                        f"no CLI parser reads its type. Received: {f.name}: {f.type}")
    return typing.cast(type, f.type)


def add_matrix_args(p: argparse.ArgumentParser, spec_type: type[RunSpec] = RunSpec) -> None:
    """The options of every spec field declared ``cli`` (see ``bench.spec.FieldInfo``):
    an axis takes a comma-separated list, a knob one value for the whole sweep."""
    axes = p.add_argument_group("axes (comma-separated lists; the sweep is their product)")
    axes.add_argument("--preset", choices=sorted(PRESETS),
                      help="a named matrix instead of the axes below (default: what "
                           "`make bench` runs on this hardware)")
    knobs = p.add_argument_group("knobs (one value for the whole sweep)")
    for f in declaration(spec_type):
        if f.info.cli == "axis":
            axes.add_argument(f.flag, type=list_of(_kind(f, spec_type), f.flag), dest=f.name,
                              help=_help(f))
        elif f.info.cli == "knob":
            knobs.add_argument(f.flag, type=_SCALARS[_kind(f, spec_type)][0], dest=f.name,
                               choices=list(f.info.choices) or None, help=_help(f))
    knobs.add_argument("--param", type=param, action="append", default=[],
                       help="workload parameter KEY=VALUE (JSON value), e.g. image_size=64")


_KNOBS = tuple(f.name for f in declaration() if f.info.cli == "knob")


def specs_from_args(args: argparse.Namespace) -> list[RunSpec]:
    """The validated configurations an invocation asks for."""
    knobs = {k: getattr(args, k) for k in _KNOBS if getattr(args, k) is not None}
    axes = {a: getattr(args, a) for a in AXES if getattr(args, a, None) is not None}
    if args.preset:
        # --workload, --batch and --param narrow a preset (make bench ARGS='--workload
        # mine.py:build' is the default sweep of the user's model); other axes are its own.
        fixed_axes = sorted(set(axes) - set(PRESET_AXES))
        if fixed_axes:
            raise UsageError(f"--preset {args.preset} sets its own "
                             f"{', '.join('--' + a.replace('_', '-') for a in fixed_axes)}; "
                             f"it can be narrowed by --workload, --batch and --param only")
        specs = PRESETS[args.preset](detect(), axes.get("workload", ()), axes.get("batch", ()),
                                     dict(args.param) if args.param else None)
        return [s.replace(**knobs) for s in specs] if knobs else specs
    if "workload" not in axes or "strategy" not in axes:
        raise UsageError("give --workload and --strategy (or --preset default|smoke)")
    if args.param:
        knobs["params"] = dict(args.param)
    expansion = expand_axes(axes, knobs)
    print_notes(expansion.notes)
    return expansion.specs


def print_notes(notes: list[str]) -> None:
    """One line per axis value dropped for some strategies (stderr: not the results)."""
    for note in notes:
        print(f"stratbench: note: {note}", file=sys.stderr)
