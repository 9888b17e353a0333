"""What every consumer of the figures shows, in a fresh process (``tests.tf_cases.run_case``).

    python -m tests.figure_cases consumers JSON_KWARGS   -> prints one MARK line

With ``labelled``, ``Warmup.first_call_s`` is labelled in the result schema first,
exactly as writing ``unit(..., label=...)`` on it would, before any consumer is
imported: the consumers derive their lists from the schema when they are imported,
so only a fresh process shows what they do with an edited schema. No TensorFlow.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from tests.tf_cases import MARK

NAME = "warmup_first_call_s"  # the field's path: the one name every consumer must use
LABEL = "first call"
VALUE = 0.5  # tests.helpers.fake_figures' warm-up first call


def label_the_field() -> None:
    """Label ``Warmup.first_call_s`` in the schema: a per-run figure the time family judges."""
    from bench.results import schema

    declared = schema.unit("s", label=LABEL, better="lower", compare="time",
                           define="tracing, graph optimisation and the first steps")
    schema.Warmup.__dataclass_fields__["first_call_s"].metadata = declared.metadata


def _cli(*argv: str) -> str:
    from bench.cli.main import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(list(argv))
    assert code in (0, 5), (argv, code)  # compare of two noisy sides may say cannot tell
    return out.getvalue()


def _column(csv_text: str) -> list[float] | None:
    """The figure's values in a CSV (rows of runs that have figures), None without such
    a column."""
    import pandas as pd

    df = pd.read_csv(io.StringIO(csv_text))
    if NAME not in df.columns:
        return None
    return [float(v) for v in df[NAME] if pd.notna(v)]


def case_consumers(labelled: bool) -> dict[str, Any]:
    """Where the figure shows, consumer by consumer (HTML, Markdown, CSV, ``bench show``,
    TensorBoard, ``bench compare``, pytest-benchmark)."""
    if labelled:
        label_the_field()
    from bench.regress.pytest_plugin import extra_info
    from bench.results.store import SweepStore, save
    from reports.tensorboard import METRICS
    from tests.helpers import replicated, report_results

    def store(sweep: Path, results: list[Any]) -> str:
        for r in results:
            save(r, SweepStore(sweep).paths(r.spec, r.replicate).result)
        return str(sweep)

    results = report_results()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        sweep = store(root / "sweep", results)
        _cli("report", sweep, "--out", str(root / "report"))
        html = (root / "report" / "report.html").read_text("utf-8")
        markdown = (root / "report" / "summary.md").read_text("utf-8")
        csv = (root / "report" / "results.csv").read_text("utf-8")
        show, show_csv = _cli("show", sweep), _cli("show", sweep, "--csv")
        compared = json.loads(_cli(
            "compare", store(root / "a", replicated("mirrored", 2, 32, 1000.0)),
            store(root / "b", replicated("mirrored", 2, 32, 1000.0)), "--format", "json"))
    measures = {m["measure"]: m["family"] for c in compared["configs"] for m in c["measures"]}
    ok = next(r for r in results if r.status == "ok" and r.figures is not None)
    info = extra_info(ok, None)
    return {
        "html table": f"<th>{LABEL}</th>" in html,
        "html definitions": f"named {NAME} " in html,
        "markdown table": f" {LABEL} |" in markdown,
        "markdown definitions": f"named {NAME} " in markdown,
        "csv": _column(csv),
        "show": LABEL in show,
        "show --csv": _column(show_csv),
        "tensorboard": NAME in [m.tag for m in METRICS],
        "compare": measures.get(NAME),
        "pytest-benchmark": [info.get(NAME), info["units"].get(NAME)],
    }


CASES = {"consumers": case_consumers}


def main() -> None:
    case, kwargs = sys.argv[1], json.loads(sys.argv[-1])
    print(MARK + json.dumps(CASES[case](**kwargs)), flush=True)


if __name__ == "__main__":
    main()
