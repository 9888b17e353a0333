"""Every RunSpec field is declared once: the CLI, labels, HParams, report variants and
matrix axes are derived from the declaration (bench.spec.spec_field). No TensorFlow."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

import pytest

from bench.answers.runs import view
from bench.cli.common import add_matrix_args
from bench.errors import SpecError
from bench.matrix import AXES, expand_axes
from bench.results.schema import RunResult
from bench.spec import RunSpec, spec_field
from reports.report import build_from_results
from reports.tensorboard import hparams_of, spec_hparams
from tests.helpers import measured, tiny_spec

# A copy of the spec with one more field, declared the way RunSpec declares its own:
# nothing else in bench/ or reports/ is told about it.
WideSpec = dataclasses.make_dataclass(
    "WideSpec",
    [("attention", str, spec_field("dense", choices=("dense", "flash"),
                                   help="attention kernel: {choices}", label="attn={}"))],
    bases=(RunSpec,), frozen=True)


def wide(**over: object) -> RunSpec:
    spec = tiny_spec(**{k: v for k, v in over.items() if k != "attention"})
    return WideSpec(**{**spec.to_dict(), **over})


def as_result(spec: RunSpec, throughput: float = 1000.0) -> RunResult:
    """A measured result of ``spec`` (the helpers build plain RunSpecs)."""
    base = measured(spec.strategy, spec.devices, spec.batch, throughput)
    return dataclasses.replace(base, spec=spec, key=spec.key())


def test_a_new_field_reaches_cli_label_hparams_and_variant_with_no_other_edit() -> None:
    parser = argparse.ArgumentParser()
    add_matrix_args(parser, WideSpec)
    args = parser.parse_args(["--attention", "dense,flash", "--workload", "mlp"])
    assert args.attention == ["dense", "flash"]
    assert "attention kernel: dense, flash" in parser.format_help()

    flash, dense = wide(attention="flash"), wide()
    assert "attn=flash" in flash.label() and "attn" not in dense.label()
    with pytest.raises(SpecError, match=r"RunSpec.attention must be one of dense, flash. "
                                        r"Received: attention='sparse'"):
        wide(attention="sparse")
    # At its default the new field keeps every existing key; away from it, it is identity.
    assert dense.key() == tiny_spec().key() != flash.key()

    run = view(as_result(flash))
    assert hparams_of(run, machines=1)["attention"] == "flash"
    assert run.variant.attention == "flash" and "attn=flash" in run.variant.label()
    assert run.variant != view(as_result(dense)).variant

    report = build_from_results([as_result(flash), as_result(dense, 1100.0)], Path("sweep"))
    (machine,) = report.machines
    labels = {w.variant.label() for w in machine.workloads}
    assert labels == {"mlp[tiny] attn=flash", "mlp[tiny]"}


def test_each_field_reads_the_same_in_every_label() -> None:
    spec = tiny_spec(strategy="multi_worker_mirrored", workers=2, communication="ring",
                     precision="mixed_bfloat16", grad_accum=2, loop="fit")
    run = view(as_result(spec))
    assert run.strategy == "multi_worker_mirrored(workers=2,comm=ring)"
    assert run.strategy in spec.label().split()
    assert run.variant.label() == "mlp[tiny] mixed_bfloat16 accum=2 loop=fit"
    for token in run.variant.label().split()[1:]:
        assert token in spec.label().split()


def test_keys_of_existing_specs_do_not_change() -> None:
    # Written before the fields were declared with their metadata: sweeps resume by key.
    assert tiny_spec().key() == "mlp-tiny.mirrored.n2.b32.float32.8e21dc1f3d"
    assert tiny_spec(timeout_s=5.0).key() == tiny_spec().key()  # not identity
    assert tiny_spec(loop="fit").key() == "mlp-tiny.mirrored.n2.b32.float32.fit.aa443866e3"
    assert tiny_spec(strategy="multi_worker_mirrored", workers=2, communication="ring").key() \
        == "mlp-tiny.multi_worker_mirrored.n2.b32.float32.74c1b41656"
    assert tiny_spec(precision="mixed_bfloat16", xla=True, grad_accum=2, steps_per_call=2,
                     data="tfdata").key() == "mlp-tiny.mirrored.n2.b32.mixed_bfloat16.e4170baf18"


def test_results_written_before_a_field_existed_read_it_as_the_default() -> None:
    result = as_result(tiny_spec())
    old = result.to_dict()
    for name in ("loop", "keras"):
        del old["spec"][name]
    loaded = RunResult.from_dict(old)
    variant = view(loaded).variant
    assert (variant.loop, variant.keras) == ("custom", 3)
    assert variant == view(result).variant
    assert variant.with_data("tfdata").data == "tfdata"
    with pytest.raises(AttributeError, match="Variant has no field 'devices'"):
        _ = variant.devices  # not a variant field: runs on 1 and 2 devices are compared


def test_hparams_matrix_and_choices_come_from_the_declaration() -> None:
    # The loop and the Keras lane were once missing from the HParams list.
    assert {"loop", "keras", "precision", "workers"} <= set(spec_hparams())
    assert not {"timeout_s", "repeats", "learning_rate"} & set(spec_hparams())
    assert {"loop", "keras", "communication", "cross_device_ops"} <= set(AXES)
    with pytest.raises(SpecError, match=r"partitioner must be one of none, fixed, min_size"):
        expand_axes({"workload": ["mlp"], "strategy": ["parameter_server"],
                     "partitioner": ["bogus"]})
    # True == 1, but a bool is not a Keras version.
    with pytest.raises(SpecError, match=r"Received: keras=True"):
        tiny_spec(keras=True)
