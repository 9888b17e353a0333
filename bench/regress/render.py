"""Render a comparison (bench.regress.compare.Report) as a terminal table or Markdown.

Differences between the sides' fingerprints come first and loudly: a changed
TensorFlow, driver or ``TF_*`` variable is usually what a regression is made of.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from bench.registry import Registry
from bench.regress.compare import (
    CANNOT_TELL,
    ConfigComparison,
    FingerprintDiff,
    MeasureComparison,
    Report,
)
from bench.regress.options import HISTORY_SWEEPS
from bench.results.stats.comparison import WELCH
from reports.columns import display

_MARK = {"regressed": "REGRESSED", "broken": "BROKEN", "improved": "improved",
         "fixed": "fixed", "ok": "ok", CANNOT_TELL: "CANNOT TELL at this noise",
         "not comparable": "n/a"}


def _pct(v: float | None) -> str:
    return "-" if v is None or not math.isfinite(v) else f"{v * 100:+.1f}%"


def _value(m: MeasureComparison, side: str) -> str:
    """A side's figure as the reports show it (their display of its unit)."""
    v = m.baseline if side == "baseline" else m.current
    if not math.isfinite(v):
        return "-"
    d = display(m.unit)
    return f"{d.text(v * d.scale)} {d.unit}".strip()


def _change(m: MeasureComparison) -> str:
    """The change of the figure itself, and which way that is (worse or better)."""
    if not math.isfinite(m.change) or abs(m.change) < 5e-4:
        return _pct(m.change)
    worse = (m.change < 0) == (m.better == "higher")
    return f"{_pct(m.change)} ({'worse' if worse else 'better'})"


def _detectable(m: MeasureComparison) -> str:
    return "-" if not math.isfinite(m.detectable) else f"{m.detectable * 100:.1f}%"


def _noise(m: MeasureComparison) -> str:
    """The noise that decided, with its degrees of freedom and the test's name."""
    if m.noise_cv is None:
        return "unknown"
    test = "Welch" if m.test == WELCH else "t"
    return f"{m.noise_cv * 100:.1f}% per {m.noise_unit} ({test}, df {m.noise_df:.3g})"


def _row(c: ConfigComparison, m: MeasureComparison) -> list[str]:
    lo, hi = m.interval
    p = "-" if m.p_value is None else f"{m.p_value:.3g}"
    return [c.label, m.label, _value(m, "baseline"), _value(m, "current"), _change(m),
            f"[{_pct(lo)}, {_pct(hi)}]", p, _detectable(m),
            f"{m.baseline_runs}/{m.current_runs}", _noise(m),
            _MARK[m.verdict] + (f" ({m.note})" if m.note else "")]


HEADER = ["configuration", "measure", "baseline", "current", "change", "interval", "p",
          "detectable", "runs b/c", "noise", "verdict"]


def rows(report: Report) -> list[list[str]]:
    """One row per configuration and measure; status changes get one row, and so does
    a measure a side has no value of, with the reason its results give."""
    out: list[list[str]] = []
    for c in report.configs:
        if not c.measures:
            out.append([c.label, "status", c.baseline_status, c.current_status, "", "", "",
                        "", f"{c.baseline_runs}/{c.current_runs}", "",
                        _MARK[c.verdict] + (f" ({c.note})" if c.note else "")])
        out += [_row(c, m) for m in c.measures]
        out += [[c.label, name, "", "", "", "", "", "", f"{c.baseline_runs}/{c.current_runs}",
                 "", f"not compared ({why})"] for name, why in c.unmeasured.items()]
    return out


def fingerprint_lines(diffs: list[FingerprintDiff]) -> list[str]:
    return [f"{d.field}: {', '.join(d.baseline)} -> {', '.join(d.current)}"
            + (f" ({d.configurations} configuration(s))" if d.configurations > 1 else "")
            for d in diffs]


def warning_banner(report: Report) -> str:
    """The loud list of software/hardware differences ("" when there are none)."""
    software = [d for d in report.warnings if d.kind == "software"]
    hardware = [d for d in report.warnings if d.kind == "hardware"]
    if not software and not hardware:
        return ""
    lines = ["!" * 78]
    if software:
        lines += ["SOFTWARE DIFFERS between baseline and current. A change below may come",
                  "from these differences rather than from the code:",
                  *[f"  {line}" for line in fingerprint_lines(software)]]
    if hardware:
        lines += ["HARDWARE DIFFERS between baseline and current: the figures are not",
                  "comparable machine to machine:",
                  *[f"  {line}" for line in fingerprint_lines(hardware)]]
    lines.append("!" * 78)
    return "\n".join(lines)


def power_line(report: Report) -> str:
    """What the comparison could have caught, e.g. "time changes of 6.1%-14.0% ..."."""
    found = [d for d in report.detectable("time") if math.isfinite(d)]
    unknown = len(report.detectable("time")) - len(found)
    if not found:
        return ("detection power: unknown (no configuration has 2+ runs on a side; the "
                "run-to-run noise cannot be measured)") if unknown else ""
    span = (f"{min(found):.1%}" if len(found) == 1 or min(found) == max(found)
            else f"{min(found):.1%} to {max(found):.1%}")
    line = (f"detection power: on this noise, time changes of {span} or more (per "
            f"configuration) are caught with {report.power:.0%} power at alpha "
            f"{report.alpha:g}; threshold {report.thresholds.of('time'):.0%}")
    return line + (f"; unknown for {unknown} configuration(s)" if unknown else "")


def summary(report: Report) -> str:
    n = len(report.configs)
    counts: dict[str, int] = {}
    for c in report.configs:
        counts[c.verdict] = counts.get(c.verdict, 0) + 1
    parts = ", ".join(f"{v} {_MARK[k]}" for k, v in sorted(counts.items()))
    if report.regressed:
        head = f"{len(report.regressed)} of {n} configuration(s) regressed"
    elif report.cannot_tell:
        head = (f"cannot tell for {len(report.cannot_tell)} of {n} configuration(s): the "
                f"noise hides changes of the threshold's size; bench ab would decide "
                f"(commands below)")
    else:
        head = f"no regression in {n} configuration(s)"
    return f"{head} ({parts})" if parts else head


def _settings(report: Report) -> str:
    per = ", ".join(f"{k} {v:.0%}" for k, v in sorted(report.thresholds.per_family.items()))
    return (f"alpha {report.alpha:g}, power {report.power:.0%}; threshold "
            f"{report.thresholds.default:.0%}" + (f" ({per})" if per else ""))


def pooling_line(report: Report) -> str:
    """Where the run-to-run noise came from, and which test decided."""
    sources = ["its own runs"]
    if report.pooling.family:
        sources.append("its family's (same workload, variant and strategy) where their "
                       "noise agrees")
    if report.pooling.history:
        sources.append(f"its last {HISTORY_SWEEPS} stored sweeps on the same machine "
                       f"({report.history_configs} configuration(s) had some)")
    return (f"noise: each configuration's run-to-run noise pooled over {', '.join(sources)}; "
            f"Welch's t where the sides' run counts or noise differ, Student's t otherwise")


AB_HEADER = ("cannot tell: bench ab would decide it, with both sides' runs interleaved in "
             "one session and compared pair by pair (the drift between sweeps cancels); "
             "give each side what differs in it (see the differences above):")


def ab_lines(report: Report, code: Callable[[str], str] = str, bullet: str = "  "
             ) -> list[str]:
    """The ``bench ab`` commands that would decide what this comparison cannot tell."""
    found = [c for c in report.cannot_tell if c.ab_command]
    if not found:
        return []
    return ["", AB_HEADER, *[f"{bullet}{c.label}: {code(c.ab_command)}" for c in found]]


def as_table(report: Report) -> str:
    """Plain-text table for the terminal (differences in the fingerprint first)."""
    lines: list[str] = []
    banner = warning_banner(report)
    if banner:
        lines += [banner, ""]
    lines += [f"baseline: {report.baseline}", f"current:  {report.current}",
              _settings(report), pooling_line(report), ""]
    table = [HEADER, *rows(report)]
    widths = [max(len(r[i]) for r in table) for i in range(len(HEADER) - 1)]
    for r in table:
        lines.append("  ".join(v.ljust(w) for v, w in zip(r, widths, strict=False))
                     + "  " + r[-1])
    lines += _tail(report, bullet="  ") + ab_lines(report)
    power = power_line(report)
    lines += ["", summary(report)] + ([power] if power else [])
    return "\n".join(lines)


def _tail(report: Report, bullet: str) -> list[str]:
    out: list[str] = []
    info = [d for d in report.fingerprint if d.kind == "info"]
    if info:
        out += ["", "also differs (expected):", *[bullet + ln for ln in fingerprint_lines(info)]]
    if report.only_baseline:
        out += ["", "only in the baseline (not compared):",
                *[bullet + x for x in report.only_baseline]]
    if report.only_current:
        out += ["", "only in the current run (not compared):",
                *[bullet + x for x in report.only_current]]
    return out


def as_markdown(report: Report) -> str:
    """Markdown for CI summaries (e.g. $GITHUB_STEP_SUMMARY)."""
    verdict = "❌" if report.regressed else ("⚠️" if report.cannot_tell else "✅")
    lines = [f"## stratbench compare {verdict} {summary(report)}", ""]
    software = [d for d in report.warnings if d.kind == "software"]
    hardware = [d for d in report.warnings if d.kind == "hardware"]
    if software:
        lines += ["> [!WARNING]",
                  "> **The software differs between baseline and current**; a change may "
                  "come from these differences rather than from the code:"]
        lines += [f"> - `{ln}`" for ln in fingerprint_lines(software)]
        lines.append("")
    if hardware:
        lines += ["> [!CAUTION]", "> **The hardware differs**: figures are not comparable:"]
        lines += [f"> - `{ln}`" for ln in fingerprint_lines(hardware)]
        lines.append("")
    power = power_line(report)
    lines += [f"- baseline: `{report.baseline}`", f"- current: `{report.current}`",
              f"- {_settings(report)}", f"- {pooling_line(report)}"] + (
        [f"- {power}"] if power else []) + [""]
    lines += ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    for r in rows(report):
        cells = [x.replace("|", "\\|") for x in r]
        if cells[-1].startswith(("REGRESSED", "BROKEN", "CANNOT TELL")):
            cells[-1] = f"**{cells[-1]}**"
        lines.append("| " + " | ".join(cells) + " |")
    lines += [ln if not ln.startswith("  ") else f"- {ln.strip()}"
              for ln in _tail(report, bullet="  ")]
    lines += ab_lines(report, code=lambda command: f"`{command}`", bullet="- ")
    lines += ["", f"<sub>{report.definition}</sub>", ""]
    return "\n".join(lines)


Renderer = Callable[[Report], str]
FORMATS: Registry[Renderer] = Registry("output format")
FORMATS.register("table", as_table)
FORMATS.register("markdown", as_markdown)
FORMATS.register("json", lambda report: report.to_json())
