"""``python -m bench.child.slurm``: this Slurm task's TF_CONFIG, as JSON on stdout.

Uses TensorFlow's SlurmClusterResolver, so it runs in a short child process:
the parent side (``bench.launch.worker``) never imports TensorFlow.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

SLURM_PORT_BASE = 8888


def tf_config(strategy: str, ps_tasks: int) -> dict[str, Any]:
    """The cluster and this task, as TF_CONFIG describes them."""
    import tensorflow as tf

    ntasks = int(os.environ.get("SLURM_NTASKS", "1"))
    jobs = ({"worker": ntasks} if strategy != "parameter_server"
            else {"chief": 1, "ps": ps_tasks, "worker": ntasks - 1 - ps_tasks})
    resolver = tf.distribute.cluster_resolver.SlurmClusterResolver(
        jobs=jobs, port_base=SLURM_PORT_BASE)
    return {"cluster": resolver.cluster_spec().as_dict(),
            "task": {"type": resolver.task_type, "index": resolver.task_id}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.child.slurm")
    parser.add_argument("--strategy", required=True)
    parser.add_argument("--ps-tasks", type=int, default=1)
    args = parser.parse_args(argv)
    print(json.dumps(tf_config(args.strategy, args.ps_tasks)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
