"""What the regression commands offer before they compute: defaults, sides and choices.

``python -m bench`` builds every subcommand's parser at start-up (``--help``, and each
``bench worker`` process of a multi-host run), and the defaults and choices of
``bench ab``, ``compare`` and ``nightly`` belong to the regression machinery, whose
modules import numpy and scipy.stats (about a second). The values live here, beside
nothing heavier than the figure catalogue, and those modules import them from here:
one definition each, which the parser reads without the statistics.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from bench.registry import Registry
from bench.results.figures import FIGURES, Figure

# -- bench ab: the sequential A/B decision (bench.regress.ab, interleave, window_pairs) ----
AB_THRESHOLD = 0.05
AB_ALPHA = 0.05
AB_BUDGET_S = 600.0
BASELINE, CANDIDATE = "baseline", "candidate"
PAIR_ROUNDS = 10  # windows of each side in a pair of windows or duet pair
PAIR_MODES = ("auto", "windows", "duet", "processes")

# -- bench compare (bench.regress.compare, pooling, render) --------------------------------
COMPARE_THRESHOLD = 0.05
COMPARE_ALPHA = 0.05


def measures(figures: Sequence[Figure] = FIGURES) -> Registry[Figure]:
    """The figures a comparison judges (those declared with a family), by name."""
    out: Registry[Figure] = Registry("measure")
    for f in figures:
        if f.family:
            out.register(f.name, f)
    return out


MEASURES = measures()
# In the catalogue's order: the first family's first figure leads the stated power.
FAMILIES = tuple(dict.fromkeys(m.family for _, m in MEASURES.items()))

# Stored sweeps of a configuration pooled, newest first: the machine's load and software
# change over months, and beyond ~20 df the t quantiles barely move (2.09 at 20, 1.96).
HISTORY_SWEEPS = 20


@dataclass(frozen=True)
class Pooling:
    """Where a configuration's run-level noise is pooled from, besides its own runs."""

    family: bool = True  # the other configurations of its family in the compared results
    history: bool = True  # its stored sweeps on the same machine (when a store exists)


POOLINGS: Registry[Pooling] = Registry("noise pooling")
POOLINGS.register("all", Pooling())
POOLINGS.register("family", Pooling(history=False))
POOLINGS.register("own", Pooling(family=False, history=False))

# The names of bench.regress.render.FORMATS (its renderers need the comparison's types).
OUTPUT_FORMATS = ("table", "markdown", "json")

# -- bench nightly (bench.regress.nightly) --------------------------------------------------
NIGHTLY_TIMEOUT_S = 3600.0
NIGHTLY_RUNS = 2  # processes per configuration per night: the run-to-run noise, measured
NIGHTLY_BASELINE_NIGHTLIES = 5  # pooled: night-to-night drift in the baseline
