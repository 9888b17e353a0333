"""``stratbench gpu-smoke``: the first thing to run on a GPU machine (``make gpu-smoke``)."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from bench.cli.common import writable_dir
from bench.exits import Exit
from bench.hardware import detect
from bench.launch.gpu_preflight import SHM_PATH, Probe
from bench.launch.gpu_smoke import all_trained, plan_text, run_smoke, smoke_plan


def cmd_gpu_smoke(args: argparse.Namespace) -> int:
    hw = detect()
    if not hw.gpus:
        # Exit 2 as any other request this machine cannot serve: nothing was measured.
        print("stratbench: error: gpu-smoke needs a GPU, and nvidia-smi shows none to this "
              "process (no driver, no nvidia-smi on PATH, or CUDA_VISIBLE_DEVICES hides "
              "them). On a CPU machine run `make smoke` instead.", file=sys.stderr)
        return Exit.USAGE
    probe = Probe(shm_path=args.shm_path)
    if args.plan:
        print(plan_text(hw, smoke_plan(hw, probe)))
        return Exit.OK
    out = writable_dir(args.out or Path("results") / f"gpu-smoke-{time.strftime('%Y%m%d-%H%M%S')}")
    report, results = run_smoke(hw, out, probe=probe)
    print(f"gpu-smoke: {sum(r.status == 'ok' for r in results)}/{len(results)} runs trained; "
          f"attach {report} to a bug report")
    return Exit.OK if all_trained(results) else Exit.RUNS_FAILED


def add_parser(sub: Any) -> None:
    """Register ``gpu-smoke``."""
    p = sub.add_parser("gpu-smoke", help="does TensorFlow train on this machine's GPUs? "
                                         "(about 3 minutes; writes one file for a bug report)")
    p.add_argument("--out", type=Path, default=None,
                   help="directory of the file and the runs' logs "
                        "(default results/gpu-smoke-<time>)")
    p.add_argument("--plan", action="store_true",
                   help="print the checks and the runs it would make, run nothing")
    p.add_argument("--shm-path", default=SHM_PATH,
                   help="the shared memory NCCL uses between processes (default /dev/shm)")
    # TensorFlow only where something will train: --plan and a machine without GPUs
    # answer without it.
    p.set_defaults(func=cmd_gpu_smoke,
                   needs_tensorflow=lambda a: not a.plan and bool(detect().gpus))
