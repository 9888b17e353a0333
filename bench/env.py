"""The environment fingerprint stored with every result.

``fingerprint()`` never imports TensorFlow (the sweep parent uses it for results
of runs that never started); the child adds the TensorFlow part
(``bench.child.backends.tf.env``).
The fingerprint has two parts that are kept apart on purpose:

- the hardware identity (``hardware_identity``, hashed as ``machine_id``): CPU
  model and cores, GPU models and count, memory. Two results with the same
  ``machine_id`` come from comparable machines; the nightly picks its baseline by it;
- the software stack (``software_stack``, hashed as ``software_id``): TensorFlow,
  Keras, numpy, CUDA/cuDNN (TensorFlow's build), GPU driver, NCCL library (GPU
  machines), Python, OS, and the ``TF_*``/``NCCL_*``/... variables. An upgrade
  changes it but not the machine, so the nightly still finds its baseline and names
  the upgrade as the likely cause.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import platform
import re
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

from bench import sim
from bench.hardware import Hardware, detect, nccl_version
from bench.lanes import software_fields

REPO_ROOT = Path(__file__).resolve().parent.parent
# The variables that can change a run's figures, by a prefix that belongs to the software
# that reads them (NCCL, CUDA, XLA, OpenMP, Intel's OpenMP, MKL, oneDNN, TPU runtimes,
# Slurm, stratbench itself). TensorFlow shares its TF_ prefix with Terraform
# (TF_CLI_CONFIG_FILE, TF_LOG, TF_VAR_*, TF_DATA_DIR), so TensorFlow's own are named by
# its prefixes and names: a machine's Terraform settings are not its software.
_ENV_PATTERN = re.compile(
    r"^(NCCL_|CUDA_|XLA_|OMP_|KMP_|MKL_|ONEDNN_|DNNL_|TPU_|SLURM_JOB|STRATBENCH_"
    r"|TF_(CPP_|GPU_|XLA_|ENABLE_|DISABLE_|CUDNN_|NUM_|FORCE_|USE_|CPU_|ONEDNN_|MKL_|GRPC_"
    r"|AUTOTUNE_|COLLECTIVE_|DATA_EXPERIMENT_)"
    r"|(TF_CONFIG|TF_DETERMINISTIC_OPS|TF_DUMP_GRAPH_PREFIX|TF2_BEHAVIOR|KERAS_BACKEND)$)")
# Testing hook: every timed call in a measured window takes this fraction longer
# (tests/test_compare.py checks that `compare` flags it). Being a STRATBENCH_ variable
# it is recorded in the fingerprint, so a slowed result can never pass for a real one.
INJECT_SLOWDOWN_VAR = "STRATBENCH_INJECT_SLOWDOWN"

# TensorFlow's default CPU allocator keeps statistics only where oneDNN's own
# (BFC-based) allocator is registered, i.e. where TF_ENABLE_ONEDNN_OPTS is on: by
# default only on CPUs with AVX-512 VNNI/BF16 or AMX. Elsewhere get_memory_info("CPU:0")
# raises, and even with tsl::EnableCPUAllocatorStats it counts zeros (allocation sizes
# come from tcmalloc, which the wheels do not link). Run processes therefore get the
# BFC CPU allocator (the one GPU builds use for host memory anyway) unless the user
# set this variable.
CPU_ALLOCATOR_VAR = "TF_CPU_ALLOCATOR_USE_BFC"


def now_iso() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def git_info(timeout_s: float = 5.0) -> dict[str, Any]:
    """Commit and dirtiness of the stratbench checkout (None outside git)."""
    def git(*args: str) -> str | None:
        # No optional locks: ``git status`` would otherwise refresh the index under
        # .git/index.lock, and a run killed meanwhile (Ctrl-C, a timeout) leaves the
        # lock behind to block the user's next commit.
        try:
            out = subprocess.run(["git", "--no-optional-locks", "-C", str(REPO_ROOT), *args],
                                 capture_output=True,
                                 text=True, timeout=timeout_s, check=True)
            return out.stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return None

    commit = git("rev-parse", "HEAD")
    status = git("status", "--porcelain", "--untracked-files=no")
    return {"commit": commit, "dirty": bool(status) if status is not None else None}


def injected_slowdown() -> float:
    """The testing hook's slowdown fraction (0 when unset), e.g. 0.2 = calls 20% longer."""
    text = os.environ.get(INJECT_SLOWDOWN_VAR, "").strip()
    if not text:
        return 0.0
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0 or value == float("inf"):
        raise ValueError(f"{INJECT_SLOWDOWN_VAR} must be a finite number >= 0 (a fraction: "
                         f"0.2 = 20% slower). Received: {INJECT_SLOWDOWN_VAR}={text!r}")
    return value


def stall_until(deadline: float) -> float:
    """Wait until ``time.perf_counter()`` reaches ``deadline``; returns the time then.

    ``time.sleep`` overshoots by ~0.1 ms, most of a sub-millisecond step, so the
    bulk is slept and the last millisecond spun: the injected delay is accurate.
    """
    import time

    remaining = deadline - time.perf_counter()
    if remaining > 0.002:
        time.sleep(remaining - 0.001)
    now = time.perf_counter()
    while now < deadline:
        now = time.perf_counter()
    return now


def relevant_env() -> dict[str, str]:
    """The environment variables that can change a run's figures (``_ENV_PATTERN``)."""
    return {k: v for k, v in sorted(os.environ.items()) if _ENV_PATTERN.match(k)}


def installed_nccl(hw: Hardware) -> str | None:
    """The version of the NCCL library a run on ``hw`` would load, found without loading
    it (``bench.hardware.nccl_version``); None when none is installed.

    Looked for only where nvidia-smi shows GPUs: NCCL runs on nothing else, so a CPU
    machine's figures cannot depend on it, and its software id stays what it was.
    """
    if not (hw.machine_gpus or hw.gpus):
        return None
    found = nccl_version()
    return found["version"] if found else None


def fingerprint(extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """Everything needed to tell whether two results are comparable.

    ``extra`` adds what only a run's own process can know (the child passes its
    TensorFlow versions, build and devices: ``bench.child.backends.tf.env``); ``machine_id``
    (hardware) and ``software_id`` (software stack) are computed after it is merged in.
    """
    hw = detect()
    env: dict[str, Any] = {
        "host": socket.gethostname(),
        "timestamp": now_iso(),
        "python": sys.version.split()[0],
        # Which interpreter (virtual environment) ran the process: an A/B side may run
        # under another one (``--candidate-python``). Not part of the software id: the
        # versions it runs are, and a venv's path says where, not what.
        "interpreter": sys.executable,
        "platform": platform.platform(),
        "cpu_model": hw.cpu_model,
        "cpu_cores": hw.cores,
        "memory_bytes": hw.memory_bytes,
        "gpus": [{"name": g.name, "memory_mib": g.memory_mib, "driver": g.driver}
                 for g in hw.gpus],
        "tpu": hw.tpu,
        "nccl": installed_nccl(hw),
        "machine_cores": hw.machine_cores or hw.cores,
        "machine_gpus": [{"name": g.name, "memory_mib": g.memory_mib, "driver": g.driver}
                         for g in hw.machine_gpus or hw.gpus],
        "git": git_info(),
        "env_vars": relevant_env(),
    }
    simulated = sim.active()
    if simulated is not None:
        # A simulated GPU server (bench.sim): part of the machine's identity, so that
        # no answer, baseline or cache ever mixes its figures with a real machine's.
        env["simulated"] = simulated.name
    env.update(extra or {})
    env["machine_id"] = machine_id(env)
    env["software_id"] = software_id(env)
    return env


# Fingerprint fields that belong to the software stack (everything else that is not
# bookkeeping, such as host, timestamp and git, describes the machine or the run).
# Each lane names its own (bench.lanes).
SOFTWARE_FIELDS = software_fields()
# Recorded variables that name a job or a place rather than change the figures: they
# differ on every run, and listing them would bury the differences that matter.
_BOOKKEEPING_VARS = re.compile(r"^(SLURM_JOB|STRATBENCH_CACHE_DIR$)")
GIB = 2**30


def hardware_identity(env: dict[str, Any]) -> dict[str, Any]:
    """What makes two machines comparable: CPU model and cores, GPUs, memory.

    It describes the machine, not what one process may use of it: a worker pinned
    to one core, or seeing one GPU through CUDA_VISIBLE_DEVICES, is on the same
    machine as its launcher. (Older results without ``machine_*`` fields give the
    process's own view, which is the same on an unrestricted machine.) Memory is
    rounded to whole GiB: the kernel's reserve moves MemTotal by a few MiB between
    versions, which is a software change. The GPU driver is software too.
    """
    memory = env.get("memory_bytes")
    gpus = env.get("machine_gpus") or env.get("gpus") or []
    return {"cpu_model": env.get("cpu_model"),
            "cpu_cores": env.get("machine_cores") or env.get("cpu_cores"),
            "memory_gib": round(memory / GIB) if isinstance(memory, (int, float)) else None,
            "gpus": sorted(str(g.get("name")) for g in gpus),
            "tpu": env.get("tpu") or False,
            **({"simulated": env["simulated"]} if env.get("simulated") else {})}


def software_stack(env: dict[str, Any]) -> dict[str, Any]:
    """The software a result ran on: versions, TensorFlow's build (CUDA, cuDNN), GPU
    drivers, the NCCL library, and the relevant environment variables (``TF_*``,
    ``NCCL_*``, ...)."""
    out: dict[str, Any] = {k: env.get(k) for k in SOFTWARE_FIELDS}
    # Only when found: results without it (CPU machines, results from before it was
    # recorded) keep the software id they had.
    if env.get("nccl"):
        out["nccl"] = env["nccl"]
    gpus = env.get("machine_gpus") or env.get("gpus") or []
    out["gpu_driver"] = sorted({str(g.get("driver")) for g in gpus if g.get("driver")})
    # Read through the same rule: results stored under a wider one (Terraform's TF_
    # variables) keep the software id they would have had.
    out["env_vars"] = {k: v for k, v in sorted((env.get("env_vars") or {}).items())
                       if _ENV_PATTERN.match(k) and not _BOOKKEEPING_VARS.match(k)}
    return out


def _digest(value: Any) -> str:
    return hashlib.sha1(json.dumps(value, sort_keys=True).encode()).hexdigest()[:12]


def machine_id(env: dict[str, Any]) -> str:
    """Hash of ``hardware_identity``: stays the same across driver or TensorFlow upgrades."""
    return _digest(hardware_identity(env))


def software_id(env: dict[str, Any]) -> str:
    """Hash of ``software_stack``: changes with any upgrade or relevant variable."""
    return _digest(software_stack(env))


def stored_machine_id(env: dict[str, Any]) -> str | None:
    """The machine id of a stored fingerprint, recomputed when its fields are there.

    Results written before the hardware/software split stored a ``machine_id`` that
    also hashed the driver; recomputing gives them today's identity, so old and new
    nightlies of one machine share a baseline.
    """
    if env.get("cpu_model") is not None:
        return machine_id(env)
    value = env.get("machine_id")
    return str(value) if value is not None else None
