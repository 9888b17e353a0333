"""Peaks that hold: measured when the machine is quiet, the best of several measurements,
checked against a theoretical maximum from the maximum clock and the vector flags.

Fake /proc/stat, /proc/loadavg, /proc/cpuinfo and lscpu texts, and a fake matmul probe
(no TensorFlow): each check in both directions.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bench.child.backends.tf import peak as tf_peak
from bench.child.probes import peak
from bench.hardware import (
    QUIET_OTHERS_SHARE,
    CpuTimes,
    activity,
    cpu_times,
    parse_loadavg,
    parse_proc_stat,
)
from tests.test_probes_schema import FakeTF

# Two processors; per line: user nice system idle iowait irq softirq steal guest guest_nice
STAT = """cpu  300 0 100 1500 50 0 0 50 0 0
cpu0 100 0 50 800 25 0 0 25 0 0
cpu1 200 0 50 700 25 0 0 25 0 0
intr 12345
ctxt 678
"""


def test_proc_stat_is_read_per_usable_processor() -> None:
    total, idle, steal = parse_proc_stat(STAT, ticks_per_s=100) or (0.0, 0.0, 0.0)
    assert (total, idle, steal) == pytest.approx((20.0, 15.5, 0.5))  # cpu0 + cpu1
    only = parse_proc_stat(STAT, cpus=[1], ticks_per_s=100)
    assert only == pytest.approx((10.0, 7.25, 0.25))
    assert parse_proc_stat(STAT, cpus=[7]) is None  # not listed: nothing read
    assert parse_proc_stat("cpu0 1 2 3 4\n", ticks_per_s=1) == pytest.approx((10.0, 4.0, 0.0))
    assert parse_loadavg("0.47 0.87 1.13 2/94 15797\n") == pytest.approx(0.47)


def test_cpu_times_reads_the_files_it_is_given(tmp_path: Path) -> None:
    (tmp_path / "stat").write_text(STAT)
    (tmp_path / "loadavg").write_text("1.50 1.00 0.50 3/100 42\n")
    t = cpu_times([0, 1], str(tmp_path / "stat"), str(tmp_path / "loadavg"))
    assert t is not None and t.load_1m == pytest.approx(1.5) and t.own >= 0
    assert cpu_times([0], str(tmp_path / "nowhere"), str(tmp_path / "loadavg")) is None


def _times(total: float, idle: float, steal: float = 0.0, own: float = 0.0,
           load: float | None = None) -> CpuTimes:
    return CpuTimes(total, idle, steal, own, load)


def test_quiet_means_others_and_the_hypervisor_left_the_cores_alone() -> None:
    start = _times(100.0, 50.0, 1.0, own=10.0, load=0.2)
    # 2 s on 2 cores = 4 s: this process used 3.9 s, nobody else anything
    mine = activity(start, _times(104.0, 50.1, 1.0, own=13.9, load=1.1))
    assert mine.quiet and mine.others == pytest.approx(0.0) and mine.steal == 0.0
    assert "1-minute load 0.20 -> 1.10" in mine.text()
    # the same 4 s, but another process took 1.5 s of them
    busy = activity(start, _times(104.0, 50.1, 1.0, own=12.3))
    assert not busy.quiet and busy.others == pytest.approx(1.6 / 4)
    assert "others used 40% of the cores" in busy.text()
    # the hypervisor took 0.4 s (10%): steal, not quiet either
    stolen = activity(start, _times(104.0, 50.1, 1.4, own=13.5))
    assert not stolen.quiet and stolen.steal == pytest.approx(0.1) and stolen.others == 0.0
    # a little of someone else is still quiet
    assert activity(start, _times(104.0, 50.1, 1.0, own=13.9 - QUIET_OTHERS_SHARE * 4 + 0.01)
                    ).quiet


class _Watch:
    """Readings for measure_peak: per measurement (idle before, measured), whether
    others used the cores; each reading advances 4 s of core time."""

    def __init__(self, busy: list[tuple[bool, bool]]) -> None:
        self.readings: Iterator[CpuTimes] = iter(self._script(busy))

    @staticmethod
    def _script(busy: list[tuple[bool, bool]]) -> list[CpuTimes]:
        total = own = 0.0
        out = [_times(total, 0.0, own=own)]
        for before, during in busy:
            for others, working in ((before, False), (during, True)):
                # the probe takes what the cores have: all but 0.2 s, or half when shared
                mine = (1.9 if others else 3.8) if working else 0.0
                total, own = total + 4.0, own + mine
                idle = 4.0 - mine - (2.0 if others else 0.0)
                out.append(_times(total, out[-1].idle + idle, own=own))
            out.append(out[-1])  # the next measurement's first reading: no time passed
        return out

    def __call__(self) -> CpuTimes:
        return next(self.readings)


def _fake_sizes(rates: list[float], monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The probe gives ``rates[i]`` on measurement i (the best size of three)."""
    left = list(rates)
    calls: list[float] = []

    def measure_size(_tf: Any, _dtype: str, _device: str, n: int) -> tuple[float, int, float]:
        rate = left[0] * (1.0 if n == 1024 else 0.8)
        if n == peak.SIZES["CPU"][-1]:
            calls.append(left.pop(0))
        return rate, 8, 0.01

    monkeypatch.setattr(tf_peak, "measure_size", measure_size)
    return calls


def test_a_quiet_machine_gives_two_measurements_and_keeps_the_best(
        monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _fake_sizes([1.10e11, 1.20e11], monkeypatch)
    got = tf_peak.measure_peak(None, "float32", "/cpu:0",
                            watch=_Watch([(False, False), (False, False)]), pause=lambda _: None)
    assert calls == [1.10e11, 1.20e11]  # QUIET_MEASUREMENTS quiet ones, then stop
    assert got.flops_per_s == 1.20e11 and got.by_size["1024"] == 1.20e11
    assert got.quiet == [True, True] and got.measured_quiet is True
    assert got.conditions.startswith("2 measurement(s), 2 quiet")


def test_a_busy_measurement_is_taken_again_and_not_kept(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # busy during the first, busy before the second: both taken again
    calls = _fake_sizes([0.60e11, 0.70e11, 1.10e11, 1.05e11], monkeypatch)
    got = tf_peak.measure_peak(None, "float32", "/cpu:0",
                            watch=_Watch([(False, True), (True, False), (False, False),
                                          (False, False)]),
                            pause=lambda _: None)
    assert len(calls) == 4 and got.quiet == [False, False, True, True]
    assert got.flops_per_s == 1.10e11  # the best quiet one
    assert "during: others used" in got.conditions and "before: others used" in got.conditions
    assert got.measurements == [0.60e11, 0.70e11, 1.10e11, 1.05e11]


def test_a_machine_never_quiet_keeps_the_best_and_says_it_may_read_low(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # a busy measurement that happens to read higher is still kept over nothing
    _fake_sizes([0.9e11, 1.0e11, 0.8e11, 0.7e11], monkeypatch)
    got = tf_peak.measure_peak(None, "float32", "/cpu:0", watch=_Watch([(True, True)] * 4),
                            pause=lambda _: None)
    assert len(got.measurements) == peak.MAX_MEASUREMENTS and got.measured_quiet is False
    assert got.flops_per_s == 1.0e11 and "none was quiet" in got.conditions
    _fake_sizes([2e11, 3e11], monkeypatch)  # /proc unreadable: nothing to check
    unknown = tf_peak.measure_peak(None, "float32", "/cpu:0", watch=lambda: None,
                                pause=lambda _: None)
    assert unknown.measured_quiet is None and unknown.quiet == [None, None]
    assert "quiet not checked" in unknown.conditions and unknown.flops_per_s == 3e11


# -- the theoretical maximum --------------------------------------------------------------
def _cpuinfo(vendor: str, family: int, model: int, name: str, flags: str,
             mhz: float = 2245.78, cores: int = 2) -> peak.CpuInfo:
    text = "\n\n".join(
        f"processor\t: {i}\nvendor_id\t: {vendor}\ncpu family\t: {family}\nmodel\t\t: {model}\n"
        f"model name\t: {name}\ncpu MHz\t\t: {mhz}\nphysical id\t: 0\ncore id\t\t: {i}\n"
        f"flags\t\t: {flags}" for i in range(cores))
    return peak.parse_cpuinfo(text)


# This machine: a VM on AMD EPYC Rome (Zen 2) showing neither cpufreq nor lscpu's maximum.
ROME = _cpuinfo("AuthenticAMD", 23, 49, "AMD EPYC", "fpu sse2 avx fma avx2 f16c")
LSCPU = """Architecture:            x86_64
Model name:              Intel(R) Xeon(R) Gold 6248 CPU @ 2.50GHz
CPU max MHz:             3900.0000
CPU min MHz:             1000.0000
"""


def test_the_clock_is_the_maximum_when_one_is_known_and_says_so_when_not() -> None:
    cascade = _cpuinfo("GenuineIntel", 6, 85, "Intel(R) Xeon(R) Gold 6248 CPU @ 2.50GHz",
                       "sse2 avx fma avx2 avx512f")
    sysfs = peak.cpu_max_clock_hz(cascade, sysfs_khz=3.9e6)
    assert sysfs == peak.Clock(3.9e9, sysfs.source, True) and "cpuinfo_max_freq" in sysfs.source
    lscpu = peak.cpu_max_clock_hz(cascade, None, peak.lscpu_max_mhz(LSCPU))
    assert lscpu.hz == pytest.approx(3.9e9) and lscpu.maximum and "lscpu" in lscpu.source
    assert peak.lscpu_max_mhz("Architecture: x86_64\n") is None
    base = peak.cpu_max_clock_hz(cascade, None)  # "@ 2.50GHz" is the base clock
    assert base.hz == pytest.approx(2.5e9) and not base.maximum
    rome = peak.cpu_max_clock_hz(ROME, None)  # no clock anywhere: the line's boost
    assert rome.hz == pytest.approx(3.9e9) and rome.maximum and "EPYC 7002" in rome.source
    ryzen = _cpuinfo("AuthenticAMD", 23, 49, "AMD Ryzen Threadripper 3970X", "avx2 fma")
    assert not peak.cpu_max_clock_hz(ryzen, None).maximum  # not the server line: cpu MHz


def test_flops_per_cycle_follow_the_vector_flags() -> None:
    def per_cycle(flags: str, vendor: str = "GenuineIntel") -> dict[str, float]:
        info = _cpuinfo(vendor, 6, 143, "Xeon", flags)
        return {d: v for d, (v, _) in peak.cpu_flops_per_cycle(info).items()}

    assert per_cycle("sse2 avx fma avx2") == {"float32": 32, "bfloat16": 32, "float16": 32}
    assert per_cycle("avx2 fma avx512f")["float32"] == 64
    assert per_cycle("avx2 fma avx512f avx512_bf16")["bfloat16"] == 128
    assert per_cycle("avx2 fma avx512f avx512_bf16 amx_bf16")["bfloat16"] == 1024
    rome = peak.cpu_theoretical(ROME)
    assert rome.bound and rome.emulated == {"bfloat16", "float16"}
    assert rome.flops_per_s["float32"] == pytest.approx(2 * 3.9e9 * 32)  # 249.6 GFLOP/s
    assert not peak.cpu_theoretical(_cpuinfo("GenuineIntel", 6, 143, "Xeon @ 2.00GHz",
                                             "avx2 fma avx512_bf16")).bound


def test_a_probe_figure_above_the_theoretical_maximum_is_a_probe_error() -> None:
    rome = peak.cpu_theoretical(ROME)
    # The other machine of docs/where-the-time-goes.md: possible.
    ok = peak.probe_errors({"float32": 205e9}, rome)
    assert ok == {}
    wrong = peak.probe_errors({"float32": 260e9}, rome)
    assert "probe error" in wrong["float32"] and "249.6 GFLOP/s" in wrong["float32"]
    # a base clock is no bound: above it is the boost clock at work, not an error
    base = peak.cpu_theoretical(_cpuinfo("GenuineIntel", 6, 85, "Xeon @ 2.00GHz",
                                         "avx2 fma"))
    assert peak.probe_errors({"float32": 200e9}, base) == {}


def test_bfloat16_above_float32_without_bf16_instructions_is_flagged() -> None:
    rome = peak.cpu_theoretical(ROME)
    flagged = peak.probe_errors({"float32": 114e9, "bfloat16": 180e9}, rome)
    assert set(flagged) == {"bfloat16"} and "without bfloat16 instructions" in flagged["bfloat16"]
    assert peak.probe_errors({"float32": 114e9, "bfloat16": 100e9}, rome) == {}
    zen4 = peak.cpu_theoretical(_cpuinfo("AuthenticAMD", 25, 17, "AMD EPYC",
                                         "avx2 fma avx512f avx512_bf16"), sysfs_khz=3.7e6)
    assert peak.probe_errors({"float32": 114e9, "bfloat16": 180e9}, zen4) == {}  # it has them


class _Peaks:
    """achievable(refresh) for settle_mfu: one figure, another after a refresh."""

    def __init__(self, first: float, again: float | None = None) -> None:
        self.first, self.again, self.refreshes = first, again, 0

    def __call__(self, refresh: bool) -> float | None:
        self.refreshes += refresh
        return self.again if refresh and self.again is not None else self.first


def test_mfu_is_never_taken_against_a_peak_above_the_theoretical_maximum() -> None:
    wrong = _Peaks(3e11)  # a bound of 2.5e11 per device: measured again, still above
    m = peak.settle_mfu(1e11, 1, wrong, 2.5e11, "chained", theoretical_bound=True)
    assert wrong.refreshes == 1 and m.mfu is None
    assert m.fault is not None and "probe error" in m.fault and "theoretical maximum" in m.fault
    assert m.mfu_theoretical == pytest.approx(1e11 / 2.5e11)  # the bound itself still holds
    fixed = peak.settle_mfu(1e11, 1, _Peaks(3e11, again=2e11), 2.5e11,
                            theoretical_bound=True)
    assert fixed.fault is None and fixed.mfu == pytest.approx(0.5)
    # the same figures against a base-clock theoretical: no error, that peak is not used
    base = peak.settle_mfu(1e11, 1, _Peaks(3e11), 2.5e11)
    assert base.fault is None and base.mfu == pytest.approx(1e11 / 3e11)
    assert base.mfu_theoretical is None


def _dtype_peak(flops: float) -> peak.DtypePeak:
    return peak.DtypePeak(flops, {"1024": flops}, {"1024": 8}, 0.0, None)


def test_a_cached_probe_error_is_replaced_on_refresh_and_reported(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STRATBENCH_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(peak, "theoretical_for", lambda *_: peak.cpu_theoretical(ROME))
    for flops in (3.0e11, 1.1e11):  # 300 GFLOP/s cached: above the 249.6 maximum
        monkeypatch.setattr(tf_peak, "measure_peak", lambda *_, f=flops: _dtype_peak(f))
        got = tf_peak.achievable_peak(FakeTF, "/cpu:0", "float32", refresh=True, ceiling=249.6e9)
    assert got.flops_per_s == 1.1e11  # not kept as "the best the hardware showed"
    monkeypatch.setattr(tf_peak, "measure_peak", lambda *_: _dtype_peak(1.0e11))
    kept = tf_peak.achievable_peak(FakeTF, "/cpu:0", "float32", refresh=True, ceiling=249.6e9)
    assert kept.flops_per_s == 1.1e11 and "is higher and stays" in kept.conditions
    monkeypatch.setattr(tf_peak, "measure_peak", lambda *_: _dtype_peak(3.0e11))
    tf_peak.achievable_peak(FakeTF, "/cpu:0", "bfloat16")  # 300 > 249.6 and > float32
    entry = tf_peak.fingerprint_entry(FakeTF, "/cpu:0", ("float32", "bfloat16"))
    errors = entry["achievable"]["probe_errors"]
    assert set(errors) == {"bfloat16"} and "above the theoretical maximum" in errors["bfloat16"]
    assert entry["theoretical"]["bound"] is True
    json.dumps(entry)  # it goes into the result's fingerprint


def test_processes_that_miss_the_cache_together_measure_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A run's processes (a cluster's tasks) reach the probe at once: one measures, the
    # others wait for it and read its figure, rather than all measuring on a busy machine.
    monkeypatch.setenv("STRATBENCH_CACHE_DIR", str(tmp_path))
    measured: list[float] = []

    def slow_measure(*_: object) -> peak.DtypePeak:
        time.sleep(0.3)
        measured.append(1.2e11)
        return _dtype_peak(1.2e11)

    monkeypatch.setattr(tf_peak, "measure_peak", slow_measure)
    got: list[float] = []
    tasks = [threading.Thread(target=lambda: got.append(
        tf_peak.achievable_peak(FakeTF, "/cpu:0", "float32").flops_per_s)) for _ in range(3)]
    for t in tasks:
        t.start()
    for t in tasks:
        t.join(timeout=30)
    assert got == [1.2e11] * 3 and len(measured) == 1
    # A refresh (a run beat the figure) measures again, under the same lock.
    tf_peak.achievable_peak(FakeTF, "/cpu:0", "float32", refresh=True)
    assert len(measured) == 2
    # A lock held past the wait is not waited on forever: measure anyway.
    with peak.measuring() as first:
        t0 = time.monotonic()
        with peak.measuring(wait_s=0.2) as second:
            assert first and not second and time.monotonic() - t0 >= 0.2
    with peak.measuring(wait_s=0.2) as third:
        assert third  # released


def test_a_remote_device_is_measured_without_this_hosts_quiet_check(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # A parameter server's worker, timed through the cluster: this host's load (its
    # own matmuls there, on one machine) would read "not quiet" every time.
    calls: list[str] = []

    def sizes(tf: object, dtype: str, device: str) -> tuple[dict[str, float], dict[str, int]]:
        calls.append(device)
        return {"512": 1e11 + len(calls)}, {"512": 4}

    monkeypatch.setattr(tf_peak, "_measure_sizes", sizes)
    worker = "/job:worker/replica:0/task:0/device:CPU:0"
    assert tf_peak.measure_dtype(FakeTF, "float32", worker, remote=True) == 1e11 + 2
    assert calls == [worker] * peak.QUIET_MEASUREMENTS


def test_onednn_on_and_off_keep_their_own_peaks(monkeypatch: pytest.MonkeyPatch) -> None:
    keys = set()
    for value in ("1", "0", None):
        if value is None:
            monkeypatch.delenv("TF_ENABLE_ONEDNN_OPTS", raising=False)
        else:
            monkeypatch.setenv("TF_ENABLE_ONEDNN_OPTS", value)
        keys.add(tf_peak.cache_key(FakeTF, "/cpu:0"))
    assert len(keys) == 3
