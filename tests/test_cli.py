"""The CLI end to end, in subprocesses, as a user runs it."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from bench.results.store import load, load_sweep, run_name
from tests.helpers import ROOT, TINY, bench, bench_all, child_processes


@pytest.mark.logical_cpu
def test_tiny_sweep_end_to_end(tiny_sweep: tuple[Path, Any]) -> None:
    # The sweep the report tests read too (conftest.py): one_device and mirrored on 1
    # and 2 devices, batches 16 and 32, two runs each.
    out, proc = tiny_sweep
    assert proc.returncode == 0, proc.stdout + proc.stderr
    loaded = load_sweep(out)
    assert not loaded.warnings
    statuses = sorted({(r.spec.strategy, r.spec.devices, r.status) for r in loaded.results})
    assert statuses == [("mirrored", 1, "ok"), ("mirrored", 2, "ok"),
                        ("one_device", 1, "ok"), ("one_device", 2, "unsupported")]
    ok = [r for r in loaded.results if r.status == "ok"]
    assert len(ok) == 12  # three supported configurations x two batches x two runs
    for r in ok:
        assert r.figures is not None and r.figures.learned
        assert r.environment["tensorflow"] and r.environment["machine_id"]
        # An arm of a shared process ran on its own devices of the process's split.
        shared = r.environment["devices"].get("process", r.spec.devices)
        assert r.environment["devices"]["logical"] == (shared > 1)
        assert len(r.environment["devices"]["names"]) == r.spec.devices
        assert (out / "logs" / f"{run_name(r.key, r.replicate)}.log").exists()
    # Evidence by default: each configuration's first run (its own process) profiled a
    # few steps after its windows, under its own key (the stored spec asks for none),
    # and the sweep printed what the profiles cost it.
    for r in ok:
        assert r.spec.profile_steps == 0 and r.figures is not None
        b = r.figures.breakdown
        assert (b is not None) == (r.replicate == 1), (r.key, r.replicate)
        if b is not None:
            assert b.profiled_steps == 5 and b.capture_s > 0 and b.compute_s > 0
            assert b.step_s == pytest.approx(b.input_s + b.compute_s + b.communication_s
                                             + b.host_s + b.idle_s)
            assert Path(b.profile_dir).parent == (out / "profiles").resolve()
    assert re.search(r"evidence: 6 runs profiled after their windows, [0-9.]+ s of the "
                     r"sweep's \d+ s", proc.stdout), proc.stdout
    assert "results:" in proc.stdout
    assert "devices must be 1" in proc.stdout  # unsupported reason in the table
    # The sweep as TensorBoard HParams sessions, and the command that opens it.
    assert f"tensorboard --logdir {out}" in proc.stdout
    assert list((out / "tensorboard").glob("events.out.tfevents.*"))
    show = bench("show", str(out))
    assert show.returncode == 0 and "mirrored" in show.stdout
    csv = bench("show", "--csv", str(out))
    assert csv.stdout.splitlines()[0].startswith("workload,strategy,devices")
    assert len(csv.stdout.strip().splitlines()) == 1 + 12 + 2  # header, ok runs, unsupported


BAD_ARGUMENTS = [
    (["run", "--workload", "mlp", "--strategy", "hovorod"], "valid: default, one_device"),
    (["run", "--workload", "bert", "--strategy", "mirrored"], "valid: mlp, cnn, resnet50"),
    (["run", "--workload", "mlp", "--strategy", "mirrored", "--devices", "3", "--batch", "64"],
     "divisible by the 3 replicas"),
    (["run", "--workload", "mlp", "--strategy", "mirrored", "--devices", "two"],
     "--devices takes comma-separated integers"),
    (["run", "--preset", "smoke", "--strategy", "mlp"],
     "--preset smoke sets its own --strategy; it can be narrowed by --workload"),
    (["show", "/nonexistent/sweep"], "no sweep directory"),
]


def test_bad_arguments_exit_2_with_a_clear_message() -> None:
    """Each bad command line exits 2 with its message and no traceback."""
    # One test, its commands run at once: each is a separate CLI process (~2 s of
    # imports), and none of them depends on another.
    procs = bench_all(*(args for args, _ in BAD_ARGUMENTS), timeout=60)
    for (args, needle), proc in zip(BAD_ARGUMENTS, procs, strict=True):
        assert proc.returncode == 2, (args, proc.stdout + proc.stderr)
        assert needle in proc.stderr, (args, proc.stderr)
        assert "Traceback" not in proc.stderr, (args, proc.stderr)


def test_timeout_is_recorded_and_sweep_continues(tmp_path: Path) -> None:
    out = tmp_path / "sweep"
    # Batch 16 gets a 1 s timeout (TensorFlow alone takes longer to import);
    # the spec key ignores the timeout, so the second invocation's run is separate.
    first = bench("run", "--workload", "mlp", "--strategy", "mirrored", "--devices", "1",
                  "--batch", "16", *TINY, "--timeout", "1", "--out", str(out))
    second = bench("run", "--workload", "mlp", "--strategy", "mirrored", "--devices", "1",
                   "--batch", "32", *TINY, "--no-profile", "--out", str(out))
    assert first.returncode == 3, first.stdout + first.stderr
    assert second.returncode == 0
    by_batch = {r.global_batch: r for r in load_sweep(out).results}
    assert by_batch[16].status == "timeout"
    assert "timeout" in (by_batch[16].reason or "") and by_batch[16].wall_s < 15
    assert by_batch[32].status == "ok"
    assert by_batch[32].figures is not None and by_batch[32].figures.breakdown is None
    assert "evidence:" not in second.stdout  # --no-profile: no profile, no cost
    assert not child_processes(tmp_path)


def test_interrupt_keeps_results_kills_children_and_resumes(tmp_path: Path) -> None:
    out = tmp_path / "sweep"
    # --no-profile: the evidence profiles would add seconds to every run and nothing
    # here is about them (test_tiny_sweep_end_to_end checks them).
    args = ["run", "--workload", "mlp", "--strategy", "mirrored", "--devices", "1",
            "--batch", "8,16,24", *TINY, "--runs", "1", "--max-runs", "1", "--no-profile",
            "--out", str(out)]
    proc = subprocess.Popen([sys.executable, "-m", "bench", *args], cwd=ROOT, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    results = out / "results"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if results.is_dir() and len(list(results.glob("*.json"))) >= 1 and \
                child_processes(tmp_path):
            break
        time.sleep(0.1)
    else:
        proc.kill()
        pytest.fail("the sweep never got to its second configuration")
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stdout + stderr
    assert "interrupted" in stdout
    assert not child_processes(tmp_path)
    kept = list(results.glob("*.json"))
    assert 1 <= len(kept) < 3
    for path in kept:
        assert load(path).status == "ok"
    again = bench(*args)
    assert again.returncode == 0, again.stdout + again.stderr
    assert f"{len(kept)} run(s) of these 3 configuration(s) already stored, " \
        f"{3 - len(kept)} to run" in again.stdout
    assert len(list(results.glob("*.json"))) == 3
    journal = [json.loads(line) for line in (out / "sweep.jsonl").read_text().splitlines()]
    assert [e["event"] for e in journal] == ["start", "interrupted", "start", "finished"]


def test_list_and_env() -> None:
    """`bench list` counts the matrix and marks what cannot run; `bench env` prints the
    fingerprint (the two commands run at once: neither starts TensorFlow)."""
    proc, env = bench_all(["list", "--workload", "mlp,cnn", "--strategy",
                           "one_device,mirrored", "--devices", "1,2", "--batch", "64"],
                          ["env", "--no-tf"], timeout=60)
    assert proc.returncode == 0
    assert "8 configuration(s)" in proc.stdout
    assert proc.stdout.count("unsupported: one_device") == 2
    data = json.loads(env.stdout)
    assert data["cpu_cores"] >= 1 and data["machine_id"] and "git" in data


@pytest.mark.skipif(os.name != "posix", reason="uses /proc")
def test_child_processes_helper_sees_a_child(tmp_path: Path) -> None:
    """The leak check above is meaningful: it does see a running child."""
    with open(tmp_path / "log", "wb") as log:
        p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)",
                              "bench.child"], stdout=log)
    try:
        time.sleep(0.2)
        assert p.pid in child_processes(tmp_path)
        assert p.pid not in child_processes(tmp_path / "elsewhere")
    finally:
        p.kill()
        p.wait(timeout=10)
