"""Hosts with budgets: each emulated host's CPU quota (a cgroup) and link, set up and
always removed.

Pure tests check the budget's validation, both cgroup versions' files (on a fake
cgroup directory), the threads a budgeted host trains with and what the result
records. Tests marked ``netns`` make real namespaces and cgroups (root; skipped with
the reason elsewhere) but run no TensorFlow: the hosts run a fake ``bench worker``
(a short Python script) that reports the budget it sees, then ends, fails, is
killed, or waits to be killed with its launcher. Each of them checks that no
namespace, cgroup or process is left: after success, failure, a killed host, a
SIGKILLed owner (the next launcher removes its leftovers) and SIGINT/SIGTERM of the
launching process.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bench import hardware
from bench.launch import cgroups, cluster_demo
from bench.launch.cgroups import V1, V2, CgroupError, CpuBudget, CpuGroups
from bench.launch.cluster_demo import budget_record, layout, run_demo
from bench.launch.netns import LinkShape, Network, applicable, ours
from bench.launch.worker import host_threads
from bench.tasks import Task
from tests.helpers import ROOT, tiny_spec, writers_under

NETNS_REASON = cluster_demo.unavailable_reason() or cgroups.unavailable_reason()
on_hosts = pytest.mark.skipif(NETNS_REASON is not None, reason=f"{NETNS_REASON}")


# -- pure: the budget, the cgroup files, what a host does with its budget -----------------
def test_a_budget_is_validated_and_names_the_field() -> None:
    b = CpuBudget(0.5)
    assert (b.quota_us, b.period_us, b.threads) == (5000, 10_000, 1)
    assert CpuBudget(1.5).threads == 2 and CpuBudget(2.0).threads == 2
    with pytest.raises(CgroupError, match="cpus=0"):
        CpuBudget(0)
    with pytest.raises(CgroupError, match="period_us=500"):
        CpuBudget(1.0, period_us=500)
    with pytest.raises(CgroupError, match="smallest quota"):
        CpuBudget(0.05)  # 500 us of a 10 ms period


@pytest.mark.parametrize("version", [V1(), V2()], ids=["v1", "v2"])
def test_both_cgroup_versions_write_and_read_the_budget(tmp_path: Path, version: Any) -> None:
    for name in ("cpu.cfs_quota_us", "cpu.cfs_period_us", "cpu.cfs_burst_us", "cpu.max"):
        (tmp_path / name).write_text("")
    version.write(tmp_path, CpuBudget(0.25))
    assert version.read(tmp_path) == pytest.approx(0.25)
    if version.name == "v2":
        assert (tmp_path / "cpu.max").read_text() == "2500 10000"
    else:
        assert (tmp_path / "cpu.cfs_quota_us").read_text() == "2500"
        assert (tmp_path / "cpu.cfs_burst_us").read_text() == "0"  # no saved-up bursts


def test_the_versions_are_found_from_the_mounts(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    v1, v2 = tmp_path / "cpu", tmp_path / "unified"
    v1.mkdir()
    v2.mkdir()
    (v1 / "cpu.cfs_quota_us").write_text("-1")
    (v2 / "cgroup.controllers").write_text("hugetlb")  # v2 mounted without cpu: v1 wins
    mounts = tmp_path / "mounts"
    mounts.write_text(f"cgroup {v1} cgroup rw,relatime,cpu 0 0\n"
                      f"cgroup2 {v2} cgroup2 rw,relatime 0 0\n")
    monkeypatch.setattr(cgroups, "MOUNTS", mounts)
    found = cgroups.backend()
    assert found is not None and (found[0].name, found[1]) == ("v1", v1)
    (v2 / "cgroup.controllers").write_text("cpuset cpu io memory")
    found = cgroups.backend()
    assert found is not None and (found[0].name, found[1]) == ("v2", v2)


@pytest.mark.logical_cpu
def test_a_host_reads_its_budget_and_trains_with_threads_that_fit(
        monkeypatch: pytest.MonkeyPatch) -> None:
    train = Task("worker", 0, "train", cluster_job="worker")
    monkeypatch.setenv(hardware.CPU_BUDGET_VAR, "0.5")
    assert hardware.cpu_budget() == 0.5
    assert host_threads(train) == (1, 1)
    monkeypatch.setenv(hardware.CPU_BUDGET_VAR, "1.5")
    assert host_threads(train) == (2, 1)
    # Servers keep TensorFlow's defaults (pinned to one thread they deadlock).
    assert host_threads(Task("worker", 0, "server", cluster_job="worker")) == (0, 0)


def test_budgeted_hosts_are_not_pinned_and_the_result_records_the_budget() -> None:
    spec = tiny_spec(strategy="multi_worker_mirrored", devices=2)
    assert all(h.cores == () for h in layout(spec, pin=False))
    asked = LinkShape(1e8, 0.001)
    record = budget_record(LinkShape(1e8), asked, "delay 1 ms not applied", CpuBudget(0.5),
                           "v1")
    assert record["cpu"] == {"cpus": 0.5, "period_us": 10_000, "quota_us": 5000}
    assert record["link"]["rate_bps"] == 1e8 and record["link"]["delay_s"] == 0.0
    assert record["link_asked"]["delay_s"] == 0.001 and record["cgroup"] == "v1"
    assert json.loads(json.dumps(record)) == record  # it travels in an env variable


# -- real namespaces and cgroups, a fake worker --------------------------------------------
FAKE_WORKER = textwrap.dedent("""
    import json, os, signal, sys, time
    cfg = json.loads(os.environ["TF_CONFIG"])
    task = f"{cfg['task']['type']}{cfg['task']['index']}"
    report = {"task": task, "pid": os.getpid(),
              "cpu_budget": os.environ.get("STRATBENCH_CPU_BUDGET"),
              "host_budget": json.loads(os.environ["STRATBENCH_HOST_BUDGET"]),
              "cgroup": open("/proc/self/cgroup").read()}
    path = os.path.join(os.environ["FAKE_DIR"], task)
    with open(path + ".tmp", "w") as fh:
        json.dump(report, fh)
    os.rename(path + ".tmp", path + ".json")  # whole, for a reader that polls
    what = os.environ.get("FAKE_" + task.upper(), "ok")
    if what == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    if what == "wait":
        time.sleep(600)
    sys.exit(3 if what == "fail" else 0)
""")


def leftovers(owner: int, path: Path) -> dict[str, list[Any]]:
    """Namespaces and cgroups made by process ``owner``, processes writing below ``path``."""
    return {"netns": [n for n in ours() if n.startswith(f"sb{owner}n")],
            "cgroups": [g.name for g in cgroups.ours() if g.name.startswith(f"sb{owner}g")],
            "processes": writers_under(path)}


NOTHING: dict[str, list[Any]] = {"netns": [], "cgroups": [], "processes": []}


@pytest.fixture
def fake_hosts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Hosts run the fake worker; afterwards nothing of this process is left."""
    script = tmp_path / "fake_worker.py"
    script.write_text(FAKE_WORKER)
    monkeypatch.setattr(cluster_demo, "worker_command",
                        lambda spec_file, target: [sys.executable, str(script)])
    monkeypatch.setattr(cluster_demo, "PEER_END_S", 1.0)
    monkeypatch.setenv("FAKE_DIR", str(tmp_path))
    yield tmp_path
    assert leftovers(os.getpid(), tmp_path) == NOTHING


def seen(tmp_path: Path) -> dict[str, dict[str, Any]]:
    return {p.stem: json.loads(p.read_text()) for p in tmp_path.glob("worker*.json")}


def mwms(devices: int) -> Any:
    return tiny_spec(strategy="multi_worker_mirrored", devices=devices, batch=12,
                     timeout_s=20.0)


@pytest.mark.netns
@on_hosts
def test_each_host_runs_inside_its_own_quota_and_everything_is_removed(
        fake_hosts: Path) -> None:
    out = run_demo(mwms(2), fake_hosts / "sweep", LinkShape(rate_bps=1e8, delay_s=0.002),
                   cpu=CpuBudget(0.5))
    assert [h.returncode for h in out.hosts] == [0, 0] and out.clean
    assert [h.cpus for h in out.hosts] == [0.5, 0.5]
    reports = seen(fake_hosts)
    assert set(reports) == {"worker0", "worker1"}
    groups = set()
    for r in reports.values():
        assert r["cpu_budget"] == "0.5"
        assert r["host_budget"] == out.budget and out.budget["cpu"]["cpus"] == 0.5
        groups |= {ln.rsplit("/", 1)[-1] for ln in r["cgroup"].splitlines()
                   if f"/sb{os.getpid()}g" in ln}
    # One group per host, named for its owner: the budgets are the hosts' own.
    assert len(groups) == 2
    # The kernel accounted periods to each host's group before it was removed.
    assert set(out.cpu_stats) == {"host0", "host1"}
    assert all(s.get("nr_periods", 0) >= 1 for s in out.cpu_stats.values())
    # The rate is always applied; the delay where the kernel has netem, else said.
    link, note = applicable(LinkShape(rate_bps=1e8, delay_s=0.002))
    assert out.budget["link"] == link.to_dict() and out.budget["note"] == note


@pytest.mark.netns
@on_hosts
@pytest.mark.parametrize("behaviour", ["fail", "kill"])
def test_a_failed_or_killed_host_leaves_nothing(fake_hosts: Path,
                                                monkeypatch: pytest.MonkeyPatch,
                                                behaviour: str) -> None:
    monkeypatch.setenv("FAKE_WORKER1", behaviour)
    monkeypatch.setenv("FAKE_WORKER2", "wait")  # outlives the chief: the demo kills it
    out = run_demo(mwms(3), fake_hosts / "sweep", cpu=CpuBudget(0.5))
    by_task = {h.task: h for h in out.hosts}
    assert by_task["worker1"].returncode == (3 if behaviour == "fail" else -signal.SIGKILL)
    assert by_task["worker2"].killed_by_demo
    assert not out.clean


@pytest.mark.netns
@on_hosts
def test_an_exception_inside_the_network_removes_its_groups(tmp_path: Path) -> None:
    log = tmp_path / "sleep.out"
    with pytest.raises(RuntimeError, match="boom"), \
            Network(2, cpu=CpuBudget(0.5)) as net:
        assert net.groups is not None and set(net.groups.groups) == {"host0", "host1"}
        with open(log, "wb") as fh:
            net.popen(net.hosts[1], [sys.executable, "-c", "import time; time.sleep(600)"],
                      stdout=fh)
        deadline = time.monotonic() + 10
        while not net.groups.live_pids()["host1"] and time.monotonic() < deadline:
            time.sleep(0.05)
        assert net.groups.live_pids()["host1"], "the host's process is in its group"
        raise RuntimeError("boom")
    assert leftovers(os.getpid(), tmp_path) == NOTHING


OWNER = textwrap.dedent("""
    import sys
    from pathlib import Path
    from bench.cli.main import _sigterm_as_interrupt
    from bench.launch import cluster_demo
    from bench.launch.cgroups import CpuBudget
    from tests.helpers import tiny_spec
    cluster_demo.worker_command = lambda spec_file, target: [sys.executable, sys.argv[1]]
    spec = tiny_spec(strategy="multi_worker_mirrored", devices=2, timeout_s=300.0)
    with _sigterm_as_interrupt():
        try:
            cluster_demo.run_demo(spec, Path(sys.argv[2]), cpu=CpuBudget(0.5),
                                  progress=lambda m: print(m, flush=True))
        except KeyboardInterrupt:
            print("interrupted", flush=True)
""")


def start_owner(tmp_path: Path) -> subprocess.Popen[str]:
    """A launcher in its own process whose hosts wait forever; returns once both run."""
    script = tmp_path / "fake_worker.py"
    script.write_text(FAKE_WORKER)
    env = {**os.environ, "FAKE_DIR": str(tmp_path), "FAKE_WORKER0": "wait",
           "FAKE_WORKER1": "wait"}
    proc = subprocess.Popen([sys.executable, "-c", OWNER, str(script), str(tmp_path / "s")],
                            stdout=subprocess.PIPE, text=True, cwd=ROOT, env=env)
    deadline = time.monotonic() + 60
    while len(seen(tmp_path)) < 2 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.1)
    if len(seen(tmp_path)) < 2:
        proc.kill()
        proc.wait(timeout=30)
        pytest.fail("the launcher's two hosts did not start within 60 s")
    return proc


@pytest.mark.netns
@on_hosts
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signalled_launcher_removes_everything(tmp_path: Path, sig: int) -> None:
    proc = start_owner(tmp_path)
    try:
        assert leftovers(proc.pid, tmp_path)["cgroups"], "the hosts' groups exist meanwhile"
        proc.send_signal(sig)
        out, _ = proc.communicate(timeout=60)
    finally:
        proc.kill()  # a failed check must not leave the launcher running
        proc.wait(timeout=30)
    assert "interrupted" in out
    assert leftovers(proc.pid, tmp_path) == NOTHING


@pytest.mark.netns
@on_hosts
def test_a_sigkilled_launchers_leftovers_go_with_the_next(tmp_path: Path) -> None:
    proc = start_owner(tmp_path)
    proc.kill()  # its finally never runs: namespaces, groups and hosts stay
    proc.wait(timeout=30)
    assert leftovers(proc.pid, tmp_path)["cgroups"]
    with CpuGroups(["probe"], CpuBudget(1.0)), Network(1):
        pass
    assert leftovers(proc.pid, tmp_path) == NOTHING
