"""Multi-host runs: hosts as network namespaces, every host's figures, faults across hosts.

Pure tests check the layout, the TF_CONFIGs and how the chief turns gathered reports
into a result (constructed payloads, no TensorFlow). Tests marked ``netns`` make real
namespaces (root, ``ip`` and ``tc``; skipped with the reason elsewhere); those that
also run TensorFlow are kept tiny. Every namespace test checks in its teardown that
no namespace of ours and no process writing below its directory is left.
"""

from __future__ import annotations

import ipaddress
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from bench.launch import worker
from bench.launch.cluster_demo import PEER_END_S, DemoError, layout, run_demo, tf_configs
from bench.launch.netns import (
    BENCHMARK_RANGE,
    LinkShape,
    NetnsError,
    Network,
    ours,
    parse_rate,
    unavailable_reason,
)
from bench.launch.worker import Member, chief_outcome, members
from bench.results.payload import HostReport, TaskReport
from bench.results.schema import TaskFigures
from tests.helpers import ROOT, fake_figures, tiny_spec, writers_under

NETNS_REASON = unavailable_reason()
F = TypeVar("F", bound=Callable[..., Any])
FAST: dict[str, Any] = {"repeats": 2, "max_seconds": 0.3, "min_steps": 3, "max_steps": 20,
                        "warmup_steps": 2}


# -- layout and cluster configuration -------------------------------------------------
def test_mwms_puts_one_worker_per_host_on_disjoint_cores() -> None:
    hosts = layout(tiny_spec(strategy="multi_worker_mirrored", devices=2))
    assert [[t.name for t in h.tasks] for h in hosts] == [["worker0"], ["worker1"]]
    if len(os.sched_getaffinity(0)) >= 2:
        assert hosts[0].cores and hosts[1].cores
        assert not set(hosts[0].cores) & set(hosts[1].cores)


def test_parameter_server_hub_host_then_one_host_per_worker() -> None:
    hosts = layout(tiny_spec(strategy="parameter_server", devices=2))
    assert [[t.name for t in h.tasks] for h in hosts] == [["chief0", "ps0"], ["worker0"],
                                                          ["worker1"]]
    assert all(h.cores == () for h in hosts)  # servers pinned to one core deadlock


def test_single_process_strategies_are_refused() -> None:
    with pytest.raises(DemoError, match="strategy=.mirrored"):
        layout(tiny_spec(strategy="mirrored", devices=2))


def test_tf_configs_use_each_hosts_address_and_distinct_ports() -> None:
    hosts = layout(tiny_spec(strategy="parameter_server", devices=2))
    configs = tf_configs(hosts, ["198.18.0.1", "198.18.0.2", "198.18.0.3"])
    assert set(configs) == {"chief0", "ps0", "worker0", "worker1"}
    cluster = configs["ps0"]["cluster"]
    assert cluster == {"chief": ["198.18.0.1:20000"], "ps": ["198.18.0.1:20001"],
                       "worker": ["198.18.0.2:20000", "198.18.0.3:20000"]}
    assert all(c["cluster"] == cluster for c in configs.values())
    assert configs["worker1"]["task"] == {"type": "worker", "index": 1}
    assert [m.name for m in members(configs["ps0"])] == ["chief0", "ps0", "worker0",
                                                         "worker1"]


def test_links_and_addresses_are_validated() -> None:
    assert parse_rate("1gbit") == 1e9 and parse_rate("10Gbit/s") == 1e10
    assert parse_rate("250mbit") == 2.5e8
    with pytest.raises(NetnsError, match="Received: 'fast'"):
        parse_rate("fast")
    with pytest.raises(NetnsError, match="rate_bps"):
        LinkShape(rate_bps=0)
    assert LinkShape(1e9, 0.0005).label() == "1 Gbit/s, 0.5 ms"
    assert LinkShape().label() == "unshaped" and not LinkShape().shaped
    with pytest.raises(NetnsError, match="198.18.0.0/15"):
        Network(2, subnet="10.0.0.0/24")
    with pytest.raises(NetnsError, match="too few"):
        Network(3, subnet="198.18.0.0/31")
    assert ipaddress.ip_network("198.19.255.0/24").subnet_of(BENCHMARK_RANGE)


# -- the chief's outcome from gathered reports (no TensorFlow) ------------------------
PEERS = [Member("worker1", "198.18.0.2:20000")]


def report(task: str, status: str = "ok", peak: float | None = 1e11,
           reason: str | None = None) -> HostReport:
    return HostReport(TaskFigures(task=task, role="worker", pid=1, local_replicas=1,
                                  throughput=500.0, cores=[0]),
                      status, reason, peak_flops_per_s=peak)


def payload(**over: Any) -> TaskReport:
    base: dict[str, Any] = {"figures": fake_figures(throughputs=(1000.0, 1000.0)),
                            "hosts": [report("worker0"), report("worker1", peak=3e11)]}
    base.update(over)
    return TaskReport("ok", **base)


def never_probed(peers: list[Member]) -> list[Member]:
    raise AssertionError("an ok run must not probe its peers")


def test_every_hosts_figures_and_mfu_over_the_sum_of_their_peaks() -> None:
    spec = tiny_spec(strategy="multi_worker_mirrored", devices=2)
    out = chief_outcome(spec, "worker0", payload(), PEERS, never_probed)
    assert out.status == "ok" and out.figures is not None
    assert [t.task for t in out.figures.tasks or []] == ["worker0", "worker1"]
    assert out.figures.peak_flops_per_s == pytest.approx(4e11)
    assert out.figures.mfu == pytest.approx(out.figures.achieved_flops_per_s / 4e11)
    assert out.peaks == {"worker0": 1e11, "worker1": 3e11}
    assert "gathered from its host" in (out.figures.combination or "")


def test_peak_faults_and_theoretical_peaks_across_hosts() -> None:
    spec = tiny_spec(strategy="multi_worker_mirrored", devices=2)
    hosts = [report("worker0"), report("worker1", peak=3e11)]
    for r, theo in zip(hosts, (2e11, 5e11), strict=True):
        r.theoretical_peak_flops_per_s = theo
    out = chief_outcome(spec, "worker0", payload(hosts=hosts), PEERS, never_probed)
    f = out.figures
    assert f is not None and f.theoretical_peak_flops_per_s == pytest.approx(7e11)
    assert f.mfu_theoretical == pytest.approx(f.achieved_flops_per_s / 7e11)
    hosts[1].peak_fault = "no MFU: the peak read low"
    out = chief_outcome(spec, "worker0", payload(hosts=hosts, reason="no MFU: own share"),
                        PEERS, never_probed)
    assert out.status == "ok" and out.figures is not None and out.figures.mfu is None
    assert out.figures.peak_fault == "worker1: no MFU: the peak read low"
    assert "worker1: no MFU" in (out.reason or "")
    fast = payload(hosts=[report("worker0", peak=1.0), report("worker1", peak=1.0)])
    out = chief_outcome(spec, "worker0", fast, PEERS, never_probed)
    assert out.figures is not None and out.figures.mfu is None
    assert "above the sum of its hosts' achievable peaks" in (out.figures.peak_fault or "")


def test_a_host_without_a_peak_leaves_mfu_empty() -> None:
    spec = tiny_spec(strategy="multi_worker_mirrored", devices=2)
    p = payload(hosts=[report("worker0"), report("worker1", peak=None)])
    out = chief_outcome(spec, "worker0", p, PEERS, never_probed)
    assert out.figures is not None and out.figures.mfu is None


def test_a_failed_host_fails_the_run_by_name() -> None:
    spec = tiny_spec(strategy="multi_worker_mirrored", devices=2)
    p = payload(hosts=[report("worker0"), report("worker1", "failed", reason="boom")])
    out = chief_outcome(spec, "worker0", p, PEERS, never_probed)
    assert out.status == "failed" and "worker1 failed" in (out.reason or "")
    assert "boom" in (out.reason or "") and out.figures is None


def test_a_host_that_never_reported_fails_the_run_by_name() -> None:
    spec = tiny_spec(strategy="multi_worker_mirrored", devices=2)
    out = chief_outcome(spec, "worker0", payload(hosts=[report("worker0")]), PEERS,
                        never_probed)
    assert out.status == "failed" and "worker1 never reported" in (out.reason or "")
    gone = chief_outcome(spec, "worker0", payload(hosts=None, hosts_error="Timeout"), PEERS,
                         lambda peers: peers)
    assert gone.status == "failed" and "Timeout" in (gone.reason or "")
    assert "not reachable: worker1 (198.18.0.2:20000)" in (gone.reason or "")


def test_the_chiefs_own_failure_names_the_unreachable_peers() -> None:
    spec = tiny_spec(strategy="multi_worker_mirrored", devices=2)
    for status in ("failed", "timeout"):
        p = TaskReport(status, "UnavailableError: socket closed")
        out = chief_outcome(spec, "worker0", p, PEERS, lambda peers: peers)
        assert out.status == status
        assert (out.reason or "").startswith("host(s) not reachable: worker1 (198.18.0.2")
        assert "socket closed" in (out.reason or "")
        alone = chief_outcome(spec, "worker0", p, PEERS, lambda peers: [])
        assert alone.reason == "UnavailableError: socket closed"


def test_host_reports_travel_as_json_and_a_newer_schema_is_refused_by_name() -> None:
    import json

    from bench.errors import SchemaError

    sent = report("worker1", "failed", reason="boom")
    assert HostReport.from_dict(json.loads(json.dumps(sent.to_dict()))) == sent
    future = sent.to_dict()
    future["task_figures"]["field_of_the_future"] = 1
    with pytest.raises(SchemaError, match="TaskFigures has no field.s. field_of_the_future"):
        HostReport.from_dict(future)
    with pytest.raises(SchemaError, match="status=.finished."):
        HostReport.from_dict({**sent.to_dict(), "status": "finished"})


def test_a_server_ends_once_the_coordinators_port_closed(monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    answers = iter([False, True, True, False, False, False])
    monkeypatch.setattr(worker, "reachable", lambda member, timeout=0: next(answers))
    watch = worker.PortWatch(Member("chief0", "198.18.0.1:20000"), interval_s=0.0, misses=3)
    # Not up yet, then up, then gone for three probes in a row: only then "left".
    assert [watch.left() for _ in range(6)] == [False, False, False, False, False, True]


# -- real namespaces ------------------------------------------------------------------
def on_namespaces(test: F) -> F:
    """Mark a test that makes namespaces; skip it, with the reason, where it cannot."""
    test = pytest.mark.skipif(NETNS_REASON is not None, reason=f"{NETNS_REASON}")(test)
    return pytest.mark.netns(test)


@pytest.fixture
def no_leftovers(tmp_path: Path) -> Iterator[Path]:
    """The test's directory; afterwards no namespace made by this process and no
    process writing below the directory (in any namespace)."""
    yield tmp_path
    mine = [n for n in ours() if n.startswith(f"sb{os.getpid()}n")]
    assert mine == [], "a namespace was left behind"
    assert writers_under(tmp_path) == [], "a process was left behind"


@on_namespaces
def test_hosts_reach_each_other_on_shaped_links_and_everything_is_removed(
        no_leftovers: Path) -> None:
    log = no_leftovers / "sleeper.out"
    with Network(2, LinkShape(rate_bps=1e9), cores=[(0,), (0,)]) as net:
        a, b = net.hosts
        assert [a.address, b.address] == ["198.18.0.1", "198.18.0.2"]
        assert all(ipaddress.ip_address(h.address) in BENCHMARK_RANGE for h in net.hosts)
        qdisc = subprocess.run(["tc", "-n", a.netns, "qdisc", "show", "dev", "eth0"],
                               capture_output=True, text=True, timeout=10).stdout
        assert "tbf" in qdisc and "rate 1Gbit" in qdisc
        code = (f"import socket; s = socket.create_connection(('{b.address}', 9), 3); "
                f"print('connected')")
        # Nothing listens on b's port 9: a refusal proves the packet crossed the link.
        r = subprocess.run(["ip", "netns", "exec", a.netns, sys.executable, "-c", code],
                           capture_output=True, text=True, timeout=30)
        assert "ConnectionRefusedError" in r.stderr, r.stderr[-500:]
        with open(log, "wb") as fh:  # a process the test does not end itself
            net.popen(b, [sys.executable, "-c", "import time; time.sleep(600)"], stdout=fh)
        assert any(net.live_pids().values())
        names = [h.netns for h in net.hosts]
    assert not set(names) & set(ours())


@on_namespaces
def test_a_delay_needs_netem_and_says_so_where_it_is_missing(no_leftovers: Path) -> None:
    try:
        with Network(2, LinkShape(rate_bps=1e9, delay_s=0.001)) as net:
            qdisc = subprocess.run(["tc", "-n", net.hosts[0].netns, "qdisc", "show", "dev",
                                    "eth0"], capture_output=True, text=True, timeout=10).stdout
            assert "netem" in qdisc and "delay 1ms" in qdisc
    except NetnsError as exc:
        assert "netem" in str(exc) and "rate only" in str(exc)


@on_namespaces
def test_a_failure_while_creating_removes_what_was_made(no_leftovers: Path,
                                                        monkeypatch: pytest.MonkeyPatch
                                                        ) -> None:
    import bench.launch.netns as netns

    real = netns._run

    def failing(cmd: Any, timeout: float = netns.CMD_TIMEOUT_S) -> Any:
        if "addr" in cmd and "add" in cmd and cmd[-1] == "eth0" and "198.18.0.2/24" in cmd:
            raise NetnsError("injected")
        return real(cmd, timeout)

    monkeypatch.setattr(netns, "_run", failing)
    with pytest.raises(NetnsError, match="injected"), Network(2):
        pass


@on_namespaces
def test_namespaces_of_a_killed_owner_are_removed_by_the_next_network(no_leftovers: Path
                                                                      ) -> None:
    code = ("import time\nfrom bench.launch.netns import Network\nwith Network(2) as n:\n"
            "    print(' '.join(h.netns for h in n.hosts), flush=True)\n    time.sleep(600)\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                            cwd=ROOT)
    try:
        assert proc.stdout is not None
        names = proc.stdout.readline().split()
    finally:
        proc.kill()  # SIGKILL: its finally never runs
        proc.wait(timeout=30)
    assert len(names) == 2 and set(names) <= set(ours())
    with Network(1):
        pass
    assert not set(names) & set(ours())


def demo(tmp_path: Path, strategy: str, devices: int, **kw: Any) -> Any:
    timeout = kw.pop("timeout_s", 120.0)
    spec = tiny_spec(strategy=strategy, devices=devices, timeout_s=timeout, **FAST)
    return run_demo(spec, tmp_path / "sweep", **kw)


@on_namespaces
@pytest.mark.slow
def test_two_hosts_multi_worker_mirrored(no_leftovers: Path) -> None:
    out = demo(no_leftovers, "multi_worker_mirrored", 2, shape=LinkShape(rate_bps=1e9))
    r = out.result
    assert r is not None and r.status == "ok", r and r.reason
    assert out.clean and [h.returncode for h in out.hosts] == [0, 0]
    f = r.figures
    assert f is not None and f.tasks is not None and f.learned
    a, b = f.tasks
    assert (a.task, b.task) == ("worker0", "worker1")
    assert a.pid != b.pid and a.weights_checksum == pytest.approx(b.weights_checksum)
    assert a.throughput and b.throughput and a.host_peak_rss_bytes and b.host_peak_rss_bytes
    hosts = {h["task"]: h for h in r.launcher["hosts"]}
    assert hosts["worker1"]["address"].startswith("198.18.0.2:")
    # MFU over the sum of both hosts' own peaks.
    assert f.peak_flops_per_s == pytest.approx(sum(h["peak_flops_per_s"]
                                                   for h in hosts.values()))
    if len(os.sched_getaffinity(0)) >= 2:
        assert a.cores and b.cores and not set(a.cores) & set(b.cores)
        assert a.threads.get("intra_op") == len(a.cores)


@on_namespaces
@pytest.mark.slow
def test_three_hosts_parameter_server(no_leftovers: Path) -> None:
    out = demo(no_leftovers, "parameter_server", 2)
    r = out.result
    assert r is not None and r.status == "ok", r and r.reason
    assert out.clean  # the servers ended by themselves once the coordinator left
    assert {h.host for h in out.hosts} == {"host0", "host1", "host2"}
    f = r.figures
    assert f is not None and f.tasks is not None and f.learned
    tasks = {t.task: t for t in f.tasks}
    assert set(tasks) == {"chief0", "ps0", "worker0", "worker1"}
    # The servers' figures came through the coordinator: their own pids and memory.
    assert len({t.pid for t in tasks.values()}) == 4
    assert all(t.host_peak_rss_bytes for t in tasks.values())
    assert f.peak_flops_per_s and f.mfu is not None


@on_namespaces
@pytest.mark.slow
def test_a_host_killed_mid_run_fails_the_run_naming_it(no_leftovers: Path) -> None:
    out = demo(no_leftovers, "multi_worker_mirrored", 2, fault="worker1:kill_after_warmup",
               timeout_s=90.0)
    r = out.result
    assert r is not None and r.status == "failed"
    assert "worker1 (198.18.0.2" in (r.reason or "")
    assert out.clean  # every other host ended by itself within PEER_END_S
    assert all(h.ended_after_chief_s is not None and h.ended_after_chief_s <= PEER_END_S
               for h in out.hosts)


@on_namespaces
@pytest.mark.slow
def test_a_host_that_never_starts_ends_the_others_at_the_deadline(no_leftovers: Path
                                                                   ) -> None:
    t0 = time.monotonic()
    out = demo(no_leftovers, "multi_worker_mirrored", 2, absent=["worker1"], timeout_s=10.0)
    r = out.result
    assert r is not None and r.status == "timeout"
    assert "worker1 (198.18.0.2" in (r.reason or "") and "10 s timeout" in (r.reason or "")
    assert out.clean and time.monotonic() - t0 < 10.0 + 60.0
    assert [h.started for h in out.hosts] == [True, False]
