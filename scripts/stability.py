"""Do two sweeps recommend the same thing? The stability figure of the report's answers.

    .venv/bin/python -m scripts.stability SWEEP_A SWEEP_B     (or: make stability A=... B=...)

For every machine, workload and batch setting either sweep answers, prints one line:

- ``agree``: both answers are settled and recommend the same configuration;
- ``equivalent-consistent``: both settled on different choices, each shown within the
  margin of the other's (the margin allows either, and both reports showed it);
- ``not settled``: either answer is not settled at its precision;
- ``disagree``: both settled on different choices; the answer would have changed;
- ``only in A`` / ``only in B`` / ``no answer``: nothing to compare there.

Places are keyed by machine (fingerprint ``machine_id``): two machines' sweeps share
none. Each answer holds per place, not jointly across places, so each disagreement is
printed with its p-value (how far the two sweeps' estimates of the two choices lie
apart for their noise) and that p-value corrected over the places compared (Holm).
Then ``verdict: ...``, the exit code below in words with the places it rests on, and
``median half-width: X%``, the median relative half-width of the intervals the
answers rest on (both sweeps; each sweep's just above it).

Reads stored results only (no TensorFlow). Exit codes: 0 every place agrees (or is
equivalent-consistent); 2 usage error (not a sweep directory) or sweeps that cannot be
compared: they share fewer places than either has, or none; 4 a disagreement beyond
what that many places give by chance (its Holm-corrected p-value at most 5%); 5 some
place is not settled (or has no answer), or disagrees within chance.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from bench.exits import Exit
from reports.report import build
from reports.stability import compare_answers, exit_code, shared_places, stability_text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sweep_a", type=Path, help="a directory written by `bench run --out`")
    parser.add_argument("sweep_b", type=Path, help="another sweep of the same matrix")
    args = parser.parse_args(argv)
    for name, path in (("sweep_a", args.sweep_a), ("sweep_b", args.sweep_b)):
        if not path.is_dir():
            print(f"error: no sweep directory at {path}. Received: {name}={str(path)!r}",
                  file=sys.stderr)
            return Exit.USAGE
    reports = [build(args.sweep_a), build(args.sweep_b)]
    for label, report in zip("AB", reports, strict=True):
        for warning in report.warnings:
            print(f"warning ({label}): {warning}", file=sys.stderr)
        print(f"{label}: {report.source} ({len(report.results)} results)")
    rows = compare_answers(*reports)
    print(stability_text(rows))
    why = shared_places(rows)
    if why is not None:
        print(f"error: {why}. Received: sweep_a={str(args.sweep_a)!r}, "
              f"sweep_b={str(args.sweep_b)!r}", file=sys.stderr)
    return exit_code(rows)


if __name__ == "__main__":
    sys.exit(main())
