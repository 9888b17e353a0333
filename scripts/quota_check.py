"""Does a host's CPU budget hold? Its compute rate against its quota, printed.

    flock /tmp/tf.lock .venv/bin/python -m scripts.quota_check [--seconds 3]
        [--budgets 0.25,0.5,1.0] [--hosts 1,4]

Each case starts ``hosts`` emulated hosts at once (``bench.launch.netns.Network``
with a ``CpuBudget``: a namespace and a cgroup each), every one running the same
single-threaded CPU-bound loop for ``--seconds``; the rate of each (loop
iterations per second) is set against one unbudgeted process running the loop
alone. A quota that holds gives a rate of ``budget x`` the unbudgeted one, also when
several hosts run at once, as long as the budgets fit the machine's cores
(4 x 0.5 = 2 CPUs on 2 cores). Needs root. Figures are printed, never asserted;
a timing measurement, so run it under the TensorFlow lock on a shared machine.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from collections.abc import Sequence

from bench.launch.cgroups import CpuBudget
from bench.launch.netns import Network

LOOP = ("import sys, time\n"
        "end = time.monotonic() + float(sys.argv[1]); n = 0\n"
        "while time.monotonic() < end:\n"
        "    for _ in range(2000):\n"
        "        pass\n"
        "    n += 1\n"
        "print(n / float(sys.argv[1]))\n")


def alone(seconds: float) -> float:
    """Loop iterations per second of one unbudgeted process."""
    out = subprocess.run([sys.executable, "-c", LOOP, str(seconds)], capture_output=True,
                         text=True, check=True, timeout=seconds + 60)
    return float(out.stdout)


def budgeted(cpus: float, hosts: int, seconds: float) -> list[float]:
    """Each host's rate when ``hosts`` hosts of ``cpus`` CPUs run the loop at once."""
    with Network(hosts, cpu=CpuBudget(cpus)) as net:
        procs = [net.popen(h, [sys.executable, "-c", LOOP, str(seconds)],
                           stdout=subprocess.PIPE, text=True) for h in net.hosts]
        return [float(p.communicate(timeout=seconds + 60)[0]) for p in procs]


def check(budgets: Sequence[float], host_counts: Sequence[int], seconds: float) -> str:
    """The table: budget, hosts at once, median rate, rate / unbudgeted rate."""
    cores = len(os.sched_getaffinity(0))
    base = alone(seconds)
    lines = [f"unbudgeted: {base:,.0f} loops/s (one process, {cores} cores)", "",
             f"{'budget':>7} {'hosts':>5} {'total CPUs':>10} {'rate loops/s':>13} "
             f"{'rate / unbudgeted':>18} {'min..max':>14}"]
    for cpus in budgets:
        for hosts in host_counts:
            total = cpus * hosts
            if total > cores + 1e-9:
                lines.append(f"{cpus:>7g} {hosts:>5} {total:>10g}  skipped: more than the "
                             f"machine's {cores} cores")
                continue
            rates = budgeted(cpus, hosts, seconds)
            rel = [r / base for r in rates]
            lines.append(f"{cpus:>7g} {hosts:>5} {total:>10g} {statistics.median(rates):>13,.0f} "
                         f"{statistics.median(rel):>18.3f} {min(rel):>6.3f}..{max(rel):<6.3f}")
    lines += ["", "a quota that holds: rate / unbudgeted = budget (for budgets up to 1 CPU; "
                  "the loop is single-threaded)"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--budgets", default="0.25,0.5,1.0")
    parser.add_argument("--hosts", default="1,4")
    args = parser.parse_args(argv)
    budgets = [float(b) for b in args.budgets.split(",") if b.strip()]
    hosts = [int(h) for h in args.hosts.split(",") if h.strip()]
    print(check(budgets, hosts, args.seconds))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
