"""The figure catalogue: every labelled field of the result schema, read in one place.

A field of ``Figures`` (or of a dataclass inside it) labelled with
``bench.results.schema.unit(..., label=...)`` is a figure. Its path is its one machine
name (``memory_device_peak_bytes``): the CSV column, the ``bench show`` column, the
TensorBoard metric, the ``bench compare`` measure and the pytest-benchmark
``extra_info`` key. Its label is its name for the reports' human readers. Every
consumer iterates ``FIGURES``, so a labelled field reaches all of them with no other
edit. A field may also name the sibling that says why it is empty
(``unit(..., why_missing=...)``): ``why_missing`` reads it, so the reports show the
reason where the figure would be instead of a bare dash. It lives beside the schema
because both sides of the stages read it: the reports, and ``bench.regress`` (compare,
pytest-benchmark).
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
    # Whether the schema names a sibling field saying why the value is empty
    # (``unit(..., why_missing=...)``); ``absence`` reads it.
    explained: bool = False

    @property
    def name(self) -> str:
        """The figure's machine name: its path, values in the stored unit."""
        return "_".join(self.path)

    @property
    def reason_name(self) -> str:
        """The name of why the figure is empty (the CSV column, pytest-benchmark's key):
        ``memory_device_peak_bytes_reason``; "" where nothing says why."""
        return f"{self.name}_reason" if self.explained else ""

    def value(self, figures: Figures | None) -> float | None:
        """The run's stored value (a dict of per-device values reads as its largest)."""
        return _read(figures, self.path)

    def in_window(self, window: Window) -> float | None:
        """One measured window's own value (None where windows do not carry it)."""
        return _read(window, self.window) if self.window else None

    def absence(self, figures: Figures | None) -> str | None:
        """Why the run has no value, where the schema says (see ``why_missing``); None
        when it has one, when nothing explains the figure, or when the run has no
        figures at all (its status and reason say why)."""
        if not self.explained or figures is None:
            return None
        owner: Any = figures
        for part in self.path[:-1]:
            owner = getattr(owner, part)
            if owner is None:  # an optional section not measured: nothing to explain
                return None
        return why_missing(owner, self.path[-1])

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


# What an empty figure says when its result predates the field that explains it.
NOT_RECORDED = "not recorded (the result predates the reason)"


def why_missing(owner: Any, name: str) -> str | None:
    """Why ``owner.<name>`` is empty, where its field names the sibling that says
    (``unit(..., why_missing=...)`` or the same metadata key): that sibling's text, or
    ``NOT_RECORDED`` when the result left it empty. None when the value is there or
    the field names no sibling."""
    fields = {f.name: f for f in dataclasses.fields(owner)}
    if name not in fields:
        raise SchemaError(f"{type(owner).__name__} has no field {name!r}. "
                          f"Received: name={name!r}")
    sibling = fields[name].metadata.get("why_missing")
    value = getattr(owner, name)
    if not sibling or (value is not None and value != {}):
        return None
    if sibling not in fields:
        raise SchemaError(f"{type(owner).__name__}.{name}: why_missing must name a field of "
                          f"{type(owner).__name__}. Received: why_missing={sibling!r}")
    return getattr(owner, sibling) or NOT_RECORDED


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


def _explained(cls: type, owner: str, sibling: str) -> bool:
    """Whether ``sibling`` (``unit(why_missing=...)``) explains the figure; checked
    against ``cls``'s fields, so a misspelt name fails on import, not in a report."""
    if not sibling:
        return False
    if sibling not in {f.name for f in dataclasses.fields(cls)}:
        raise SchemaError(f"{owner}: unit(why_missing=...) must name a field of "
                          f"{cls.__name__}. Received: why_missing={sibling!r}")
    return True


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
                family=meta.get("compare", ""),
                explained=_explained(cls, owner, meta.get("why_missing", ""))))
    return tuple(out)


FIGURES: tuple[Figure, ...] = catalogue()
