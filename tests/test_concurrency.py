"""Independent copies combined from the windows they measured together, and the
knobs ParameterServer refuses (no TensorFlow: constructed windows and specs)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from bench.child.backends.tf.ps import check_data_source
from bench.errors import SpecError, Unsupported
from bench.results.combination import COMBINERS, combine
from bench.results.concurrency import (
    Span,
    common_span,
    concurrent_windows,
    overlap_fraction,
    rate_within,
    spans,
)
from bench.results.schema import TaskFigures, Window
from bench.strategies import STRATEGIES
from tests.helpers import fake_figures, tiny_spec

T0 = 1_700_000_000.0  # wall-clock seconds: any epoch time will do


def copy(*windows: tuple[float, float, float]) -> list[Span]:
    """Windows as (start offset s, end offset s, examples/s) from T0."""
    return [Span(T0 + a, T0 + b, rate * (b - a)) for a, b, rate in windows]


def test_aligned_copies_add_their_rates_window_by_window() -> None:
    a = copy((0, 1, 100), (1, 2, 110), (2, 3, 120))
    b = copy((0, 1, 200), (1, 2, 190), (2, 3, 180))
    got = concurrent_windows([a, b])
    assert [c.index for c in got] == [0, 1, 2]
    assert [c.throughput for c in got] == pytest.approx([300, 300, 300])
    assert got[1].rates == pytest.approx((110, 190))
    assert overlap_fraction([a, b]) == pytest.approx(1.0)


def test_a_late_copy_cuts_the_first_window_and_a_late_start_drops_it() -> None:
    a = copy((0, 1, 100), (1, 2, 100))
    late = copy((0.3, 1.3, 50), (1.3, 2.3, 50))  # 0.3 s late: 70% of window 0 remains
    (first, second) = concurrent_windows([a, late])
    assert (first.start, first.end) == pytest.approx((T0 + 0.3, T0 + 1.0))
    assert first.throughput == pytest.approx(150)
    assert (second.start, second.end) == pytest.approx((T0 + 1.0, T0 + 2.0))
    very_late = copy((0.6, 1.6, 50), (1.6, 2.6, 50))  # less than half of window 0 remains
    assert [c.index for c in concurrent_windows([a, very_late])] == [1]


def test_a_copy_that_stops_early_drops_the_windows_it_did_not_measure() -> None:
    a = copy((0, 1, 100), (1, 2, 100), (2, 3, 100))
    early = copy((0, 1, 100), (1, 2.2, 100))  # done 0.8 s before a's last window ends
    assert [c.index for c in concurrent_windows([a, early])] == [0, 1]
    assert common_span([a, early]) == pytest.approx((T0, T0 + 2.2))
    assert overlap_fraction([a, early]) == pytest.approx(2 / 3)


def test_misaligned_windows_are_pro_rated_by_their_overlap() -> None:
    # b's windows straddle a's: half of [0, 1] at 100 ex/s, half at 300 ex/s -> 200.
    b = copy((-0.5, 0.5, 100), (0.5, 1.5, 300), (1.5, 2.5, 300))
    rate, covered = rate_within(b, T0, T0 + 1)
    assert rate == pytest.approx(200) and covered == pytest.approx(1.0)
    a = copy((0, 1, 1000), (1, 2, 1000))
    assert [c.rates[1] for c in concurrent_windows([a, b])] == pytest.approx([200, 300])


def test_a_gap_in_a_copy_drops_the_window_it_falls_in() -> None:
    a = copy((0, 1, 100), (1, 2, 100))
    gappy = copy((0, 0.5, 100), (0.8, 2, 100))  # not measuring for 30% of a's window 0
    assert [c.index for c in concurrent_windows([a, gappy])] == [1]


def test_copies_that_never_overlap_give_no_concurrent_window() -> None:
    assert concurrent_windows([copy((0, 1, 100)), copy((2, 3, 100))]) == []
    assert common_span([copy((0, 1, 100)), []]) is None


def _windows(spans_: list[Span], base: Window) -> list[Window]:
    return [replace(base, index=i, steps=10, examples=round(s.examples),
                    wall_s=s.length, global_throughput=s.examples / s.length,
                    start_ts=s.start, end_ts=s.end) for i, s in enumerate(spans_)]


def _copies(spec: Any, copies: list[list[Span]]) -> tuple[Any, list[TaskFigures]]:
    main = fake_figures(throughputs=(100.0,) * len(copies[0]), replicas=1, batch=16)
    tasks = []
    for i, c in enumerate(copies):
        w = _windows(c, main.windows[0])
        rates = sorted(x.global_throughput for x in w)
        tasks.append(TaskFigures(task=f"replica{i}", role="replica", windows=w,
                                 throughput=rates[len(rates) // 2]))
    return replace(main, windows=tasks[0].windows), tasks


def test_every_strategy_names_a_rule_of_combination() -> None:
    # The registry holds the trait; the arithmetic is in bench.results.combination.
    assert {f.combiner for _, f in STRATEGIES.items()} <= set(COMBINERS.names())
    assert STRATEGIES.get("independent").combiner == "concurrent_copies"


def test_independent_run_is_judged_on_its_concurrent_windows() -> None:
    spec = tiny_spec(strategy="independent", devices=2, batch=32)
    a = copy((0, 1, 100), (1, 2, 120), (2, 3, 140))
    b = copy((0.2, 1.2, 300), (1.2, 2.2, 300), (2.2, 3.2, 300))
    main, tasks = _copies(spec, [a, b])
    f = combine(spec, main, tasks)
    # Every window of copy 0 overlapped copy 1 for >= 80%: three combined windows,
    # each copy 0's rate + 300; the headline is their median, not copy 0's own.
    assert [w.global_throughput for w in f.windows] == pytest.approx([400, 420, 440])
    assert f.global_throughput == pytest.approx(420)
    assert f.per_replica_throughput == pytest.approx(210)
    assert f.achieved_flops_per_s == pytest.approx(420 * f.model.train_flops_per_example)
    w0 = f.windows[0]
    assert (w0.start_ts, w0.end_ts) == pytest.approx((T0 + 0.2, T0 + 1.0))
    assert w0.examples / w0.wall_s == pytest.approx(400, rel=0.01)
    assert w0.steps == round(w0.examples / spec.examples_per_step)
    assert f.tasks is not None and f.tasks[1].windows == tasks[1].windows  # each copy's own
    assert f.combination is not None and "3 of 3 windows" in f.combination


def test_independent_copies_without_overlap_say_they_were_not_concurrent() -> None:
    spec = tiny_spec(strategy="independent", devices=2, batch=32)
    main, tasks = _copies(spec, [copy((0, 1, 100)), copy((5, 6, 300))])
    f = combine(spec, main, tasks)
    assert f.global_throughput == pytest.approx(400)
    assert f.combination is not None and f.combination.startswith("NOT CONCURRENT")
    # Results written before windows carried their times: the same fallback, said so.
    old = [replace(t, windows=[replace(w, start_ts=None) for w in t.windows]) for t in tasks]
    assert spans(old[0].windows) is None
    g = combine(spec, main, old)
    assert g.combination is not None and "stored no window times" in g.combination


@pytest.mark.parametrize(("over", "field", "value"), [
    ({"grad_accum": 2}, "grad_accum", "2"),
    ({"steps_per_call": 4}, "steps_per_call", "4"),
])
def test_parameter_server_refuses_knobs_it_does_not_implement(
        over: dict[str, Any], field: str, value: str) -> None:
    with pytest.raises(SpecError, match=rf"RunSpec\.{field} must be 1 for parameter_server"
                                        rf".*Received: {field}={value}"):
        tiny_spec(strategy="parameter_server", devices=2, **over)
    tiny_spec(strategy="parameter_server", devices=2, data="tfdata")  # honoured


def test_parameter_server_refuses_on_device_data_where_batches_are_copied() -> None:
    synthetic = tiny_spec(strategy="parameter_server", devices=2)
    check_data_source(synthetic, gpus=0)  # CPU: the pool is in the memory workers use
    check_data_source(tiny_spec(strategy="parameter_server", devices=2, data="tfdata"), 2)
    with pytest.raises(Unsupported, match=r"Received: data='synthetic'"):
        check_data_source(synthetic, gpus=2)
