"""The report answers per training loop and states what Keras fit costs over a custom loop."""

from __future__ import annotations

from pathlib import Path

from reports.markdown import render_markdown
from reports.report import build_from_results
from tests.helpers import replicated


def test_fit_is_answered_apart_and_its_cost_is_called_only_beyond_the_noise() -> None:
    results = [
        *replicated("mirrored", 2, 32, 1000.0, run_cv=0.02),
        *replicated("mirrored", 2, 32, 700.0, run_cv=0.02, loop="fit"),  # a real 30% gap
        *replicated("one_device", 1, 32, 1000.0, run_cv=0.10),
        *replicated("one_device", 1, 32, 960.0, run_cv=0.10, loop="fit"),  # 4% in 10% noise
    ]
    report = build_from_results(results, Path("sweep"))
    (machine,) = report.machines
    labels = {w.variant.label() for w in machine.workloads}
    assert any("loop=fit" in label for label in labels)
    assert any("loop=fit" not in label for label in labels)
    costs = {c.strategy: c for c in machine.loop_costs}
    assert costs["mirrored"].significant and 0.6 < (costs["mirrored"].ratio or 0) < 0.8
    assert not costs["one_device"].significant
    text = render_markdown(report)
    assert "Keras fit vs the custom loop" in text
    assert "a custom loop would gain" in text
    assert "fit and the custom loop are tied" in text
