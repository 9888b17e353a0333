"""``python -m bench k8s-manifest``: a Kubernetes manifest for a multi-host run.

Prints (or writes to ``--output``) a ConfigMap with the spec and one TF_CONFIG
per pod index, a headless Service, a NetworkPolicy admitting the TensorFlow port
only from the run's own pods, and an Indexed Job with one pod per task running
``python -m bench worker``. Apply it with ``kubectl apply -f FILE``.
TensorFlow's gRPC servers have no authentication: keep the port unreachable from
anything but the run's pods.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from bench.cli.common import add_matrix_args
from bench.cli.worker import one_spec
from bench.errors import UsageError
from bench.exits import Exit
from bench.launch.k8s import DEFAULT_PORT, K8sOptions, ManifestError, manifest, pod_tasks, render


def add_parser(sub: Any) -> None:
    """Register ``k8s-manifest``."""
    p = sub.add_parser("k8s-manifest", help="a Kubernetes Indexed Job (+ headless Service) "
                                            "for a multi-host run",
                       description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    add_matrix_args(p)
    p.add_argument("--spec", type=Path, help="the configuration as a RunSpec JSON file "
                                             "(or a stored result) instead of the options")
    p.add_argument("--name", required=True, help="Job, Service and pod name prefix")
    p.add_argument("--image", required=True,
                   help="container image with stratbench and TensorFlow installed")
    p.add_argument("--namespace", default="default")
    p.add_argument("--port", type=int, default=DEFAULT_PORT,
                   help=f"TensorFlow's gRPC port in every pod (default {DEFAULT_PORT})")
    p.add_argument("--cpu", help="CPU request and limit per pod, e.g. 8")
    p.add_argument("--memory", help="memory request and limit per pod, e.g. 32Gi")
    p.add_argument("--gpus", type=int, default=0, help="nvidia.com/gpu per pod")
    p.add_argument("--results-claim", help="PersistentVolumeClaim mounted at /results "
                                           "(default: an emptyDir, gone with the pod)")
    p.add_argument("--no-network-policy", action="store_true",
                   help="leave out the NetworkPolicy (the port is then open to the cluster)")
    p.add_argument("--output", type=Path, help="write the manifest here instead of stdout")
    p.set_defaults(func=cmd_k8s_manifest)


def cmd_k8s_manifest(args: argparse.Namespace) -> int:
    spec = one_spec(args, "k8s-manifest")
    try:
        opts = K8sOptions(name=args.name, image=args.image, namespace=args.namespace,
                          port=args.port, cpu=args.cpu, memory=args.memory, gpus=args.gpus,
                          results_claim=args.results_claim,
                          network_policy=not args.no_network_policy)
        text = render(manifest(spec, opts))
        tasks = pod_tasks(spec)
    except ManifestError as exc:
        raise UsageError(str(exc)) from None
    if args.output:
        args.output.write_text(text, encoding="utf-8")
        pods = ", ".join(f"{opts.name}-{i}={t.name}" for i, t in enumerate(tasks))
        print(f"wrote {args.output}: {len(tasks)} pods ({pods}); port {opts.port}/TCP must "
              f"be reachable between them and from nothing else (TensorFlow's gRPC has no "
              f"authentication). Apply with: kubectl apply -f {args.output}")
    else:
        print(text, end="")
    return Exit.OK
