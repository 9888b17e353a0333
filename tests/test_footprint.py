"""A session's memory and a first guess of its time, before anything of its workload ran
(bench.adaptive.footprint, bench.adaptive.sweep.affordable_part): constructed specs and
machines, both ways."""

from __future__ import annotations

from typing import Any

import pytest

from bench.adaptive.footprint import process_bytes, together_fitting, too_large
from bench.adaptive.sweep import affordable_part
from bench.hardware import Hardware
from bench.spec import RunSpec
from workloads import WORKLOADS

GIB = 2**30
TWO_CORES = Hardware("test cpu", 2, 24 * GIB)


def resnet(size: int, batch: int = 32, **kw: Any) -> list[RunSpec]:
    """A ResNet50 session of four in-process strategies at 1, 2 and 4 devices."""
    return [RunSpec(workload="resnet50", strategy=s, devices=d, batch=batch,
                    params={"image_size": size}, repeats=2, max_seconds=2.0, **kw)
            for s in ("default", "one_device", "mirrored", "central_storage")
            for d in (1, 2, 4) if not (s in ("default", "one_device") and d > 1)]


def preset_resnet() -> list[RunSpec]:
    """The CPU preset's ResNet50 session: 32x32, 10 classes, SGD, batch 16."""
    return [RunSpec(workload="resnet50", strategy=s, devices=d, batch=16, optimizer="sgd",
                    params={"image_size": 32, "classes": 10}, repeats=10, max_seconds=0.5,
                    min_steps=3, max_steps=400, warmup_steps=3)
            for s, d in (("default", 1), ("mirrored", 2))]


def test_parameter_counts_match_the_models_keras_builds() -> None:
    # Counted by Keras on the built models (count_params) once: the analytic counts
    # the memory guess rests on.
    expected = {"mlp": 669_706, "resnet50": 25_636_712}
    for name, count in expected.items():
        w = WORKLOADS.get(name)
        assert w.params is not None and w.params(w.resolve("default", {})) == count


def test_eight_resnet50_arms_at_224_hold_about_what_was_seen() -> None:
    size = process_bytes(resnet(224))
    assert size is not None and 8 * GIB < size < 12 * GIB  # 10.5 GB seen per process
    small = process_bytes(preset_resnet())
    assert small is not None and small < 2 * GIB


def test_two_large_sessions_are_measured_one_at_a_time_and_small_ones_together() -> None:
    assert together_fitting([resnet(224)], TWO_CORES, 2) == 1
    assert together_fitting([preset_resnet()], TWO_CORES, 2) == 2
    roomy = Hardware("test cpu", 2, 256 * GIB)
    assert together_fitting([resnet(224)], roomy, 2) == 2
    assert together_fitting([resnet(224)], Hardware("test cpu", 2, None), 2) == 2


def test_a_session_larger_than_the_machine_is_said() -> None:
    small = Hardware("test cpu", 2, 8 * GIB)
    assert "GiB of the machine's 8.0 GiB" in (too_large(resnet(224), small) or "")
    assert too_large(preset_resnet(), small) is None


def test_a_session_the_budget_cannot_pay_for_is_cut_to_what_it_can_or_not_opened() -> None:
    said: list[str] = []
    unit = resnet(224)
    kept = affordable_part(unit, TWO_CORES, 1, 240.0, said.append)
    runs = [s for s in kept if s.strategy not in ("default", "one_device") or s.devices == 1]
    assert 2 <= len(runs) < 8
    assert any(s.strategy == "one_device" and s.devices == 1 for s in runs)  # the reference
    left = [ln for ln in said if ln.startswith("  resnet50")]
    assert len(left) == 8 - len(runs) and all("~" in ln and " s:" in ln for ln in left)
    said.clear()
    assert affordable_part(unit, TWO_CORES, 1, 60.0, said.append) == []
    assert "not opened" in said[0]
    said.clear()
    # What a first guess says fits is measured whole, and nothing is said.
    assert affordable_part(preset_resnet(), TWO_CORES, 2, 240.0, said.append) == \
        preset_resnet()
    assert said == []


@pytest.mark.parametrize("cores,fits", [(2, False), (64, True)])
def test_the_first_guess_scales_with_the_machine(cores: int, fits: bool) -> None:
    hw = Hardware("test cpu", cores, 256 * GIB)
    kept = affordable_part(resnet(224), hw, 1, 240.0, lambda _: None)
    assert (kept == resnet(224)) is fits


def test_sessions_beyond_the_cores_share_them_in_the_first_guess() -> None:
    """Sessions started together build side by side, one core each: up to the machine's
    cores the start-ups overlap whole, beyond them they share the cores."""
    from bench.adaptive.pricing import session_guess

    unit = preset_resnet()
    one, two, three = (session_guess(unit, TWO_CORES, 10, n) for n in (1, 2, 3))
    windows = two - one  # a session's windows: the part each more session adds whole
    fixed = one - windows
    assert fixed > 0 and windows > 0
    assert three - two == pytest.approx(windows + fixed / 2)  # a third shares two cores
    eight = Hardware("test cpu", 8, 24 * GIB)
    assert session_guess(unit, eight, 10, 3) - session_guess(unit, eight, 10, 2) == \
        pytest.approx(windows)
