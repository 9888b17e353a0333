"""The nccl-tests-style all-reduce probe: formulas, and real runs on logical CPU devices.

TensorFlow parts run in child processes (tests/probe_cases.py).
"""

from __future__ import annotations

import itertools
import os
from typing import Any

import pytest

from bench.child.backends.tf.allreduce import (
    Buffers,
    algbw,
    busbw,
    human_bytes,
    size_buffers,
    sizes,
)
from tests.probe_cases import run_probe_case

KiB, MiB = 2**10, 2**20


def test_sizes_double_from_one_kib_up_to_the_maximum() -> None:
    assert sizes(8 * KiB) == [1 * KiB, 2 * KiB, 4 * KiB, 8 * KiB]
    full = sizes(256 * MiB)
    assert full[0] == KiB and full[-1] == 256 * MiB and len(full) == 19
    assert all(b == 2 * a for a, b in itertools.pairwise(full))
    assert sizes(3 * KiB) == [1 * KiB, 2 * KiB]  # not a power of two: stops below it
    with pytest.raises(ValueError, match="max_bytes=512"):
        sizes(512)


def test_bus_bandwidth_matches_a_hand_computation() -> None:
    # 64 MiB in 0.1 s: algbw = 67108864 / 0.1 = 671,088,640 B/s.
    bw = algbw(64 * MiB, 0.1)
    assert bw == pytest.approx(671_088_640.0)
    # nccl-tests all-reduce factor 2(n-1)/n: n=2 -> 1, n=4 -> 1.5, n=8 -> 1.75, n=1 -> 0.
    assert busbw(bw, 2) == pytest.approx(671_088_640.0)
    assert busbw(bw, 4) == pytest.approx(1_006_632_960.0)
    assert busbw(bw, 8) == pytest.approx(1_174_405_120.0)
    assert busbw(bw, 1) == 0.0


def test_buffers_count_bytes_of_every_tensor() -> None:
    b = Buffers("grads", ((3, 4), (5,)), "float32")
    assert (b.elements, b.bytes) == (17, 68)
    assert size_buffers(64 * MiB).shapes == ((16 * MiB,),)
    assert human_bytes(64 * MiB) == "64 MiB" and human_bytes(1536) == "1536 B"
    with pytest.raises(ValueError, match="n_bytes=6"):
        size_buffers(6)


def _check_points(figures: dict[str, Any], replicas: int) -> None:
    """Every point positive, internally consistent (algbw, busbw, p90 >= median)."""
    assert figures["replicas"] == replicas
    for p in figures["points"]:
        assert p["time_median_s"] > 0 and p["time_p90_s"] >= p["time_median_s"], p
        assert p["algbw"] == pytest.approx(p["bytes"] / p["time_median_s"])
        assert p["busbw"] == pytest.approx(p["algbw"] * 2 * (replicas - 1) / replicas)
        assert p["iterations"] >= 15


# Sizes 256x and 16x apart. Monotonicity is asserted only between them: at 1 KiB the
# time is the fixed cost of launching a collective (~0.5-1 ms here), at 4 MiB it adds
# at least one pass over 4 MiB per replica, at 64 MiB sixteen times that. Adjacent
# doubling sizes are not compared: below ~1 MiB they differ by less than the noise
# of a shared 2-core machine. Medians of >= 15 timed all-reduces each.
MONOTONE_SIZES = [1 * KiB, 4 * MiB, 64 * MiB]


@pytest.mark.parametrize("devices", [2, 4])
def test_probe_times_are_positive_and_grow_with_size(devices: int) -> None:
    r = run_probe_case("allreduce", devices, configs=[
        {"strategy": "mirrored", "cross_device_ops": "default"}], sizes=MONOTONE_SIZES)
    (figures,) = r["figures"]
    _check_points(figures, devices)
    sized = figures["points"][:-1]
    assert [p["bytes"] for p in sized] == MONOTONE_SIZES
    medians = [p["time_median_s"] for p in sized]
    assert medians == sorted(medians) and len(set(medians)) == len(medians), medians
    # The last point is the workload's exact gradient list, one tensor per variable.
    grads = figures["points"][-1]
    assert grads["label"] == "gradients:mlp"
    assert grads["bytes"] == r["grad_bytes_per_step"]
    assert grads["tensors"] == r["trainable_variables"]
    assert "CollectiveAllReduce" in figures["implementation"]


def test_every_cpu_cross_device_path_all_reduces_correctly() -> None:
    """HierarchicalCopy, ReductionToOneDevice and CentralStorage on 2 devices (none of
    them uses collective keys, so one process runs all three). The probe checks each
    sum against the known answer before timing; a wrong sum fails the case."""
    configs = [{"strategy": "mirrored", "cross_device_ops": "hierarchical_copy"},
               {"strategy": "mirrored", "cross_device_ops": "reduction_to_one_device"},
               {"strategy": "central_storage", "cross_device_ops": "default"}]
    r = run_probe_case("allreduce", 2, configs=configs, sizes=[64 * KiB, 4 * MiB])
    names = [f["implementation"] for f in r["figures"]]
    assert "HierarchicalCopyAllReduce" in names[0], names
    assert "ReductionToOneDevice" in names[1], names
    assert names[2].startswith("CentralStorageStrategy"), names
    for figures in r["figures"]:
        _check_points(figures, 2)


@pytest.mark.logical_cpu
def test_cli_runs_each_configuration_isolated_and_stores_the_common_schema(
        tmp_path: Any) -> None:
    """`python -m bench allreduce` end to end: one child per configuration, results in
    the sweep directory (RunResult.allreduce), NCCL on CPU recorded as unsupported."""
    import subprocess
    import sys

    from bench.results.store import load
    from tests.probe_cases import ROOT

    out = tmp_path / "ar"
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "allreduce", "--strategy", "mirrored",
         "--cross-device-ops", "default,nccl", "--devices", "2", "--workload", "mlp",
         "--size", "tiny", "--max-bytes", "8KiB", "--warmup", "2", "--min-iters", "5",
         "--max-seconds", "0.1", "--out", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=240,
        env={**os.environ, "STRATBENCH_CACHE_DIR": str(tmp_path / "cache")})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "busbw GB/s" in proc.stdout
    results = {r.spec.cross_device_ops: r for r in map(load, (out / "results").glob("*.json"))}
    assert results["nccl"].status == "unsupported"
    ok = results["default"]
    assert ok.status == "ok" and ok.figures is None and ok.allreduce is not None
    assert [p.bytes for p in ok.allreduce.points] == [1024, 2048, 4096, 8192, 4752]
    assert ok.spec.mode == "allreduce" and ok.allreduce.replicas == 2
    # The fingerprint reads the peak cache only: no op may run before the strategy exists.
    assert ok.environment["peak_flops"]["device"] == "/cpu:0"
