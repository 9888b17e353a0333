"""``python -m bench`` (also installed as ``stratbench``): the subcommands.

Each subcommand is a module of this package with ``add_parser(subparsers)``;
parsing only: the work is done by the packages they call, which tests call
directly. Exit codes are in ``bench.exits``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
from collections.abc import Iterator, Sequence
from typing import Any

from bench.cli import (
    ab,
    allreduce,
    cluster_demo,
    compare,
    env,
    gpu_smoke,
    history,
    k8s_manifest,
    lab,
    listing,
    nightly,
    project,
    report,
    run,
    show,
    slurm_script,
    worker,
)
from bench.errors import BenchError, SpecError, UsageError
from bench.exits import EPILOG, Exit
from bench.hardware import detect
from bench.launch.interpreter import require_tensorflow

COMMANDS = (run, listing, env, show, report, history, compare, nightly, ab, allreduce, worker,
            cluster_demo, lab, k8s_manifest, slurm_script, project, gpu_smoke)


def build_parser() -> argparse.ArgumentParser:
    """The ``stratbench`` parser with every subcommand registered."""
    parser = argparse.ArgumentParser(
        prog="stratbench", description="Benchmark TensorFlow distribution strategies.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        command.add_parser(sub)
    return parser


@contextlib.contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """Treat SIGTERM (a CI job cancelled, `kill`) and SIGINT like Ctrl-C while a command runs.

    The run's children live in their own process groups, so they do not get the
    parent's signal; the KeyboardInterrupt path is the one that kills every process of
    the current run and keeps the finished results. SIGINT is set explicitly because a
    process started in the background by a non-interactive shell inherits it ignored
    (and Python then leaves it ignored). The previous handlers are restored.
    """
    def handler(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous: dict[signal.Signals, Any] = {}
    try:
        for sig in (signal.SIGTERM, signal.SIGINT):
            previous[sig] = signal.signal(sig, handler)
    except ValueError:  # not the main thread: signals cannot be handled here
        pass
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command line; returns its exit code (``bench.exits.Exit``)."""
    with _sigterm_as_interrupt():
        return _main(argv)


def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)  # argparse exits with 2 on usage errors
    try:
        needs = getattr(args, "needs_tensorflow", False)
        if needs(args) if callable(needs) else needs:
            # Commands that start TensorFlow children refuse before anything runs where
            # this interpreter cannot import it, or is the CPU build on a GPU machine.
            require_tensorflow(len(detect().gpus))
        return int(args.func(args))
    except (SpecError, UsageError) as exc:
        print(f"stratbench: error: {exc}", file=sys.stderr)
        return Exit.USAGE
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        return Exit.INTERRUPTED
    except BrokenPipeError:
        # Output piped into e.g. `head`, which closed early: not an error. Point stdout
        # at /dev/null so that the interpreter's final flush does not raise again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return Exit.OK
    except BenchError as exc:
        print(f"stratbench: error: {exc}", file=sys.stderr)
        return Exit.INTERNAL


if __name__ == "__main__":
    sys.exit(main())
