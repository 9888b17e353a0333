"""Figures are declared once, in the result schema (``unit(..., label=...)``), and every
consumer takes them from the catalogue (``bench.results.figures``) under one name. No
TensorFlow."""

from __future__ import annotations

import pytest

from bench.errors import SchemaError
from bench.regress.compare import FAMILIES, MEASURES
from bench.results.figures import FIGURES
from bench.results.schema import BETTER, Window, unit
from reports.columns import SCHEMA_FIGURES
from reports.results_table import to_frame
from reports.tensorboard import METRICS
from tests import figure_cases
from tests.helpers import fake_result
from tests.tf_cases import run_case


def test_the_catalogue_gives_each_figure_one_name_a_direction_and_its_windows() -> None:
    names = [f.name for f in FIGURES]
    assert len(set(names)) == len(names)
    assert {"global_throughput", "per_replica_throughput", "step_time_median_s",
            "memory_device_peak_bytes", "mfu"} <= set(names)
    assert all(f.better in BETTER for f in FIGURES)
    # The reports, TensorBoard and compare read the same list, in the same order.
    assert [f.name for f in SCHEMA_FIGURES] == names
    assert [m.tag for m in METRICS][: len(names)] == names
    assert MEASURES.names() == [f.name for f in FIGURES if f.family]
    assert FAMILIES == ("time", "memory", "energy")

    figures = fake_result().figures
    assert figures is not None
    throughput = MEASURES.get("global_throughput")
    assert throughput.better == "higher"
    assert throughput.samples(figures) == [w.global_throughput for w in figures.windows]
    # A figure only the run has is one value per run.
    loss_end = next(f for f in FIGURES if f.name == "loss_end")
    assert not loss_end.window and loss_end.samples(figures) == [figures.loss_end]
    assert to_frame([fake_result()]).columns.tolist().count("memory_device_peak_bytes") == 1


def test_a_figure_must_say_which_way_is_better() -> None:
    with pytest.raises(SchemaError, match=r"needs better= one of higher, lower. "
                                          r"Received: better=''"):
        unit("s", label="first call")
    with pytest.raises(SchemaError, match=r"needs a label. Received: better='lower'"):
        unit("s", better="lower")
    assert unit("s", label="first call", better="lower").metadata["better"] == "lower"


def test_a_window_path_must_name_a_field_of_window() -> None:
    from dataclasses import dataclass

    from bench.results.figures import catalogue

    @dataclass
    class Odd:
        x: float = unit("s", 0.0, label="x", better="lower", window="step_time.nope")

    with pytest.raises(SchemaError, match=r"Odd.x: .*field of Window. "
                                          r"Received: window='step_time.nope'"):
        catalogue(Odd)
    assert "step_time" in Window.__dataclass_fields__


@pytest.mark.parametrize("labelled", [True, False])
def test_a_field_labelled_in_the_schema_reaches_every_consumer_under_its_name(
        labelled: bool) -> None:
    """Labelling a field is the only edit: HTML, Markdown, CSV, ``bench show``,
    TensorBoard, ``bench compare`` and pytest-benchmark then all carry it, named by
    its path; unlabelled, none of them does (so the check can fail)."""
    seen = run_case("consumers", module="tests.figure_cases", timeout=300, labelled=labelled)
    if labelled:
        value = figure_cases.VALUE
        assert seen["html table"] and seen["html definitions"], seen
        assert seen["markdown table"] and seen["markdown definitions"], seen
        assert seen["csv"] and set(seen["csv"]) == {value}, seen
        assert seen["show"] and seen["show --csv"] == seen["csv"], seen
        assert seen["tensorboard"], seen
        assert seen["compare"] == "time", seen
        assert seen["pytest-benchmark"] == [value, "s"], seen
    else:
        assert seen == {"html table": False, "html definitions": False,
                        "markdown table": False, "markdown definitions": False,
                        "csv": None, "show": False, "show --csv": None,
                        "tensorboard": False, "compare": None,
                        "pytest-benchmark": [None, None]}
