"""The cluster of a Slurm step from Slurm's variables, the sbatch script and the GPU
share of a host's task: constructed environments, no Slurm and no TensorFlow (the
real Slurm runs in tests/test_slurm.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench.errors import UsageError
from bench.hardware import GpuInfo
from bench.launch import worker
from bench.launch.slurm.script import ScriptError, SlurmOptions, layout, sbatch_script
from bench.launch.slurm.step import (
    PORT_BASE_VAR,
    PORT_HIGH,
    PORT_LOW,
    SlurmEnvError,
    SlurmStep,
    expand_hostlist,
    parse_end_time,
    parse_node_addresses,
    parse_tasks_per_node,
    tf_config,
)
from bench.spec import RunSpec


def step_env(nodes: str = "n[1-2]", per_node: str = "2(x2)", node: str = "n1",
             local: int = 0, procid: int = 0, ntasks: int = 4, **extra: str) -> dict[str, str]:
    return {"SLURM_JOB_ID": "41", "SLURM_STEP_ID": "0", "SLURM_STEP_NODELIST": nodes,
            "SLURM_STEP_TASKS_PER_NODE": per_node, "SLURMD_NODENAME": node,
            "SLURM_LOCALID": str(local), "SLURM_PROCID": str(procid),
            "SLURM_STEP_NUM_TASKS": str(ntasks), **extra}


@pytest.mark.parametrize(("text", "names"), [
    ("n[1-3,7],m5", ["n1", "n2", "n3", "n7", "m5"]),
    ("node[08-10]", ["node08", "node09", "node10"]),
    ("r[1-2]n[1-2]", ["r1n1", "r1n2", "r2n1", "r2n2"]),
    ("localhost", ["localhost"]),
    ("a,b[3]", ["a", "b3"]),
])
def test_host_lists_expand_as_slurm_writes_them(text: str, names: list[str]) -> None:
    assert expand_hostlist(text) == names


@pytest.mark.parametrize("text", ["n[1-", "n1]", "n[a-b]", "a,,b", "n[1-x]"])
def test_a_malformed_host_list_is_refused(text: str) -> None:
    with pytest.raises(ValueError):
        expand_hostlist(text)


def test_tasks_per_node_expand_their_repeats() -> None:
    assert parse_tasks_per_node("3(x2),2,1") == [3, 3, 2, 1]
    assert parse_tasks_per_node("4") == [4]
    with pytest.raises(ValueError):
        parse_tasks_per_node("3(x),2")


def test_the_cluster_is_ordered_by_node_then_local_rank_whatever_the_procid() -> None:
    # Cyclic distribution: procid 1 sits on the second node, local rank 0.
    step = SlurmStep.from_env(step_env(node="n2", local=0, procid=1))
    assert (step.node_index, step.local_id, step.rank) == (1, 0, 2)
    addresses = {"n1": "198.18.0.2", "n2": "198.18.0.3"}
    config = tf_config(step, "multi_worker_mirrored", 1, addresses, {PORT_BASE_VAR: "21000"})
    assert config == {"cluster": {"worker": ["198.18.0.2:21000", "198.18.0.2:21001",
                                             "198.18.0.3:21000", "198.18.0.3:21001"]},
                      "task": {"type": "worker", "index": 2}}
    assert step.rank_nodes() == ["n1", "n1", "n2", "n2"]


def test_nodes_that_share_an_address_never_share_a_port() -> None:
    step = SlurmStep.from_env(step_env(nodes="a,b", per_node="2,1", node="b", ntasks=3))
    ends = step.endpoints({"a": "10.0.0.1", "b": "10.0.0.1"}, {})
    assert len(set(ends)) == 3
    ports = [int(e.rsplit(":", 1)[1]) for e in ends]
    assert ports == [ports[0], ports[0] + 1, ports[0] + 2]
    assert ports[0] >= PORT_LOW and ports[-1] < PORT_HIGH
    # Two steps of one job get different blocks (here: the hash differs for step 1).
    other = SlurmStep.from_env(step_env(nodes="a,b", per_node="2,1", node="b", ntasks=3,
                                        SLURM_STEP_ID="1"))
    assert other.port_base({}) != step.port_base({})


def test_parameter_server_jobs_follow_the_rank_order() -> None:
    step = SlurmStep.from_env(step_env(nodes="n1", per_node="4", node="n1", local=1,
                                       procid=1))
    config = tf_config(step, "parameter_server", 1, {}, {PORT_BASE_VAR: "22000"})
    assert config["cluster"] == {"chief": ["n1:22000"], "ps": ["n1:22001"],
                                 "worker": ["n1:22002", "n1:22003"]}
    assert config["task"] == {"type": "ps", "index": 0}
    small = SlurmStep.from_env(step_env(nodes="n1", per_node="2", node="n1", ntasks=2))
    with pytest.raises(SlurmEnvError, match="SLURM_STEP_NUM_TASKS=2"):
        tf_config(small, "parameter_server", 1, {})


@pytest.mark.parametrize(("change", "named"), [
    ({"SLURM_STEP_NODELIST": None, "SLURM_JOB_NODELIST": None}, "SLURM_STEP_NODELIST"),
    ({"SLURM_STEP_TASKS_PER_NODE": "2"}, "SLURM_STEP_TASKS_PER_NODE"),
    ({"SLURM_LOCALID": "5"}, "SLURM_LOCALID"),
    ({"SLURM_LOCALID": "x"}, "SLURM_LOCALID"),
    ({"SLURM_STEP_NUM_TASKS": "3"}, "SLURM_STEP_NUM_TASKS"),
    ({"SLURM_STEP_ID": "batch"}, "SLURM_STEP_ID"),
    ({"SLURMD_NODENAME": None, "SLURM_NODEID": "7"}, "SLURM_NODEID"),
    ({"SLURM_STEP_NODELIST": "n[1-"}, "SLURM_STEP_NODELIST"),
])
def test_a_wrong_or_partial_environment_names_the_variable(change: dict[str, str | None],
                                                           named: str) -> None:
    env = step_env()
    for key, value in change.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    with pytest.raises(SlurmEnvError, match=named):
        SlurmStep.from_env(env)


def test_the_node_id_places_a_task_when_the_node_name_is_not_in_the_list() -> None:
    env = step_env(node="elsewhere", SLURM_NODEID="1", local=1, procid=3)
    assert SlurmStep.from_env(env).rank == 3


def test_a_bad_port_base_is_refused_by_name() -> None:
    step = SlurmStep.from_env(step_env())
    with pytest.raises(SlurmEnvError, match=PORT_BASE_VAR):
        step.port_base({PORT_BASE_VAR: "80"})


def test_scontrol_outputs_are_read() -> None:
    text = ("NodeName=node1 Arch=x86_64 CoresPerSocket=1 NodeAddr=198.18.0.2 "
            "NodeHostName=node1\nNodeName=node2 NodeAddr=198.18.0.3 State=IDLE\n")
    assert parse_node_addresses(text) == {"node1": "198.18.0.2", "node2": "198.18.0.3"}
    assert parse_end_time("JobId=3 EndTime=Unknown") is None
    start = parse_end_time("EndTime=2026-01-01T00:00:00")
    assert start is not None
    assert parse_end_time("JobId=3 StartTime=2026-01-01T00:00:00 EndTime=2026-01-01T00:01:00"
                          ) == start + 60


# -- a task's GPUs on its host ------------------------------------------------------
def gpus(n: int) -> tuple[GpuInfo, ...]:
    return tuple(GpuInfo(i, "NVIDIA H100", 81559, "550.54", uuid=f"GPU-{i:04d}")
                 for i in range(n))


def test_a_task_keeps_the_gpus_slurm_gave_it_and_shares_a_host_by_local_rank() -> None:
    # Slurm's --gpus-per-task: the task sees exactly its own GPU, whatever its rank.
    assert worker.host_gpus(gpus(1), 1, local=3) == ("GPU-0000",)
    # Every GPU of the node visible: the local rank picks the share.
    assert worker.host_gpus(gpus(8), 2, local=1) == ("GPU-0002", "GPU-0003")
    with pytest.raises(UsageError, match="CUDA_VISIBLE_DEVICES"):
        worker.host_gpus(gpus(3), 2, local=1)


def test_the_local_rank_counts_gpu_tasks_on_the_same_address() -> None:
    config = {"cluster": {"chief": ["a:1"], "ps": ["a:2"], "worker": ["a:3", "b:1", "a:4"]},
              "task": {"type": "worker", "index": 2}}
    assert worker.local_rank(config) == 1
    config["task"] = {"type": "worker", "index": 1}
    assert worker.local_rank(config) == 0


# -- the sbatch script ---------------------------------------------------------------
def mwm(devices: int = 2) -> RunSpec:
    return RunSpec(workload="mlp", strategy="multi_worker_mirrored", devices=devices,
                   batch=256, timeout_s=600.0)


def test_the_script_asks_for_the_runs_tasks_and_carries_the_spec(tmp_path: Path) -> None:
    opts = SlurmOptions(out=tmp_path / "out", venv=Path("/opt/venv"), nodes=2,
                        gpus_per_task=1, partition="gpu")
    text = sbatch_script(mwm(4), opts)
    assert "#SBATCH --nodes=2" in text and "#SBATCH --ntasks=4" in text
    assert "#SBATCH --ntasks-per-node=2" in text and "#SBATCH --gpus-per-task=1" in text
    assert "#SBATCH --time=13" in text  # (600 s + 180 s) / 60, rounded up
    srun = next(line for line in text.splitlines() if line.startswith("exec srun"))
    import shlex
    argv = shlex.split(srun)[2:]
    assert argv[:4] == ["/opt/venv/bin/stratbench", "worker", "--cluster", "slurm"]
    assert RunSpec.from_dict(json.loads(argv[argv.index("--spec-json") + 1])) == mwm(4)
    result = subprocess.run(["bash", "-n"], input=text, text=True, capture_output=True)
    assert result.returncode == 0, result.stderr


def test_a_layout_the_nodes_cannot_hold_is_refused() -> None:
    with pytest.raises(ScriptError, match="nodes=3"):
        layout(mwm(2), SlurmOptions(out=Path("/o"), venv=Path("/v"), nodes=3))
    with pytest.raises(ScriptError, match="tasks_per_node=1"):
        layout(mwm(4), SlurmOptions(out=Path("/o"), venv=Path("/v"), nodes=2,
                                    tasks_per_node=1))
    with pytest.raises(ScriptError, match="runs in one process"):
        layout(RunSpec(workload="mlp", strategy="mirrored", devices=2, batch=64),
               SlurmOptions(out=Path("/o"), venv=Path("/v")))


def test_slurm_script_cli_errors_exit_2_naming_the_value(tmp_path: Path) -> None:
    base = [sys.executable, "-m", "bench", "slurm-script", "--workload", "mlp", "--strategy",
            "multi_worker_mirrored", "--devices", "2", "--batch", "256"]
    relative = subprocess.run([*base, "--out", "out"], capture_output=True, text=True,
                              timeout=60)
    assert relative.returncode == 2 and "--out=out" in relative.stderr
    assert "Traceback" not in relative.stderr
    too_many = subprocess.run([*base, "--out", str(tmp_path), "--nodes", "5"],
                              capture_output=True, text=True, timeout=60)
    assert too_many.returncode == 2 and "nodes=5" in too_many.stderr
