"""A sweep as TensorBoard event files: each stored run a session of the HParams dashboard.

``tensorboard --logdir <sweep>`` then shows, side by side, the HParams dashboard
(one row per run: its spec as hyperparameters; every figure of the result schema and
the report's scaling figures as metrics, named as in the CSV) and the profiles captured under
``<sweep>/profiles/``. Replicates of a configuration share a session group, so the
dashboard can show their mean, min or max.

Written with TensorBoard's own protocol buffers and record format only:
``tensorboard.compat.tf`` (behind its event-file writer and the v1 hparams summaries)
imports TensorFlow when it is installed, and reports never do.
"""

from __future__ import annotations

import datetime as _dt
import os
import shutil
import socket
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.answers.configs import Ratio
from bench.answers.runs import RunView
from bench.answers.scaling import Scaling
from bench.results.store import SweepStore, run_name
from bench.spec import RunSpec, declaration
from reports.columns import SCALING_FIGURES, SCHEMA_FIGURES, ScalingFigure, SchemaFigure
from reports.report import SweepReport, build

# <sweep>/tensorboard/events.out.tfevents.*: the experiment (hyperparameter and metric
# definitions); <sweep>/tensorboard/<run name>/events.out.tfevents.*: one session per run.
# The directory's name is the store's (SweepStore.tensorboard_dir).


@dataclass(frozen=True)
class MetricDef:
    """One HParams metric: a scalar tag (the figure's one name, as in the CSV), what it
    means, and how to read it off a run."""

    tag: str
    description: str
    value: Callable[[RunView, Scaling], float | None]


def _schema_metric(f: SchemaFigure) -> MetricDef:
    def value(run: RunView, _: Scaling) -> float | None:
        return f.value(run.result.figures) if run.ok else None

    return MetricDef(f.name, f"{f.label}, in {f.unit} ({f.better} is better): {f.define}",
                     value)


def _value(ratio: Ratio | None) -> float | None:
    """A scaling figure's value (its interval stays in the report)."""
    return ratio.value if ratio is not None else None


def _scaling_metric(f: ScalingFigure) -> MetricDef:
    return MetricDef(f.name, f"{f.header}: {f.define}", lambda r, s: _value(f.value(s)))


# Every figure of the result schema (in its stored unit), then the report's scaling
# figures: the same names and the same list as the CSV's.
METRICS: tuple[MetricDef, ...] = (
    *(_schema_metric(f) for f in SCHEMA_FIGURES),
    *(_scaling_metric(f) for f in SCALING_FIGURES),
)


def spec_hparams(spec_type: type[RunSpec] = RunSpec) -> tuple[str, ...]:
    """Spec fields shown as hyperparameters, each its own column: those declared
    ``hparam`` (``bench.spec.FieldInfo``)."""
    return tuple(f.name for f in declaration(spec_type) if f.info.hparam)


def session_name(run: RunView) -> str:
    """The run's directory name, as the store names its profile and log."""
    return run_name(run.key, getattr(run.result, "replicate", 1))


def hparams_of(run: RunView, machines: int) -> dict[str, bool | float | str]:
    """The spec of ``run`` as HParams values (bool, number or string)."""
    spec = run.result.spec
    values: dict[str, bool | float | str] = {}
    for name in spec_hparams(type(spec)):
        value = getattr(spec, name, None)
        if value is not None:
            values[name] = value if isinstance(value, (bool, int, float, str)) else str(value)
    values["strategy_label"] = run.strategy
    values["replicas"] = run.replicas
    values["global_batch"] = run.global_batch
    values["per_replica_batch"] = run.per_replica_batch
    values["status"] = run.status
    for key, value in sorted(dict(spec.params).items()):
        values[f"param.{key}"] = value if isinstance(value, (bool, int, float, str)) \
            else str(value)
    if machines > 1:
        values["machine"] = run.machine
    return values


@dataclass(frozen=True)
class Exported:
    logdir: Path  # <sweep>/tensorboard
    sessions: int
    command: str  # what opens it beside the profiles


def _iso_seconds(text: str, default: float) -> float:
    try:
        return _dt.datetime.fromisoformat(text).timestamp()
    except (TypeError, ValueError):
        return default


class _EventFile:
    """One ``events.out.tfevents.*`` file in TensorBoard's record format."""

    _count = 0

    def __init__(self, directory: Path) -> None:
        from tensorboard.compat.proto import event_pb2
        from tensorboard.summary.writer.record_writer import RecordWriter

        directory.mkdir(parents=True, exist_ok=True)
        _EventFile._count += 1
        name = (f"events.out.tfevents.{int(time.time())}.{socket.gethostname()}."
                f"{os.getpid()}.{_EventFile._count}")
        self._event_pb2 = event_pb2
        self._writer = RecordWriter(open(directory / name, "wb"))  # noqa: SIM115
        self.add(event_pb2.Event(wall_time=time.time(), file_version="brain.Event:2"))

    def add(self, event: Any) -> None:
        self._writer.write(event.SerializeToString())

    def summary(self, summary: Any, wall_time: float, step: int = 0) -> None:
        self.add(self._event_pb2.Event(wall_time=wall_time, step=step, summary=summary))

    def close(self) -> None:
        self._writer.close()


def _plugin_summary(tag: str, data: Any) -> Any:
    """A Summary carrying HParams plugin data (as the plugin's own summary helpers do)."""
    from tensorboard.compat.proto import summary_pb2
    from tensorboard.plugins.hparams import metadata

    summary = summary_pb2.Summary()
    summary.value.add(tag=tag, metadata=metadata.create_summary_metadata(data),
                      tensor=metadata.NULL_TENSOR)
    return summary


def _scalar_summary(tag: str, value: float, description: str) -> Any:
    from tensorboard.compat.proto import summary_pb2
    from tensorboard.plugins.scalar import metadata as scalar_metadata
    from tensorboard.util import tensor_util

    summary = summary_pb2.Summary()
    summary.value.add(
        tag=tag, tensor=tensor_util.make_tensor_proto(float(value)),
        metadata=scalar_metadata.create_summary_metadata(display_name=tag,
                                                         description=description))
    return summary


def _experiment(runs: Sequence[RunView], hparams: dict[str, dict[str, Any]],
                created: float) -> Any:
    from tensorboard.plugins.hparams import api_pb2, plugin_data_pb2
    from tensorboard.plugins.hparams.metadata import EXPERIMENT_TAG

    names = sorted({n for values in hparams.values() for n in values})
    infos = []
    for name in names:
        seen = [v[name] for v in hparams.values() if name in v]
        info = api_pb2.HParamInfo(name=name)
        if all(isinstance(v, bool) for v in seen):
            info.type = api_pb2.DATA_TYPE_BOOL
            info.domain_discrete.extend(sorted(set(seen)))
        elif all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in seen):
            info.type = api_pb2.DATA_TYPE_FLOAT64
            info.domain_discrete.extend(sorted({float(v) for v in seen}))
        else:
            info.type = api_pb2.DATA_TYPE_STRING
            info.domain_discrete.extend(sorted({str(v) for v in seen}))
        infos.append(info)
    metrics = [api_pb2.MetricInfo(name=api_pb2.MetricName(group="", tag=m.tag),
                                  display_name=m.tag, description=m.description)
               for m in METRICS]
    experiment = api_pb2.Experiment(
        description=f"stratbench sweep: {len(runs)} stored run(s)",
        time_created_secs=created, hparam_infos=infos, metric_infos=metrics)
    return _plugin_summary(EXPERIMENT_TAG, plugin_data_pb2.HParamsPluginData(
        experiment=experiment))


def _session(writer: _EventFile, run: RunView, scaling: Scaling,
             values: dict[str, Any], now: float) -> None:
    from tensorboard.plugins.hparams import api_pb2, plugin_data_pb2
    from tensorboard.plugins.hparams.metadata import (
        SESSION_END_INFO_TAG,
        SESSION_START_INFO_TAG,
    )

    started = _iso_seconds(run.result.started_at, now)
    ended = _iso_seconds(run.result.finished_at, started)
    start = plugin_data_pb2.SessionStartInfo(group_name=run.key, start_time_secs=started)
    for name, value in values.items():
        if isinstance(value, bool):
            start.hparams[name].bool_value = value
        elif isinstance(value, (int, float)):
            start.hparams[name].number_value = value
        else:
            start.hparams[name].string_value = str(value)
    writer.summary(_plugin_summary(SESSION_START_INFO_TAG, plugin_data_pb2.HParamsPluginData(
        session_start_info=start)), started)
    for metric in METRICS:
        value = metric.value(run, scaling)
        if value is not None:
            writer.summary(_scalar_summary(metric.tag, value, metric.description), ended)
    # The figures windows carry as series too (Scalars dashboard: step = window index).
    figures = run.result.figures
    for w in (figures.windows if figures is not None and run.ok else []):
        for f in SCHEMA_FIGURES:
            value = f.in_window(w)
            if value is not None:
                writer.summary(_scalar_summary(f"windows/{f.name}", value,
                                               f"{f.label} of one measured window, in "
                                               f"{f.unit}"), ended, w.index)
    status = api_pb2.STATUS_SUCCESS if run.ok else api_pb2.STATUS_FAILURE
    writer.summary(_plugin_summary(SESSION_END_INFO_TAG, plugin_data_pb2.HParamsPluginData(
        session_end_info=plugin_data_pb2.SessionEndInfo(status=status, end_time_secs=ended))),
        ended)


def tensorboard_dir(sweep_dir: Path) -> Path:
    """Where a sweep's TensorBoard export goes (the store owns the layout)."""
    return SweepStore(sweep_dir).tensorboard_dir


def write_report(report: SweepReport, out_dir: Path) -> int:
    """Write ``report``'s runs as HParams sessions under ``out_dir`` (replaced whole).

    Returns the number of sessions. The new files are written beside the old ones and
    swapped in, so a TensorBoard already watching never reads a half-written export.
    """
    runs = [(run, m.scaling.get(run.key, Scaling()))
            for m in report.machines for run in m.machine.runs]
    now = time.time()
    hparams = {session_name(r): hparams_of(r, len(report.machines)) for r, _ in runs}
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=out_dir.parent))
    try:
        top = _EventFile(tmp)
        top.summary(_experiment([r for r, _ in runs], hparams, now), now)
        top.close()
        for run, scaling in runs:
            name = session_name(run)
            writer = _EventFile(tmp / name)
            _session(writer, run, scaling, hparams[name], now)
            writer.close()
        os.chmod(tmp, 0o755)  # mkdtemp makes it private; the export is meant to be read
        old = out_dir.with_name(f".{out_dir.name}.old-{os.getpid()}")
        if out_dir.exists():
            os.replace(out_dir, old)
        os.replace(tmp, out_dir)
        shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return len(runs)


def export(sweep_dir: Path) -> Exported:
    """Write ``<sweep>/tensorboard/`` from the sweep's stored results."""
    from bench.results.text import tensorboard_command

    out = tensorboard_dir(sweep_dir)
    sessions = write_report(build(sweep_dir), out)
    return Exported(out, sessions, tensorboard_command(sweep_dir))
