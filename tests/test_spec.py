"""Spec validation: every error names the field and the received value."""

from __future__ import annotations

import pytest

from bench.errors import SpecError, UnknownNameError
from bench.spec import RunSpec
from tests.helpers import tiny_spec


@pytest.mark.parametrize(("field", "value"), [
    ("devices", 0), ("batch", -4), ("batch", 2.5), ("grad_accum", 0), ("steps_per_call", 0),
    ("repeats", 0), ("max_seconds", 0.0), ("max_seconds", float("nan")), ("timeout_s", -1.0),
    ("precision", "fp8"), ("data", "imagenet"), ("batch_mode", "local"), ("size", "huge"),
    ("xla", "yes"), ("warmup_steps", -1), ("learning_rate", 0),
])
def test_bad_field_names_field_and_value(field: str, value: object) -> None:
    with pytest.raises(SpecError) as err:
        tiny_spec(**{field: value})
    msg = str(err.value)
    assert f"RunSpec.{field}" in msg
    assert f"Received: {field}={value!r}" in msg


def test_unknown_names_list_valid_ones() -> None:
    with pytest.raises(UnknownNameError, match="valid: mlp, cnn, resnet50, transformer, or "
                                               "a model of your own: package.module:function"):
        tiny_spec(workload="bert")
    with pytest.raises(UnknownNameError, match="valid: default, one_device, mirrored"):
        tiny_spec(strategy="horovod")


def test_global_batch_must_divide_by_replicas() -> None:
    with pytest.raises(SpecError, match=r"divisible by the 4 replicas.*Received: batch=30"):
        tiny_spec(devices=4, batch=30)


def test_batch_modes_resolve_both_ways() -> None:
    g = tiny_spec(devices=4, batch=64)
    assert (g.global_batch, g.per_replica_batch, g.replicas) == (64, 16, 4)
    p = tiny_spec(devices=4, batch=64, batch_mode="per_replica")
    assert (p.global_batch, p.per_replica_batch) == (256, 64)
    one = tiny_spec(strategy="one_device", devices=1, batch=64, batch_mode="per_replica")
    assert one.global_batch == 64


def test_grad_accum_counts_examples_per_step() -> None:
    assert tiny_spec(batch=32, grad_accum=3).examples_per_step == 96


def test_cross_device_ops_only_for_mirrored() -> None:
    tiny_spec(cross_device_ops="hierarchical_copy")
    with pytest.raises(SpecError, match="cross_device_ops.*central_storage"):
        tiny_spec(strategy="central_storage", cross_device_ops="nccl")


def test_workload_params_are_checked() -> None:
    with pytest.raises(SpecError, match="no parameter.*depth.*valid: classes, input_dim"):
        tiny_spec(params={"depth": 3})
    with pytest.raises(SpecError, match="image_size must be int"):
        tiny_spec(workload="cnn", params={"image_size": "big"})
    with pytest.raises(SpecError, match="image_size must be >= 32"):
        tiny_spec(workload="resnet50", params={"image_size": 16})
    assert tiny_spec(workload="mlp", params={"widths": [8, 8]}).workload_params()["widths"] \
        == (8, 8)


def test_key_is_stable_and_ignores_timeout() -> None:
    a, b = tiny_spec(), tiny_spec(timeout_s=5.0)
    assert a.key() == b.key()
    assert a.key() != tiny_spec(batch=64).key()
    assert a.key() != tiny_spec(params={"widths": [16]}).key()
    assert "/" not in a.key() and " " not in a.key()


def test_round_trip_and_unknown_fields() -> None:
    s = tiny_spec(params={"widths": [8]}, xla=True)
    assert RunSpec.from_dict(s.to_dict()) == s
    with pytest.raises(SpecError, match="no field.*colour"):
        RunSpec.from_dict({**s.to_dict(), "colour": "blue"})


def test_min_max_steps_consistent() -> None:
    with pytest.raises(SpecError, match="max_steps.*min_steps"):
        tiny_spec(min_steps=10, max_steps=5)
