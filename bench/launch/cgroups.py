"""CPU budgets for emulated hosts: one cgroup per host with a CFS quota.

A ``CpuBudget`` of 0.5 gives a host half a CPU's time: the kernel lets the processes
of its cgroup run for ``0.5 x period`` in every period and then holds them until
the next (CFS bandwidth control). Four hosts of 0.5 CPU are then four times the
compute of one, wherever the scheduler places them: strong scaling on one machine
is real scaling. The period is short (10 ms, against the kernel's 100 ms default)
so that a throttled host is a slower CPU rather than one that stops for 50 ms at a
time in the middle of a collective.

Both cgroup versions: v2 ``cpu.max`` where the unified hierarchy holds the cpu
controller, else v1 ``cpu.cfs_quota_us`` / ``cpu.cfs_period_us`` (``BACKENDS``,
first that applies). Groups are made flat under the controller's root and named
``sb<pid>g<k>-<label>``, so a group left by a process that died without its
``finally`` (SIGKILL) names its dead owner and is removed by the next
``CpuGroups`` (``remove_stale``), like ``bench.launch.netns``'s namespaces.

A process joins its host's group before anything else runs (``join_prefix``: a
shell writes its own pid into the group and execs the command), so everything it
starts is in the group too. ``CpuGroups.destroy`` SIGKILLs what is still in the
groups and removes them; it is idempotent and runs on every way out (exception,
Ctrl-C, SIGTERM through ``bench.cli.main``). Needs root.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import os
import re
import signal
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from bench.errors import BenchError

CFS_PERIOD_US = 10_000
MIN_QUOTA_US = 1_000  # the kernel refuses a smaller quota
KILL_WAIT_S = 10.0
NAME_PREFIX = "sb"
_NAME = re.compile(rf"^{NAME_PREFIX}(\d+)g\d+-")
_counter = itertools.count()
MOUNTS = Path("/proc/self/mounts")


class CgroupError(BenchError):
    """A CPU budget cannot be set up or removed (the message says which and why)."""


@dataclass(frozen=True)
class CpuBudget:
    """``cpus`` CPUs' worth of time per ``period_us`` for each host."""

    cpus: float
    period_us: int = CFS_PERIOD_US

    def __post_init__(self) -> None:
        if not (self.cpus > 0 and math.isfinite(self.cpus)):
            raise CgroupError(f"CpuBudget.cpus must be a positive number of CPUs. "
                              f"Received: cpus={self.cpus!r}")
        if not 1_000 <= self.period_us <= 1_000_000:
            raise CgroupError(f"CpuBudget.period_us must be between 1000 and 1000000 (the "
                              f"kernel's limits). Received: period_us={self.period_us!r}")
        if self.quota_us < MIN_QUOTA_US:
            raise CgroupError(f"CpuBudget.cpus x period_us must be at least {MIN_QUOTA_US} us "
                              f"(the kernel's smallest quota); raise the period. Received: "
                              f"cpus={self.cpus!r}, period_us={self.period_us}")

    @property
    def quota_us(self) -> int:
        return round(self.cpus * self.period_us)

    @property
    def threads(self) -> int:
        """Intra-op threads that fit the budget (more would only take turns)."""
        return max(1, math.ceil(self.cpus - 1e-9))

    def to_dict(self) -> dict[str, Any]:
        return {"cpus": self.cpus, "period_us": self.period_us, "quota_us": self.quota_us}


# -- the two cgroup versions --------------------------------------------------------------
class Backend(Protocol):
    """One cgroup version: where groups go and how a budget is written and read."""

    name: str

    def root(self) -> Path | None:
        """The controller's root directory, or None where this version does not apply."""
        ...

    def prepare(self, root: Path) -> None:
        """Make the root able to hold groups with a CPU budget."""
        ...

    def write(self, group: Path, budget: CpuBudget) -> None: ...

    def read(self, group: Path) -> float | None:
        """The group's budget in CPUs (None: no quota)."""
        ...


def _mounts() -> list[tuple[str, str, list[str]]]:
    """(mount point, type, options) of every mount."""
    try:
        lines = MOUNTS.read_text(encoding="utf-8").splitlines()
    except OSError:
        return []
    out = []
    for line in lines:
        parts = line.split()
        if len(parts) >= 4:
            out.append((parts[1], parts[2], parts[3].split(",")))
    return out


class V2:
    """The unified hierarchy: ``cpu.max`` = "quota period"."""

    name = "v2"

    def root(self) -> Path | None:
        for point, kind, _ in _mounts():
            if kind == "cgroup2":
                controllers = Path(point, "cgroup.controllers")
                with contextlib.suppress(OSError):
                    if "cpu" in controllers.read_text(encoding="ascii").split():
                        return Path(point)
        return None

    def prepare(self, root: Path) -> None:
        control = root / "cgroup.subtree_control"
        if "cpu" not in control.read_text(encoding="ascii").split():
            control.write_text("+cpu", encoding="ascii")

    def write(self, group: Path, budget: CpuBudget) -> None:
        (group / "cpu.max").write_text(f"{budget.quota_us} {budget.period_us}",
                                       encoding="ascii")

    def read(self, group: Path) -> float | None:
        quota, period = (group / "cpu.max").read_text(encoding="ascii").split()[:2]
        return None if quota == "max" else int(quota) / int(period)


class V1:
    """The cpu controller of the legacy hierarchy: CFS quota and period files."""

    name = "v1"

    def root(self) -> Path | None:
        for point, kind, options in _mounts():
            if kind == "cgroup" and "cpu" in options and Path(point, "cpu.cfs_quota_us").exists():
                return Path(point)
        return None

    def prepare(self, root: Path) -> None:
        pass

    def write(self, group: Path, budget: CpuBudget) -> None:
        # The period first: a quota is checked against the period in force.
        (group / "cpu.cfs_period_us").write_text(str(budget.period_us), encoding="ascii")
        (group / "cpu.cfs_quota_us").write_text(str(budget.quota_us), encoding="ascii")
        burst = group / "cpu.cfs_burst_us"  # no saved-up bursts above the budget
        if burst.exists():
            burst.write_text("0", encoding="ascii")

    def read(self, group: Path) -> float | None:
        quota = int((group / "cpu.cfs_quota_us").read_text(encoding="ascii"))
        period = int((group / "cpu.cfs_period_us").read_text(encoding="ascii"))
        return None if quota < 0 else quota / period


# v2 first: where the unified hierarchy has the cpu controller, v1 cannot have it too.
BACKENDS: tuple[Backend, ...] = (V2(), V1())


def backend() -> tuple[Backend, Path] | None:
    """The cgroup version that can hold CPU budgets here and its root, or None."""
    for b in BACKENDS:
        root = b.root()
        if root is not None:
            return b, root
    return None


def unavailable_reason() -> str | None:
    """Why CPU budgets cannot be set here (None if they can)."""
    if os.geteuid() != 0:
        return "CPU budgets (cgroups) need root"
    found = backend()
    if found is None:
        return ("no cgroup hierarchy with the cpu controller is mounted (cgroup v2 cpu.max "
                "or v1 cpu.cfs_quota_us)")
    b, root = found
    if not os.access(root, os.W_OK):
        return f"the cgroup {b.name} cpu root {root} is not writable"
    return None


def members(group: Path) -> list[int]:
    """PIDs in ``group`` (none when it is gone)."""
    try:
        text = (group / "cgroup.procs").read_text(encoding="ascii")
    except OSError:
        return []
    return [int(p) for p in text.split() if p.isdigit()]


def ours(root: Path | None = None) -> list[Path]:
    """Groups made by this module (any process), e.g. to check none is left."""
    if root is None:
        found = backend()
        if found is None:
            return []
        root = found[1]
    try:
        return sorted(p for p in root.iterdir() if p.is_dir() and _NAME.match(p.name))
    except OSError:
        return []


def remove_stale() -> list[Path]:
    """Remove groups of this module whose creating process is dead; returns them."""
    removed = []
    for group in ours():
        m = _NAME.match(group.name)
        if m and not alive(int(m.group(1))):
            _destroy_group(group)
            removed.append(group)
    return removed


def join_prefix(group: Path) -> list[str]:
    """A command prefix that moves the process into ``group`` and execs the rest.

    The shell writes its own pid (which the command keeps through exec) before the
    command starts, so no instruction of the command runs outside the budget. It
    goes before ``ip netns exec``, which remounts /sys and hides the cgroup files.
    """
    return ["sh", "-c", 'echo $$ > "$0" && exec "$@"', str(group / "cgroup.procs")]


@dataclass
class CpuGroups:
    """One cgroup per label, each with ``budget``; a context manager that removes them."""

    labels: Sequence[str]
    budget: CpuBudget
    groups: dict[str, Path] = field(default_factory=dict, init=False)
    backend_name: str = field(default="", init=False)

    def __enter__(self) -> CpuGroups:
        self.create()
        return self

    def __exit__(self, *exc: object) -> None:
        self.destroy()

    def create(self) -> None:
        """Make the groups (removing what was made when one fails)."""
        why = unavailable_reason()
        if why is not None:
            raise CgroupError(f"cannot give hosts a CPU budget: {why}")
        found = backend()
        assert found is not None
        b, root = found
        self.backend_name = b.name
        remove_stale()
        stem = f"{NAME_PREFIX}{os.getpid()}g{next(_counter)}"
        try:
            b.prepare(root)
            for label in self.labels:
                group = root / f"{stem}-{label}"
                group.mkdir()
                self.groups[label] = group
                b.write(group, self.budget)
                got = b.read(group)
                if got is None or abs(got - self.budget.cpus) > 1e-6:
                    raise CgroupError(f"group {group} reads back a budget of {got} CPUs, "
                                      f"not {self.budget.cpus}")
        except OSError as exc:
            self.destroy()
            raise CgroupError(f"setting a {self.budget.cpus:g}-CPU budget failed: {exc}"
                              ) from exc
        except BaseException:
            self.destroy()
            raise

    def prefix(self, label: str) -> list[str]:
        """``join_prefix`` for ``label``'s group."""
        return join_prefix(self.groups[label])

    def stats(self, label: str) -> dict[str, int]:
        """The group's CPU statistics (``cpu.stat``: periods, throttled periods, time)."""
        out: dict[str, int] = {}
        with contextlib.suppress(OSError):
            for line in (self.groups[label] / "cpu.stat").read_text(
                    encoding="ascii").splitlines():
                key, _, value = line.partition(" ")
                if value.strip().isdigit():
                    out[key] = int(value)
        return out

    def live_pids(self) -> dict[str, list[int]]:
        """Processes still in each group (empty lists: none)."""
        return {label: members(g) for label, g in self.groups.items()}

    def destroy(self) -> None:
        """SIGKILL everything in the groups, then remove them (idempotent)."""
        problems = []
        for group in self.groups.values():
            try:
                _destroy_group(group)
            except CgroupError as exc:
                problems.append(str(exc))
        self.groups.clear()
        if problems:
            raise CgroupError("; ".join(problems))


def kill_all(pids_of: Callable[[], list[int]], where: str) -> float:
    """SIGKILL the live processes ``pids_of`` lists until it lists none (bounded);
    returns the deadline it kept to. Raises CgroupError naming ``where`` when a
    process survives (stuck in the kernel)."""
    deadline = time.monotonic() + KILL_WAIT_S
    while True:
        pids = [p for p in pids_of() if alive(p)]
        if not pids:
            return deadline
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        if time.monotonic() > deadline:
            raise CgroupError(f"processes {pids} in {where} survived SIGKILL for "
                              f"{KILL_WAIT_S:g} s (stuck in the kernel?)")
        time.sleep(0.05)


def _destroy_group(group: Path) -> None:
    """SIGKILL what runs in ``group`` (bounded wait), then remove it."""
    deadline = kill_all(lambda: members(group), f"cgroup {group}")
    # A zombie still counts as a member until reaped; removal retries briefly.
    while group.exists():
        try:
            group.rmdir()
        except FileNotFoundError:
            break
        except OSError as exc:
            if time.monotonic() > deadline:
                raise CgroupError(f"cgroup {group} could not be removed: {exc}") from exc
            time.sleep(0.05)


def alive(pid: int) -> bool:
    """True for a live process (a zombie, already dead but unreaped, is not)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
            return fh.read().rsplit(")", 1)[-1].split()[0] != "Z"
    except (OSError, IndexError):
        return False
