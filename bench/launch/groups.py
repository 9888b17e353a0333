"""Which configurations of a sweep share a process: the arms of one answer.

An answer compares configurations that train the same thing (workload, its size and
parameters, batch, precision, loop, ...) under different strategies and device
counts. Those that run in one process (in-process strategies, the custom loop) are
measured together, their windows interleaved (``bench.launch.arms``), so that the
answer's ratios come from pairs measured seconds apart in one process rather than
from separate processes started minutes apart. A multi-process configuration whose
processes can take turns with them (MultiWorkerMirrored) joins that session in
processes of its own (``bench.launch.session``), and so does the other framework's
lane (data_parallel on JAX beside mirrored on TensorFlow: a process of its own, as
the two frameworks cannot share one). Everything else runs alone.
"""

from __future__ import annotations

from collections.abc import Sequence

from bench.launch.arms import shareable_reason
from bench.spec import RunSpec

# What differs between the configurations one answer compares.
ANSWER_AXES = ("strategy", "devices", "cross_device_ops", "backend")


def answer_key(spec: RunSpec) -> str:
    """The answer ``spec`` belongs to: its identity without the answer's axes."""
    items = {k: v for k, v in spec.to_dict().items() if k not in ANSWER_AXES}
    return repr(sorted(items.items(), key=lambda kv: kv[0]))


def in_session(spec: RunSpec) -> bool:
    """Whether ``spec`` can be measured in an arms session: as an arm, or as a member in
    processes of its own."""
    return shareable_reason(spec, member=True) is None


def is_session(specs: Sequence[RunSpec]) -> bool:
    """Whether ``specs`` make a session: two or more, every one ``in_session``, one at
    least an in-process arm (a session's windows are paced around the arms' process)."""
    return (len(specs) >= 2 and all(in_session(s) for s in specs)
            and any(shareable_reason(s) is None for s in specs))


def sweep_units(specs: Sequence[RunSpec]) -> list[tuple[RunSpec, ...]]:
    """The sweep's units, in the specs' order: each answer's configurations that can
    share a session (``is_session``) as one unit, every other configuration alone."""
    groups: dict[str, list[RunSpec]] = {}
    for spec in specs:
        if in_session(spec):
            groups.setdefault(answer_key(spec), []).append(spec)
    units: list[tuple[RunSpec, ...]] = []
    placed: set[str] = set()
    for spec in specs:
        members = groups.get(answer_key(spec), []) if in_session(spec) else []
        if is_session(members):
            key = answer_key(spec)
            if key not in placed:
                placed.add(key)
                units.append(tuple(members))
        else:
            units.append((spec,))
    return units
