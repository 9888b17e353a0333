"""Probe figures in the schema and the spec, the peak cache, MFU and the oom note
(no TensorFlow)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench.child.backends.tf import peak as tf_peak
from bench.child.probes import peak
from bench.errors import SpecError
from bench.launch.memory_fit import note_largest_fit
from bench.results.schema import (
    AllReduceFigures,
    AllReducePoint,
    Communication,
    RunResult,
    units_table,
)
from bench.spec import RunSpec

BASE: dict[str, Any] = {"workload": "mlp", "strategy": "mirrored", "devices": 2,
                        "batch": 32, "size": "tiny"}


def spec(**over: Any) -> RunSpec:
    return RunSpec(**{**BASE, **over})


def result(status: str = "ok", **over: Any) -> RunResult:
    s = spec(**over)
    reason = None if status == "ok" else f"{status} for a test"
    return RunResult(key=s.key(), spec=s, status=status, reason=reason, replicas=s.replicas,
                     global_batch=s.global_batch, per_replica_batch=s.per_replica_batch)


def test_spec_modes_and_profile_steps_are_validated_with_the_received_value() -> None:
    assert spec().mode == "train" and spec().profile_steps == 0
    assert spec(mode="allreduce").label().endswith("allreduce")
    assert spec(mode="allreduce").key() != spec().key()
    with pytest.raises(SpecError, match=r"Received: mode='ring'"):
        spec(mode="ring")
    with pytest.raises(SpecError, match=r"Received: profile_steps=-1"):
        spec(profile_steps=-1)
    with pytest.raises(SpecError, match=r"Received: profile_steps=3"):
        spec(mode="allreduce", profile_steps=3)
    with pytest.raises(SpecError, match=r"Received: allreduce_max_bytes=100"):
        spec(allreduce_max_bytes=100)
    with pytest.raises(SpecError, match=r"independent copies never communicate\. "
                                        r"Received: mode='allreduce'"):
        spec(strategy="independent", mode="allreduce")


def test_probe_figures_round_trip_with_units(tmp_path: Path) -> None:
    r = result(mode="allreduce")
    r.allreduce = AllReduceFigures(
        implementation="MirroredStrategy/CollectiveAllReduce", replicas=2, dtype="float32",
        warmup_iterations=3, points=[AllReducePoint("1 KiB", 1024, 1, 1e-3, 2e-3, 1.024e6,
                                                    1.024e6, 20)])
    back = RunResult.from_dict(json.loads(json.dumps(r.to_dict())))
    assert back.allreduce == r.allreduce
    units = r.to_dict()["units"]
    assert units["allreduce.points.busbw"] == "bytes/s"
    assert units["allreduce.points.time_median_s"] == "s"
    assert "busbw = algbw x 2(n-1)/n" in r.to_dict()["definitions"]["allreduce"]
    table = units_table(Communication)
    assert table["collective_s"] == "s" and table["comm_fraction"].startswith("ratio")


def test_a_result_written_before_the_probe_fields_still_loads() -> None:
    doc = result().to_dict()
    for name in ("allreduce",):
        doc.pop(name)
    for name in ("mode", "profile_steps", "allreduce_max_bytes"):
        doc["spec"].pop(name)
    back = RunResult.from_dict(doc)
    assert back.allreduce is None and back.spec.mode == "train"


class _Experimental:
    """tf.config.experimental's TF32 switch, reading ``enabled``."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled

    def tensor_float_32_execution_enabled(self) -> bool:
        return self.enabled


class FakeTF:
    """Just what the cache key needs; it has no matmul, so measuring would fail."""

    __version__ = "0.0-test"

    class config:  # mirrors tf.config.threading and the TF32 switch (on by default)
        class threading:
            @staticmethod
            def get_intra_op_parallelism_threads() -> int:
                return 0

        experimental = _Experimental(True)


def _fake_peak(flops: float) -> peak.DtypePeak:
    return peak.DtypePeak(flops_per_s=flops, by_size={"512": flops}, chain={"512": 8},
                          measured_at=0.0, load_avg_1m=None)


def test_achievable_peak_comes_from_the_cache_without_measuring(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STRATBENCH_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(tf_peak, "measure_peak", lambda _tf, dtype, _dev: _fake_peak(4.0e11))
    assert tf_peak.achievable_peak(FakeTF, "/cpu:0", "float32").flops_per_s == 4.0e11

    def no_measuring(*_: Any, **__: Any) -> float:
        raise AssertionError("measured although the cache has the figure")

    monkeypatch.setattr(tf_peak, "measure_peak", no_measuring)
    assert tf_peak.achievable_peak(FakeTF, "/cpu:0", "float32").flops_per_s == 4.0e11
    assert tf_peak.cached_peak(FakeTF, "/cpu:0", "bfloat16") is None  # measured per dtype
    key = tf_peak.cache_key(FakeTF, "/cpu:0")
    assert tf_peak.cache_key(FakeTF, "/gpu:0") != key  # another device kind, another entry
    assert key.endswith(peak.METHOD_VERSION)  # figures of another method are not reused
    entry = json.loads(peak.cache_path().read_text())[key]
    assert "chained square matmuls" in entry["method"]


def test_a_refresh_keeps_the_higher_peak(tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STRATBENCH_CACHE_DIR", str(tmp_path))
    for flops in (4.0e11, 1.0e11):  # a busy machine reads low: the cached 4e11 stays
        monkeypatch.setattr(tf_peak, "measure_peak", lambda *_, f=flops: _fake_peak(f))
        got = tf_peak.achievable_peak(FakeTF, "/cpu:0", "float32", refresh=True)
    assert got.flops_per_s == 4.0e11 and got.remeasured == 1
    monkeypatch.setattr(tf_peak, "measure_peak", lambda *_: _fake_peak(5.0e11))
    assert tf_peak.achievable_peak(FakeTF, "/cpu:0", "float32", refresh=True).flops_per_s == 5e11


def test_chains_are_long_enough_that_launch_latency_does_not_count() -> None:
    # A GPU at 300 TFLOP/s, n = 8192: one matmul is 1.1 TFLOP, 3.7 ms; a call of k
    # chained matmuls must last MIN_CALL_S, so a ~10 us launch is < 0.01% of it.
    n, rate = 8192, 3e14
    k = peak.chain_length(rate, n)
    assert k * 2 * n**3 / rate >= peak.MIN_CALL_S
    assert (k - 1) * 2 * n**3 / rate < peak.MIN_CALL_S
    assert peak.chain_length(1e9, 4096) == 1  # already slow: one matmul per call
    assert peak.chain_length(0.0, 512) == 1
    assert peak.chain_length(1e18, 512) == peak.MAX_CHAIN
    assert min(peak.SIZES["GPU"]) >= 2048 and len(peak.SIZES["CPU"]) > 1


def _cpuinfo(vendor: str, family: int, model: int, name: str, flags: str, mhz: float,
             cores: list[tuple[int, int]]) -> str:
    """/proc/cpuinfo text: one block per (physical id, core id) logical processor."""
    return "\n\n".join(
        f"processor\t: {i}\nvendor_id\t: {vendor}\ncpu family\t: {family}\n"
        f"model\t\t: {model}\nmodel name\t: {name}\ncpu MHz\t\t: {mhz}\n"
        f"physical id\t: {pkg}\ncore id\t\t: {core}\nflags\t\t: {flags}"
        for i, (pkg, core) in enumerate(cores)) + "\n"


ZEN4 = _cpuinfo("AuthenticAMD", 25, 17, "AMD EPYC", "fpu sse2 avx fma avx2 avx512f "
                "avx512_bf16 avx512_vnni", 2596.142, [(0, 0), (0, 1)])
# Two sockets of 2 cores with 2 hyperthreads each: 8 processors, 4 physical cores.
SAPPHIRE = _cpuinfo("GenuineIntel", 6, 143, "Intel(R) Xeon(R) Platinum 8480+ @ 2.00GHz",
                    "sse2 avx fma avx2 avx512f avx512_bf16 avx512_fp16 amx_bf16 amx_tile",
                    2000.0, [(p, c) for p in (0, 1) for c in (0, 1)] * 2)


def test_theoretical_cpu_peak_is_cores_x_clock_x_flops_per_cycle() -> None:
    info = peak.parse_cpuinfo(ZEN4)
    assert info.physical_cores == 2 and "avx512_bf16" in info.flags
    t = peak.cpu_theoretical(info)
    # Zen 4 runs AVX-512 on 256-bit pipes: 2 FMA x 8 lanes x 2 = 32 float32 FLOPs per
    # cycle; its bfloat16 dot products do twice that; float16 is converted.
    assert t.flops_per_s["float32"] == pytest.approx(2 * 2596.142e6 * 32)
    assert t.flops_per_s["bfloat16"] == pytest.approx(2 * 2596.142e6 * 64)
    assert t.flops_per_s["float16"] == t.flops_per_s["float32"]
    assert "cpu MHz" in t.inputs["clock_source"]
    # With the kernel's boost clock (cpufreq, in kHz) that clock is used instead.
    boosted = peak.cpu_theoretical(info, sysfs_khz=3.7e6)
    assert boosted.flops_per_s["float32"] == pytest.approx(2 * 3.7e9 * 32)


def test_theoretical_cpu_peak_counts_physical_cores_the_process_may_use() -> None:
    info = peak.parse_cpuinfo(SAPPHIRE)
    assert info.physical_cores == 4  # hyperthreads share their core's vector units
    mine = peak.parse_cpuinfo(SAPPHIRE, usable=[0, 4])  # two threads of one core
    assert mine.physical_cores == 1
    t = peak.cpu_theoretical(mine)
    assert t.flops_per_s["float32"] == pytest.approx(2.0e9 * 64)  # "@ 2.00GHz" x AVX-512
    assert t.flops_per_s["bfloat16"] == pytest.approx(2.0e9 * 1024)  # AMX
    assert t.flops_per_s["float16"] == pytest.approx(2.0e9 * 128)  # AVX512-FP16
    assert "base clock" in t.inputs["clock_source"]


def test_theoretical_cpu_peak_without_vector_units_or_clock_is_unknown() -> None:
    avx2 = peak.parse_cpuinfo(_cpuinfo("GenuineIntel", 6, 85, "Xeon", "sse2 avx fma avx2",
                                       3000.0, [(0, 0)]))
    assert peak.cpu_flops_per_cycle(avx2)["float32"][0] == 32
    assert peak.cpu_flops_per_cycle(avx2)["bfloat16"][0] == 32  # converted
    bare = peak.parse_cpuinfo("processor\t: 0\nflags\t: fpu\ncpu MHz\t: 1000\n")
    assert peak.cpu_theoretical(bare).flops_per_s == {}
    no_clock = peak.parse_cpuinfo("processor\t: 0\nflags\t: sse2 avx\n")
    assert peak.cpu_theoretical(no_clock).source.startswith("unknown")


def test_theoretical_gpu_peak_comes_from_the_datasheet_table() -> None:
    a100 = peak.gpu_theoretical("NVIDIA A100-SXM4-40GB")
    assert a100.flops_per_s["bfloat16"] == 312e12 and "A100" in a100.source
    assert peak.gpu_theoretical("NVIDIA A100 80GB PCIe").flops_per_s == a100.flops_per_s
    assert peak.gpu_theoretical("Some Future GPU").flops_per_s == {}
    assert peak.gpu_theoretical("Some Future GPU").source.startswith("unknown")


@pytest.mark.parametrize(("name", "model"), [
    ("NVIDIA H100 80GB HBM3", "H100 SXM"), ("NVIDIA H100 PCIe", "H100 PCIe"),
    ("NVIDIA H100 NVL", "H100 NVL"), ("NVIDIA H200", "H200"), ("NVIDIA H200 NVL", "H200 NVL"),
    ("NVIDIA GH200 480GB", "GH200"), ("NVIDIA B200", "B200"),
    ("NVIDIA A100-SXM4-80GB", "A100"), ("NVIDIA A10G", "A10G"), ("NVIDIA A10", "A10"),
    ("NVIDIA L40S", "L40S"), ("NVIDIA L40", "L40"), ("NVIDIA L4", "L4"),
    ("Tesla T4", "T4"), ("Tesla V100-SXM2-16GB", "V100"),
])
def test_every_gpu_gets_its_own_model_never_a_neighbours(name: str, model: str) -> None:
    found = peak.gpu_model(name)
    assert found is not None and found.name == model, (name, found)


def test_l40_l4_and_l40s_each_get_their_own_peaks() -> None:
    rates = {n: peak.gpu_theoretical(f"NVIDIA {n}").flops_per_s["float32"]
             for n in ("L40", "L4", "L40S")}
    assert len(set(rates.values())) == 3 and rates["L4"] < rates["L40"] < rates["L40S"]


def test_float32_on_an_h100_follows_its_math_mode() -> None:
    """TensorFlow runs float32 matmuls as TF32 on Ampere and newer by default: the float32
    peak is then the TF32 tensor-core rate, and the CUDA-core one with TF32 off; a
    measured 390 TFLOP/s (TF32, PyTorch on the real card) is no probe error then, and
    is one against the CUDA-core rate."""
    on = peak.gpu_theoretical("NVIDIA H100 80GB HBM3", tf32=True)
    off = peak.gpu_theoretical("NVIDIA H100 80GB HBM3", tf32=False)
    assert on.flops_per_s["float32"] == 494.5e12 and "TF32" in on.source
    assert off.flops_per_s["float32"] == 67e12 and "CUDA-core" in off.source
    assert on.flops_per_s["bfloat16"] == off.flops_per_s["bfloat16"] == 989e12
    assert peak.probe_errors({"float32": 390e12}, on) == {}
    assert "float32" in peak.probe_errors({"float32": 390e12}, off)
    assert peak.probe_errors({"float32": 51.6e12}, off) == {}
    # A card without tensor-core float32 keeps its one rate either way.
    assert peak.gpu_theoretical("Tesla V100", tf32=True).flops_per_s["float32"] == 15.7e12
    assert peak.theoretical_for("/gpu:0", "NVIDIA H100 80GB HBM3", tf32=False) == off


def test_each_float32_math_mode_has_its_own_cached_peak() -> None:
    off = type("Off", (FakeTF,), {})
    off.config = type("config", (), {"threading": FakeTF.config.threading,
                                     "experimental": _Experimental(False)})
    assert tf_peak.cache_key(FakeTF, "/gpu:0") != tf_peak.cache_key(off, "/gpu:0")
    assert tf_peak.cache_key(FakeTF, "/cpu:0") == tf_peak.cache_key(off, "/cpu:0")


class FakePeak:
    """An achievable peak that reads ``first`` from the cache and ``again`` re-measured."""

    def __init__(self, first: float | None, again: float | None = None) -> None:
        self.first, self.again, self.refreshes = first, again, 0

    def __call__(self, refresh: bool) -> float | None:
        if refresh:
            self.refreshes += 1
            return self.again
        return self.first


def test_mfu_is_achieved_over_the_peaks_and_never_above_one() -> None:
    # Below the cached peak: no re-measuring; MFU against both peaks.
    fake = FakePeak(2e11)
    m = peak.settle_mfu(1e11, 1, fake, theoretical_per_device=4e11)
    assert (m.mfu, m.peak_flops_per_s, m.fault) == (pytest.approx(0.5), 2e11, None)
    assert m.mfu_theoretical == pytest.approx(0.25) and fake.refreshes == 0
    # Two GPUs: the per-device peaks add up.
    assert peak.settle_mfu(1e11, 2, FakePeak(1e11), None).mfu == pytest.approx(0.5)


def test_a_run_above_the_peak_has_it_re_measured() -> None:
    fake = FakePeak(1e11, again=2.5e11)  # the cached figure read low
    m = peak.settle_mfu(2e11, 1, fake, theoretical_per_device=None)
    assert fake.refreshes == 1 and m.remeasured
    assert m.mfu == pytest.approx(0.8) and m.peak_flops_per_s == 2.5e11 and m.fault is None


def test_a_run_still_above_the_re_measured_peak_blames_the_peak() -> None:
    m = peak.settle_mfu(3e11, 1, FakePeak(1e11, again=1.5e11), 2e11, method="chained")
    assert m.mfu is None and m.mfu_theoretical is None
    assert m.fault is not None and "peak probe reads low" in m.fault
    assert "1.5e+11" in m.fault and "chained" in m.fault
    assert m.peak_flops_per_s == 1.5e11  # the re-measured figure, for the reader


def test_a_theoretical_peak_below_the_measured_one_is_not_used() -> None:
    # A nominal clock (no boost) makes the theoretical peak read below what the
    # device measurably does: its MFU would be meaningless.
    m = peak.settle_mfu(1e11, 1, FakePeak(2e11), theoretical_per_device=1.6e11)
    assert m.mfu == pytest.approx(0.5)
    assert m.mfu_theoretical is None and m.theoretical_peak_flops_per_s is None


def test_mfu_is_achieved_over_peak_times_physical_devices() -> None:
    # 1e9 FLOP/example x 100 examples/s = 1e11 FLOP/s; 2 GPUs of 2.5e11 -> 0.2.
    assert peak.mfu(1e9, 100.0, 2.5e11, 2) == (pytest.approx(0.2), 5e11)
    assert peak.mfu(1e9, 100.0, None, 1) == (None, None)


def _peak(name: str, cores: tuple[int, ...], intra: int, achievable: float | None,
          theoretical: float | None = None, fault: str | None = None) -> Any:
    from bench.results.mfu import TaskPeak

    return TaskPeak(name, achievable, theoretical, fault, cores=cores, intra_threads=intra)


def test_run_mfu_adds_the_peaks_of_disjoint_or_thread_split_hardware() -> None:
    from bench.results.mfu import run_mfu
    from tests.helpers import fake_figures

    f = fake_figures()  # achieved = 600 FLOP/example x median throughput
    achieved = f.achieved_flops_per_s

    def pair(cores: tuple[tuple[int, ...], tuple[int, ...]], intra: int) -> list[Any]:
        return [_peak(f"replica{i}", c, intra, achieved, 2 * achieved)
                for i, c in enumerate(cores)]

    g = run_mfu(f, pair(((0,), (1,)), 1))
    assert g.mfu == pytest.approx(0.5) and g.peak_flops_per_s == pytest.approx(2 * achieved)
    assert g.mfu_theoretical == pytest.approx(0.25) and g.peak_fault is None
    assert run_mfu(f, pair(((0, 1), (0, 1)), 1)).mfu == pytest.approx(0.5)
    # Sharing cores with all their threads each: the core set's peak counts once.
    assert run_mfu(f, pair(((0, 1), (0, 1)), 2)).mfu == pytest.approx(1.0)
    half = [_peak("replica0", (0, 1), 2, achieved / 4), _peak("replica1", (0, 1), 2,
                                                              achieved / 4)]
    over = run_mfu(f, half)
    assert over.mfu is None  # never above 100%
    assert "above the sum of its tasks' achievable peaks" in (over.peak_fault or "")
    faulty = [_peak("replica0", (0,), 1, achieved, fault="no MFU: the peak probe reads low"),
              _peak("replica1", (1,), 1, achieved)]
    g = run_mfu(f, faulty)
    assert g.mfu is None and g.peak_fault == "no MFU: the peak probe reads low"
    # Hardware without a measured peak: no MFU at all, rather than one over the rest.
    unmeasured = run_mfu(f, [_peak("replica0", (0,), 1, achieved),
                             _peak("replica1", (1,), 1, None)])
    assert unmeasured.mfu is None and unmeasured.peak_flops_per_s is None


def test_oom_result_names_the_largest_batch_that_fit() -> None:
    ran = [result(batch=32), result(batch=64), result("oom", batch=256),
           result(batch=128, devices=4),  # another configuration: not a sibling
           result(batch=96, precision="mixed_bfloat16")]
    oom = result("oom", batch=128)
    oom.reason = "ResourceExhaustedError: OOM when allocating"
    note_largest_fit(oom, ran)
    assert oom.reason is not None
    assert oom.reason.startswith("largest batch of this configuration that fit in this "
                                 "sweep: global batch 64 (32 per replica)")
    assert oom.reason.endswith("OOM when allocating")
    lonely = note_largest_fit(result("oom", batch=64, devices=4), ran[:1])
    assert "no smaller batch" in (lonely.reason or "")
    ok = result(batch=32)
    assert note_largest_fit(ok, ran).reason is None  # only oom results are touched


def test_a_failing_profile_costs_its_figures_not_the_run(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from types import SimpleNamespace

    from bench.child.backends.tf import after as hooks
    from tests.helpers import fake_figures

    def broken_capture(*_: Any, **__: Any) -> Any:
        raise RuntimeError("another profiler session is active")

    monkeypatch.setattr(tf_peak, "fingerprint_entry", lambda *_, **__: {"device": "/cpu:0"})
    monkeypatch.setattr(tf_peak, "achievable_peak", lambda *_, **__: _fake_peak(1e12))
    monkeypatch.setattr(peak, "theoretical_for", lambda *_: peak.Theoretical())
    monkeypatch.setattr(hooks, "capture", broken_capture)
    trainer = SimpleNamespace(
        spec=spec(profile_steps=3), tf=None, optimizer=SimpleNamespace(name="adam"),
        devices=SimpleNamespace(kind="CPU", names=["/cpu:0", "/cpu:1"]),
        local_replicas=2, replicas=2, profile_steps=lambda *_: [])
    figures = fake_figures()
    out = hooks.after_windows(trainer, figures, tmp_path / "p")
    assert figures.communication is None and figures.breakdown is None
    assert figures.mfu == pytest.approx(600.0 * figures.global_throughput / 1e12)
    assert figures.mfu_theoretical is None  # no theoretical peak known here
    assert out.reason is not None and "another profiler session is active" in out.reason


def test_a_run_that_beats_its_peak_twice_stores_no_mfu_and_says_why(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from bench.child.backends.tf import after as hooks
    from tests.helpers import fake_figures

    calls: list[bool] = []

    def low_peak(_tf: Any, _device: str, _dtype: str, refresh: bool = False,
                 ceiling: float | None = None) -> Any:
        calls.append(refresh)
        return _fake_peak(1.0)  # far below the 600 FLOP/example x ~1000 examples/s

    monkeypatch.setattr(tf_peak, "fingerprint_entry", lambda *_, **__: {})
    monkeypatch.setattr(tf_peak, "achievable_peak", low_peak)
    monkeypatch.setattr(peak, "theoretical_for", lambda *_: peak.Theoretical())
    figures = fake_figures()
    out = hooks.settle_run_mfu(None, figures, "float32", "/cpu:0", 1)
    assert calls == [False, True]  # cached, then measured again
    assert figures.mfu is None and figures.peak_fault is not None
    assert out.reason is not None and "peak probe reads low" in out.reason


@pytest.mark.parametrize("tf32,achievable,achieved", [
    (True, 390e12, 200e12),   # TF32 on (TensorFlow's default): tensor-core rate
    (False, 51.6e12, 40e12),  # TF32 off: the CUDA-core rate
])
def test_float32_mfu_of_a_faked_h100_run_uses_its_math_modes_peaks(
        tf32: bool, achievable: float, achieved: float) -> None:
    """A run's MFU on the recorded H100 with the achievable peaks PyTorch measured there
    (390 TFLOP/s with TF32 on, 51.6 with it off): settled against both peaks, with no
    probe error and no re-measurement in either mode."""
    theo = peak.gpu_theoretical("NVIDIA H100 80GB HBM3", tf32=tf32)
    m = peak.settle_mfu(achieved, 1, FakePeak(achievable), theo.flops_per_s["float32"],
                        theo.source, theoretical_bound=theo.bound)
    assert m.fault is None and not m.remeasured
    assert m.mfu == pytest.approx(achieved / achievable)
    assert m.mfu_theoretical == pytest.approx(achieved / theo.flops_per_s["float32"])
    # The other mode's peak is wrong for this run: with TF32 on, the CUDA-core rate
    # reads as a probe error (the achievable peak above it); with it off, the TF32 rate
    # gives a theoretical MFU far too low to mean anything.
    other = peak.gpu_theoretical("NVIDIA H100 80GB HBM3", tf32=not tf32)
    wrong = peak.settle_mfu(achieved, 1, FakePeak(achievable, achievable),
                            other.flops_per_s["float32"], other.source,
                            theoretical_bound=other.bound)
    if tf32:
        assert wrong.fault is not None and "probe error" in wrong.fault
    else:
        assert (wrong.mfu_theoretical or 0) < 0.1
