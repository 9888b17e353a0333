"""``stratbench env``: the environment fingerprint stored with every result."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from typing import Any

from bench.env import fingerprint
from bench.errors import BenchError
from bench.exits import Exit

# Importing TensorFlow and measuring the peak (first time on a machine) take seconds.
TF_FINGERPRINT_TIMEOUT_S = 300.0


def cmd_env(args: argparse.Namespace) -> int:
    if args.no_tf:
        print(json.dumps(fingerprint(), indent=2))
        return Exit.OK
    # The TensorFlow part comes from a child process: this side never imports TensorFlow.
    try:
        out = subprocess.run([sys.executable, "-m", "bench.child.backends.tf.env"],
                             capture_output=True, text=True,
                             timeout=TF_FINGERPRINT_TIMEOUT_S, check=True,
                             env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"},
                             stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as exc:
        raise BenchError(f"the TensorFlow fingerprint took longer than "
                         f"{TF_FINGERPRINT_TIMEOUT_S:g} s; `stratbench env --no-tf` skips it"
                         ) from exc
    except subprocess.CalledProcessError as exc:
        tail = "\n".join((exc.stderr or "").strip().splitlines()[-5:])
        raise BenchError(f"the TensorFlow fingerprint failed (exit {exc.returncode}):\n{tail}"
                         ) from exc
    print(out.stdout, end="")
    return Exit.OK


def add_parser(sub: Any) -> None:
    """Register ``env``."""
    p = sub.add_parser("env", help="print the environment fingerprint")
    p.add_argument("--no-tf", action="store_true", help="skip the TensorFlow part")
    p.set_defaults(func=cmd_env)
