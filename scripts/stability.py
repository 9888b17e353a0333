"""Do two sweeps recommend the same thing? The stability figure of the report's answers.

    .venv/bin/python -m scripts.stability SWEEP_A SWEEP_B     (or: make stability A=... B=...)

For every workload and batch setting either sweep answers, prints one line:

- ``agree``: the same configuration is recommended;
- ``tie-consistent``: different choices, but each sweep calls a tie that contains the
  other's choice (the noise allows either, and both reports say so);
- ``disagree``: anything else; the answer would have changed on a re-run;
- ``only in A`` / ``only in B`` / ``no answer``: nothing to compare there.

Reads stored results only (no TensorFlow). Exit codes: 0 no disagreement, 4 at least
one disagreement (the answer changed), 2 usage error (not a sweep directory).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from bench.exits import Exit
from reports.report import build
from reports.stability import compare_answers, disagreements, stability_text


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
    return Exit.REGRESSION if disagreements(rows) else Exit.OK


if __name__ == "__main__":
    sys.exit(main())
