"""What the machine has, found without importing TensorFlow.

The sweep parent never imports TensorFlow (it would pin devices and hold
~550 MiB); it still needs to know how many GPUs exist to decide which
configurations are `unsupported` before spawning anything.

One module per concept, each name re-exported here (``from bench.hardware import X``):

- ``tools``: nvidia-smi (or a simulated server) asked, and the numbers of tool output;
- ``cpu``: CPU model, cores, memory, the CPU budget, /proc/stat activity (quiet cores);
- ``gpus``: nvidia-smi's inventory, MIG slices, ``visible()`` and the ``GPU_MODELS``
  datasheet;
- ``links``: the GPUs' topology and the NCCL TensorFlow would load;
- ``slowdowns``: what a run's GPU state says (throttle findings, sustained clock);
- ``gpu_sampler``: the GPU state read through NVML or nvidia-smi, the GPU fingerprint
  and the ``GpuRun`` sampler;
- ``machine``: ``Hardware`` and ``detect()``, and the cards a run trains on.
"""

from __future__ import annotations

from bench.hardware.cpu import (
    CPU_BUDGET_VAR,
    QUIET_OTHERS_SHARE,
    QUIET_STEAL_SHARE,
    Activity,
    CpuTimes,
    activity,
    cpu_budget,
    cpu_model,
    cpu_times,
    memory_bytes,
    open_text,
    parse_loadavg,
    parse_proc_stat,
    usable_cores,
)
from bench.hardware.gpu_sampler import (
    MAX_SAMPLES,
    RUN_SMI_TIMEOUT_S,
    SAMPLE_EVERY_S,
    STATE_READERS,
    GpuRun,
    StateReader,
    gpu_fingerprint,
    gpu_state,
    nvml_module,
    nvml_state,
    state_reader,
)
from bench.hardware.gpus import (
    GPU_MODELS,
    GpuInfo,
    GpuModel,
    card_ids,
    cuda_devices,
    gpu_model,
    mig_devices,
    nvidia_gpus,
    query_compute_cap,
    visible,
)
from bench.hardware.links import LINK_KINDS, ld_cache_dirs, nccl_version, topology, topology_links
from bench.hardware.machine import Hardware, detect, first_cards, run_cards, tpu_present
from bench.hardware.slowdowns import (
    CLOCK_DRIFT,
    SLOWDOWNS,
    THROTTLE_BITS,
    clock_mismatch,
    summarise_samples,
    sustained_clock,
    throttle_findings,
    throttle_reasons,
)
from bench.hardware.tools import parse_float, parse_int, smi_present

__all__ = [
    "CLOCK_DRIFT", "CPU_BUDGET_VAR", "GPU_MODELS", "LINK_KINDS", "MAX_SAMPLES",
    "QUIET_OTHERS_SHARE", "QUIET_STEAL_SHARE", "RUN_SMI_TIMEOUT_S", "SAMPLE_EVERY_S",
    "SLOWDOWNS", "STATE_READERS", "THROTTLE_BITS",
    "Activity", "CpuTimes", "GpuInfo", "GpuModel", "GpuRun", "Hardware", "StateReader",
    "activity", "card_ids", "clock_mismatch", "cpu_budget", "cpu_model", "cpu_times",
    "cuda_devices", "detect", "first_cards", "gpu_fingerprint", "gpu_model", "gpu_state",
    "ld_cache_dirs", "memory_bytes", "mig_devices", "nccl_version", "nvidia_gpus",
    "nvml_module", "nvml_state", "open_text", "parse_float", "parse_int", "parse_loadavg",
    "parse_proc_stat", "query_compute_cap", "run_cards", "smi_present", "state_reader",
    "summarise_samples", "sustained_clock", "throttle_findings", "throttle_reasons",
    "topology", "topology_links", "tpu_present", "usable_cores", "visible",
]
