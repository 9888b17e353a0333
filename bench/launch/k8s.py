"""A Kubernetes manifest for a multi-host run: an Indexed Job behind a headless Service.

One pod per cluster task (pod index = the task's rank in TF_CONFIG: the chief
first, then parameter servers, then workers). The pods run ``python -m bench
worker --spec`` with the same spec file; each one's ``TF_CONFIG`` is picked from
a ConfigMap by the index Kubernetes gives the pod (``JOB_COMPLETION_INDEX``), and
names its peers by their stable DNS names ``<job>-<index>.<service>``: an Indexed
Job sets each pod's hostname to ``<job>-<index>`` and its ``subdomain`` makes the
headless Service publish it (``publishNotReadyAddresses``: a MultiWorkerMirrored
leader needs its peers' names before any pod is ready). Every task listens on
one TCP port (``port``, 2222 by default).

Security: TensorFlow's gRPC servers have no authentication; whoever reaches the
port can run operations in the pod. The manifest therefore includes a
NetworkPolicy that admits traffic to that port only from the Job's own pods
(effective where the cluster's network plugin enforces NetworkPolicies).

The documents are emitted as JSON, which is YAML (1.2): ``kubectl apply -f``
reads them, and so does any YAML parser, with no YAML library needed here.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from bench.errors import BenchError
from bench.hardware import Hardware
from bench.spec import RunSpec
from bench.strategies import STRATEGIES
from bench.tasks import Task

DEFAULT_PORT = 2222
# Beyond the spec's timeout: image pull, pod scheduling, the chief writing its result.
DEADLINE_MARGIN_S = 600
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
JOB_ORDER = ("chief", "ps", "worker")
CONFIG_DIR = "/etc/stratbench"
RESULTS_DIR = "/results"


class ManifestError(BenchError):
    """Options that cannot make a valid manifest (the CLI exits 2)."""


@dataclass(frozen=True)
class K8sOptions:
    """What the manifest needs besides the run's spec."""

    name: str  # the Job's name; pods are <name>-<index>, the Service <name>
    image: str  # a container image with stratbench and TensorFlow installed
    namespace: str = "default"
    port: int = DEFAULT_PORT
    cpu: str | None = None  # per pod, e.g. "8"
    memory: str | None = None  # per pod, e.g. "32Gi"
    gpus: int = 0  # nvidia.com/gpu per pod
    results_claim: str | None = None  # a PersistentVolumeClaim for /results
    network_policy: bool = True
    python: str = "python"

    def __post_init__(self) -> None:
        for field_name in ("name", "namespace"):
            value = getattr(self, field_name)
            if not _DNS_LABEL.match(value) or len(value) > 50:
                raise ManifestError(
                    f"K8sOptions.{field_name} must be a DNS label (lower-case letters, "
                    f"digits, '-', at most 50 characters). Received: {field_name}={value!r}")
        if not self.image.strip():
            raise ManifestError(f"K8sOptions.image must name a container image. "
                                f"Received: image={self.image!r}")
        if not 1 <= self.port <= 65535:
            raise ManifestError(f"K8sOptions.port must be a TCP port. Received: port={self.port}")
        if self.gpus < 0:
            raise ManifestError(f"K8sOptions.gpus must be >= 0. Received: gpus={self.gpus}")


def pod_tasks(spec: RunSpec) -> list[Task]:
    """The run's cluster tasks in pod-index order (chief, parameter servers, workers)."""
    # The layout does not depend on this machine: plan on an abstract host.
    hw = Hardware(cpu_model="", cores=1, memory_bytes=None)
    tasks = [t for t in STRATEGIES.get(spec.strategy).plan(spec, hw) if t.cluster_job]
    if not tasks:
        raise ManifestError(f"strategy {spec.strategy} runs in one process: there is no "
                            f"cluster to lay out (use multi_worker_mirrored or "
                            f"parameter_server). Received: strategy={spec.strategy!r}")
    return sorted(tasks, key=lambda t: (JOB_ORDER.index(t.cluster_job or "worker"), t.index))


def tf_config_for(index: int, spec: RunSpec, opts: K8sOptions) -> dict[str, Any]:
    """The TF_CONFIG the pod of ``index`` gets."""
    tasks = pod_tasks(spec)
    if not 0 <= index < len(tasks):
        raise ManifestError(f"pod index must be in 0..{len(tasks) - 1}. Received: {index}")
    cluster: dict[str, list[str]] = {}
    for i, t in enumerate(tasks):
        cluster.setdefault(t.cluster_job or "", []).append(
            f"{opts.name}-{i}.{opts.name}:{opts.port}")
    me = tasks[index]
    return {"cluster": cluster, "task": {"type": me.cluster_job, "index": me.index}}


def manifest(spec: RunSpec, opts: K8sOptions) -> list[dict[str, Any]]:
    """ConfigMap (spec, TF_CONFIG per index), headless Service, NetworkPolicy, Job."""
    n = len(pod_tasks(spec))
    labels = {"app.kubernetes.io/name": "stratbench", "stratbench/run": opts.name}
    meta = {"name": opts.name, "namespace": opts.namespace, "labels": labels}
    config = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {
        "spec.json": json.dumps(spec.to_dict(), indent=1),
        **{f"tf_config.{i}.json": json.dumps(tf_config_for(i, spec, opts)) for i in range(n)},
    }}
    service = {"apiVersion": "v1", "kind": "Service", "metadata": meta, "spec": {
        "clusterIP": "None", "publishNotReadyAddresses": True, "selector": labels,
        "ports": [{"name": "tf-grpc", "port": opts.port, "targetPort": opts.port,
                   "protocol": "TCP"}]}}
    docs: list[dict[str, Any]] = [config, service]
    if opts.network_policy:
        docs.append({
            "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": meta,
            "spec": {"podSelector": {"matchLabels": labels}, "policyTypes": ["Ingress"],
                     "ingress": [{"from": [{"podSelector": {"matchLabels": labels}}],
                                  "ports": [{"port": opts.port, "protocol": "TCP"}]}]}})
    docs.append(_job(spec, opts, n, labels, meta))
    return docs


def _job(spec: RunSpec, opts: K8sOptions, n: int, labels: dict[str, str],
         meta: dict[str, Any]) -> dict[str, Any]:
    # The index picks the pod's TF_CONFIG; exec keeps bench worker as PID 1's child-free
    # successor, so the pod ends with its exit code.
    script = (f'export TF_CONFIG="$(cat {CONFIG_DIR}/tf_config.$JOB_COMPLETION_INDEX.json)" '
              f'&& exec {opts.python} -m bench worker --spec {CONFIG_DIR}/spec.json '
              f"--cluster tf_config --out {RESULTS_DIR}")
    limits: dict[str, Any] = {}
    if opts.cpu:
        limits["cpu"] = opts.cpu
    if opts.memory:
        limits["memory"] = opts.memory
    if opts.gpus:
        limits["nvidia.com/gpu"] = opts.gpus
    container: dict[str, Any] = {
        "name": "task", "image": opts.image, "command": ["/bin/sh", "-c", script],
        "ports": [{"name": "tf-grpc", "containerPort": opts.port, "protocol": "TCP"}],
        "volumeMounts": [{"name": "config", "mountPath": CONFIG_DIR, "readOnly": True},
                         {"name": "results", "mountPath": RESULTS_DIR}]}
    if limits:
        container["resources"] = {"limits": limits, "requests": dict(limits)}
    results: dict[str, Any] = ({"persistentVolumeClaim": {"claimName": opts.results_claim}}
                               if opts.results_claim else {"emptyDir": {}})
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": {
        "completionMode": "Indexed", "completions": n, "parallelism": n,
        # A benchmark must not be retried behind the user's back: one failure ends it.
        "backoffLimit": 0,
        "activeDeadlineSeconds": int(spec.timeout_s) + DEADLINE_MARGIN_S,
        "template": {"metadata": {"labels": labels}, "spec": {
            "subdomain": opts.name, "restartPolicy": "Never",
            "containers": [container],
            "volumes": [{"name": "config", "configMap": {"name": opts.name}},
                        {"name": "results", **results}]}}}}


def render(docs: list[dict[str, Any]]) -> str:
    """The documents as a multi-document YAML stream (each document JSON)."""
    return "".join(f"---\n{json.dumps(d, indent=2)}\n" for d in docs)


def parse(text: str) -> list[dict[str, Any]]:
    """Read back what ``render`` wrote (documents separated by ``---`` lines)."""
    docs: list[dict[str, Any]] = []
    chunk: list[str] = []
    for line in text.splitlines():
        if line.strip() == "---":
            if "".join(chunk).strip():
                docs.append(json.loads("\n".join(chunk)))
            chunk = []
        else:
            chunk.append(line)
    if "".join(chunk).strip():
        docs.append(json.loads("\n".join(chunk)))
    return docs
