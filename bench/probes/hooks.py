"""What runs after a training run's measured windows: MFU, then the optional profile.

Kept out of the measured loop so neither the peak probe nor the profiler can touch
the throughput windows; the child calls ``after_windows`` once ``measure`` returned.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.probes.peak import PRECISION_DTYPE, fingerprint_entry, mfu, peak_flops
from bench.probes.profile import capture, tensorboard_command
from bench.probes.trace import Classifier
from bench.results import Figures


def optimizer_classifier(optimizer: Any) -> Classifier:
    """Packing ops count inside the run's optimizer scope(s), where Keras all-reduces
    gradients (a LossScaleOptimizer's inner optimizer has its own scope)."""
    names = [optimizer.name]
    inner = getattr(optimizer, "inner_optimizer", None)
    if inner is not None:
        names.append(inner.name)
    return Classifier(reduction_scopes=tuple(re.sub(r"_\d+$", "", n) for n in names))


def after_windows(trainer: Any, figures: Figures, profile_dir: Path | None,
                  progress: Callable[[str], None] = lambda _: None) -> dict[str, Any]:
    """Fill ``figures.mfu``, ``peak_flops_per_s`` and ``communication`` in place.

    Returns the peak FLOP/s entry for the environment fingerprint (measured here, after
    the strategy exists, if the cache lacks it: see peak.fingerprint_entry).
    """
    spec, devices = trainer.spec, trainer.devices
    entry = fingerprint_entry(trainer.tf, measure=True)
    table = peak_flops(trainer.tf, devices.names[0])
    physical = 1 if devices.kind == "CPU" else len(devices.names)
    figures.mfu, figures.peak_flops_per_s = mfu(
        figures.model.train_flops_per_example, figures.global_throughput,
        table.get(PRECISION_DTYPE[spec.precision]), physical)
    if not spec.profile_steps:
        return entry
    if profile_dir is None:
        progress("profile_steps > 0 but no profile directory was given: not profiled")
        return entry
    profile_dir = profile_dir.resolve()  # the stored path must work from anywhere
    figures.communication = capture(
        trainer.tf, lambda: float(trainer.call().numpy()), spec.profile_steps, profile_dir,
        steps_per_call=spec.steps_per_call, unprofiled_step_s=figures.step_time.median_s,
        classifier=optimizer_classifier(trainer.optimizer))
    c = figures.communication
    progress(f"profile: {c.collective_s * 1e3:.2f} ms of {c.step_s * 1e3:.2f} ms per step "
             f"communicating ({c.comm_fraction:.1%}); open it with: "
             f"{tensorboard_command(profile_dir)}")
    return entry
