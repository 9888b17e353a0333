"""Exit codes of every ``stratbench`` command: one meaning each.

1 is what Python itself returns for an uncaught exception, so a crash anywhere
(even before ``main`` runs) reads as an internal error, never as a verdict.
"""

from __future__ import annotations

from enum import IntEnum


class Exit(IntEnum):
    OK = 0  # done; compare/nightly: no regression at the stated power; ab: SAME or IMPROVED
    INTERNAL = 1  # a bug in stratbench (please report it)
    USAGE = 2  # bad option, unknown name, invalid configuration, unusable path
    RUNS_FAILED = 3  # some configurations failed, ran out of memory or timed out
    REGRESSION = 4  # compare/nightly/ab: a significant change beyond the threshold
    CANNOT_TELL = 5  # compare/nightly: the noise hides changes of the threshold's size; ab: UNKNOWN
    INTERRUPTED = 130  # Ctrl-C; finished results are kept, re-run to resume


EPILOG = ("exit codes: 0 ok, 1 internal error, 2 usage error, 3 runs failed/oom/timeout, "
          "4 regression, 5 cannot tell at this noise, 130 interrupted")
