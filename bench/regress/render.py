"""Render a comparison (bench.regress.compare.Report) as a terminal table or Markdown."""

from __future__ import annotations

import math
from collections.abc import Callable

from bench.registry import Registry
from bench.regress.compare import ConfigComparison, FingerprintDiff, MetricComparison, Report

MIB = 2**20

_MARK = {"regressed": "REGRESSED", "broken": "BROKEN", "improved": "improved",
         "fixed": "fixed", "unchanged": "ok", "inconclusive": "inconclusive",
         "not comparable": "n/a"}


def _value(v: float, unit: str) -> str:
    if not math.isfinite(v):
        return "-"
    if unit == "s":
        return f"{v * 1e3:.3f} ms"
    if unit == "bytes":
        return f"{v / MIB:,.1f} MiB"
    return f"{v:,.1f} {unit}"


def _pct(v: float) -> str:
    return "-" if not math.isfinite(v) else f"{v * 100:+.1f}%"


def _p(m: MetricComparison) -> str:
    return "-" if m.p_value is None else f"{m.p_value:.3g}"


def _row(c: ConfigComparison, m: MetricComparison) -> list[str]:
    lo, hi = m.interval
    return [c.label, m.metric, _value(m.baseline_median, m.unit),
            _value(m.current_median, m.unit), _pct(m.change), f"[{_pct(lo)}, {_pct(hi)}]",
            _p(m), f"{m.baseline_windows}/{m.current_windows}",
            f"{m.baseline_cv * 100:.1f}%/{m.current_cv * 100:.1f}%",
            _MARK[m.verdict] + (f" ({m.note})" if m.note else "")]


HEADER = ["configuration", "metric", "baseline", "current", "change", "95% interval", "p",
          "windows b/c", "CV b/c", "verdict"]


def rows(report: Report) -> list[list[str]]:
    """One row per configuration and metric; status changes get one row."""
    out: list[list[str]] = []
    for c in report.configs:
        if not c.metrics:
            out.append([c.label, "status", c.baseline_status, c.current_status, "", "", "",
                        "", "", _MARK[c.verdict] + (f" ({c.note})" if c.note else "")])
        out += [_row(c, m) for m in c.metrics]
    return out


def fingerprint_lines(diffs: list[FingerprintDiff]) -> list[str]:
    return [f"{d.field}: {', '.join(d.baseline)} -> {', '.join(d.current)}"
            + (f" ({d.configurations} configuration(s))" if d.configurations > 1 else "")
            for d in diffs]


def warning_banner(report: Report) -> str:
    """The loud warning printed when fingerprints differ ("" when they do not)."""
    if not report.warnings:
        return ""
    lines = ["!" * 78,
             "WARNING: baseline and current come from DIFFERENT ENVIRONMENTS. A change",
             "below may come from these differences rather than from the code:",
             *[f"  {line}" for line in fingerprint_lines(report.warnings)],
             "!" * 78]
    return "\n".join(lines)


def summary(report: Report) -> str:
    n = len(report.configs)
    counts: dict[str, int] = {}
    for c in report.configs:
        counts[c.verdict] = counts.get(c.verdict, 0) + 1
    parts = ", ".join(f"{v} {_MARK[k]}" for k, v in sorted(counts.items()))
    head = (f"{len(report.regressed)} of {n} configuration(s) regressed" if report.regressed
            else f"no regression in {n} configuration(s)")
    return f"{head} ({parts})" if parts else head


def _settings(report: Report) -> str:
    per = ", ".join(f"{k} {v:.0%}" for k, v in sorted(report.thresholds.per_metric.items()))
    return (f"test: {report.method}, alpha {report.alpha:g}; threshold "
            f"{report.thresholds.default:.0%}" + (f" ({per})" if per else ""))


def as_table(report: Report) -> str:
    """Plain-text table for the terminal."""
    table = [HEADER, *rows(report)]
    widths = [max(len(r[i]) for r in table) for i in range(len(HEADER) - 1)]
    lines = [f"baseline: {report.baseline}", f"current:  {report.current}", _settings(report)]
    banner = warning_banner(report)
    if banner:
        lines += ["", banner]
    lines.append("")
    for r in table:
        lines.append("  ".join(v.ljust(w) for v, w in zip(r, widths, strict=False))
                     + "  " + r[-1])
    lines += _tail(report, bullet="  ")
    lines += ["", summary(report)]
    return "\n".join(lines)


def _tail(report: Report, bullet: str) -> list[str]:
    out: list[str] = []
    info = [d for d in report.fingerprint if d.severity == "info"]
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
    verdict = "❌" if report.regressed else "✅"
    lines = [f"## stratbench compare {verdict} {summary(report)}", "",
             f"- baseline: `{report.baseline}`", f"- current: `{report.current}`",
             f"- {_settings(report)}", ""]
    if report.warnings:
        lines += ["> [!WARNING]",
                  "> **Baseline and current come from different environments**; a change "
                  "may come from these differences rather than from the code:"]
        lines += [f"> - `{ln}`" for ln in fingerprint_lines(report.warnings)]
        lines.append("")
    lines += ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    for r in rows(report):
        cells = [x.replace("|", "\\|") for x in r]
        if cells[-1].startswith(("REGRESSED", "BROKEN")):
            cells[-1] = f"**{cells[-1]}**"
        lines.append("| " + " | ".join(cells) + " |")
    lines += [ln if not ln.startswith("  ") else f"- {ln.strip()}"
              for ln in _tail(report, bullet="  ")]
    lines += ["", f"<sub>{report.definition}</sub>", ""]
    return "\n".join(lines)


Renderer = Callable[[Report], str]
FORMATS: Registry[Renderer] = Registry("output format")
FORMATS.register("table", as_table)
FORMATS.register("markdown", as_markdown)
FORMATS.register("json", lambda report: report.to_json())
