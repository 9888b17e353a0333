"""The manifest's pods, run as processes: what kubectl would start is what this test starts.

No Kubernetes cluster runs here, so the test plays the kubelet for the Indexed Job that
``stratbench k8s-manifest`` wrote, taking everything from the manifest itself: each pod
is a network namespace of its own (an address in 198.18.0.0/15) running the
container's ``command`` with ``JOB_COMPLETION_INDEX`` set; the ConfigMap's entries are
files in a directory standing for the config volume and an empty directory stands for
the results volume (their mount paths in the command are read as those directories);
the headless Service's DNS names (``<job>-<index>.<service>``) are each namespace's
``/etc/hosts`` (``ip netns exec`` bind-mounts ``/etc/netns/<name>/hosts``). The pods'
exit codes and the chief's result are then what the Job's would be.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench.launch.k8s import CONFIG_DIR, RESULTS_DIR, K8sOptions, manifest
from bench.launch.netns import Host, Network
from bench.results.store import SweepStore, load
from bench.spec import RunSpec
from tests.test_multihost import no_leftovers, on_namespaces  # noqa: F401 (a fixture)

POD_TIMEOUT_S = 180.0


@contextmanager
def service_dns(net: Network, names: dict[str, str]) -> Iterator[None]:
    """``names`` (DNS name -> address) resolvable inside every host of ``net``."""
    made = []
    try:
        for host in net.hosts:
            folder = Path("/etc/netns") / host.netns
            folder.mkdir(parents=True, exist_ok=True)
            made.append(folder)
            (folder / "hosts").write_text(
                "127.0.0.1 localhost\n" + "".join(f"{a} {n}\n" for n, a in names.items()),
                encoding="utf-8")
        yield
    finally:
        for folder in made:
            shutil.rmtree(folder, ignore_errors=True)
        with_parent = Path("/etc/netns")
        if with_parent.is_dir() and not any(with_parent.iterdir()):
            with_parent.rmdir()


def start_pod(net: Network, host: Host, job: dict[str, Any], index: int, volumes: dict[str, Path],
              log: Path) -> subprocess.Popen[bytes]:
    """The Job's container for pod ``index`` on ``host``, as the kubelet would start it."""
    container = job["spec"]["template"]["spec"]["containers"][0]
    command = list(container["command"])
    for mount in container["volumeMounts"]:
        command = [part.replace(mount["mountPath"], str(volumes[mount["name"]]))
                   for part in command]
    env = {**os.environ, "JOB_COMPLETION_INDEX": str(index),
           # The image's python: this interpreter, first on PATH.
           "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}"}
    env.pop("TF_CONFIG", None)
    with open(log, "ab") as fh:
        return net.popen(host, command, stdout=fh, stderr=subprocess.STDOUT,
                         stdin=subprocess.DEVNULL, env=env, cwd="/")


@on_namespaces
def test_the_manifests_pods_run_as_written_and_the_chief_stores_every_hosts_figures(
        no_leftovers: Path) -> None:  # noqa: F811
    tmp = no_leftovers
    spec = RunSpec(workload="mlp", strategy="multi_worker_mirrored", devices=2, batch=256,
                   warmup_steps=2, min_steps=3, max_steps=10, max_seconds=1.0, repeats=2,
                   timeout_s=120.0)
    opts = K8sOptions(name="rn", image="unused", port=2222)
    docs = {d["kind"]: d for d in manifest(spec, opts)}
    job, config = docs["Job"], docs["ConfigMap"]
    pods = job["spec"]["completions"]
    assert pods == 2
    config_dir = tmp / "config"
    config_dir.mkdir()
    for name, text in config["data"].items():
        (config_dir / name).write_text(text, encoding="utf-8")
    with Network(pods) as net:
        # The headless Service: pod i is <job>-<i>.<service>.
        names = {f"{opts.name}-{i}.{opts.name}": h.address for i, h in enumerate(net.hosts)}
        with service_dns(net, names):
            procs = []
            for i, host in enumerate(net.hosts):
                results = tmp / f"results{i}"
                results.mkdir()
                procs.append(start_pod(net, host, job, i,
                                       {"config": config_dir, "results": results},
                                       tmp / f"pod{i}.log"))
            codes = [p.wait(timeout=POD_TIMEOUT_S) for p in procs]
    logs = "\n".join((tmp / f"pod{i}.log").read_text(errors="replace")[-2000:]
                     for i in range(pods))
    assert codes == [0, 0], logs
    assert CONFIG_DIR and RESULTS_DIR  # the paths the command named, replaced above
    files = sorted(SweepStore(tmp / "results0").result_files_of(spec))
    assert len(files) == 1, logs
    result = load(files[0])
    assert result.status == "ok", result.reason
    assert result.figures is not None and result.figures.tasks is not None
    assert [t.task for t in result.figures.tasks] == ["worker0", "worker1"]
    peers = (result.launcher or {})["tf_config"]["cluster"]["worker"]
    assert peers == [f"{n}:2222" for n in names]
    assert not (tmp / "results1" / "results").exists()  # only the chief writes a result
    assert json.loads(config["data"]["tf_config.1.json"])["task"]["index"] == 1
    assert not any(Path("/etc/netns", h.netns).exists() for h in net.hosts)
