"""Faults a simulated server acts out on demand (``STRATBENCH_GPU_SIM_FAULTS``).

Comma-separated, each optionally ``@strategy`` (only that strategy's runs): ``hang``
(the first collective never returns, the process idle), ``jit=SECONDS`` (the first
call's JIT takes that long; kept in the CUDA cache as any JIT), ``memory_mib=MIB`` (the card holds
that much: 23034, a 24 GB L4's, runs out at batch 128). Read by the stand-in child and
checked by the parent before anything runs. Shared root: no TensorFlow.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bench.errors import UsageError

FAULTS_VAR = "STRATBENCH_GPU_SIM_FAULTS"


@dataclass(frozen=True)
class Faults:
    """The faults asked for this process's strategy (``STRATBENCH_GPU_SIM_FAULTS``)."""

    hang: bool = False
    jit_s: float | None = None
    memory_mib: float | None = None

    @classmethod
    def parse(cls, text: str, strategy: str) -> Faults:
        found: dict[str, Any] = {}
        for item in (x.strip() for x in text.split(",") if x.strip()):
            what, _, only = item.partition("@")
            if only and only != strategy:
                continue
            name, _, value = what.partition("=")
            try:
                field_name, read = FAULTS[name]
                found[field_name] = read(value)
            except (KeyError, ValueError):
                raise UsageError(f"{FAULTS_VAR} holds an unknown fault: expected "
                                  f"{', '.join(FAULTS)} (hang, jit=SECONDS, "
                                  f"memory_mib=MIB), each optionally @strategy. "
                                  f"Received: {item!r}") from None
        return cls(**found)


# Each fault's name: the field it sets and how its value is read.
FAULTS: dict[str, tuple[str, Callable[[str], Any]]] = {
    "hang": ("hang", lambda _value: True),
    "jit": ("jit_s", float),
    "memory_mib": ("memory_mib", float),
}


