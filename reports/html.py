"""The self-contained HTML report: inline CSS, plots as data: URIs, no scripts, no network."""

from __future__ import annotations

import base64
import html
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from bench.answers.configs import ConfigView
from bench.answers.recommend import WorkloadAnswer
from bench.answers.runs import RunView
from bench.answers.worth import worth
from bench.results.figures import why_missing
from bench.results.text import tensorboard_command
from reports.answers import HEADERS, LEGEND, answer_row
from reports.breakdown import breakdown_table, common_dir
from reports.brief import HEADERS as BRIEF_HEADERS
from reports.brief import brief
from reports.columns import Notes, definitions
from reports.explain import split_profiles
from reports.loops import cost_line
from reports.plots import Plot, allreduce_plot, workload_plots
from reports.projection import SweepProjection, machine_projections
from reports.projection import plot as projection_plot
from reports.projection import text as projection_text
from reports.report import MachineReport, SweepReport
from reports.tables import comparison
from reports.worth import worth_sentence

CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0 auto;
max-width:1500px;padding:1rem 1.5rem;color:#222;line-height:1.4}
h1{font-size:1.6rem;margin-bottom:.2rem}h2{border-bottom:2px solid #ddd;margin-top:2.2rem}
h3{margin-top:1.8rem}table{border-collapse:collapse;margin:.6rem 0;font-size:.78rem}
th,td{border:1px solid #ddd;padding:.25rem .45rem;text-align:right;vertical-align:top}
th{background:#f3f4f6}td.l,th.l{text-align:left}tr.best td{background:#eefbea}
tr.sub th{background:#e8eef8;text-align:left}
.box{border-left:4px solid #888;background:#f7f7f7;padding:.5rem .9rem;margin:.8rem 0}
.rec{border-color:#2b8a3e;background:#eefbea}.warn{border-color:#c92a2a;background:#fff1f0}
.note{border-color:#e8a33d;background:#fff8e6}.muted{color:#666;font-size:.85rem}
figure{margin:1rem 0}figure img{max-width:100%;border:1px solid #eee}
figcaption{font-size:.8rem;color:#555}pre{white-space:pre-wrap;font-size:.75rem;margin:0}
dl.defs dt{font-weight:600;margin-top:.4rem}dl.defs dd{margin-left:1rem}
.sev-high{color:#c92a2a;font-weight:600}.sev-moderate{color:#b7791f}
.scroll{overflow-x:auto;max-width:100%}tr.hasv td{border-bottom:none}
tr.v td{border-top:none;color:#8a4b08;font-size:.74rem;padding-top:0}
pre.wide{white-space:pre}ul.notes{list-style:none;padding-left:0;margin-top:0}
details.more{margin:.6rem 0}details.more>summary{cursor:pointer;color:#1c5fb0}
ul.paths{font-size:.78rem;margin:.2rem 0}
"""


def e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _table(headers: Sequence[str], rows: Iterable[Sequence[str]],
           left: int = 1) -> str:
    head = "".join(f"<th class='l'>{e(h)}</th>" if i < left else f"<th>{e(h)}</th>"
                   for i, h in enumerate(headers))
    body = "".join("<tr>" + "".join(f"<td class='l'>{e(c)}</td>" if i < left
                                    else f"<td>{e(c)}</td>" for i, c in enumerate(row))
                   + "</tr>" for row in rows)
    return (f"<div class='scroll'><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody>"
            f"</table></div>")


def _figure(plot: Plot) -> str:
    return (f"<figure data-plot='{e(plot.name)}'><img alt='{e(plot.title)}' "
            f"src='data:image/png;base64,{plot.png_base64}'>"
            f"<figcaption>{e(plot.caption)}</figcaption></figure>")


def _comparison(w: WorkloadAnswer, mr: MachineReport) -> str:
    """Ranked tables; the verdicts column becomes a line under its row (keeps tables narrow)."""
    out = []
    best = {r.best.key for r in w.recommendations if r.best}
    for rk in w.rankings:
        table = comparison(rk, mr)
        assert table.headers[-1] == "verdicts"
        headers = table.headers[:-1]
        head = "".join(f"<th class='l'>{e(h)}</th>" if i < 3 else f"<th>{e(h)}</th>"
                       for i, h in enumerate(headers))
        body = []
        for (n, rows), keys in zip(table.groups, table.keys, strict=True):
            body.append(f"<tr class='sub'><th colspan='{len(headers)}'>{n} replica(s)"
                        f"</th></tr>")
            for row, key in zip(rows, keys, strict=True):
                cls = "best" if key in best else ""
                cells = "".join(f"<td class='l'>{e(c)}</td>" if i < 3 else f"<td>{e(c)}</td>"
                                for i, c in enumerate(row[:-1]))
                verdicts = row[-1]
                body.append(f"<tr class='{cls}{' hasv' if verdicts != '-' else ''}' "
                            f"data-key='{e(key)}'>{cells}</tr>")
                if verdicts != "-":
                    body.append(f"<tr class='v {cls}'><td></td><td class='l' "
                                f"colspan='{len(headers) - 1}'>verdicts: {e(verdicts)}</td></tr>")
        out.append(f"<h4>{e(rk.label)}</h4><div class='scroll'><table><thead><tr>{head}"
                   f"</tr></thead><tbody>{''.join(body)}</tbody></table></div>"
                   + _notes(table.notes))
    return "".join(out)


def _notes(lines: Sequence[str]) -> str:
    """A table's footnotes (why cells marked n/a [k] are empty), under it."""
    if not lines:
        return ""
    return ("<ul class='notes muted'>" + "".join(f"<li>{e(line)}</li>" for line in lines)
            + "</ul>")


def _recommendation(w: WorkloadAnswer) -> str:
    """Each place's answer in one sentence, what it is worth (``reports.worth``), the
    full reasoning folded beneath it; the profiles' paths the reasoning names are taken
    out of its sentences and linked under them."""
    items, dirs = [], []
    for rec in w.recommendations:
        text, found = split_profiles(rec.text)
        dirs += found
        others = []
        for o in rec.others:
            line, more = split_profiles(o)
            others.append(f"<li>{e(line)}</li>")
            dirs += more
        found_worth = worth(rec)
        short = worth_sentence(found_worth) if found_worth is not None else text
        items.append(f"<li><b>{e(rec.ranking.label)}</b>: {e(short)}."
                     f"<details><summary>why</summary><p>{rec.verb}{e(text)}</p>"
                     + (f"<ul>{''.join(others)}</ul>" if others else "")
                     + "</details></li>")
    return (f"<div class='box rec'><b>Recommendation</b><ul>{''.join(items)}</ul>"
            f"{_profile_links(list(dict.fromkeys(dirs)))}</div>")


def _href(path: str) -> str:
    """A link to a profile directory. Stored paths are relative to where the sweep ran,
    which is where ``bench report`` normally runs too: resolved here, not against the
    report's own folder."""
    return Path(path).resolve().as_uri()


def _profile_links(dirs: Sequence[str]) -> str:
    """The profiles named above, one link each, and the command that opens them all."""
    if not dirs:
        return ""
    links = "".join(f"<li><a href='{e(_href(d))}'>{e(d)}</a></li>" for d in dirs)
    return (f"<p class='muted'>Profiles compared above (open them together with "
            f"<code>{e(tensorboard_command(common_dir(dirs)))}</code>):</p>"
            f"<ul class='paths'>{links}</ul>")


def _brief(w: WorkloadAnswer) -> str:
    """The workload's places in one short table: a heading row per place, then the
    answer and what it was compared with."""
    head = "".join(f"<th class='l'>{e(h)}</th>" if i != 1 else f"<th>{e(h)}</th>"
                   for i, h in enumerate(BRIEF_HEADERS))
    body = []
    for place in brief(w):
        body.append(f"<tr class='sub'><th colspan='{len(BRIEF_HEADERS)}'>{e(place.heading)}"
                    f"</th></tr>")
        for i, row in enumerate(place.rows):
            cells = "".join(f"<td class='l'>{e(c)}</td>" if j != 1 else f"<td>{e(c)}</td>"
                            for j, c in enumerate(row.cells))
            body.append(f"<tr{' class=best' if i == 0 else ''}>{cells}</tr>")
        if place.more:
            body.append(f"<tr><td class='l muted' colspan='{len(BRIEF_HEADERS)}'>"
                        f"{place.more} more in the ranked tables below</td></tr>")
    return (f"<div class='scroll'><table class='brief'><thead><tr>{head}</tr></thead>"
            f"<tbody>{''.join(body)}</tbody></table></div>")


def _disclaimer(text: str) -> str:
    """The machine's caveat: its first sentence in view, the rest folded (it stays
    above the first plot, where a long paragraph would push the answers away)."""
    first, sep, rest = text.partition(". ")
    if not sep:
        return f"<div class='box note'><b>Read this first.</b> {e(text)}</div>"
    return (f"<div class='box note'><b>Read this first.</b> {e(first)}.<details>"
            f"<summary>What that means</summary>{e(rest)}</details></div>")


def _verdict_list(w: WorkloadAnswer, mr: MachineReport) -> str:
    items = []
    for run in sorted(w.configs, key=lambda r: (r.batch_setting, r.replicas, r.strategy)):
        found = [v for v in mr.verdicts.get(run.key, []) if v.kind != "not measured"]
        if not found:
            continue
        lis = "".join(f"<li><span class='sev-{e(v.severity)}'>{e(v.kind)} ({e(v.severity)})"
                      f"</span>: {e(v.text)}</li>" for v in found)
        items.append(f"<li>{e(run.result.spec.label())}<ul>{lis}</ul></li>")
    if not items:
        return "<p class='muted'>No run of this workload triggered a verdict.</p>"
    return f"<details open><summary>Verdicts per run</summary><ul>{''.join(items)}</ul></details>"


def _tasks(runs: Sequence[RunView]) -> str:
    """Per-process figures of multi-process runs, where present."""
    out = []
    headers = ["task", "role", "examples", "throughput (examples/s)", "device peak (MiB)",
               "host peak (MiB)", "launch to first step (s)"]
    for run in runs:
        if not run.tasks:
            continue
        rows, notes = [], Notes()
        for t in run.tasks:
            reason = why_missing(t, "device_peak_bytes")
            peak = notes.mark(headers[4], reason, t.task) if reason else _mib(t.device_peak_bytes)
            rows.append([t.task, t.role, str(t.examples) if t.examples is not None else "-",
                         _num(t.throughput), peak, _mib(t.host_peak_rss_bytes),
                         _num(t.launch_to_first_step_s)])
        how = run.combination or "not stated"
        out.append(f"<h4>Tasks of {e(run.result.spec.label())}</h4>"
                   f"<p class='muted'>global figures combined as: {e(how)}</p>"
                   + _table(headers, rows, left=2) + _notes(notes.lines()))
    return "".join(out)


def _num(value: Any) -> str:
    if isinstance(value, dict):
        value = max(value.values()) if value else None
    return f"{value:,.4g}" if isinstance(value, (int, float)) else "-"


def _mib(value: Any) -> str:
    if isinstance(value, dict):
        value = max(value.values()) if value else None
    return f"{value / 2**20:,.0f}" if isinstance(value, (int, float)) else "-"


def _profiles(configs: Sequence[ConfigView]) -> str:
    """Where each profiled configuration's step went (reports.breakdown)."""
    table = breakdown_table(configs)
    if not table.rows:
        return ""
    return ("<h4>Where the step time goes (profiled)</h4><p class='muted'>Each part in ms "
            "per step and as a share of the profiled step (see breakdown under "
            "Definitions); the parts add up to the step.</p>"
            + _table(table.headers, table.rows) + _notes(table.notes))


def _ms(value: Any) -> str:
    return f"{value * 1e3:.3g}" if isinstance(value, (int, float)) else "-"


def _allreduce_table(mr: MachineReport) -> str:
    rows = []
    for run in mr.machine.runs:
        ar = run.allreduce
        if ar is None:
            continue
        for p in ar.points:
            rows.append([run.result.spec.label(), ar.implementation, p.label, _num(p.bytes),
                         str(p.tensors), _ms(p.time_median_s), _ms(p.time_p90_s),
                         _num(p.algbw / 1e9), _num(p.busbw / 1e9)])
    if not rows:
        return ""
    return _table(["configuration", "implementation", "point", "bytes", "tensors",
                   "median (ms)", "p90 (ms)", "algbw (GB/s)", "busbw (GB/s)"], rows, left=3)


def _projection(sp: SweepProjection, mr: MachineReport) -> str:
    """One workload's projection: the plot, what the model assumes, the numbers."""
    p = sp.projection
    title = (f"Projected scaling: {sp.workload}, link of the {sp.strategy} probe "
             f"(n={p.link.probe_replicas})\n{mr.machine.hardware}, {mr.machine.dates}")
    png = base64.b64encode(projection_plot(p, sp.checks, title)).decode("ascii")
    caption = (f"Scaling efficiency (throughput / (n x one replica)) projected to "
               f"{p.points[-1].n} replicas from one replica's step ({sp.single}) and the "
               f"all-reduce probe ({sp.probe}): the band runs from no overlap (lower edge) to "
               f"full overlap of communication with the backward pass"
               + ("; the points are the runs measured here, labelled with the projection's "
                  "error there." if sp.checks else "."))
    return (f"<h4>{e(sp.workload)}: link of the {e(sp.strategy)} probe</h4>"
            + _figure(Plot("projected-scaling", f"Projected scaling: {sp.workload}", png,
                           caption))
            + f"<p>{e(sp.limits(mr.machine.cpu_only))}</p>"
            "<details open><summary>Inputs, fitted link, formulas, the projection at powers "
            "of two and the measured points</summary><div class='scroll'><pre class='wide'>"
            f"{e(projection_text(p, sp.checks))}</pre></div></details>")


def _projections(mr: MachineReport) -> str:
    found, missing = machine_projections(mr)
    return ("<h3>Projected scaling</h3>" + "".join(_projection(sp, mr) for sp in found)
            + "".join(f"<p class='muted'>{e(line)}</p>" for line in missing))


def _problems(mr: MachineReport) -> str:
    probs = mr.problems
    if not probs:
        return "<p class='muted'>Every configuration has figures.</p>"
    rows = []
    for run in probs:
        full = (run.result.reason or "").strip()
        detail = (f"<details><summary>{e(run.reason_line)}</summary><pre>{e(full)}</pre>"
                  f"</details>" if "\n" in full else e(run.reason_line or "no reason recorded"))
        rows.append(f"<tr data-key='{e(run.key)}'><td class='l'>{e(run.status)}</td>"
                    f"<td class='l'>{e(run.result.spec.label())}</td>"
                    f"<td class='l'>{detail}</td></tr>")
    return ("<table><thead><tr><th class='l'>status</th><th class='l'>configuration</th>"
            f"<th class='l'>reason</th></tr></thead><tbody>{''.join(rows)}</tbody></table>")


def _machine(mr: MachineReport, n: int) -> str:
    m = mr.machine
    parts = [f"<h2 id='machine-{n}'>Machine {n}: {e(m.hardware)}</h2>"]
    if m.disclaimer:
        parts.append(_disclaimer(m.disclaimer))
    for i, w in enumerate(mr.workloads, 1):
        # What a reader needs in a minute first (the short table, the plots); the
        # explanations and the full tables folded under them.
        parts.append(f"<h3 id='m{n}-w{i}'>{e(w.variant.label())}</h3>")
        parts.append(_brief(w))
        parts.extend(_figure(p) for p in workload_plots(w, mr))
        runs = [r for c in w.configs for r in c.runs]
        parts.append(f"<details class='more'><summary>{e(w.variant.label())} in full: why "
                     f"each answer, the ranked tables, verdicts and profiles</summary>"
                     + _sentences(mr, w) + _recommendation(w) + _comparison(w, mr)
                     + _verdict_list(w, mr) + _tasks(runs) + _profiles(w.configs) + "</details>")
    # Reference, not an answer: after the workloads, so the first screen is the answers.
    parts.append("<details><summary>Environment (fingerprint)</summary>"
                 + _table(["", ""], [[k, v] for k, v in m.facts.items()], left=2)
                 + "</details>")
    ar = allreduce_plot(mr)
    if ar is not None:
        parts.append("<h3>All-reduce probes</h3>" + _figure(ar) + _allreduce_table(mr))
    parts.append(_projections(mr))
    if mr.loop_costs:
        items = "".join(f"<li>{html.escape(cost_line(c))}</li>" for c in mr.loop_costs)
        parts.append("<h3>Keras fit vs the custom loop</h3><p>Each configuration measured "
                     "with both loops: the throughput of <code>fit</code> over the custom "
                     f"loop's, with its interval from the runs.</p><ul>{items}</ul>")
    parts.append(f"<h3>Runs without figures ({len(mr.problems)})</h3>" + _problems(mr))
    return "".join(parts)


def _answers(mr: MachineReport, n: int) -> str:
    """One machine's answers: a row per place, its place linking to the workload's
    section (where each answer is in full, folded)."""
    rows = [(i, answer_row(mr.machine, w.variant, rec))
            for i, w in enumerate(mr.workloads, 1) for rec in w.recommendations]
    head = "".join(f"<th class='l'>{e(h)}</th>" for h in HEADERS)
    body = "".join(f"<tr><td class='l'><a href='#m{n}-w{i}'>{e(r.place)}</a></td>"
                   + "".join(f"<td class='l'>{e(c)}</td>" for c in r.cells[1:]) + "</tr>"
                   for i, r in rows)
    return (f"<p><a href='#machine-{n}'>{e(mr.machine.hardware)}</a> "
            f"<span class='muted'>({len(mr.machine.runs)} results)</span></p>"
            f"<div class='scroll'><table class='answers'><thead><tr>{head}</tr></thead>"
            f"<tbody>{body}</tbody></table></div>")


def _sentences(mr: MachineReport, w: WorkloadAnswer) -> str:
    """The workload's answers in full (what ``--explain`` prints)."""
    items = "".join(f"<li>{e(answer_row(mr.machine, w.variant, rec).sentence)}</li>"
                    for rec in w.recommendations)
    return f"<p><b>The answers in full</b></p><ul>{items}</ul>" if items else ""


def _definitions() -> str:
    items = definitions()
    return ("<h2 id='definitions'>Definitions</h2><dl class='defs'>"
            + "".join(f"<dt>{e(k)}</dt><dd>{e(v)}</dd>" for k, v in items.items())
            + "</dl>")


def render_html(report: SweepReport) -> str:
    """The whole report as one HTML document."""
    toc = [_answers(mr, n) for n, mr in enumerate(report.machines, 1)]
    warnings = "".join(f"<li>{e(w)}</li>" for w in report.warnings)
    body = [f"<h1>stratbench report</h1><p class='muted'>{e(report.source)}: "
            f"{len(report.results)} result(s), generated {e(report.generated_at)}</p>"]
    if warnings:
        body.append(f"<div class='box warn'><b>Skipped files</b><ul>{warnings}</ul></div>")
    if len(report.machines) > 1:
        body.append("<div class='box note'>These results come from "
                    f"{len(report.machines)} different machines (fingerprint machine_id); "
                    "each has its own section and figures are never combined across them."
                    "</div>")
    if not report.machines:
        body.append("<p>No results to report.</p>")
    body.append(f"<div class='box rec'><b>Answers</b> (per workload and batch: what to use, "
                f"what kind of answer it is, against what, the noise, and what would settle "
                f"it; {e(LEGEND)}){''.join(toc)}</div>")
    body.extend(_machine(mr, n) for n, mr in enumerate(report.machines, 1))
    body.append(_definitions())
    return ("<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
            "<meta name='viewport' content='width=device-width, initial-scale=1'>"
            f"<title>stratbench report: {e(report.source.name)}</title>"
            f"<style>{CSS}</style></head><body>{''.join(body)}</body></html>\n")
