"""The statistics' default levels: significance (alpha) and detection power.

Apart from ``bench.results.stats``, which imports scipy, so that a command line can
show them as its options' defaults without importing it (``bench compare --power``);
``bench.results.stats`` imports them from here.
"""

from __future__ import annotations

DEFAULT_ALPHA = 0.05
DEFAULT_POWER = 0.9
