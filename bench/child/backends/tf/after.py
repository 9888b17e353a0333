"""What runs after a TensorFlow run's measured windows: MFU against TensorFlow's matmul
probe (peak.py), then the optional profile and its breakdown (probes.profile)."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.child.backends.tf import peak as tf_peak
from bench.child.probes import peak
from bench.child.probes.hooks import AfterWindows, evidence_step_count
from bench.child.probes.peak import PRECISION_DTYPE
from bench.child.probes.profile import capture
from bench.child.probes.trace import Classifier
from bench.results.schema import Figures
from bench.results.text import breakdown_line


def optimizer_classifier(optimizer: Any) -> Classifier:
    """Packing ops count inside the run's optimizer scope(s), where Keras all-reduces
    gradients (a LossScaleOptimizer's inner optimizer has its own scope)."""
    names = [optimizer.name]
    inner = getattr(optimizer, "inner_optimizer", None)
    if inner is not None:
        names.append(inner.name)
    return Classifier(reduction_scopes=tuple(re.sub(r"_\d+$", "", n) for n in names))


def settle_run_mfu(tf: Any, figures: Figures, precision: str, device: str,
                   physical_devices: int, share: float = 1.0,
                   progress: Callable[[str], None] = lambda _: None) -> AfterWindows:
    """Fill ``figures``' MFU fields in place against both peaks (see peak.settle_mfu).

    ``share`` is the fraction of the global achieved FLOP/s done by this process's
    devices (a worker of a synchronous multi-process run does its replicas' share).
    The achievable peak of the run's dtype is measured here if the cache lacks it (after
    the windows: never inside them), and again if the run beats it.
    """
    dtype = PRECISION_DTYPE[precision]
    out = AfterWindows({})
    own = figures.achieved_flops_per_s * share
    kind = peak.device_kind(device)
    theo = tf_peak.device_theoretical(tf, device)

    def achievable(refresh: bool) -> float | None:
        if refresh:
            progress(f"measuring the {dtype} peak again: the run's {own:.4g} FLOP/s beat the "
                     f"cached one, or it reads above the theoretical maximum")
        try:
            return tf_peak.achievable_peak(tf, device, dtype, refresh=refresh,
                                           ceiling=peak.bound_of(theo, dtype)).flops_per_s
        except OSError as exc:  # e.g. an unwritable cache directory
            out.problems.append(f"no MFU: peak FLOP/s probe failed ({exc})")
        except Exception as exc:  # no matmul kernel for this dtype here: no peak
            out.problems.append(f"no MFU: no {dtype} matmul peak on {device} "
                                f"({type(exc).__name__}: {str(exc).strip()[:200]})")
        return None

    settled = peak.settle_mfu(own, physical_devices, achievable,
                              theo.flops_per_s.get(dtype),
                              peak.method_text(device, peak.SIZES[kind]),
                              theoretical_bound=theo.bound)
    figures.mfu, figures.peak_flops_per_s = settled.mfu, settled.peak_flops_per_s
    figures.mfu_theoretical = settled.mfu_theoretical
    figures.theoretical_peak_flops_per_s = settled.theoretical_peak_flops_per_s
    if settled.fault:
        figures.peak_fault = settled.fault
        out.problems.append(settled.fault)
        progress(settled.fault)
    out.peak_entry = tf_peak.fingerprint_entry(tf, device)
    return out


def after_windows(trainer: Any, figures: Figures, profile_dir: Path | None,
                  progress: Callable[[str], None] = lambda _: None,
                  evidence_steps: int = 0) -> AfterWindows:
    """Fill ``figures``' MFU fields, ``breakdown`` and ``communication`` in place.

    The peak is measured here, after the strategy exists, if the cache lacks it (see
    tf_peak.fingerprint_entry). The trainer drives the profiled steps itself
    (``trainer.profile_steps``, a ``probes.profile.StepDriver``), so the custom loop
    and ``fit`` are split alike: the spec's ``profile_steps``, else up to
    ``evidence_steps`` (a sweep's evidence, kept short on slow steps). A failing profile
    costs the breakdown, not the throughput already measured: it is reported in
    ``problems``.
    """
    spec, devices = trainer.spec, trainer.devices
    physical = 1 if devices.kind == "CPU" else len(devices.names)
    out = settle_run_mfu(trainer.tf, figures, spec.precision, devices.names[0], physical,
                         share=trainer.local_replicas / trainer.replicas, progress=progress)
    steps = spec.profile_steps or (evidence_step_count(
        evidence_steps, figures.step_time.median_s * spec.steps_per_call,
        trainer.local_replicas < trainer.replicas) if evidence_steps else 0)
    if not steps:
        return out
    if profile_dir is None:
        out.problems.append("profile_steps > 0 but no profile directory was given: "
                            "not profiled")
        return out
    profile_dir = profile_dir.resolve()  # the stored path must work from anywhere
    try:
        figures.breakdown, figures.communication = capture(
            trainer.tf, trainer.profile_steps, steps, profile_dir,
            steps_per_call=spec.steps_per_call, unprofiled_step_s=figures.step_time.median_s,
            classifier=optimizer_classifier(trainer.optimizer), loop=spec.loop)
    except Exception as exc:
        out.problems.append(f"profile failed, no step breakdown: "
                            f"{type(exc).__name__}: {str(exc).strip()[:300]}")
        progress(out.problems[-1])
        return out
    progress(breakdown_line(figures.breakdown))
    return out
