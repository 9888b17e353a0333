"""What a run's GPU state says: the throttle reasons that mean a fault, a clock that fell
or moved over the windows, the clock the windows sustained. Pure functions of the states
``bench.hardware.gpu_sampler`` reads."""

from __future__ import annotations

import statistics
from typing import Any

# -- GPU state: what moves benchmark numbers by tens of percent ----------------------
# Bits of nvidia-smi's clocks_event_reasons.active (NVML's clocksEventReasons).
THROTTLE_BITS = {0x1: "gpu_idle", 0x2: "applications_clocks_setting", 0x4: "sw_power_cap",
                 0x8: "hw_slowdown", 0x10: "sync_boost", 0x20: "sw_thermal_slowdown",
                 0x40: "hw_thermal_slowdown", 0x80: "hw_power_brake_slowdown",
                 0x100: "display_clocks_setting"}
# The reasons that mean a fault: heat, a hardware slowdown or power brake. The power cap
# (sw_power_cap) is not one: an H100 under a sustained load sits at its 700 W cap with
# that bit set and its SM clock at 1335-1380 of 1980 MHz, which is how it runs, not a
# fault. What moves a comparison there is the clock itself: a run whose SM clock moved
# by more than CLOCK_DRIFT between the two ends of its windows is reported.
SLOWDOWNS = ("hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown",
             "hw_power_brake_slowdown")
CLOCK_DRIFT = 0.10


def throttle_reasons(mask: int | None) -> list[str]:
    """Names of the bits set in a clocks-event-reasons mask."""
    if mask is None:
        return []
    return [name for bit, name in THROTTLE_BITS.items() if mask & bit]


def throttle_findings(start: list[dict[str, Any]], end: list[dict[str, Any]],
                      during: list[dict[str, Any]] | None = None) -> list[str]:
    """One line per GPU slowed down by a fault (``SLOWDOWNS``) at either end or in the
    samples ``during`` the windows, or whose SM clock moved by more than
    ``CLOCK_DRIFT`` over them (empty: none).

    For a verdict: such a run measured another GPU than the one named in its
    fingerprint. A GPU at its power cap with a steady clock is not one.
    """
    findings = []
    for when, states in (("start", start), ("end", end)):
        for st in states:
            slow = [r for r in st.get("throttle_reasons") or [] if r in SLOWDOWNS]
            if slow:
                clock = (f"; SM clock {st.get('sm_clock_mhz')} of "
                         f"{st.get('sm_clock_max_mhz')} MHz" if st.get("sm_clock_mhz") else "")
                findings.append(f"GPU {st.get('index')} at the {when} of the windows: "
                                f"{', '.join(slow)}{clock}")
    for d in during or []:
        slow = [r for r in d.get("reasons") or [] if r in SLOWDOWNS]
        if slow:
            findings.append(f"GPU {d.get('index')} during the windows: {', '.join(slow)} "
                            f"in {d.get('samples')} samples")
        # Against the median: a card boosting for the first second and settling at its
        # power cap has a high first sample, not a fall.
        low = d.get("sm_clock_min_mhz")
        typical = d.get("sm_clock_median_mhz") or d.get("sm_clock_mean_mhz")
        if low and typical and 1.0 - low / typical > CLOCK_DRIFT:
            findings.append(f"GPU {d.get('index')}: SM clock fell to {low} MHz during the "
                            f"windows (median {typical:.0f} MHz over {d.get('samples')} "
                            f"samples)")
    # Samples taken during the windows say how the clock went; the two ends alone would
    # also catch a GPU boosting at the first window and settling at its power cap.
    sampled = {d.get("index") for d in during or [] if d.get("sm_clock_mean_mhz")}
    before = {st.get("index"): st for st in start}
    for st in end:
        if st.get("index") in sampled:
            continue
        first = before.get(st.get("index"))
        a, b = (first or {}).get("sm_clock_mhz"), st.get("sm_clock_mhz")
        if a and b and abs(b / a - 1.0) > CLOCK_DRIFT:
            why = ", ".join(st.get("throttle_reasons") or []) or "no reason given"
            findings.append(f"GPU {st.get('index')}: SM clock moved from {a} to {b} MHz "
                            f"during the windows ({why})")
    return findings


def sustained_clock(gpu_state_entry: dict[str, Any]) -> float | None:
    """The mean SM clock (MHz) a run's windows ran at, over its GPUs: the samples
    taken during the windows where there are any, else the mean of both ends."""
    during = gpu_state_entry.get("during") or []
    means = [d["sm_clock_mean_mhz"] for d in during if d.get("sm_clock_mean_mhz")]
    if not means:
        ends = (gpu_state_entry.get("start") or []) + (gpu_state_entry.get("end") or [])
        means = [st["sm_clock_mhz"] for st in ends if st.get("sm_clock_mhz")]
    return sum(means) / len(means) if means else None


def clock_mismatch(clocks: dict[str, float]) -> str | None:
    """A line when the sustained SM clocks of runs being compared (label -> MHz)
    differ by more than ``CLOCK_DRIFT``: their figures are of GPUs running at
    different speeds, whatever the fingerprint says. None when they agree."""
    if len(clocks) < 2:
        return None
    low, high = min(clocks.items(), key=lambda kv: kv[1]), max(clocks.items(),
                                                               key=lambda kv: kv[1])
    if high[1] / low[1] - 1.0 <= CLOCK_DRIFT:
        return None
    return (f"the GPUs ran at different clocks: {high[0]} at {high[1]:.0f} MHz, "
            f"{low[0]} at {low[1]:.0f} MHz (more than {CLOCK_DRIFT:.0%} apart)")


def summarise_samples(samples: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Per GPU, from ``gpu_state`` samples taken during the windows: how many, how many
    found it idle, the SM clock's mean and minimum and power's mean and maximum over the
    busy ones, and every reason seen.

    An idle GPU (``gpu_idle``: between steps of a host-bound run, or before its first
    kernel) drops to its idle clock, 345 MHz on the H100: that is no slowdown of the
    work, so such samples stay out of the clock and power figures.
    """
    by_gpu: dict[Any, list[dict[str, Any]]] = {}
    for sample in samples:
        for st in sample:
            by_gpu.setdefault(st.get("index"), []).append(st)
    out = []
    for index, states in sorted(by_gpu.items(), key=lambda kv: str(kv[0])):
        busy = [st for st in states if "gpu_idle" not in (st.get("throttle_reasons") or [])]
        clocks = [st["sm_clock_mhz"] for st in busy if st.get("sm_clock_mhz")]
        power = [st["power_draw_w"] for st in busy if st.get("power_draw_w") is not None]
        reasons = sorted({r for st in states for r in st.get("throttle_reasons") or []})
        out.append({"index": index, "samples": len(states),
                    "idle_samples": len(states) - len(busy),
                    "sm_clock_mean_mhz": sum(clocks) / len(clocks) if clocks else None,
                    "sm_clock_median_mhz": statistics.median(clocks) if clocks else None,
                    "sm_clock_min_mhz": min(clocks) if clocks else None,
                    "power_mean_w": sum(power) / len(power) if power else None,
                    "power_max_w": max(power) if power else None, "reasons": reasons})
    return out
