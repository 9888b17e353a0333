"""The Markdown summary: fits a CI job summary or a pull-request comment (no images).

GitHub caps a job summary at 1 MiB; this stays far below (tests/test_report_minute.py
holds stored sweeps' summaries under ``SUMMARY_LIMIT``): the answers, a short table
per workload, and the explanations and ranked tables folded under each.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise

from bench.answers.recommend import WorkloadAnswer
from bench.results.text import tensorboard_command
from reports.answers import HEADERS, LEGEND, answer_row, machine_rows
from reports.breakdown import breakdown_table, common_dir, profiled
from reports.brief import HEADERS as BRIEF_HEADERS
from reports.brief import brief
from reports.columns import definitions
from reports.explain import split_profiles
from reports.loops import cost_line
from reports.report import MachineReport, SweepReport
from reports.tables import comparison

# What a stored default sweep's summary is held under (bytes, UTF-8): about a thirtieth
# of GitHub's 1 MiB job-summary limit. The aim was 20 KB; the ranked tables' Markdown
# columns and the profiled breakdown (both pinned by the report tests) keep a default
# sweep of five places near 30 KB.
SUMMARY_LIMIT = 32_000


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
        # Its first sentence in view, the rest folded: no long paragraph above the answers.
        first, sep, rest = m.disclaimer.partition(". ")
        out += ([f"> **Note.** {first}.", "",
                 f"<details><summary>What that means</summary>\n\n{rest}\n\n</details>", ""]
                if sep else [f"> **Note.** {m.disclaimer}", ""])
    answers = machine_rows(mr)
    if answers:
        # One item a paragraph: a place's sentence is read alone.
        out += ["**What each answer is worth:**", "",
                *[line for r in answers for line in (f"- {r.worth}", "")],
                f"**Answers** (one row per place, each in full under its workload; "
                f"{LEGEND}):", "", md_table(HEADERS, [r.cells for r in answers]), ""]
    for w in mr.workloads:
        out += [f"### {w.variant.label()}", "", *_brief(w),
                f"<details><summary>{w.variant.label()} in full: why each answer, the "
                f"ranked tables and profiles</summary>", "", *_in_full(mr, w),
                "</details>", ""]
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


def _brief(w: WorkloadAnswer) -> list[str]:
    """The workload's short table: a bold row heads each place."""
    rows: list[list[str]] = []
    for place in brief(w):
        rows.append([f"**{place.heading}**", *([""] * (len(BRIEF_HEADERS) - 1))])
        rows += [list(r.cells) for r in place.rows]
        if place.more:
            rows.append([f"{place.more} more in the ranked tables", *([""] * 4)])
    return [md_table(BRIEF_HEADERS, rows), ""]


def _in_full(mr: MachineReport, w: WorkloadAnswer) -> list[str]:
    """What the short table leaves out: the answers' sentences and full texts (the
    profiles' paths listed apart, not inside them), the ranked tables' brief columns,
    and the profiled breakdown."""
    out = [*[f"- {answer_row(mr.machine, w.variant, r).sentence}" for r in w.recommendations],
           ""]
    dirs: list[str] = []
    for rec in w.recommendations:
        text, found = split_profiles(rec.text)
        dirs += found
        out.append(f"- **{rec.ranking.label}**: {rec.verb}{text}")
        # Only the flags here: each other configuration's standing is a row of the short
        # table above, and its sentence is the HTML's (a summary that repeats them all
        # outgrows a CI job summary).
        out += [f"  - {c.choice}: flagged super-ideal, above the {c.replicas}x ideal (what "
                f"that means: the HTML report)" for c in rec.super_ideal]
    out.append("")
    if dirs:
        out += ["Profiles compared above:", "",
                *[f"- `{d}`" for d in dict.fromkeys(dirs)], ""]
    for rk in w.rankings:
        table = comparison(rk, mr)
        # Brief columns only: the full table is in the HTML and the CSV.
        keep = [i for i, brief_ in enumerate(table.brief) if brief_]
        headers = ["replicas", *[table.headers[i] for i in keep]]
        rows = [[str(n_), *[row[i] for i in keep]]
                for n_, group in table.groups for row in group]
        out += [f"**{rk.label}**", "", md_table(headers, rows), ""]
        # Why cells marked n/a [k] are empty: one line each, the configurations named.
        if table.notes:
            out += [*[f"- {line}" for line in table.notes], ""]
    profiles = breakdown_table(w.configs)
    if profiles.rows:
        # One command opens every profile of the workload: a path per row is the HTML's.
        dirs = [d for c in w.configs if (p := profiled(c)) is not None for d in p.dirs]
        opens = (f"; open them with: `{tensorboard_command(common_dir(dirs))}`" if dirs
                 else "")
        keep = [i for i, h in enumerate(profiles.headers) if h != "profile"]
        out += ["**Where the step time goes (profiled)**: each part in ms per step and as "
                f"a share of the profiled step; the parts add up to the step{opens}.", "",
                md_table([profiles.headers[i] for i in keep],
                         [[row[i] for i in keep] for row in profiles.rows]), ""]
        out += [*[f"- {line}" for line in profiles.notes], *([""] if profiles.notes else [])]
    return out


# Defined in every summary: what the answers rest on, whatever the tables show.
ALWAYS_DEFINED = ("runs and intervals", "recommendation")


def _used(defs: dict[str, str], body: str) -> dict[str, str]:
    """The definitions of the columns ``body``'s tables show, and ``ALWAYS_DEFINED``:
    the full list is the HTML report's, and would be most of this summary."""
    lines = body.splitlines()
    shown = {c.strip().replace("\\|", "|") for line, below in pairwise(lines)
             if line.startswith("| ") and below.startswith("|---")
             for c in line.strip("|").split(" | ")}
    return {k: v for k, v in defs.items() if k in ALWAYS_DEFINED or k in shown}


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
    out += [f"- **{k}**: {v}" for k, v in _used(definitions(), "\n".join(out)).items()]
    out += ["", "The HTML report defines every column; this summary, the terms it uses.",
            "", "Throughput is global (all replicas) examples/s, the median of the measured "
            "windows; memory in MiB (2^20 bytes).", "", "</details>", ""]
    return "\n".join(out)
