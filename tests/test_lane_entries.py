"""The lane entries (bench.lanes): what the spec, the fingerprint and the strategies read
of each backend comes from its one entry."""

from __future__ import annotations

import pytest

from bench import spec
from bench.env import SOFTWARE_FIELDS, software_id
from bench.errors import SpecError
from bench.lanes import COMMON_SOFTWARE, LANES, software_fields
from bench.spec import RunSpec, lane_of, on_lane
from bench.strategies import STRATEGIES


def test_the_backend_choices_and_keras_backends_are_the_lanes() -> None:
    assert spec.BACKENDS == ("tf", "jax")
    assert spec.KERAS_BACKEND_LANES == {"tensorflow": "tf", "jax": "jax"}
    assert lane_of({"KERAS_BACKEND": "jax"}) == "jax"
    with pytest.raises(SpecError, match=r"tf.distribute, Keras 3 on JAX.*'torch'"):
        lane_of({"KERAS_BACKEND": "torch"})


def test_the_software_fields_are_every_lanes_and_the_common_ones() -> None:
    # The software id of every stored result depends on this set (not its order).
    assert set(SOFTWARE_FIELDS) == {"tensorflow", "keras", "numpy", "python", "platform",
                                    "tf_build", "backend", "jax", "jaxlib", "xla_flags"}
    assert software_fields() == SOFTWARE_FIELDS
    assert SOFTWARE_FIELDS[:len(COMMON_SOFTWARE)] == COMMON_SOFTWARE
    env = {"tensorflow": "2.21.0", "keras": "3.15", "python": "3.11.7"}
    assert software_id(env) == software_id(dict(reversed(list(env.items()))))


def test_every_lane_has_strategies_and_its_entry_names_only_registered_ones() -> None:
    for name, lane in LANES.items():
        assert lane.name == name
        assert any(name in f.backends for _, f in STRATEGIES.items()), name
        for theirs, ours in lane.counterparts:
            assert name in STRATEGIES.get(ours).backends
            assert name not in STRATEGIES.get(theirs).backends


@pytest.mark.parametrize(("strategy", "backend", "counterpart"), [
    ("mirrored", "jax", "data_parallel"), ("default", "jax", "data_parallel"),
    ("one_device", "jax", "data_parallel"), ("data_parallel", "tf", "mirrored")])
def test_counterparts_come_from_the_lane_entry(strategy: str, backend: str,
                                               counterpart: str) -> None:
    own = "jax" if backend == "tf" else "tf"
    s = RunSpec(workload="mlp", strategy=strategy, devices=2, backend=own)
    assert on_lane(s, backend).strategy == counterpart
    assert STRATEGIES.get("central_storage").counterpart("jax") is None


def test_a_lane_limit_names_the_field_and_the_value() -> None:
    s = RunSpec(workload="mlp", strategy="data_parallel", backend="jax", xla=True)
    assert LANES.get("jax").limit_reason(s) == (
        "xla=True does not run on the JAX backend: JAX compiles every step with XLA: the xla "
        "knob is the TensorFlow lane's. Received: xla=True")
    assert LANES.get("tf").limit_reason(s) is None
