"""Noise-aware comparison of two sets of results (a baseline and a current side).

The run (one process) is the unit of replication. Windows of one process share its
conditions (load, memory layout, thread placement), so runs differ from each other
by more than their windows do; windows only say how precisely their own run was
measured. Each run gives one figure per measure (the median of its windows), and
``bench.results.stats.comparison.compare_runs`` compares the two groups of run figures with
the run-to-run noise (nightlies: night-to-night too). That noise is pooled
(``bench.regress.pooling``) over the configuration's stored sweeps on the same
machine and the other configurations of its family, so that 2 runs a side do not
mean 2 degrees of freedom; each side keeps its own noise (Welch's t) where the
sides' run counts or noise differ, one common noise (Student's t) otherwise.

For every configuration present on both sides (matched by ``RunSpec.key()``,
recomputed from the stored spec so that results written before a RunSpec field was
added still match), each family of figures gets ONE decision. The measures are the
schema's figures declared with a family (``unit(..., compare=...)``, read through
``bench.results.figures``), under their one name, each with its direction and its
per-window values:

- ``time``: ``global_throughput``. Per-replica throughput, step time, FLOP/s and MFU
  are this one measurement seen other ways up, so they are not judged again;
- ``memory``: ``memory_device_peak_bytes`` and ``memory_host_peak_rss_bytes``, each
  judged; the family takes the worst.

Verdicts (of a measure and of a family), at ``alpha`` with 90% power:

- ``regressed``: the change is significant and worse than the threshold;
- ``improved``: significant and better than the threshold;
- ``cannot tell``: otherwise, when the minimum detectable change (what this
  comparison would catch with 90% power at its measured noise) exceeds the
  threshold: the gate could not have seen a regression of the threshold's size.
  The configuration then carries the ``bench ab`` command that would decide it
  (both sides interleaved in one session, compared pair by pair);
- ``ok``: otherwise (a regression of the threshold's size would have been caught).

A configuration that was ``ok`` in the baseline and failed, ran out of memory or
timed out now is ``broken``, a regression too. Every difference between the
sides' fingerprints is listed: software first (TensorFlow, CUDA, driver, Python,
``TF_*``/``NCCL_*`` variables), since that is usually the cause.
"""

from __future__ import annotations

import json
import math
import shlex
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from functools import partial
from typing import Any

import numpy as np

from bench.env import hardware_identity, software_stack, stored_machine_id
from bench.errors import BenchError
from bench.exits import Exit
from bench.regress.options import COMPARE_ALPHA, COMPARE_THRESHOLD, FAMILIES, MEASURES
from bench.regress.pooling import Grouped, PooledNoise, Pooling, pool_noise
from bench.results.figures import Figure
from bench.results.levels import DEFAULT_POWER
from bench.results.schema import RunResult
from bench.results.stats.comparison import STUDENT, RunComparison, compare_runs
from bench.results.stats.settlement import ABOVE_CODE, BELOW_CODE, interval_decision
from bench.spec import RunSpec, cli_args

# Defined in bench.regress.options, which bench compare's parser reads without scipy.
DEFAULT_THRESHOLD = COMPARE_THRESHOLD
DEFAULT_ALPHA = COMPARE_ALPHA

COMPARISON_DEFINITION = (
    "The run (one process) is the unit: each run's figure is the median of its windows; "
    "windows only give a run's own precision (a floor to its noise). change = ratio of the "
    "geometric means of the run figures, current / baseline - 1, of the figure itself "
    "(throughput: - = slower; memory: + = more); worse is against the figure's better "
    "direction. The interval and p come from a t test on the log run figures, with the "
    "run-to-run noise pooled (within-group variance over all groups' degrees of freedom) "
    "over both sides, the configuration's stored sweeps on the same machine and the "
    "configurations of its family (workload, variant, strategy) whose noise agrees (F "
    "test); Student's t on that common noise, or Welch's t (each side its own noise, "
    "Welch-Satterthwaite df) where the sides' run counts or noise differ; the "
    "nightly-to-nightly noise instead when the baseline pools several nightlies and it "
    "is larger. detectable = the change found with 90% power at alpha on that noise. "
    "regressed/improved: the whole interval beyond the threshold (the figure moved by more "
    "than a factor 1 + threshold, either way up, as the reports and bench ab decide); "
    "cannot tell: otherwise, when the change is beyond the noise and its estimate beyond "
    "the threshold, or when detectable > threshold (bench ab, both sides interleaved, "
    "would decide); "
    "ok: otherwise.")


class CompareError(BenchError):
    """Inputs that cannot be compared (usage error at the CLI: exit code 2)."""


# -- measures and their families ----------------------------------------------------------
# MEASURES and FAMILIES are bench.regress.options' (--threshold's help lists the families).
# Names accepted by --threshold besides the families: every judged figure's name, and
# the names of earlier versions.
_ALIASES = {"throughput": "time", "step_time": "time", "device_memory": "memory",
            "host_memory": "memory", **{name: m.family for name, m in MEASURES.items()}}


# -- thresholds ---------------------------------------------------------------------------
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
    """Smallest relative change that counts, per family (``default`` for the rest)."""

    default: float = DEFAULT_THRESHOLD
    per_family: dict[str, float] = field(default_factory=dict)

    def of(self, family: str) -> float:
        return self.per_family.get(family, self.default)

    @classmethod
    def parse(cls, items: Iterable[str]) -> Thresholds:
        """From ``["5%", "memory=10%", "time=0.03"]`` (a judged figure's name means its
        family; so do ``throughput``/``step_time`` (time) and ``device_memory``/
        ``host_memory`` (memory))."""
        default, per = DEFAULT_THRESHOLD, {}
        for item in items:
            name, sep, value = item.rpartition("=")
            if not sep:
                default = parse_fraction(value, "--threshold")
                continue
            family = _ALIASES.get(name, name)
            if family not in FAMILIES:
                raise CompareError(f"unknown family {name!r} in --threshold; valid: "
                                   f"{', '.join(FAMILIES)}. Received: {item!r}")
            per[family] = parse_fraction(value, f"--threshold {name}")
        return cls(default, per)


# -- results of a comparison --------------------------------------------------------------
OK, REGRESSED, IMPROVED, CANNOT_TELL = "ok", "regressed", "improved", "cannot tell"
VERDICTS = (REGRESSED, CANNOT_TELL, IMPROVED, OK)  # worst first: a family takes the first
# Of a configuration: the families' verdicts, plus status changes between the sides.
CONFIG_VERDICTS = (*VERDICTS, "broken", "fixed", "not comparable")


@dataclass
class MeasureComparison:
    """One measure (a figure) of one configuration; ``change`` and ``interval`` are
    relative, of the figure itself (current / baseline - 1): worse when it goes against
    ``better`` (throughput down, memory up)."""

    measure: str  # the figure's name
    label: str  # the figure's name for humans
    family: str
    unit: str
    better: str  # "higher" or "lower"
    baseline: float  # geometric mean of the run figures, in ``unit``
    current: float
    change: float
    interval: tuple[float, float]
    p_value: float | None
    significant: bool
    detectable: float  # minimum detectable change at alpha with 90% power
    threshold: float
    baseline_runs: int
    current_runs: int
    baseline_windows: int
    current_windows: int
    noise_cv: float | None  # run-level (or nightly-level) noise that decided, as a CV
    noise_unit: str  # "run" or "nightly"
    run_cv: float | None  # run-to-run CV within nightlies, both sides pooled
    window_cv: tuple[float, float]  # within-run window CV, baseline and current
    verdict: str
    note: str = ""
    noise_df: float = 0.0  # degrees of freedom of the noise (Welch-Satterthwaite's: welch)
    test: str = STUDENT  # "student" (one common noise) or "welch" (each side its own)
    noise_from: str = ""  # where the run-level noise was pooled from


@dataclass
class ConfigComparison:
    key: str
    label: str
    baseline_status: str
    current_status: str
    baseline_runs: int
    current_runs: int
    measures: list[MeasureComparison] = field(default_factory=list)
    families: dict[str, str] = field(default_factory=dict)  # family -> verdict
    verdict: str = OK
    note: str = ""
    # Measures a side has no value of, by name, with the reason the results give (only
    # figures whose schema says why they are empty): reported instead of left out.
    unmeasured: dict[str, str] = field(default_factory=dict)
    # cannot tell: the `bench ab` command that decides it from interleaved pairs.
    ab_command: str = ""

    def measure(self, name: str) -> MeasureComparison | None:
        return next((m for m in self.measures if m.measure == name), None)


@dataclass
class FingerprintDiff:
    field: str
    kind: str  # "software", "hardware" (both may explain a change) or "info" (expected)
    baseline: list[str]
    current: list[str]
    configurations: int  # how many matched configurations differ in it

    @property
    def severity(self) -> str:
        return "info" if self.kind == "info" else "warning"


@dataclass
class Report:
    baseline: str
    current: str
    alpha: float
    power: float
    thresholds: Thresholds
    configs: list[ConfigComparison]
    only_baseline: list[str]
    only_current: list[str]
    fingerprint: list[FingerprintDiff]
    definition: str = COMPARISON_DEFINITION
    pooling: Pooling = field(default_factory=Pooling)
    history_configs: int = 0  # configurations that found stored runs of theirs

    @property
    def regressed(self) -> list[ConfigComparison]:
        return [c for c in self.configs if c.verdict in (REGRESSED, "broken")]

    @property
    def cannot_tell(self) -> list[ConfigComparison]:
        return [c for c in self.configs if c.verdict == CANNOT_TELL]

    @property
    def warnings(self) -> list[FingerprintDiff]:
        """Software and hardware differences (either may explain a change)."""
        return [d for d in self.fingerprint if d.kind != "info"]

    @property
    def exit_code(self) -> Exit:
        """REGRESSION over CANNOT_TELL over OK (see bench.exits)."""
        if self.regressed:
            return Exit.REGRESSION
        return Exit.CANNOT_TELL if self.cannot_tell else Exit.OK

    def detectable(self, family: str = "time") -> list[float]:
        """Minimum detectable changes of ``family``'s first measure, one per configuration."""
        found = (next((m for m in c.measures if m.family == family), None)
                 for c in self.configs)
        return [m.detectable for m in found if m is not None]

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["regressed"] = [c.key for c in self.regressed]
        d["cannot_tell"] = [c.key for c in self.cannot_tell]
        d["exit_code"] = int(self.exit_code)
        d["units"] = {
            "baseline": "the measure's unit (measures[].unit), geometric mean of run figures",
            "current": "the measure's unit (measures[].unit)",
            "change": "ratio (current / baseline - 1; worse against measures[].better)",
            "interval": f"ratio ({1 - self.alpha:.0%} interval of change)",
            "detectable": f"ratio (change found with {self.power:.0%} power at alpha)",
            "threshold": "ratio", "noise_cv": "ratio (std/mean of run or nightly figures)",
            "noise_df": "degrees of freedom (of the noise; Welch-Satterthwaite's for welch)",
            "run_cv": "ratio (std/mean of run figures)",
            "window_cv": "ratio (std/mean of the windows of one run)",
            "alpha": "probability", "power": "probability",
            "p_value": "probability (two-sided)"}
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


# -- comparing ----------------------------------------------------------------------------
def identity(result: RunResult) -> str:
    """The key two results are matched by (recomputed: see the module docstring)."""
    return result.spec.key()


def group(results: Iterable[RunResult], labels: Sequence[Hashable] | None = None
          ) -> dict[str, Grouped]:
    """Results by configuration key, each with its group label (None without labels)."""
    results = list(results)
    if labels is not None and len(labels) != len(results):
        raise CompareError(f"one group label per result is needed. Received: {len(labels)} "
                           f"labels for {len(results)} results")
    out: dict[str, Grouped] = {}
    for i, r in enumerate(results):
        out.setdefault(identity(r), []).append((r, None if labels is None else labels[i]))
    return out


def _verdict(stats: RunComparison, threshold: float, better: str) -> tuple[str, str]:
    # The log change turned so that + is worse: for a figure where higher is better a
    # fall is the regression, and the same threshold applies both ways up.
    sign = -1.0 if better == "higher" else 1.0
    log_change = math.log(stats.ratio) * sign
    bound = math.log1p(threshold)
    # The reports' and the gate's rule: regressed only with the whole interval past the
    # threshold; an estimate past it whose interval reaches inside is not one yet.
    ends = sorted(sign * math.log(x) if x > 0 else math.nan for x in (stats.low, stats.high))
    code = int(interval_decision(ends[0], ends[1], False, bound))
    if code == ABOVE_CODE:
        return REGRESSED, ""
    if code == BELOW_CODE:
        return IMPROVED, ""
    if stats.significant and abs(log_change) > bound:
        word = "worse" if log_change > 0 else "better"
        return CANNOT_TELL, (f"{word} beyond the noise, but its interval reaches inside the "
                             f"{threshold:.0%} threshold; bench ab would decide it "
                             f"(command below)")
    if stats.mde > threshold:
        why = stats.note or (f"only changes of {stats.mde:.1%} or more would be caught, "
                             f"threshold {threshold:.0%}")
        return CANNOT_TELL, f"{why}; bench ab would decide it (command below)"
    if stats.significant:
        return OK, f"significant but within the {threshold:.0%} threshold"
    return OK, ""


def compare_measure(measure: Figure, base: Sequence[Sequence[float]],
                    cur: Sequence[Sequence[float]], threshold: float, *,
                    alpha: float = DEFAULT_ALPHA, power: float = DEFAULT_POWER,
                    base_groups: Sequence[Hashable] | None = None,
                    cur_groups: Sequence[Hashable] | None = None,
                    pooled: PooledNoise | None = None) -> MeasureComparison:
    """Compare one measure's runs (each run a list of window values); see the docstring.

    ``pooled``: the run-level noise evidence to judge with (``bench.regress.pooling``);
    without it, these runs' own."""
    found = partial(MeasureComparison, measure=measure.name, label=measure.label,
                    family=measure.family, unit=measure.unit, better=measure.better,
                    threshold=threshold, baseline_runs=len(base), current_runs=len(cur),
                    baseline_windows=sum(map(len, base)), current_windows=sum(map(len, cur)))
    values = [v for run in (*base, *cur) for v in run]
    if min(values) <= 0:  # no ratio of a zero: judged by equality alone
        same = len(set(values)) == 1
        return found(
            baseline=float(np.median([v for r in base for v in r])),
            current=float(np.median([v for r in cur for v in r])), change=math.nan,
            interval=(math.nan, math.nan), p_value=None, significant=False,
            detectable=0.0 if same else math.inf, noise_cv=None,
            noise_unit="run", run_cv=None, window_cv=(0.0, 0.0),
            verdict=OK if same else CANNOT_TELL,
            note="" if same else "zero values: no ratio can be formed")
    stats = compare_runs(base, cur, alpha=alpha, power=power, baseline_groups=base_groups,
                         current_groups=cur_groups,
                         noise=None if pooled is None else pooled.noise, welch=True)
    verdict, note = _verdict(stats, threshold, measure.better)
    return found(
        baseline=stats.baseline.center, current=stats.current.center,
        change=stats.ratio - 1.0, interval=(stats.low - 1.0, stats.high - 1.0),
        p_value=stats.p_value, significant=stats.significant, detectable=stats.mde,
        noise_cv=stats.noise_cv,
        noise_unit="nightly" if stats.unit == "group" else "run", run_cv=stats.run_cv,
        window_cv=(stats.baseline.within_cv, stats.current.within_cv), verdict=verdict,
        note=note, noise_df=stats.df, test=stats.test,
        noise_from="" if pooled is None else pooled.describe())


def _status(results: Sequence[RunResult]) -> str:
    statuses = sorted({r.status for r in results})
    return "ok" if statuses == ["ok"] else "/".join(statuses)


def _unmeasured(measure: Figure, without: dict[str, Grouped]) -> str:
    """Why ``measure`` has no value on the sides without one (their runs, by side), as
    their results say: ``current: <reason>``; "" where the figure names no reason."""
    parts = []
    for side, runs in without.items():
        reasons = dict.fromkeys(a for r, _ in runs if (a := measure.absence(r.figures)))
        if reasons:
            parts.append(f"{side}: {'; '.join(reasons)}")
    return "; ".join(parts)


def compare_config(base: Grouped, cur: Grouped, *, thresholds: Thresholds,
                   alpha: float = DEFAULT_ALPHA, power: float = DEFAULT_POWER,
                   pooled: Mapping[str, PooledNoise] | None = None) -> ConfigComparison:
    """Compare the runs of one configuration on both sides (with their group labels);
    ``pooled``: each measure's noise evidence, by measure name (else the runs' own)."""
    b_all, c_all = [r for r, _ in base], [r for r, _ in cur]
    first = (c_all or b_all)[0]
    out = ConfigComparison(key=identity(first), label=first.spec.label(),
                           baseline_status=_status(b_all), current_status=_status(c_all),
                           baseline_runs=len(b_all), current_runs=len(c_all))
    b_ok = [(r, g) for r, g in base if r.status == "ok" and r.figures]
    c_ok = [(r, g) for r, g in cur if r.status == "ok" and r.figures]
    if b_ok and not c_ok:
        reason = next((r.reason for r in c_all if r.reason), "") or ""
        out.verdict, out.note = "broken", (f"ok before, {out.current_status} now: "
                                           f"{reason.splitlines()[0] if reason else ''}")
        return out
    if not b_ok:
        out.verdict = "fixed" if c_ok else "not comparable"
        out.note = f"baseline {out.baseline_status}"
        return out
    for _, measure in MEASURES.items():
        b = [(w, g) for r, g in b_ok if r.figures and (w := measure.samples(r.figures))]
        c = [(w, g) for r, g in c_ok if r.figures and (w := measure.samples(r.figures))]
        if not b or not c:
            if measure.optional and not b and not c:
                continue  # an optional figure neither side has (energy without counters)
            why = _unmeasured(measure, {"baseline": [] if b else b_ok,
                                        "current": [] if c else c_ok})
            if why:
                out.unmeasured[measure.name] = why
            continue
        out.measures.append(compare_measure(
            measure, [w for w, _ in b], [w for w, _ in c], thresholds.of(measure.family),
            alpha=alpha, power=power, base_groups=[g for _, g in b],
            cur_groups=[g for _, g in c], pooled=(pooled or {}).get(measure.name)))
    for family in FAMILIES:
        verdicts = {m.verdict for m in out.measures if m.family == family}
        if verdicts:
            out.families[family] = next(v for v in VERDICTS if v in verdicts)
    out.verdict = next((v for v in VERDICTS if v in out.families.values()), OK)
    if out.current_status != "ok":  # some runs failed: said, though the others compared
        out.note = f"current runs {out.current_status}"
    if out.verdict == CANNOT_TELL:
        out.ab_command = ab_command(first.spec, b_all, c_all)
    return out


def _env_vars(results: Sequence[RunResult]) -> dict[str, str]:
    """The relevant environment variables of a side's runs (its first fingerprint's)."""
    env = next((r.environment for r in results if r.environment), {})
    return {k: str(v) for k, v in software_stack(env)["env_vars"].items()}


def ab_command(spec: RunSpec, base: Sequence[RunResult], cur: Sequence[RunResult]) -> str:
    """The ``bench ab`` command that decides ``spec`` from interleaved pairs, with each
    side's environment variables where the sides' fingerprints differ in them ("" for a
    configuration that does not train, which ``bench ab`` cannot run)."""
    if spec.mode != "train":
        return ""
    args = ["python", "-m", "bench", "ab", *cli_args(spec)]
    b_vars, c_vars = _env_vars(base), _env_vars(cur)
    for name in sorted(set(b_vars) | set(c_vars)):
        if b_vars.get(name) != c_vars.get(name):
            for side, found in (("baseline", b_vars), ("candidate", c_vars)):
                args += [f"--{side}-env", f"{name}={found[name]}"] if name in found else []
    return shlex.join(args)


def compare(baseline: Sequence[RunResult], current: Sequence[RunResult], *,
            baseline_label: str = "baseline", current_label: str = "current",
            thresholds: Thresholds | None = None, alpha: float = DEFAULT_ALPHA,
            power: float = DEFAULT_POWER, baseline_groups: Sequence[Hashable] | None = None,
            current_groups: Sequence[Hashable] | None = None,
            pooling: Pooling | None = None, history: Mapping[str, Grouped] | None = None
            ) -> Report:
    """Compare every configuration present on both sides.

    ``*_groups`` label each result with the group it came from (e.g. the nightly's
    sweep): runs of one group share its conditions, and with 2+ groups on a side the
    group-to-group noise is measured too (see ``bench.results.stats.comparison.compare_runs``).
    ``pooling`` says where each configuration's run-level noise is pooled from (default:
    its family and its ``history``, each configuration's stored runs with their sweep,
    ``bench.regress.pooling.load_history``).
    """
    if not 0 < alpha < 1:
        raise CompareError(f"alpha must be between 0 and 1. Received: alpha={alpha!r}")
    if not 0 < power < 1:
        raise CompareError(f"power must be between 0 and 1. Received: power={power!r}")
    if not baseline:
        raise CompareError(f"no results on the baseline side ({baseline_label})")
    if not current:
        raise CompareError(f"no results on the current side ({current_label})")
    thresholds = thresholds or Thresholds()
    pooling = pooling or Pooling()
    if history is None:  # as used: no stored runs given, none pooled (the report says so)
        pooling = replace(pooling, history=False)
    b, c = group(baseline, baseline_groups), group(current, current_groups)
    common = [k for k in c if k in b]
    pooled = pool_noise(b, c, common, (m for _, m in MEASURES.items()), pooling=pooling,
                        history=history)
    configs = [compare_config(b[k], c[k], thresholds=thresholds, alpha=alpha, power=power,
                              pooled=pooled[k])
               for k in sorted(common, key=lambda k: c[k][0][0].spec.label())]
    return Report(
        baseline=baseline_label, current=current_label, alpha=alpha, power=power,
        thresholds=thresholds, configs=configs, pooling=pooling,
        history_configs=sum(1 for k in common if (history or {}).get(k)),
        only_baseline=sorted(b[k][0][0].spec.label() for k in b if k not in c),
        only_current=sorted(c[k][0][0].spec.label() for k in c if k not in b),
        fingerprint=fingerprint_diffs([([r for r, _ in b[k]], [r for r, _ in c[k]])
                                       for k in common]))


# -- fingerprints ---------------------------------------------------------------------------
_KIND_ORDER = {"software": 0, "hardware": 1, "info": 2}


def _fields(env: dict[str, Any]) -> dict[tuple[str, str], str]:
    """(kind, field) -> JSON value of every fingerprint field that can differ."""
    out: dict[tuple[str, str], str] = {}
    if env.get("cpu_model") is not None:
        for k, v in hardware_identity(env).items():
            out[("hardware", k)] = json.dumps(v, sort_keys=True)
    else:  # a fingerprint without hardware fields: its stored id is all there is
        out[("hardware", "machine_id")] = json.dumps(stored_machine_id(env))
    for k, v in software_stack(env).items():
        if k == "env_vars":
            for var, value in v.items():
                out[("software", f"env_vars.{var}")] = json.dumps(value)
        elif v not in (None, []):
            out[("software", k)] = json.dumps(v, sort_keys=True)
    git = env.get("git") or {}
    out[("info", "git.commit")] = json.dumps(git.get("commit"))
    out[("info", "git.dirty")] = json.dumps(git.get("dirty"))
    out[("info", "host")] = json.dumps(env.get("host"))
    return out


def fingerprint_diffs(pairs: Sequence[tuple[Sequence[RunResult], Sequence[RunResult]]]
                      ) -> list[FingerprintDiff]:
    """Fields whose values differ between the two sides of matched configurations,
    software first, then hardware, then the expected ones (commit, host)."""
    found: dict[tuple[str, str], tuple[set[str], set[str], int]] = {}
    for base, cur in pairs:
        b_env = [_fields(r.environment or {}) for r in base]
        c_env = [_fields(r.environment or {}) for r in cur]
        for name in {n for e in b_env + c_env for n in e}:
            bv = {e.get(name, '"(unset)"') for e in b_env}
            cv = {e.get(name, '"(unset)"') for e in c_env}
            if bv != cv:
                old = found.get(name, (set(), set(), 0))
                found[name] = (old[0] | bv, old[1] | cv, old[2] + 1)
    diffs = [FingerprintDiff(name, kind, sorted(_plain(v) for v in bv),
                             sorted(_plain(v) for v in cv), count)
             for (kind, name), (bv, cv, count) in found.items()]
    return sorted(diffs, key=lambda d: (_KIND_ORDER[d.kind], d.field))


def _plain(encoded: str) -> str:
    value = json.loads(encoded)
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)
