"""Noise-aware comparison of two sets of results (a baseline and a current run).

For every configuration present on both sides (matched by ``RunSpec.key()``,
recomputed from the stored spec so that results written before a RunSpec field
was added still match), each metric in ``METRICS`` is compared on its
per-window samples. A metric *regressed* when both hold:

- the change is statistically significant (``TESTS[method]`` on the windows), and
- the relative change of the medians is worse than the metric's threshold.

Either alone cries wolf: a significant 0.5% change is real but irrelevant, and a
7% change within a noisy configuration is not evidence. A configuration that was
``ok`` in the baseline and failed, ran out of memory or timed out now is a
regression too. Differences in the environment fingerprint are listed, loudly.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from bench.errors import BenchError
from bench.registry import Registry
from bench.regress.significance import TESTS, bootstrap_ratio_interval
from bench.results.schema import Figures, RunResult
from bench.results.stats import coefficient_of_variation

DEFAULT_THRESHOLD = 0.05
DEFAULT_ALPHA = 0.05
DEFAULT_METHOD = "mannwhitney"
CONFIDENCE = 0.95  # of the reported bootstrap interval, whatever the method
# With 2+ baseline runs of a configuration, its run-to-run spread is known: windows of
# one process share that process's conditions (load, memory layout, thread placement),
# so a new run can differ from the old ones by more than their windows do. A change
# smaller than this many run-to-run CVs is what re-running the same code can show.
RUN_NOISE_K = 2.0

COMPARISON_DEFINITION = (
    "change = median(current windows) / median(baseline windows) - 1. A metric regressed "
    "when the change is significant (the chosen test on per-window values, two-sided) AND "
    "worse than the metric's threshold. noise floor = coefficient of variation (std/mean) of "
    "the per-window throughputs of one side. Several runs of one configuration on a side "
    f"are pooled (their windows together); with 2+ baseline runs the threshold is raised "
    f"to {RUN_NOISE_K:g} x the run-to-run CV of their medians when that is larger.")


class CompareError(BenchError):
    """Inputs that cannot be compared (usage error at the CLI: exit code 2)."""


# -- metrics ------------------------------------------------------------------------
@dataclass(frozen=True)
class Metric:
    """A figure compared window by window."""

    name: str
    unit: str
    higher_is_better: bool
    description: str
    samples: Callable[[Figures], list[float]]


def _device_peaks(f: Figures) -> list[float]:
    return [float(max(w.device_peak_bytes.values())) for w in f.windows if w.device_peak_bytes]


def _host_peaks(f: Figures) -> list[float]:
    return [float(w.host_peak_rss_bytes) for w in f.windows if w.host_peak_rss_bytes]


METRICS: Registry[Metric] = Registry("metric")
for _m in (
    Metric("throughput", "examples/s", True, "global throughput of each window",
           lambda f: [w.global_throughput for w in f.windows]),
    Metric("step_time", "s", False, "median step time of each window",
           lambda f: [w.step_time.median_s for w in f.windows]),
    Metric("device_memory", "bytes", False,
           "device peak of each window (max over devices; process-wide on CPU)", _device_peaks),
    Metric("host_memory", "bytes", False, "host peak RSS of each window", _host_peaks),
):
    METRICS.register(_m.name, _m)


# -- thresholds ---------------------------------------------------------------------
def parse_fraction(text: str, what: str) -> float:
    """``5%`` or ``0.05`` -> 0.05; the error names ``what`` and the received text."""
    raw = text.strip()
    try:
        value = float(raw[:-1]) / 100.0 if raw.endswith("%") else float(raw)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise CompareError(f"{what} must be a fraction like 5% or 0.05. Received: {text!r}")
    return value


@dataclass(frozen=True)
class Thresholds:
    """Smallest relative change that counts, per metric (``default`` for the rest)."""

    default: float = DEFAULT_THRESHOLD
    per_metric: dict[str, float] = field(default_factory=dict)

    def of(self, metric: str) -> float:
        return self.per_metric.get(metric, self.default)

    @classmethod
    def parse(cls, items: Iterable[str]) -> Thresholds:
        """From ``["5%", "memory=10%", "throughput=0.03"]`` (``memory`` = both memories)."""
        default, per = DEFAULT_THRESHOLD, {}
        for item in items:
            name, sep, value = item.rpartition("=")
            if not sep:
                default = parse_fraction(value, "--threshold")
                continue
            names = ["device_memory", "host_memory"] if name == "memory" else [name]
            for n in names:
                METRICS.get(n)  # unknown metric names are refused with the valid ones
                per[n] = parse_fraction(value, f"--threshold {name}")
        return cls(default, per)


# -- results of a comparison --------------------------------------------------------
VERDICTS = ("regressed", "improved", "unchanged", "inconclusive")  # of a metric
# Of a configuration: the metrics' verdicts, plus status changes between the sides.
CONFIG_VERDICTS = (*VERDICTS, "broken", "fixed", "not comparable")


@dataclass
class MetricComparison:
    metric: str
    unit: str
    baseline_median: float
    current_median: float
    change: float  # relative: current / baseline - 1
    interval: tuple[float, float]  # bootstrap interval of the relative change
    p_value: float | None
    significant: bool
    threshold: float
    baseline_windows: int
    current_windows: int
    baseline_cv: float
    current_cv: float
    verdict: str
    note: str = ""
    run_to_run_cv: float | None = None  # of the baseline runs' medians (2+ runs)


@dataclass
class ConfigComparison:
    key: str
    label: str
    baseline_status: str
    current_status: str
    baseline_runs: int
    current_runs: int
    metrics: list[MetricComparison] = field(default_factory=list)
    verdict: str = "unchanged"
    note: str = ""

    @property
    def noise_floor(self) -> tuple[float | None, float | None]:
        """Throughput CV across windows (baseline, current), the measured noise floor."""
        for m in self.metrics:
            if m.metric == "throughput":
                return m.baseline_cv, m.current_cv
        return None, None


@dataclass
class FingerprintDiff:
    field: str
    baseline: list[str]
    current: list[str]
    severity: str  # "warning": may explain a change; "info": expected (code, host)
    configurations: int  # how many matched configurations differ in it


@dataclass
class Report:
    baseline: str
    current: str
    method: str
    alpha: float
    thresholds: Thresholds
    configs: list[ConfigComparison]
    only_baseline: list[str]
    only_current: list[str]
    fingerprint: list[FingerprintDiff]
    definition: str = COMPARISON_DEFINITION

    @property
    def regressed(self) -> list[ConfigComparison]:
        return [c for c in self.configs if c.verdict in ("regressed", "broken")]

    @property
    def warnings(self) -> list[FingerprintDiff]:
        return [d for d in self.fingerprint if d.severity == "warning"]

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["regressed"] = [c.key for c in self.regressed]
        d["units"] = {"baseline_median": "the metric's unit (metrics[].unit)",
                      "current_median": "the metric's unit (metrics[].unit)",
                      "change": "ratio (current / baseline - 1)",
                      "interval": "ratio (95% bootstrap interval of change)",
                      "threshold": "ratio", "baseline_cv": "ratio (std/mean of windows)",
                      "current_cv": "ratio (std/mean of windows)",
                      "run_to_run_cv": "ratio (std/mean of baseline run medians)",
                      "alpha": "probability", "p_value": "probability (two-sided)"}
        for c, cd in zip(self.configs, d["configs"], strict=True):
            cd["noise_floor_cv"] = dict(zip(("baseline", "current"), c.noise_floor, strict=True))
        return d

    def to_json(self) -> str:
        """Strict JSON: undefined figures (e.g. a change from 0 bytes) become null."""
        return json.dumps(_finite(self.to_dict()), indent=2, allow_nan=False) + "\n"


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


# -- comparing ----------------------------------------------------------------------
def identity(result: RunResult) -> str:
    """The key two results are matched by (recomputed: see the module docstring)."""
    return result.spec.key()


def group(results: Iterable[RunResult]) -> dict[str, list[RunResult]]:
    out: dict[str, list[RunResult]] = {}
    for r in results:
        out.setdefault(identity(r), []).append(r)
    return out


def compare_metric(metric: Metric, base: Sequence[float], cur: Sequence[float],
                   threshold: float, method: str, alpha: float,
                   run_to_run_cv: float | None = None) -> MetricComparison:
    """Compare one metric's per-window samples; see the module docstring for the rule."""
    asked = threshold
    if run_to_run_cv is not None:
        threshold = max(threshold, RUN_NOISE_K * run_to_run_cv)
    b_med, c_med = float(np.median(base)), float(np.median(cur))
    change = c_med / b_med - 1.0 if b_med else math.nan
    lo, hi = bootstrap_ratio_interval(base, cur, CONFIDENCE)
    outcome = TESTS.get(method).run(base, cur, alpha)
    worse = -change if metric.higher_is_better else change
    if not outcome.possible:
        verdict = "inconclusive"
    elif outcome.significant and worse > threshold:
        verdict = "regressed"
    elif outcome.significant and -worse > threshold:
        verdict = "improved"
    else:
        verdict = "unchanged"
    note = outcome.note
    if verdict == "unchanged" and outcome.significant:
        note = f"significant but within the {threshold:.0%} threshold"
    elif verdict == "unchanged" and abs(worse) > threshold:
        note = "beyond the threshold but not significant (noise)"
    noisiest = max(coefficient_of_variation(base), coefficient_of_variation(cur))
    if verdict in ("regressed", "improved") and noisiest > threshold:
        # Seen when other processes share the machine: say so rather than stay silent.
        note = (f"noisy: window CV up to {noisiest:.0%} exceeds the threshold; the machine "
                f"may have been busy, confirm with a re-run")
    if threshold > asked and run_to_run_cv is not None:
        raised = (f"threshold {threshold:.0%}: {RUN_NOISE_K:g} x the baseline runs' "
                  f"run-to-run CV {run_to_run_cv:.1%}")
        note = f"{note}; {raised}" if note else raised
    return MetricComparison(
        metric=metric.name, unit=metric.unit, baseline_median=b_med, current_median=c_med,
        change=change, interval=(lo - 1.0, hi - 1.0), p_value=outcome.p_value,
        significant=outcome.significant, threshold=threshold, baseline_windows=len(base),
        current_windows=len(cur), baseline_cv=coefficient_of_variation(base),
        current_cv=coefficient_of_variation(cur), verdict=verdict, note=note,
        run_to_run_cv=run_to_run_cv)


def _pooled(results: Sequence[RunResult], metric: Metric) -> list[float]:
    return [v for r in results if r.figures is not None for v in metric.samples(r.figures)]


def _run_to_run_cv(results: Sequence[RunResult], metric: Metric) -> float | None:
    medians = [float(np.median(v)) for r in results if r.figures
               and (v := metric.samples(r.figures))]
    return coefficient_of_variation(medians) if len(medians) >= 2 else None


def _status(results: Sequence[RunResult]) -> str:
    statuses = sorted({r.status for r in results})
    return "ok" if statuses == ["ok"] else "/".join(statuses)


def compare_config(base: Sequence[RunResult], cur: Sequence[RunResult], *,
                   thresholds: Thresholds, method: str, alpha: float) -> ConfigComparison:
    """Compare the runs of one configuration on both sides."""
    first = (cur or base)[0]
    out = ConfigComparison(key=identity(first), label=first.spec.label(),
                           baseline_status=_status(base), current_status=_status(cur),
                           baseline_runs=len(base), current_runs=len(cur))
    base_ok = [r for r in base if r.status == "ok" and r.figures]
    cur_ok = [r for r in cur if r.status == "ok" and r.figures]
    if base_ok and not cur_ok:
        reason = next((r.reason for r in cur if r.reason), "") or ""
        out.verdict, out.note = "broken", (f"ok before, {out.current_status} now: "
                                           f"{reason.splitlines()[0] if reason else ''}")
        return out
    if not base_ok:
        out.verdict = "fixed" if cur_ok else "not comparable"
        out.note = f"baseline {out.baseline_status}"
        return out
    for name, metric in METRICS.items():
        b, c = _pooled(base_ok, metric), _pooled(cur_ok, metric)
        if b and c:
            out.metrics.append(compare_metric(metric, b, c, thresholds.of(name), method, alpha,
                                              _run_to_run_cv(base_ok, metric)))
    # Worst first: one regressed metric makes the configuration regressed.
    verdicts = {m.verdict for m in out.metrics}
    out.verdict = next((v for v in ("regressed", "improved", "inconclusive") if v in verdicts),
                       "unchanged")
    return out


def compare(baseline: Sequence[RunResult], current: Sequence[RunResult], *,
            baseline_label: str = "baseline", current_label: str = "current",
            thresholds: Thresholds | None = None, method: str = DEFAULT_METHOD,
            alpha: float = DEFAULT_ALPHA) -> Report:
    """Compare every configuration present on both sides."""
    TESTS.get(method)  # refuse an unknown method before doing anything
    if not 0 < alpha < 1:
        raise CompareError(f"alpha must be between 0 and 1. Received: alpha={alpha!r}")
    if not baseline:
        raise CompareError(f"no results on the baseline side ({baseline_label})")
    if not current:
        raise CompareError(f"no results on the current side ({current_label})")
    thresholds = thresholds or Thresholds()
    b, c = group(baseline), group(current)
    common = [k for k in c if k in b]
    configs = [compare_config(b[k], c[k], thresholds=thresholds, method=method, alpha=alpha)
               for k in sorted(common, key=lambda k: c[k][0].spec.label())]
    return Report(
        baseline=baseline_label, current=current_label, method=method, alpha=alpha,
        thresholds=thresholds, configs=configs,
        only_baseline=sorted(b[k][0].spec.label() for k in b if k not in c),
        only_current=sorted(c[k][0].spec.label() for k in c if k not in b),
        fingerprint=fingerprint_diffs([(b[k], c[k]) for k in common]))


# -- fingerprints -------------------------------------------------------------------
# Differences that can move a figure: hardware, software stack, relevant variables.
_WARN_FIELDS = ("machine_id", "cpu_model", "cpu_cores", "memory_bytes", "gpus", "tpu",
                "tensorflow", "keras", "numpy", "python", "platform", "tf_build",
                "physical_devices", "threads")
# Expected to differ between a baseline and a current run; listed, not warned about.
_INFO_FIELDS = ("git.commit", "git.dirty", "host")


def _fields(env: dict[str, Any]) -> dict[str, str]:
    out = {k: json.dumps(env.get(k), sort_keys=True) for k in _WARN_FIELDS if k in env}
    git = env.get("git") or {}
    out["git.commit"] = json.dumps(git.get("commit"))
    out["git.dirty"] = json.dumps(git.get("dirty"))
    out["host"] = json.dumps(env.get("host"))
    for var, value in (env.get("env_vars") or {}).items():
        out[f"env_vars.{var}"] = json.dumps(value)
    return out


def fingerprint_diffs(pairs: Sequence[tuple[Sequence[RunResult], Sequence[RunResult]]]
                      ) -> list[FingerprintDiff]:
    """Fields whose values differ between the two sides of matched configurations."""
    found: dict[str, tuple[set[str], set[str], int]] = {}
    for base, cur in pairs:
        b_env = [_fields(r.environment) for r in base]
        c_env = [_fields(r.environment) for r in cur]
        names = {n for e in b_env + c_env for n in e}
        for name in names:
            bv = {e.get(name, '"(unset)"') for e in b_env}
            cv = {e.get(name, '"(unset)"') for e in c_env}
            if bv != cv:
                old = found.get(name, (set(), set(), 0))
                found[name] = (old[0] | bv, old[1] | cv, old[2] + 1)
    diffs = []
    for name in sorted(found):
        bv, cv, count = found[name]
        severity = "info" if name in _INFO_FIELDS else "warning"
        diffs.append(FingerprintDiff(name, sorted(_plain(v) for v in bv),
                                     sorted(_plain(v) for v in cv), severity, count))
    return sorted(diffs, key=lambda d: (d.severity != "warning", d.field))


def _plain(encoded: str) -> str:
    value = json.loads(encoded)
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)
