"""The cluster of a Slurm job step, from Slurm's own variables (``bench worker``).

Every task of ``srun ... stratbench worker`` reads the same step description
from its environment and computes the same ``TF_CONFIG``, so no task talks to
another before TensorFlow does:

- the step's nodes (``SLURM_STEP_NODELIST``, a host list such as ``n[1-3,7],m5``)
  and how many tasks each holds (``SLURM_STEP_TASKS_PER_NODE``, ``3(x2),2,1``);
- this task's node (``SLURMD_NODENAME`` found in that list, else
  ``SLURM_NODEID``) and its rank on the node (``SLURM_LOCALID``).

The cluster's tasks are ordered by node, then by local rank, whatever Slurm's
distribution (block, cyclic, arbitrary): ``SLURM_PROCID`` is not used to place a
task, only checked against the step's size. Worker 0 (or the parameter-server
chief) is the first task of the first node.

Addresses are the nodes' ``NodeAddr`` as ``scontrol show node`` gives them (what
slurmctld itself uses to reach the node), else the node names. Ports cannot
collide within a step: a block per step (from the job and step ids, or
``STRATBENCH_SLURM_PORT_BASE``) plus the task's slot on its address, counting
the tasks of every node that shares that address before it (several ``slurmd``
on one machine). TensorFlow's ``SlurmClusterResolver`` is not used: it needs
``nvidia-smi`` on CPU nodes, overwrites the GPUs Slurm gave each task, and gives
every node's first task the same port.

The GPUs are the ones Slurm gave the task: ``CUDA_VISIBLE_DEVICES`` as Slurm's
gres plugin sets it is kept, and the harness maps it to UUIDs as everywhere else
(``bench.hardware.visible``). A missing or malformed variable is a ``UsageError``
naming it (the command exits 2), never a traceback.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bench.errors import UsageError

PORT_BASE_VAR = "STRATBENCH_SLURM_PORT_BASE"
# Ports below Linux's ephemeral range (32768-60999), so that no outgoing connection
# of the node holds one; a block of PORT_BLOCK ports per job step.
PORT_LOW, PORT_HIGH = 20000, 32000
PORT_BLOCK = 32
SCONTROL_TIMEOUT_S = 15.0


class SlurmEnvError(UsageError):
    """A Slurm variable is missing or malformed (the message names it and its value)."""


def expand_hostlist(text: str) -> list[str]:
    """Slurm's compressed host list expanded: ``n[1-3,7],m5`` is n1 n2 n3 n7 m5.

    Ranges keep the lower bound's zero padding (``n[08-10]``: n08 n09 n10); several
    bracket groups in one name multiply (``r[1-2]n[1-2]``: r1n1 r1n2 r2n1 r2n2).
    """
    names: list[str] = []
    for item in _split_top(text.strip()):
        if not item:
            raise ValueError(f"empty host name in host list {text!r}")
        names += _expand_one(item)
    return names


def _split_top(text: str) -> list[str]:
    """``text`` split at the commas outside brackets."""
    items, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise ValueError(f"unbalanced ']' in host list {text!r}")
        elif ch == "," and depth == 0:
            items.append(text[start:i])
            start = i + 1
    if depth:
        raise ValueError(f"unbalanced '[' in host list {text!r}")
    items.append(text[start:])
    return items


def _expand_one(item: str) -> list[str]:
    m = re.match(r"^([^\[]*)\[([^\]]*)\](.*)$", item)
    if not m:
        return [item]
    prefix, ranges, rest = m.groups()
    heads: list[str] = []
    for part in ranges.split(","):
        lo, sep, hi = part.partition("-")
        if not lo.isdigit() or (sep and not hi.isdigit()):
            raise ValueError(f"bad range {part!r} in host name {item!r}")
        width = len(lo)
        heads += [f"{prefix}{n:0{width}d}" for n in range(int(lo), int(hi or lo) + 1)]
    tails = _expand_one(rest) if rest else [""]
    return [h + t for h in heads for t in tails]


def parse_tasks_per_node(text: str) -> list[int]:
    """``SLURM_STEP_TASKS_PER_NODE`` expanded: ``3(x2),2,1`` is [3, 3, 2, 1]."""
    counts: list[int] = []
    for part in text.strip().split(","):
        m = re.fullmatch(r"(\d+)(?:\(x(\d+)\))?", part.strip())
        if not m:
            raise ValueError(f"bad entry {part!r} in tasks per node {text!r}")
        counts += [int(m.group(1))] * int(m.group(2) or 1)
    return counts


@dataclass(frozen=True)
class SlurmStep:
    """One task's view of its job step, as Slurm's variables describe it."""

    job_id: int
    step_id: int
    procid: int
    nodes: tuple[str, ...]
    tasks_per_node: tuple[int, ...]
    node_index: int
    local_id: int

    @property
    def ntasks(self) -> int:
        return sum(self.tasks_per_node)

    @property
    def rank(self) -> int:
        """This task's place in the cluster: by node, then by local rank."""
        return sum(self.tasks_per_node[:self.node_index]) + self.local_id

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> SlurmStep:
        """The step from ``env`` (default: this process's environment)."""
        env = os.environ if env is None else env
        nodes = _read(env, ("SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"),
                      expand_hostlist)
        counts = _read(env, ("SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"),
                       parse_tasks_per_node)
        if len(counts) != len(nodes):
            raise SlurmEnvError(
                f"SLURM_STEP_TASKS_PER_NODE lists {len(counts)} node(s) but "
                f"SLURM_STEP_NODELIST lists {len(nodes)}. Received: "
                f"SLURM_STEP_TASKS_PER_NODE={env.get('SLURM_STEP_TASKS_PER_NODE')!r}, "
                f"SLURM_STEP_NODELIST={env.get('SLURM_STEP_NODELIST')!r}")
        own = env.get("SLURMD_NODENAME")
        if own and own in nodes:
            node_index = nodes.index(own)
        else:
            node_index = _read(env, ("SLURM_NODEID",), _count)
            if node_index >= len(nodes):
                raise SlurmEnvError(f"SLURM_NODEID is past the step's {len(nodes)} node(s). "
                                    f"Received: SLURM_NODEID={node_index}")
        local_id = _read(env, ("SLURM_LOCALID",), _count)
        if local_id >= counts[node_index]:
            raise SlurmEnvError(
                f"SLURM_LOCALID is past the {counts[node_index]} task(s) of node "
                f"{nodes[node_index]}. Received: SLURM_LOCALID={local_id}")
        procid = _read(env, ("SLURM_PROCID",), _count)
        ntasks = _read(env, ("SLURM_STEP_NUM_TASKS", "SLURM_NTASKS"), _count)
        if ntasks != sum(counts) or procid >= ntasks:
            raise SlurmEnvError(
                f"the step's task counts disagree: SLURM_STEP_NUM_TASKS={ntasks}, "
                f"SLURM_STEP_TASKS_PER_NODE={counts} (sum {sum(counts)}), "
                f"SLURM_PROCID={procid}")
        return cls(job_id=_read(env, ("SLURM_JOB_ID", "SLURM_JOBID"), _count),
                   step_id=_read(env, ("SLURM_STEP_ID", "SLURM_STEPID"), _step),
                   procid=procid, nodes=tuple(nodes), tasks_per_node=tuple(counts),
                   node_index=node_index, local_id=local_id)

    def rank_nodes(self) -> list[str]:
        """The node of every task, in rank order."""
        return [n for n, count in zip(self.nodes, self.tasks_per_node, strict=True)
                for _ in range(count)]

    def port_base(self, env: Mapping[str, str] | None = None) -> int:
        """The first port of this step's block (``STRATBENCH_SLURM_PORT_BASE`` wins)."""
        env = os.environ if env is None else env
        given = env.get(PORT_BASE_VAR)
        if given is not None:
            try:
                base = int(given)
            except ValueError:
                base = -1
            if not 1024 <= base <= 65535 - self.ntasks:
                raise SlurmEnvError(f"{PORT_BASE_VAR} must be a port from 1024 to "
                                    f"{65535 - self.ntasks}. Received: {given!r}")
            return base
        block = PORT_BLOCK * -(-self.ntasks // PORT_BLOCK)
        slots = (PORT_HIGH - PORT_LOW) // block
        key = zlib.crc32(f"{self.job_id}.{self.step_id}".encode())
        return PORT_LOW + (key % slots) * block

    def endpoints(self, addresses: Mapping[str, str],
                  env: Mapping[str, str] | None = None) -> list[str]:
        """Every task's ``host:port``, in cluster order (node, then local rank).

        ``addresses``: each node's address (a node missing from it is reached by its
        name). Tasks on one address take consecutive ports from the step's base, so
        nodes that share an address (several slurmd on one machine) never collide.
        """
        base = self.port_base(env)
        used: dict[str, int] = {}
        out = []
        for node, count in zip(self.nodes, self.tasks_per_node, strict=True):
            addr = addresses.get(node, node)
            first = used.get(addr, 0)
            used[addr] = first + count
            host = f"[{addr}]" if ":" in addr else addr
            out += [f"{host}:{base + first + k}" for k in range(count)]
        return out


def _count(text: str) -> int:
    value = int(text)
    if value < 0:
        raise ValueError(text)
    return value


def _step(text: str) -> int:
    # A batch script's own step is "batch"/"extern"; a worker runs in an srun step.
    if not text.isdigit():
        raise ValueError(f"{text} is not an srun step: run the worker under srun")
    return int(text)


def _read(env: Mapping[str, str], names: Sequence[str], parse: Any) -> Any:
    """The first of ``names`` set in ``env``, parsed; SlurmEnvError naming it otherwise."""
    for name in names:
        if name in env:
            try:
                return parse(env[name])
            except ValueError as exc:
                raise SlurmEnvError(f"{name} is malformed ({exc}). "
                                    f"Received: {name}={env[name]!r}") from None
    raise SlurmEnvError(f"{names[0]} is not set: run the worker inside a Slurm job step "
                        f"(srun), or give it TF_CONFIG")


def scontrol(*args: str, timeout_s: float = SCONTROL_TIMEOUT_S) -> str | None:
    """What ``scontrol ARGS`` prints; None where scontrol is missing, fails or passes
    ``timeout_s`` (the callers then do without what it would have said)."""
    program = shutil.which("scontrol")
    if program is None:
        return None
    try:
        return subprocess.run([program, *args], capture_output=True, text=True,
                              timeout=timeout_s, check=True,
                              stdin=subprocess.DEVNULL).stdout
    except (OSError, subprocess.SubprocessError):
        return None


def node_addresses(nodes: Sequence[str]) -> dict[str, str]:
    """Each node's ``NodeAddr`` from ``scontrol show node`` (empty where scontrol
    cannot say: the nodes are then reached by name)."""
    out = scontrol("show", "node", "-o", ",".join(nodes)) if nodes else None
    return parse_node_addresses(out) if out is not None else {}


def parse_node_addresses(text: str) -> dict[str, str]:
    """``NodeName`` to ``NodeAddr`` from ``scontrol show node -o`` output."""
    found = {}
    for line in text.splitlines():
        name = re.search(r"(?:^|\s)NodeName=(\S+)", line)
        addr = re.search(r"(?:^|\s)NodeAddr=(\S+)", line)
        if name and addr:
            found[name.group(1)] = addr.group(1)
    return found


def tf_config(step: SlurmStep, strategy: str, ps_tasks: int,
              addresses: Mapping[str, str], env: Mapping[str, str] | None = None
              ) -> dict[str, Any]:
    """TF_CONFIG for this task: every task a MultiWorkerMirrored worker, or, for
    ParameterServer, the first the chief, the next ``ps_tasks`` the parameter
    servers and the rest the workers."""
    ends = step.endpoints(addresses, env)
    if strategy != "parameter_server":
        return {"cluster": {"worker": ends}, "task": {"type": "worker", "index": step.rank}}
    if step.ntasks < 2 + ps_tasks:
        raise SlurmEnvError(
            f"parameter_server needs a chief, {ps_tasks} parameter server(s) and at least "
            f"one worker: {2 + ps_tasks} tasks. Received: SLURM_STEP_NUM_TASKS={step.ntasks}")
    jobs = [("chief", 1), ("ps", ps_tasks), ("worker", step.ntasks - 1 - ps_tasks)]
    cluster: dict[str, list[str]] = {}
    start = 0
    own: dict[str, Any] = {}
    for job, count in jobs:
        cluster[job] = ends[start:start + count]
        if start <= step.rank < start + count:
            own = {"type": job, "index": step.rank - start}
        start += count
    return {"cluster": cluster, "task": own}


def job_end_epoch(job_id: int) -> float | None:
    """When the job's time limit ends, as epoch seconds (``scontrol show job``'s
    ``EndTime``); None where it has none or scontrol cannot say."""
    out = scontrol("show", "job", "-o", str(job_id))
    return parse_end_time(out) if out is not None else None


def parse_end_time(text: str) -> float | None:
    """``EndTime`` of ``scontrol show job -o`` output as epoch seconds (local time, as
    scontrol prints it); None for ``Unknown`` or no such field."""
    m = re.search(r"(?:^|\s)EndTime=(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)", text)
    if not m:
        return None
    return time.mktime(time.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S"))


def describe(step: SlurmStep) -> dict[str, Any]:
    """What the result records of the step (``launcher["slurm"]``)."""
    return {"job_id": step.job_id, "step_id": step.step_id, "nodes": list(step.nodes),
            "tasks_per_node": list(step.tasks_per_node)}
