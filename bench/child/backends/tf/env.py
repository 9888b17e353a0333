"""The TensorFlow part of the environment fingerprint (child side)."""

from __future__ import annotations

from typing import Any

from bench.env import fingerprint


def tf_fingerprint() -> dict[str, Any]:
    """The TensorFlow part: versions, build info (CUDA/cuDNN), physical devices."""
    import keras
    import numpy
    import tensorflow as tf

    build = {k: str(v) for k, v in tf.sysconfig.get_build_info().items()}
    devices = [f"{d.device_type}:{d.name}" for d in tf.config.list_physical_devices()]
    from bench.child.backends.tf.peak import fingerprint_entry  # measured once a machine

    return {"tensorflow": tf.__version__, "keras": keras.__version__,
            "numpy": numpy.__version__, "tf_build": build, "physical_devices": devices,
            "peak_flops": fingerprint_entry(tf)}


def child_fingerprint() -> dict[str, Any]:
    """The whole fingerprint as a run's process sees it (TensorFlow part included)."""
    return fingerprint(tf_fingerprint())


def main() -> int:
    """``python -m bench.child.backends.tf.env``: print the fingerprint as this process sees it."""
    import json

    print(json.dumps(child_fingerprint(), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
