"""Hosts on one machine: Linux network namespaces joined by a switch, links shaped by tc.

A ``Network`` makes ``n`` hosts, each a network namespace with one interface
(``eth0``) and its own address, plus a switch namespace holding a Linux bridge
that joins them. Each host's interface is the end of a veth pair whose other
end is a bridge port, so every host reaches every other over one emulated link,
and the machine's own network namespace is never touched (nothing to clean up
there, nothing of the machine's exposed to the hosts). Links can be shaped on
each host's egress: ``tbf`` for a rate (a NIC of that speed), ``netem`` for a
delay (where the kernel has it; some, e.g. minimal VM kernels, do not).

Addresses come only from 198.18.0.0/15, the range RFC 2544 sets aside for
benchmarking (never routed on the Internet): the hosts' traffic cannot be
mistaken for, or leak to, a real network.

Cleanup is the point of this module: ``Network`` is a context manager whose exit
SIGKILLs every process still inside its namespaces (``ip netns pids``, whoever
started them) and deletes the namespaces, also after an exception, Ctrl-C or a
timeout; namespaces left by a process that died without its ``finally``
(SIGKILL) are removed by the next ``Network`` (their names carry the dead PID).
Every command has a timeout. Needs root, ``ip`` and ``tc`` (iproute2).

A ``Network`` with a ``cpu`` budget also gives every host a cgroup with that CPU
quota (``bench.launch.cgroups``): each process ``popen`` starts joins its host's
group before it runs, learns its budget from ``STRATBENCH_CPU_BUDGET``, and the
groups are removed with the namespaces (their processes killed first).
"""

from __future__ import annotations

import contextlib
import ipaddress
import itertools
import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from bench.errors import BenchError
from bench.hardware import CPU_BUDGET_VAR
from bench.launch.cgroups import CgroupError, CpuBudget, CpuGroups, alive, kill_all
from bench.launch.interrupts import interrupts_deferred

BENCHMARK_RANGE = ipaddress.IPv4Network("198.18.0.0/15")  # RFC 2544
DEFAULT_SUBNET = "198.18.0.0/24"
CMD_TIMEOUT_S = 15.0
KILL_WAIT_S = 10.0
# Namespace names: "sb<pid>n<k>-<label>", so a leftover names the process that made it.
NAME_PREFIX = "sb"
_NAME = re.compile(rf"^{NAME_PREFIX}(\d+)n\d+-")
_counter = itertools.count()


class NetnsError(BenchError):
    """A namespace, link or shaping command failed (the message says which)."""


@dataclass(frozen=True)
class LinkShape:
    """How every host's link is shaped: ``rate_bps`` bits/s (None: as fast as the
    veth goes) and ``delay_s`` one-way delay added on each host's egress."""

    rate_bps: float | None = None
    delay_s: float = 0.0

    def __post_init__(self) -> None:
        if self.rate_bps is not None and not self.rate_bps > 0:
            raise NetnsError(f"LinkShape.rate_bps must be positive or None. "
                             f"Received: rate_bps={self.rate_bps!r}")
        if not self.delay_s >= 0:
            raise NetnsError(f"LinkShape.delay_s must be >= 0. Received: delay_s={self.delay_s!r}")

    @property
    def shaped(self) -> bool:
        return self.rate_bps is not None or self.delay_s > 0

    def label(self) -> str:
        """E.g. ``"1 Gbit/s, 0.5 ms"`` or ``"unshaped"``."""
        parts = []
        if self.rate_bps is not None:
            parts.append(rate_text(self.rate_bps))
        if self.delay_s:
            parts.append(f"{self.delay_s * 1e3:g} ms")
        return ", ".join(parts) or "unshaped"

    def to_dict(self) -> dict[str, Any]:
        return {"rate_bps": self.rate_bps, "delay_s": self.delay_s, "label": self.label()}


def rate_text(bps: float) -> str:
    """``1e9`` -> ``"1 Gbit/s"``."""
    for scale, unit in ((1e9, "Gbit/s"), (1e6, "Mbit/s"), (1e3, "kbit/s")):
        if bps >= scale:
            return f"{bps / scale:g} {unit}"
    return f"{bps:g} bit/s"


_RATE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmg]?)(?:bit|b)?(?:/s|ps)?\s*$", re.IGNORECASE)


def parse_rate(text: str) -> float:
    """``"1gbit"``, ``"10Gbit/s"``, ``"100mbit"`` -> bits per second."""
    m = _RATE.match(text)
    if not m:
        raise NetnsError(f"a link rate looks like 1gbit, 10Gbit/s or 100mbit. "
                         f"Received: {text!r}")
    return float(m.group(1)) * {"": 1.0, "k": 1e3, "m": 1e6, "g": 1e9}[m.group(2).lower()]


@dataclass(frozen=True)
class Host:
    """One emulated host: its namespace, address on the switch, and CPU cores."""

    label: str  # e.g. "host0"
    netns: str
    address: str
    cores: tuple[int, ...] = ()
    cpus: float | None = None  # its CPU budget (None: no quota)


def unavailable_reason() -> str | None:
    """Why namespaces cannot be made here (None if they can): not Linux, not root,
    no ``ip``/``tc``, or the kernel refuses (e.g. inside a restricted container)."""
    if not sys.platform.startswith("linux"):
        return f"network namespaces need Linux (this is {sys.platform})"
    if os.geteuid() != 0:
        return "creating network namespaces needs root"
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            return f"the {tool!r} command (iproute2) is not installed"
    probe = f"{NAME_PREFIX}{os.getpid()}n{next(_counter)}-probe"
    try:
        _run(["ip", "netns", "add", probe])
    except NetnsError as exc:
        return f"cannot create a network namespace: {exc}"
    with contextlib.suppress(NetnsError):
        _run(["ip", "netns", "del", probe])
    return None


def netem_available() -> bool:
    """Whether this kernel offers the ``netem`` qdisc (link delays); probed in a
    throw-away namespace, so the machine's own interfaces are never touched."""
    probe = f"{NAME_PREFIX}{os.getpid()}n{next(_counter)}-netem"
    try:
        _run(["ip", "netns", "add", probe])
    except NetnsError:
        return False
    try:
        _run(["tc", "-n", probe, "qdisc", "add", "dev", "lo", "root", "netem", "delay",
              "1ms"])
        return True
    except NetnsError:
        return False
    finally:
        with contextlib.suppress(NetnsError):
            _run(["ip", "netns", "del", probe])


def applicable(shape: LinkShape) -> tuple[LinkShape, str | None]:
    """``shape`` as this kernel can apply it, and a note when a part was dropped: a
    delay needs netem (absent from some VM kernels); the rate alone still applies."""
    if shape.delay_s > 0 and not netem_available():
        return (LinkShape(shape.rate_bps, 0.0),
                f"delay {shape.delay_s * 1e3:g} ms not applied: this kernel has no netem qdisc")
    return shape, None


def list_netns() -> list[str]:
    """Names of the machine's network namespaces (``ip netns list``)."""
    out = _run(["ip", "netns", "list"]).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def ours(names: Sequence[str] | None = None) -> list[str]:
    """Namespaces made by this module (any process), e.g. to check none is left."""
    return [n for n in (list_netns() if names is None else names) if _NAME.match(n)]


def remove_stale() -> list[str]:
    """Delete namespaces of this module whose creating process is dead; returns them."""
    removed = []
    for name in ours():
        m = _NAME.match(name)
        if m and not alive(int(m.group(1))):
            _destroy_netns(name)
            removed.append(name)
    return removed


def pids_in(netns: str) -> list[int]:
    """PIDs of processes whose network namespace is ``netns``."""
    try:
        out = _run(["ip", "netns", "pids", netns]).stdout
    except NetnsError:
        return []
    return [int(p) for p in out.split() if p.isdigit()]


@dataclass
class Network:
    """``hosts`` hosts on one switch, links shaped by ``shape``; a context manager.

    ``cores[i]`` are host i's CPU cores (processes started by ``popen`` are pinned
    to them with taskset; empty: all cores); ``cpu`` every host's CPU budget (a
    cgroup each; None: none). Addresses are ``subnet``'s first
    host addresses, in host order; ``subnet`` must lie inside 198.18.0.0/15.
    """

    hosts_wanted: int
    shape: LinkShape = field(default_factory=LinkShape)
    cores: Sequence[tuple[int, ...]] = ()
    subnet: str = DEFAULT_SUBNET
    cpu: CpuBudget | None = None
    hosts: list[Host] = field(default_factory=list, init=False)
    groups: CpuGroups | None = field(default=None, init=False, repr=False)
    _made: list[str] = field(default_factory=list, init=False, repr=False)
    _procs: list[subprocess.Popen[Any]] = field(default_factory=list, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.hosts_wanted < 1:
            raise NetnsError(f"Network needs at least one host. "
                             f"Received: hosts={self.hosts_wanted}")
        net = ipaddress.ip_network(self.subnet)
        if not (isinstance(net, ipaddress.IPv4Network) and net.subnet_of(BENCHMARK_RANGE)):
            raise NetnsError(f"Network.subnet must lie inside {BENCHMARK_RANGE} (the "
                             f"benchmarking range). Received: subnet={self.subnet!r}")
        if net.num_addresses - 2 < self.hosts_wanted:
            raise NetnsError(f"Network.subnet {self.subnet} has too few addresses for "
                             f"{self.hosts_wanted} hosts")
        if self.cores and len(self.cores) != self.hosts_wanted:
            raise NetnsError(f"Network.cores needs one core set per host "
                             f"({self.hosts_wanted}). Received: cores={list(self.cores)!r}")

    # -- lifecycle ---------------------------------------------------------------
    def __enter__(self) -> Network:
        remove_stale()
        try:
            if self.cpu is not None:
                self.groups = CpuGroups([f"host{i}" for i in range(self.hosts_wanted)],
                                        self.cpu)
                self.groups.create()
            self._create()
        except BaseException:
            self.destroy()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.destroy()

    def _create(self) -> None:
        net = ipaddress.ip_network(self.subnet)
        stem = f"{NAME_PREFIX}{os.getpid()}n{next(_counter)}"
        switch = f"{stem}-switch"
        self._add_netns(switch)
        _run(["ip", "-n", switch, "link", "add", "br0", "type", "bridge"])
        _run(["ip", "-n", switch, "link", "set", "br0", "up"])
        addresses = itertools.islice(net.hosts(), self.hosts_wanted)
        for i, addr in enumerate(addresses):
            name = f"{stem}-host{i}"
            self._add_netns(name)
            # Both ends are created inside namespaces: the machine's own namespace
            # never holds an interface of ours, even for a moment.
            _run(["ip", "-n", name, "link", "add", "eth0", "type", "veth", "peer", "name",
                  f"p{i}", "netns", switch])
            _run(["ip", "-n", switch, "link", "set", f"p{i}", "master", "br0"])
            _run(["ip", "-n", switch, "link", "set", f"p{i}", "up"])
            _run(["ip", "-n", name, "addr", "add", f"{addr}/{net.prefixlen}", "dev", "eth0"])
            _run(["ip", "-n", name, "link", "set", "eth0", "up"])
            _run(["ip", "-n", name, "link", "set", "lo", "up"])
            self._shape(name)
            cores = tuple(self.cores[i]) if self.cores else ()
            cpus = self.cpu.cpus if self.cpu is not None else None
            self.hosts.append(Host(f"host{i}", name, str(addr), cores, cpus))

    def _add_netns(self, name: str) -> None:
        _run(["ip", "netns", "add", name])
        self._made.append(name)

    def _shape(self, netns: str) -> None:
        shape = self.shape
        if not shape.shaped:
            return
        base = ["tc", "-n", netns, "qdisc", "add", "dev", "eth0", "root"]
        if shape.delay_s > 0:
            # netem adds the delay and, with a rate, serialises at that rate too.
            qdisc = ["netem", "delay", f"{shape.delay_s * 1e6:.0f}us", "limit", "100000"]
            if shape.rate_bps is not None:
                qdisc += ["rate", f"{shape.rate_bps:.0f}bit"]
            try:
                _run([*base, *qdisc])
            except NetnsError as exc:
                raise NetnsError(f"a link delay needs the netem qdisc, which this kernel "
                                 f"does not offer; shape by rate only (delay 0). {exc}") from exc
            return
        assert shape.rate_bps is not None
        rate_bytes = shape.rate_bps / 8
        # Burst: the bucket must hold a full GSO segment (64 KiB) and about 1 ms of
        # traffic, or tbf caps the rate below the one asked for. Queue: 50 ms worth,
        # so TCP sees a NIC-like queue rather than drops at every burst.
        burst = max(128 * 1024, int(rate_bytes * 1e-3))
        limit = max(4 * burst, int(rate_bytes * 0.05))
        _run([*base, "tbf", "rate", f"{shape.rate_bps:.0f}bit", "burst", str(burst),
              "limit", str(limit)])

    def destroy(self) -> None:
        """Kill every process in the namespaces and CPU groups, then delete them
        (idempotent)."""
        for proc in self._procs:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
        for proc in self._procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=KILL_WAIT_S)
        problems = []
        for name in reversed(self._made):
            try:
                _destroy_netns(name)
            except NetnsError as exc:
                problems.append(str(exc))
        self._made.clear()
        self._procs.clear()
        if self.groups is not None:
            try:
                self.groups.destroy()
            except CgroupError as exc:
                problems.append(str(exc))
        if problems:
            raise NetnsError("; ".join(problems))

    # -- use ---------------------------------------------------------------------
    def popen(self, host: Host, cmd: Sequence[str], **kwargs: Any) -> subprocess.Popen[Any]:
        """Start ``cmd`` inside ``host``'s namespace, pinned to its cores, within its
        CPU budget, in its own session (so that it and its children can be killed as
        a group)."""
        pin = ["taskset", "-c", ",".join(map(str, host.cores))] if host.cores else []
        join: list[str] = []
        if self.groups is not None and host.cpus is not None:
            join = self.groups.prefix(host.label)
            kwargs["env"] = {**(kwargs.get("env") or os.environ),
                             CPU_BUDGET_VAR: f"{host.cpus:g}"}
        with interrupts_deferred():  # on the list before a Ctrl-C can land
            proc = subprocess.Popen([*join, "ip", "netns", "exec", host.netns, *pin, *cmd],
                                    start_new_session=True, **kwargs)
            self._procs.append(proc)
        return proc

    def run(self, host: Host, cmd: Sequence[str],
            timeout: float = CMD_TIMEOUT_S) -> subprocess.CompletedProcess[str]:
        """Run a short command inside ``host``'s namespace (output captured)."""
        return _run(["ip", "netns", "exec", host.netns, *cmd], timeout=timeout)

    def live_pids(self) -> dict[str, list[int]]:
        """Processes still inside each namespace and CPU group of this network (empty
        lists: none)."""
        groups = self.groups.live_pids() if self.groups is not None else {}
        return {**{name: pids_in(name) for name in self._made},
                **{f"cgroup {label}": pids for label, pids in groups.items()}}


def _destroy_netns(name: str) -> None:
    """SIGKILL what runs in ``name`` (bounded wait), then delete it."""
    try:
        kill_all(lambda: pids_in(name), f"namespace {name}")
    except CgroupError as exc:
        raise NetnsError(str(exc)) from exc
    if name in list_netns():
        _run(["ip", "netns", "del", name])


def _run(cmd: Sequence[str], timeout: float = CMD_TIMEOUT_S) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(list(cmd), capture_output=True, text=True, check=True,
                              timeout=timeout, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as exc:
        raise NetnsError(f"`{' '.join(cmd)}` took over {timeout:g} s") from exc
    except subprocess.CalledProcessError as exc:
        raise NetnsError(f"`{' '.join(cmd)}` failed: {exc.stderr.strip()[-300:]}") from exc
    except OSError as exc:
        raise NetnsError(f"`{' '.join(cmd)}` could not start: {exc}") from exc
