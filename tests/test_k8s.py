"""The Kubernetes manifest: its documents' structure and the TF_CONFIG each pod gets."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench.cli.main import main
from bench.launch.k8s import (
    K8sOptions,
    ManifestError,
    manifest,
    parse,
    pod_tasks,
    render,
    tf_config_for,
)
from bench.launch.worker import members
from bench.spec import RunSpec
from tests.helpers import tiny_spec

OPTS = K8sOptions(name="bench-a", image="registry.example/stratbench:1", cpu="4",
                  memory="8Gi", gpus=1)


def docs_of(spec: RunSpec, opts: K8sOptions = OPTS) -> dict[str, dict[str, Any]]:
    """The rendered manifest read back, by kind (render -> parse round trip)."""
    docs = parse(render(manifest(spec, opts)))
    kinds = [d["kind"] for d in docs]
    assert len(set(kinds)) == len(kinds)
    return {d["kind"]: d for d in docs}


def pod_tf_config(docs: dict[str, dict[str, Any]], index: int) -> dict[str, Any]:
    """What the pod of ``index`` exports as TF_CONFIG: its ConfigMap entry, picked by
    the command's $JOB_COMPLETION_INDEX."""
    job = docs["Job"]["spec"]["template"]["spec"]
    script = job["containers"][0]["command"][-1]
    assert "tf_config.$JOB_COMPLETION_INDEX.json" in script
    return dict(json.loads(docs["ConfigMap"]["data"][f"tf_config.{index}.json"]))


def test_indexed_job_behind_a_headless_service() -> None:
    docs = docs_of(tiny_spec(strategy="multi_worker_mirrored", devices=3, batch=30))
    assert set(docs) == {"ConfigMap", "Service", "NetworkPolicy", "Job"}
    svc, job = docs["Service"], docs["Job"]
    assert svc["spec"]["clusterIP"] == "None" and svc["spec"]["publishNotReadyAddresses"]
    assert svc["spec"]["ports"][0]["port"] == 2222
    spec = job["spec"]
    assert spec["completionMode"] == "Indexed"
    assert spec["completions"] == spec["parallelism"] == 3 and spec["backoffLimit"] == 0
    pod = spec["template"]
    # The pods' hostnames <job>-<i> resolve under the Service: subdomain = its name.
    assert pod["spec"]["subdomain"] == svc["metadata"]["name"] == job["metadata"]["name"]
    assert svc["spec"]["selector"] == pod["metadata"]["labels"]
    container = pod["spec"]["containers"][0]
    assert container["image"] == OPTS.image
    assert container["ports"][0]["containerPort"] == 2222
    assert container["resources"]["limits"] == {"cpu": "4", "memory": "8Gi",
                                                "nvidia.com/gpu": 1}
    assert "bench worker --spec /etc/stratbench/spec.json" in container["command"][-1]
    stored = RunSpec.from_dict(json.loads(docs["ConfigMap"]["data"]["spec.json"]))
    assert stored == tiny_spec(strategy="multi_worker_mirrored", devices=3, batch=30)


def test_every_pod_gets_its_own_task_and_the_same_cluster() -> None:
    spec = tiny_spec(strategy="multi_worker_mirrored", devices=3, batch=30)
    docs = docs_of(spec)
    configs = [pod_tf_config(docs, i) for i in range(3)]
    assert [c["task"] for c in configs] == [{"type": "worker", "index": i} for i in range(3)]
    assert configs[0]["cluster"] == {"worker": [f"bench-a-{i}.bench-a:2222" for i in range(3)]}
    assert all(c["cluster"] == configs[0]["cluster"] for c in configs)


def test_parameter_server_pods_chief_first_then_ps_then_workers() -> None:
    spec = tiny_spec(strategy="parameter_server", devices=2, ps_tasks=2)
    docs = docs_of(spec)
    assert docs["Job"]["spec"]["completions"] == 5
    tasks = [pod_tf_config(docs, i)["task"] for i in range(5)]
    assert [(t["type"], t["index"]) for t in tasks] == [
        ("chief", 0), ("ps", 0), ("ps", 1), ("worker", 0), ("worker", 1)]
    cluster = pod_tf_config(docs, 0)["cluster"]
    assert cluster["ps"] == ["bench-a-1.bench-a:2222", "bench-a-2.bench-a:2222"]
    # The pod of each index is the task bench worker will look up in that TF_CONFIG.
    names = [m.name for m in members(pod_tf_config(docs, 0))]
    assert names == [t.name for t in pod_tasks(spec)]
    assert tf_config_for(3, spec, OPTS) == pod_tf_config(docs, 3)


def test_the_network_policy_admits_only_the_runs_own_pods_on_the_port() -> None:
    docs = docs_of(tiny_spec(strategy="multi_worker_mirrored", devices=2))
    policy = docs["NetworkPolicy"]["spec"]
    labels = docs["Job"]["spec"]["template"]["metadata"]["labels"]
    assert policy["podSelector"] == {"matchLabels": labels}
    (rule,) = policy["ingress"]
    assert rule["from"] == [{"podSelector": {"matchLabels": labels}}]
    assert rule["ports"] == [{"port": 2222, "protocol": "TCP"}]
    without = docs_of(tiny_spec(strategy="multi_worker_mirrored", devices=2),
                      K8sOptions(name="b", image="i", network_policy=False))
    assert "NetworkPolicy" not in without


def test_results_volume_is_a_claim_when_given() -> None:
    opts = K8sOptions(name="b", image="i", results_claim="bench-results")
    job = docs_of(tiny_spec(strategy="multi_worker_mirrored", devices=2), opts)["Job"]
    volumes = {v["name"]: v for v in job["spec"]["template"]["spec"]["volumes"]}
    assert volumes["results"]["persistentVolumeClaim"] == {"claimName": "bench-results"}


def test_bad_options_name_the_field() -> None:
    with pytest.raises(ManifestError, match="name='Bad_Name'"):
        K8sOptions(name="Bad_Name", image="i")
    with pytest.raises(ManifestError, match="port=0"):
        K8sOptions(name="b", image="i", port=0)
    with pytest.raises(ManifestError, match="strategy='mirrored'"):
        manifest(tiny_spec(strategy="mirrored", devices=2), K8sOptions(name="b", image="i"))


def test_cli_writes_the_manifest_and_refuses_bad_names(tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]
                                                       ) -> None:
    out = tmp_path / "job.yaml"
    args = ["k8s-manifest", "--workload", "mlp", "--strategy", "multi_worker_mirrored",
            "--devices", "2", "--batch", "32", "--image", "img:1", "--output", str(out)]
    assert main([*args, "--name", "run1"]) == 0
    assert "2222/TCP" in capsys.readouterr().out
    assert {d["kind"] for d in parse(out.read_text())} >= {"Job", "Service"}
    assert main([*args, "--name", "Run_1"]) == 2
    assert "Received: name='Run_1'" in capsys.readouterr().err
