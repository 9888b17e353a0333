"""The figure catalogue: every labelled field of the result schema, read in one place.

A field of ``Figures`` (or of a dataclass inside it) labelled with
``bench.results.schema.unit(..., label=...)`` is a figure. Its path is its one machine
name (``memory_device_peak_bytes``): the CSV column, the ``bench show`` column, the
TensorBoard metric, the ``bench compare`` measure and the pytest-benchmark
``extra_info`` key. Its label is its name for the reports' human readers. Every
consumer iterates ``FIGURES``, so a labelled field reaches all of them with no other
edit. It lives beside the schema because both sides of the stages read it: the
reports, and ``bench.regress`` (compare, pytest-benchmark).
"""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass
from typing import Any

from bench.errors import SchemaError
from bench.results.schema import BETTER, Figures, Window


@dataclass(frozen=True)
class Figure:
    """One labelled field of ``Figures`` (possibly nested, e.g. step_time.median_s)."""

    path: tuple[str, ...]
    label: str
    unit: str  # as stored (the schema's unit)
    define: str
    better: str  # "higher" or "lower": which way is an improvement
    detail: bool  # CSV, ``bench show`` and definitions only
    optional: bool  # may be absent (probe figures): a column only when some row has it
    # Where each window holds its own value (a path inside ``Window``); empty when only
    # the run as a whole has the figure.
    window: tuple[str, ...] = ()
    # The ``bench compare`` family whose verdict this figure takes part in ("": none).
    family: str = ""

    @property
    def name(self) -> str:
        """The figure's machine name: its path, values in the stored unit."""
        return "_".join(self.path)

    def value(self, figures: Figures | None) -> float | None:
        """The run's stored value (a dict of per-device values reads as its largest)."""
        return _read(figures, self.path)

    def in_window(self, window: Window) -> float | None:
        """One measured window's own value (None where windows do not carry it)."""
        return _read(window, self.window) if self.window else None

    def samples(self, figures: Figures) -> list[float]:
        """The values a comparison works on: one per measured window where windows
        carry the figure, else the run's own value (none where it was not measured)."""
        if self.window:
            found = (self.in_window(w) for w in figures.windows)
            return [v for v in found if v is not None]
        run = self.value(figures)
        return [] if run is None else [run]


def _read(obj: Any, path: tuple[str, ...]) -> float | None:
    for part in path:
        if obj is None:
            return None
        obj = getattr(obj, part)
    if isinstance(obj, dict):
        obj = max(obj.values()) if obj else None
    return float(obj) if isinstance(obj, (int, float)) else None


def _optional(tp: Any) -> bool:
    return type(None) in typing.get_args(tp)


def _window_path(owner: str, text: str) -> tuple[str, ...]:
    """``text`` ("step_time.median_s") checked against ``Window``'s fields."""
    if not text:
        return ()
    path = tuple(text.split("."))
    cls: Any = Window
    for part in path:
        hints = typing.get_type_hints(cls) if dataclasses.is_dataclass(cls) else {}
        if part not in hints:
            raise SchemaError(f"{owner}: unit(window=...) must name a field of Window. "
                              f"Received: window={text!r}")
        cls = hints[part]
    return path


def catalogue(cls: type = Figures, prefix: tuple[str, ...] = (),
              optional: bool = False) -> tuple[Figure, ...]:
    """Every labelled field of ``cls`` and of the dataclasses inside it, in field order."""
    hints = typing.get_type_hints(cls)
    out: list[Figure] = []
    for f in dataclasses.fields(cls):
        tp = hints[f.name]
        maybe = optional or _optional(tp)
        inner = [a for a in typing.get_args(tp) if a is not type(None)] if maybe else [tp]
        sub = inner[0] if len(inner) == 1 else None
        # Nested dataclasses are walked; lists (windows, tasks) are per-window or per-task
        # detail, not figures of the run.
        if isinstance(sub, type) and dataclasses.is_dataclass(sub):
            out += catalogue(sub, (*prefix, f.name), maybe)
        elif f.metadata.get("label"):
            meta = f.metadata
            owner = f"{cls.__name__}.{f.name}"
            if meta.get("better") not in BETTER:  # unit() checks it; a hand-made field may not
                raise SchemaError(f"{owner}: a figure needs better= one of "
                                  f"{', '.join(BETTER)}. Received: better={meta.get('better')!r}")
            out.append(Figure(
                path=(*prefix, f.name), label=meta["label"], unit=meta.get("unit", ""),
                define=meta.get("define", ""), better=meta["better"],
                detail=bool(meta.get("detail")), optional=maybe,
                window=_window_path(owner, meta.get("window", "")),
                family=meta.get("compare", "")))
    return tuple(out)


FIGURES: tuple[Figure, ...] = catalogue()
