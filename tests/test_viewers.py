"""The viewer commands the tool prints work on this install, checked with real clients.

The server tests start the printed commands on free loopback ports (all at once, in a
module fixture: bounded wait, always killed with their process groups) and fetch over
HTTP what a browser would.
TensorBoard imports TensorFlow when it is installed, so these tests start servers,
never import TensorFlow in the pytest process. Reading the HParams export back uses
TensorBoard's own event reader in a child process (with TensorBoard's no-TensorFlow
switch, so that child stays small).
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import shlex
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from bench.launch.launcher import free_ports
from bench.results import text
from bench.results.store import SweepStore, save
from tests.helpers import ROOT, report_results

SERVER_START_S = 120.0  # TensorBoard imports TensorFlow: ~10 s warm on 2 shared cores
# A free port is found, then bound seconds later by a server still importing: another
# process can take it meanwhile (xprof once exited "Address already in use" in a full
# run). Such a server starts again on another port, this many times at most.
BIND_RETRIES = 3
PROFILE_RUN = "2026_01_01_00_00_00"


def write_profile(logdir: Path, host: str = "localhost") -> Path:
    """A profile as tf.profiler writes it. Zero bytes is a valid, empty XSpace proto."""
    run = logdir / "plugins" / "profile" / PROFILE_RUN
    run.mkdir(parents=True)
    (run / f"{host}.xplane.pb").write_bytes(b"")
    return run


def _venv_argv(command: str) -> list[str]:
    """The printed command as argv, its program taken from this interpreter's bin/
    (where `pip install` put it: what a user with the venv activated runs)."""
    argv = shlex.split(command)
    program = Path(sys.executable).parent / argv[0]
    assert program.exists(), f"the printed command's program is not installed: {program}"
    return [str(program), *argv[1:]]


def fetch(url: str, body: dict[str, Any] | None = None, timeout: float = 30.0) -> Any:
    """GET (or POST ``body`` as JSON) and decode the JSON answer (gzip or not)."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data,
                                 headers={"Content-Type": "application/json"} if data else {})
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        raw = resp.read()
        if resp.headers.get("Content-Encoding") == "gzip":
            raw = gzip.decompress(raw)
    return json.loads(raw)


@dataclass
class Server:
    """A viewer started from the command the tool printed, answering at ``base``."""

    command: str  # as printed
    logdir: Path  # what it serves
    argv: list[str]
    base: str
    log: Path
    proc: subprocess.Popen[bytes] | None = None
    restarts: int = 0


def start(server: Server) -> None:
    """Start ``server``'s process (its own process group, output to its log)."""
    with open(server.log, "wb") as out:
        server.proc = subprocess.Popen(server.argv, stdout=out, stderr=subprocess.STDOUT,
                                       start_new_session=True, cwd=ROOT)


def wait_ready(servers: list[Server], ready_path: str) -> None:
    """Wait (bounded) until every server answers 200 on ``ready_path``."""
    deadline = time.monotonic() + SERVER_START_S
    waiting = list(servers)
    while waiting:
        for server in list(waiting):
            assert server.proc is not None
            if server.proc.poll() is not None:
                said = server.log.read_text(errors="replace")
                if "Address already in use" in said and server.restarts < BIND_RETRIES:
                    server.restarts += 1
                    (port,) = free_ports(1)
                    server.argv = _on_port(server.argv, port)
                    server.base = f"http://127.0.0.1:{port}"
                    start(server)
                    continue
                pytest.fail(f"{server.argv[0]} exited with {server.proc.returncode}:\n"
                            f"{said[-3000:]}")
            try:
                with urllib.request.urlopen(server.base + ready_path, timeout=5) as resp:
                    if resp.status == 200:
                        waiting.remove(server)
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
        if waiting and time.monotonic() > deadline:
            pytest.fail("\n".join(f"{s.argv[0]} did not answer {ready_path} within "
                                   f"{SERVER_START_S} s:\n"
                                   f"{s.log.read_text(errors='replace')[-3000:]}"
                                   for s in waiting))
        if waiting:
            time.sleep(0.5)


def stop(server: Server) -> None:
    """Kill ``server``'s process group and reap it."""
    if server.proc is None:
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(server.proc.pid, signal.SIGKILL)
    server.proc.wait(timeout=30)


def _on_port(argv: list[str], port: int) -> list[str]:
    """``argv`` listening on 127.0.0.1:``port`` whatever port it printed."""
    kept = [a for a in argv if not a.startswith(("--port", "--host"))]
    if Path(argv[0]).name == "tensorboard":
        return [*kept, f"--port={port}", "--host=127.0.0.1"]
    return [*kept, f"--port={port}"]


def test_printed_profile_command_is_tensorboard_here() -> None:
    # The project depends on tensorboard: the printed command is TensorBoard's.
    assert text.tensorboard_command("/x/y") == "tensorboard --logdir /x/y"


def make_sweep(tmp_path: Path) -> Path:
    """A stored sweep (every status, a second replicate) with one profile."""
    sweep = tmp_path / "sweep"
    store = SweepStore(sweep)
    results = report_results()
    for r in results:
        save(r, store.paths(r.spec, r.replicate).result)
    twin = results[0]
    twin.replicate = 2
    save(twin, store.paths(twin.spec, 2).result)
    write_profile(store.paths(results[-1].spec).profile)
    return sweep


_READER = r'''
import json, sys, types
# TensorBoard's own switch for running without TensorFlow (its stub reader).
sys.modules["tensorboard.compat.notf"] = types.ModuleType("tensorboard.compat.notf")
from pathlib import Path
from tensorboard.backend.event_processing import event_accumulator as ea
from tensorboard.plugins.hparams import metadata
from tensorboard.util import tensor_util

logdir = Path(sys.argv[1])
out = {"runs": {}}
for d in sorted([logdir, *(p for p in logdir.iterdir() if p.is_dir())]):
    acc = ea.EventAccumulator(str(d), size_guidance={ea.TENSORS: 0})
    acc.Reload()
    run = {"scalars": {}, "hparams": None, "status": None, "experiment": None}
    for tag, content in acc.PluginTagToContent(metadata.PLUGIN_NAME).items():
        if tag == metadata.EXPERIMENT_TAG:
            exp = metadata.parse_experiment_plugin_data(content)
            run["experiment"] = {"hparams": [h.name for h in exp.hparam_infos],
                                 "metrics": [m.name.tag for m in exp.metric_infos]}
        elif tag == metadata.SESSION_START_INFO_TAG:
            info = metadata.parse_session_start_info_plugin_data(content)
            run["hparams"] = {k: v.WhichOneof("kind") and getattr(v, v.WhichOneof("kind"))
                              for k, v in info.hparams.items()}
            run["group"] = info.group_name
        elif tag == metadata.SESSION_END_INFO_TAG:
            run["status"] = metadata.parse_session_end_info_plugin_data(content).status
    for tag in acc.Tags()["tensors"]:
        if tag.startswith("_hparams_"):
            continue
        run["scalars"][tag] = [[e.step, float(tensor_util.make_ndarray(e.tensor_proto))]
                               for e in acc.Tensors(tag)]
    out["runs"]["." if d == logdir else d.name] = run
out["tensorflow_loaded"] = "tensorflow" in sys.modules
print(json.dumps(out))
'''


def read_back(logdir: Path) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, "-c", _READER, str(logdir)], capture_output=True,
                          text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)  # type: ignore[no-any-return]


def test_sweep_export_reads_back_with_tensorboards_reader(tmp_path: Path) -> None:
    from reports.tensorboard import METRICS, export

    sweep = make_sweep(tmp_path)
    exported = export(sweep)
    assert exported.logdir == sweep / "tensorboard"
    assert exported.command == f"tensorboard --logdir {sweep}"
    stored = len(list((sweep / "results").glob("*.json")))
    assert exported.sessions == stored
    read = read_back(exported.logdir)
    assert not read["tensorflow_loaded"]
    runs = read["runs"]
    experiment = runs["."]["experiment"]
    assert {"strategy", "devices", "global_batch", "precision", "status"} <= set(
        experiment["hparams"])
    assert experiment["metrics"] == [m.tag for m in METRICS]
    sessions = {name: r for name, r in runs.items() if name != "."}
    assert len(sessions) == stored
    ok = [r for r in sessions.values() if r["hparams"]["status"] == "ok"
          and r["hparams"]["mode"] == "train"]
    assert ok and all(r["status"] == 1 for r in ok)  # api_pb2.STATUS_SUCCESS
    for r in ok:
        # The figures' one names (the CSV's), memory in its stored unit.
        for tag in ("global_throughput", "step_time_median_s", "memory_device_peak_bytes"):
            assert len(r["scalars"][tag]) == 1, (tag, r["scalars"].keys())
        assert len(r["scalars"]["windows/global_throughput"]) == 3
    failed = [r for r in sessions.values() if r["hparams"]["status"] != "ok"]
    assert failed and all(r["status"] == 2 and "global_throughput" not in r["scalars"]
                          for r in failed)  # api_pb2.STATUS_FAILURE
    # Stored figures come back exactly (float32 in the event file).
    mirrored2 = [r for r in ok if r["hparams"]["strategy"] == "mirrored"
                 and r["hparams"]["devices"] == 2 and r["hparams"]["global_batch"] == 32]
    assert mirrored2 and mirrored2[0]["scalars"]["global_throughput"][0][1] == pytest.approx(
        20_000.0 * 0.7, rel=1e-6)
    # Efficiencies come from the report's scaling (one device of the same strategy).
    assert mirrored2[0]["scalars"]["strong_eff"][0][1] == pytest.approx(
        0.7 / 0.97 / 2, rel=1e-6)
    # Replicates of a configuration are one session group (the dashboard aggregates).
    groups = [r["group"] for r in sessions.values()]
    assert len(set(groups)) == len(groups) - 1
    assert any(name.endswith(".run2") for name in sessions)


def test_export_replaces_the_previous_one_and_loads_no_tensorflow(tmp_path: Path) -> None:
    sweep = make_sweep(tmp_path)
    code = ("import sys; from pathlib import Path; from reports.tensorboard import export; "
            "export(Path(sys.argv[1])); export(Path(sys.argv[1])); "
            "print('tensorflow' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code, str(sweep)], capture_output=True,
                          text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == "False"
    top = sweep / "tensorboard"
    assert len(list(top.glob("events.out.tfevents.*"))) == 1
    assert all(len(list(d.glob("events.out.tfevents.*"))) == 1 for d in top.iterdir()
               if d.is_dir())
    assert not [p for p in sweep.iterdir() if p.name.startswith(".tensorboard")]


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Server]]:
    """The three viewers the tool prints, each started from its printed command on a
    free loopback port, all at once (each spends seconds importing TensorBoard or
    xprof, mostly on one core): ``profile`` (TensorBoard on one run's profile),
    ``xprof`` (the command printed where TensorBoard is not installed) and ``sweep``
    (TensorBoard on an exported sweep). Always killed with their process groups."""
    from reports.tensorboard import export

    tmp = tmp_path_factory.mktemp("viewers")
    profile = tmp / "profiles" / "mlp-key"
    write_profile(profile)
    with pytest.MonkeyPatch.context() as mp:  # as if TensorBoard were not installed
        real = text.importlib.util.find_spec
        mp.setattr(text.importlib.util, "find_spec",
                   lambda name, *a: None if name == "tensorboard" else real(name, *a))
        xprof_command = text.tensorboard_command(tmp / "p")
    write_profile(tmp / "p")
    sweep = make_sweep(tmp)
    printed = {"profile": (text.tensorboard_command(profile), profile),
               "xprof": (xprof_command, tmp / "p"),
               "sweep": (export(sweep).command, sweep)}
    ports = free_ports(len(printed))
    started = {name: Server(command, logdir, _on_port(_venv_argv(command), port),
                            f"http://127.0.0.1:{port}", tmp / f"{name}.log")
               for (name, (command, logdir)), port in zip(printed.items(), ports, strict=True)}
    try:
        for server in started.values():
            start(server)
        wait_ready(list(started.values()), "/data/plugin/profile/runs")
        yield started
    finally:
        for server in started.values():
            stop(server)


def test_printed_profile_command_serves_the_profile(servers: dict[str, Server]) -> None:
    """TensorBoard started from the command printed for a run's profile lists it."""
    base = servers["profile"].base
    runs = fetch(base + "/data/plugin/profile/runs")
    assert any(PROFILE_RUN in r for r in runs), runs
    listing = fetch(base + "/data/plugins_listing")
    assert listing["profile"]["enabled"], listing["profile"]


def test_without_tensorboard_the_xprof_command_is_printed_and_serves(
        servers: dict[str, Server]) -> None:
    """Without TensorBoard the printed command is xprof's, and it serves the profile."""
    assert servers["xprof"].command.startswith("xprof server --logdir=")
    runs = fetch(servers["xprof"].base + "/data/plugin/profile/runs")
    assert any(PROFILE_RUN in r for r in runs), runs


def test_tensorboard_on_the_sweep_shows_hparams_beside_the_profiles(
        servers: dict[str, Server]) -> None:
    """TensorBoard on an exported sweep shows its profile and one HParams session
    group per configuration."""
    base, sweep = servers["sweep"].base, servers["sweep"].logdir
    listing = fetch(base + "/data/plugins_listing")
    profiles = fetch(base + "/data/plugin/profile/runs")
    assert any(PROFILE_RUN in r for r in profiles), profiles
    # TensorBoard loads event files in the background: poll, bounded.
    deadline = time.monotonic() + 60
    while True:
        experiment = fetch(base + "/data/plugin/hparams/experiment",
                           {"experimentName": ""})
        groups = fetch(base + "/data/plugin/hparams/session_groups",
                       {"experimentName": "", "allowedStatuses": [
                           "STATUS_UNKNOWN", "STATUS_SUCCESS", "STATUS_FAILURE",
                           "STATUS_RUNNING"],
                        "colParams": [], "startIndex": 0, "sliceSize": 1000})
        if groups.get("sessionGroups") or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert listing["hparams"]["enabled"], listing["hparams"]
    names = {h["name"] for h in experiment["hparamInfos"]}
    assert {"strategy", "devices", "global_batch"} <= names
    assert {m["name"]["tag"] for m in experiment["metricInfos"]} >= {"global_throughput",
                                                                      "mfu"}
    assert len(groups["sessionGroups"]) == len(
        list((sweep / "results").glob("*.json"))) - 1  # the replicate shares a group


def test_bench_tensorboard_command_writes_and_prints_the_viewer(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from bench.cli.main import main

    sweep = make_sweep(tmp_path)
    assert main(["tensorboard", str(sweep)]) == 0
    out = capsys.readouterr().out
    assert f"tensorboard --logdir {sweep}" in out and "HParams sessions" in out
    assert list((sweep / "tensorboard").glob("events.out.tfevents.*"))
    assert main(["tensorboard", str(tmp_path / "missing")]) == 2
    assert "no sweep directory" in capsys.readouterr().err
