"""Attribution on known causes, on real TensorFlow runs (tests/attribution_cases.py).

Each knob adds time to exactly one part of a tiny training step: a slow ``tf.data`` map
to input, extra matmuls to compute, all-reducing 16 MiB to communication, Python
(a ``tf.py_function``, a Keras callback in ``fit``) to host. Profiled with and without
it, the time it added must land in that part, by an effect that a few profiled steps'
noise cannot hide. The categorisation itself is tested on constructed events in
tests/test_profile.py.
"""

from __future__ import annotations

from typing import Any

import pytest

from bench.child.probes.trace import op_family
from bench.results.schema import BREAKDOWN_PARTS
from tests.attribution_cases import run_attribution_case

# A knob's few milliseconds a step, measured in two profiles: another test's processes
# beside them would land in the same parts.
pytestmark = pytest.mark.alone

# The knob must add at least this much per step (each adds 10-20 ms here; the parts of
# a tiny step move by well under 1 ms between two profiles of 5 steps).
EFFECT_S = 0.005
# What the knob added: at least this share in its part, at most that share in any other.
TARGET_SHARE, OTHER_SHARE = 0.7, 0.2


def _attributed(pair: dict[str, Any], part: str, op: str) -> None:
    """The knob's time landed in ``part``, and the op that grew most there is of
    ``op``'s family (a build's kernel name, e.g. oneDNN's ``_MklMatMul``, is not pinned)."""
    base, knob = pair["base"], pair["knob"]
    added = knob["step_s"] - base["step_s"]
    grew = {p: knob[f"{p}_s"] - base[f"{p}_s"] for p in BREAKDOWN_PARTS}
    seen = {p: f"{g * 1e3:+.2f} ms" for p, g in grew.items()}
    assert added >= EFFECT_S, (added, seen)
    assert grew[part] >= TARGET_SHARE * added, (part, added, seen)
    for other in BREAKDOWN_PARTS:
        if other != part:
            assert grew[other] <= OTHER_SHARE * added, (other, added, seen)

    def ops(b: dict[str, Any]) -> dict[str, float]:
        return {t["name"]: t["s"] for t in b["top"] if t["part"] == part}

    before, after = ops(base), ops(knob)
    growth = {name: after.get(name, 0.0) - before.get(name, 0.0) for name in after}
    assert op_family(max(growth, key=lambda name: growth[name])) == op_family(op), growth


def _constructed(grew: str, kernel: str) -> dict[str, Any]:
    """A pair whose knob added 10 ms to ``grew``, 9 of them in op type ``kernel``."""
    base = {"step_s": 0.010, **{f"{p}_s": 0.002 for p in BREAKDOWN_PARTS},
            "top": [{"name": "AddV2", "part": grew, "s": 0.001}]}
    knob = {**base, "step_s": 0.020, f"{grew}_s": 0.012,
            "top": [{"name": "AddV2", "part": grew, "s": 0.002},
                    {"name": kernel, "part": grew, "s": 0.009}]}
    return {"base": base, "knob": knob}


@pytest.mark.parametrize("kernel", ["MatMul", "_MklMatMul", "_FusedMatMul",
                                    "_MklNativeFusedMatMul"])
def test_the_check_accepts_any_builds_matmul_kernel(kernel: str) -> None:
    _attributed(_constructed("compute", kernel), "compute", "MatMul")


def test_the_check_fails_when_the_growth_lands_elsewhere() -> None:
    with pytest.raises(AssertionError):  # the matmul's time landed in host
        _attributed(_constructed("host", "_MklMatMul"), "compute", "MatMul")
    with pytest.raises(AssertionError):  # in compute, but another op grew most
        _attributed(_constructed("compute", "Conv2D"), "compute", "MatMul")


def test_a_slow_input_pipeline_is_attributed_to_input(tmp_path: Any) -> None:
    """The map's matmuls run on the pipeline's threads: only the wait for them counts."""
    _attributed(run_attribution_case("input", tmp=str(tmp_path)), "input", "IteratorGetNext")


def test_extra_matmuls_in_the_step_are_attributed_to_compute(tmp_path: Any) -> None:
    _attributed(run_attribution_case("compute", tmp=str(tmp_path)), "compute", "MatMul")


def test_an_extra_all_reduce_is_attributed_to_communication(tmp_path: Any) -> None:
    _attributed(run_attribution_case("communication", tmp=str(tmp_path)), "communication",
                "CollectiveReduceV2")


@pytest.mark.parametrize("loop", ["custom", "fit"])
def test_python_in_the_step_is_attributed_to_host(tmp_path: Any, loop: str,
                                                  host_cases: dict[str, Any]) -> None:
    """A tf.py_function in the custom loop's step, a Keras callback in fit's."""
    op = "EagerPyFunc" if loop == "custom" else "Python and dispatch"
    _attributed(host_cases[loop], "host", op)


@pytest.fixture(scope="module")
def host_cases(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Both loops' host knobs, from one process."""
    result: dict[str, Any] = run_attribution_case(
        "host", tmp=str(tmp_path_factory.mktemp("host")))
    return result
