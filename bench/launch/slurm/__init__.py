"""Slurm, the engine users run multi-host jobs on: the cluster of a job step from
Slurm's variables (``step``), the sbatch script for a configuration (``script``),
and a Slurm of stratbench's own on emulated hosts (``private``: the tests' and, through
``bench.launch.slurm_demo``, the scaling lab's)."""
