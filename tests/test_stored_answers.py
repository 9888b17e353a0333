"""The answers the reports read from two stored default sweeps stay what they were.

The sweeps (``tests/fixtures/stored-sweeps.tar.xz``: two ``make bench`` runs of a 2-core
Xeon with AMX, their ``results/`` and ``sweep.jsonl`` only) are read through the command
a user types, ``bench report``; each place's answer and its kind must match
``tests/fixtures/stored-answers.json``. A change to the code's shape leaves these alone;
a change to a decision rule changes them on purpose, and then the file with it
(``python -m tests.test_stored_answers --write``).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from tests.helpers import stored_sweeps

FIXTURES = Path(__file__).parent / "fixtures"
EXPECTED = FIXTURES / "stored-answers.json"
SWEEPS = ("a", "b")
ROOT = Path(__file__).resolve().parent.parent


def answers(sweep: Path, out: Path) -> list[list[str]]:
    """[place, answer, kind] of each row of ``bench report``'s answers table."""
    proc = subprocess.run([sys.executable, "-m", "bench", "report", str(sweep), "--out",
                           str(out), "--width", "400"], capture_output=True, text=True,
                          timeout=180, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    header = next(i for i, line in enumerate(lines)
                  if re.match(r"\s+place\s{2,}answer\s{2,}kind\s{2,}", line))
    rows = []
    for line in lines[header + 1:]:
        if not line.strip() or line.strip().startswith("("):
            break
        cells = re.split(r"\s{2,}", line.strip())
        rows.append(cells[:3])
    assert rows, f"no answers read from {sweep}:\n{proc.stdout}"
    return rows


def read_all(tmp: Path) -> dict[str, list[list[str]]]:
    return {sweep.name: answers(sweep, tmp / f"report-{sweep.name}")
            for sweep in stored_sweeps(tmp)}


def test_stored_sweeps_answers_unchanged(tmp_path: Path) -> None:
    expected = json.loads(EXPECTED.read_text())
    got = read_all(tmp_path)
    for name in SWEEPS:
        assert got[name] == expected[name], f"sweep {name}: answers changed"


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: python -m tests.test_stored_answers --write")
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        EXPECTED.write_text(json.dumps(read_all(Path(tmp)), indent=1) + "\n")
    print(f"wrote {EXPECTED}")
