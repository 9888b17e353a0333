"""What a `python -m bench` process imports before its command runs.

Every such process builds the whole parser first: `--help`, a mistyped option, and each
`bench worker` process of a multi-host run. The subcommands import the libraries their
work needs (pandas, matplotlib, scipy.stats for the statistics and reports) when they
run; building the parser imported them all, about 1.5 s of every start. The defaults
and choices the options show live in light modules (``bench.regress.options``,
``bench.results.levels``) for that reason.
"""

from __future__ import annotations

import json
import subprocess
import sys

from tests.helpers import ROOT

HEAVY = ("pandas", "matplotlib", "scipy.stats", "tensorflow", "jax")


def test_building_the_parser_imports_no_heavy_library() -> None:
    # A fresh interpreter: this one has imported them all for other tests.
    code = ("import json, sys\n"
            "import bench.cli.main\n"
            "bench.cli.main.build_parser()\n"
            f"print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, timeout=120, check=True)
    loaded = json.loads(out.stdout.strip().splitlines()[-1])
    assert loaded == [], (f"building the parser imported {', '.join(loaded)}; import them "
                          f"in the cmd_* function that needs them (python -X importtime "
                          f"-m bench --help shows who imports them)")


def test_the_output_formats_offered_are_those_rendered() -> None:
    # `bench compare --format` offers bench.regress.options' names (its parser imports no
    # renderer); each must have its renderer, and each renderer be offered.
    from bench.regress.options import OUTPUT_FORMATS
    from bench.regress.render import FORMATS

    assert FORMATS.names() == list(OUTPUT_FORMATS)
