"""One machine's configurations as its answers and the reports' verdicts read them.

A machine's runs grouped into configurations (``group_configs``), their noise pooled
(``pool_noise``), and each configuration's scaling against its baselines: what every
place of the machine decides from, and what the verdicts' rules look at besides the
configuration itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from bench.answers.configs import ConfigView, group_configs, pool_noise
from bench.answers.runs import Machine
from bench.answers.scaling import Index, Scaling, scaling_of


@dataclass
class Basis:
    """What a machine's answers and rules may look at besides one configuration."""

    machine: Machine
    index: Index
    scaling: dict[str, Scaling]  # by result key
    runs: Sequence[ConfigView]  # every configuration of the machine


def basis_of(machine: Machine) -> Basis:
    """Group the machine's runs into configurations, pool their noise and scale each."""
    configs = group_configs(machine.runs)
    pool_noise(configs)
    index = Index(configs)
    return Basis(machine, index, {c.key: scaling_of(c, index) for c in configs}, configs)
