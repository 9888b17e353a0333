"""A Slurm of stratbench's own on emulated hosts: Debian's slurmctld, slurmd and munged.

``PrivateSlurm(nodes=n)`` makes ``n + 1`` hosts on one switch (``bench.launch.netns``:
network namespaces with addresses in 198.18.0.0/15, optionally a CPU quota each and
shaped links): host 0 is the login and controller host (``munged``, ``slurmctld``,
and every client command: ``srun``, ``sbatch``, ``scancel``), each other host a
compute node running its own ``slurmd -N node<i>`` (Debian's build allows several
slurmd on one machine). Everything lives in a directory of its own: the munge key
and socket, ``slurm.conf`` (``SLURM_CONF`` points the clients at it), the state,
spool and logs. Nothing of the machine's own Slurm or munge, if any, is touched.

The configuration is the plainest a site runs: ``proctrack/linuxproc``,
``task/none``, ``select/cons_tres`` by CPU, no accounting, oversubscription allowed
(a 2-core machine runs a chief, a parameter server and two workers). A node's jobs
run inside its host's CPU quota: slurmd, the step daemons it forks and their tasks
all stay in the host's group.

Cleanup is the network's: leaving the block SIGKILLs every process still in any of
the namespaces (daemons, step daemons, tasks, whoever started them) and deletes the
namespaces and groups, also after an exception or Ctrl-C. Every wait has a timeout.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.errors import BenchError
from bench.launch.cgroups import CpuBudget
from bench.launch.netns import Host, LinkShape, Network, unavailable_reason

TOOLS = ("munged", "slurmctld", "slurmd", "srun", "sbatch", "scontrol", "scancel", "sinfo")
READY_TIMEOUT_S = 30.0
CLIENT_TIMEOUT_S = 30.0
POLL_S = 0.2
# Seconds between SIGTERM and SIGKILL when a step ends (scancel, a time limit): the
# time a worker has to write its result.
KILL_WAIT_S = 10


# ``ip netns exec`` gives its command a fresh /sys without the cgroup mounts, and
# slurmd (22.05) will not start without a cgroup hierarchy to detect, even with
# proctrack/linuxproc and task/none; a v1 freezer hierarchy mounted in that command's
# own mount namespace (gone with it), with the systemd-named one it looks for, is
# enough, and slurmd creates no group in it.
CGROUP_VIEW = ["sh", "-c", "mount -t tmpfs cgroup /sys/fs/cgroup && mkdir -p "
               "/sys/fs/cgroup/freezer /sys/fs/cgroup/systemd && mount -t cgroup -o "
               "freezer freezer /sys/fs/cgroup/freezer && mount -t cgroup -o none,name=systemd "
               "systemd /sys/fs/cgroup/systemd; exec \"$@\"", "sh"]


class SlurmError(BenchError):
    """The private Slurm could not start or answer (the message says which part)."""


def tool(name: str) -> str | None:
    """The path of a Slurm or munge program: on PATH, or in the sbin directories that
    Debian installs the daemons into (not on every user's PATH)."""
    return shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin")


def unavailable() -> str | None:
    """Why a private Slurm cannot run here (None: it can)."""
    missing = [t for t in TOOLS if tool(t) is None]
    if missing:
        return (f"Slurm and munge are not installed (missing: {', '.join(missing)}); on "
                f"Debian: apt-get install slurm-wlm munge")
    return unavailable_reason()


def config_text(work: Path, sockets: Path, hosts: Sequence[Host], cpus: int) -> str:
    """``slurm.conf`` for a controller on ``hosts[0]`` and a node on each other host;
    ``sockets``: a short directory for the Unix sockets (munge's, the step daemons')."""
    controller, nodes = hosts[0], hosts[1:]
    lines = [
        "ClusterName=stratbench",
        f"SlurmctldHost={socket.gethostname()}({controller.address})",
        "AuthType=auth/munge",
        f"AuthInfo=socket={sockets / 'munge.socket'}",
        "CredType=cred/munge",
        "SlurmUser=root",
        "SlurmdUser=root",
        f"StateSaveLocation={work / 'state'}",
        f"SlurmdSpoolDir={sockets / 'spool'}/%n",
        f"SlurmctldPidFile={work / 'run'}/slurmctld.pid",
        f"SlurmdPidFile={work / 'run'}/slurmd.%n.pid",
        f"SlurmctldLogFile={work / 'log'}/slurmctld.log",
        f"SlurmdLogFile={work / 'log'}/slurmd.%n.log",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_CPU",
        "SchedulerType=sched/builtin",
        "AccountingStorageType=accounting_storage/none",
        "JobAcctGatherType=jobacct_gather/none",
        "JobCompType=jobcomp/none",
        "MpiDefault=none",
        "ReturnToService=2",
        "InactiveLimit=0",
        f"KillWait={KILL_WAIT_S}",
        "MinJobAge=600",
        "SlurmctldTimeout=30",
        "SlurmdTimeout=30",
        # The nodes' CPU count is Slurm's bookkeeping only (what a node computes is its
        # host's quota): taken from here, not from the machine.
        "SlurmdParameters=config_overrides",
    ]
    lines += [f"NodeName={node_name(i)} NodeAddr={h.address} NodeHostname={node_name(i)} "
              f"CPUs={cpus} State=UNKNOWN" for i, h in enumerate(nodes, start=1)]
    lines.append("PartitionName=main Nodes=ALL Default=YES MaxTime=INFINITE State=UP "
                 "OverSubscribe=FORCE")
    return "\n".join(lines) + "\n"


def _tool(name: str) -> str:
    found = tool(name)
    if found is None:
        raise SlurmError(f"{name} is not installed (apt-get install slurm-wlm munge)")
    return found


def node_name(i: int) -> str:
    return f"node{i}"


@dataclass
class PrivateSlurm:
    """``nodes`` compute nodes and a login host, each an emulated host; a context
    manager. ``budget``: each host's CPU quota (None: none); ``shape``: the links."""

    nodes: int
    work: Path
    # Enough slots for a parameter-server job's four tasks and a second job beside it.
    cpus_per_node: int = 16
    budget: CpuBudget | None = None
    shape: LinkShape = field(default_factory=LinkShape)
    network: Network | None = field(default=None, init=False, repr=False)
    sockets: Path | None = field(default=None, init=False, repr=False)

    @property
    def conf(self) -> Path:
        return self.work / "slurm.conf"

    @property
    def node_names(self) -> list[str]:
        return [node_name(i) for i in range(1, self.nodes + 1)]

    def env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        """The environment of a client command (and so of the jobs it starts)."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
        return {**env, "SLURM_CONF": str(self.conf), **(extra or {})}

    # -- lifecycle ---------------------------------------------------------------
    def __enter__(self) -> PrivateSlurm:
        why = unavailable()
        if why:
            raise SlurmError(f"a private Slurm cannot run here: {why}")
        self.network = Network(self.nodes + 1, shape=self.shape, cpu=self.budget)
        self.network.__enter__()
        try:
            self._start()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        if self.network is None:
            return
        try:
            with contextlib.suppress(SlurmError, OSError, subprocess.SubprocessError):
                self.run(["scancel", "--full", "--user=root"], timeout=5.0)
            self.network.__exit__(*exc)
        finally:
            if self.sockets is not None:
                shutil.rmtree(self.sockets, ignore_errors=True)

    def _start(self) -> None:
        assert self.network is not None
        work = self.work
        # Unix socket paths hold at most 107 bytes: the step daemons' sockets live in the
        # spool directory, so it and munge's socket go in a short directory of their own.
        self.sockets = Path(tempfile.mkdtemp(prefix="sbslurm-"))
        sockets = self.sockets
        for sub in ("state", "run", "log"):
            (work / sub).mkdir(parents=True, exist_ok=True)
        for name in self.node_names:
            (sockets / "spool" / name).mkdir(parents=True)
        key = work / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o600)
        self.conf.write_text(config_text(work, sockets, self.network.hosts,
                                         self.cpus_per_node), encoding="utf-8")
        login = self.network.hosts[0]
        self._daemon(login, [_tool("munged"), "-F", "-f", f"--socket={sockets / 'munge.socket'}",
                             f"--key-file={key}", f"--pid-file={work / 'run/munged.pid'}",
                             f"--log-file={work / 'log/munged.log'}",
                             f"--seed-file={work / 'run/munged.seed'}"], "munged")
        self._wait(lambda: (sockets / "munge.socket").exists(), "munged's socket")
        self._daemon(login, [_tool("slurmctld"), "-D", "-f", str(self.conf)], "slurmctld")
        for name, host in zip(self.node_names, self.network.hosts[1:], strict=True):
            self._daemon(host, [*CGROUP_VIEW, _tool("slurmd"), "-D", "-f", str(self.conf),
                                "-N", name], f"slurmd.{name}")
        self._wait(self._all_idle, f"{self.nodes} idle node(s) in sinfo")

    def _daemon(self, host: Host, cmd: list[str], label: str) -> None:
        assert self.network is not None
        log = open(self.work / "log" / f"{label}.out", "ab")  # noqa: SIM115 (the daemon's)
        with log:
            self.network.popen(host, cmd, stdout=log, stderr=subprocess.STDOUT,
                               stdin=subprocess.DEVNULL, env=self.env())

    def _all_idle(self) -> bool:
        try:
            out = self.run(["sinfo", "-h", "-N", "-o", "%N %t"], timeout=5.0).stdout
        except SlurmError:
            return False
        states = dict(line.split() for line in out.splitlines() if line.strip())
        return all(states.get(n) == "idle" for n in self.node_names)

    def _wait(self, ready: Any, what: str, timeout_s: float = READY_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout_s
        while not ready():
            if time.monotonic() > deadline:
                raise SlurmError(f"{what} not ready within {timeout_s:g} s; logs: "
                                 f"{self.work / 'log'}")
            time.sleep(POLL_S)

    # -- use ---------------------------------------------------------------------
    def popen(self, cmd: Sequence[str], env: dict[str, str] | None = None,
              **kwargs: Any) -> subprocess.Popen[Any]:
        """Start a client command (``srun``, ``sbatch``...) on the login host."""
        assert self.network is not None
        return self.network.popen(self.network.hosts[0], cmd, env=self.env(env), **kwargs)

    def run(self, cmd: Sequence[str], timeout: float = CLIENT_TIMEOUT_S,
            env: dict[str, str] | None = None, check: bool = True
            ) -> subprocess.CompletedProcess[str]:
        """Run a client command on the login host and wait for it (output captured);
        ``check``: a non-zero exit raises SlurmError."""
        proc = self.popen(cmd, env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          stdin=subprocess.DEVNULL, text=True)
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, 9)
            proc.communicate()
            raise SlurmError(f"{' '.join(cmd)} took over {timeout:g} s") from exc
        if check and proc.returncode:
            raise SlurmError(f"{' '.join(cmd)} exited {proc.returncode}: {err.strip()[-500:]}")
        return subprocess.CompletedProcess(list(cmd), proc.returncode, out, err)

    def job(self, job_id: int) -> dict[str, str]:
        """``scontrol show job``'s fields of ``job_id`` (JobState, ExitCode, ...)."""
        out = self.run(["scontrol", "show", "job", "-o", str(job_id)]).stdout
        return dict(part.split("=", 1) for part in out.split() if "=" in part)

    def wait_job(self, job_id: int, timeout_s: float) -> dict[str, str]:
        """The job's fields once it has ended (SlurmError past ``timeout_s``)."""
        ended = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY")
        deadline = time.monotonic() + timeout_s
        while True:
            fields = self.job(job_id)
            if fields.get("JobState") in ended:
                return fields
            if time.monotonic() > deadline:
                raise SlurmError(f"job {job_id} still {fields.get('JobState')} after "
                                 f"{timeout_s:g} s")
            time.sleep(0.5)
