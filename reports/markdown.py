"""The Markdown summary: fits a CI job summary or a pull-request comment (no images)."""

from __future__ import annotations

from collections.abc import Sequence

from reports.answers import HEADERS, LEGEND, machine_rows
from reports.breakdown import breakdown_table
from reports.columns import definitions
from reports.loops import cost_line
from reports.report import MachineReport, SweepReport
from reports.tables import comparison


def cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def md_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(cell(h) for h in headers) + " |",
             "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _machine(mr: MachineReport, n: int, many: bool) -> list[str]:
    m = mr.machine
    out = [f"## {'Machine ' + str(n) + ': ' if many else ''}{m.hardware}", "",
           f"TensorFlow {m.facts.get('TensorFlow')}, Python {m.facts.get('Python')}, "
           f"commit {m.facts.get('git commit(s)')}, {m.dates}, machine_id `{m.machine_id}`.", ""]
    if m.disclaimer:
        out += [f"> **Note.** {m.disclaimer}", ""]
    answers = machine_rows(mr)
    if answers:
        out += [f"**Answers** (one row per place, details below; {LEGEND}):", "",
                md_table(HEADERS, [r.cells for r in answers]), "",
                "<details><summary>The answers in full</summary>", "",
                *[f"- {r.sentence}" for r in answers], "", "</details>", ""]
    for w in mr.workloads:
        out += [f"### {w.variant.label()}", ""]
        for rec in w.recommendations:
            out.append(f"- **{rec.ranking.label}**: {rec.verb}{rec.text}")
            out += [f"  - {o}" for o in rec.others]
        out.append("")
        for rk in w.rankings:
            table = comparison(rk, mr)
            # Brief columns only: the full table is in the HTML and the CSV.
            keep = [i for i, brief in enumerate(table.brief) if brief]
            headers = ["replicas", *[table.headers[i] for i in keep]]
            rows = [[str(n_), *[row[i] for i in keep]]
                    for n_, group in table.groups for row in group]
            out += [f"**{rk.label}**", "", md_table(headers, rows), ""]
            # Why cells marked n/a [k] are empty: one line each, the configurations named.
            if table.notes:
                out += [*[f"- {line}" for line in table.notes], ""]
        profiles = breakdown_table(w.configs)
        if profiles.rows:
            out += ["**Where the step time goes (profiled)**: each part in ms per step and as "
                    "a share of the profiled step; the parts add up to the step.", "",
                    md_table(profiles.headers, profiles.rows), ""]
            out += [*[f"- {line}" for line in profiles.notes], *([""] if profiles.notes else [])]
    if mr.loop_costs:
        out += ["### Keras fit vs the custom loop", "",
                "Each configuration measured with both loops: the throughput of `fit` over the "
                "custom loop's, with its interval from the runs (ties are ties).", "",
                *[f"- {cost_line(c)}" for c in mr.loop_costs], ""]
    probs = mr.problems
    if probs:
        out += [f"### Runs without figures ({len(probs)})", "",
                md_table(["status", "configuration", "reason"],
                         [[r.status, r.result.spec.label(), r.reason_line or "-"]
                          for r in probs]), ""]
    return out


def render_markdown(report: SweepReport) -> str:
    """The summary as Markdown text."""
    out = ["# stratbench report", "",
           f"{len(report.results)} result(s) from `{report.source}`, generated "
           f"{report.generated_at}.", ""]
    for w in report.warnings:
        out.append(f"> **Warning:** {w}")
    if report.warnings:
        out.append("")
    if not report.machines:
        out += [f"No results found in `{report.source}`.", ""]
    many = len(report.machines) > 1
    if many:
        out += [f"Results from {len(report.machines)} machines: each has its own section; "
                "figures are never combined across machines.", ""]
    for n, mr in enumerate(report.machines, 1):
        out += _machine(mr, n, many)
    out += ["<details><summary>Definitions</summary>", ""]
    out += [f"- **{k}**: {v}" for k, v in definitions().items()]
    out += ["", "Throughput is global (all replicas) examples/s, the median of the measured "
            "windows; memory in MiB (2^20 bytes).", "", "</details>", ""]
    return "\n".join(out)
