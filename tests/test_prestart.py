"""Children forked from a pre-imported starter (bench.launch.prestart, bench.child.starter).

The protocol runs against a starter that imports nothing (``--no-preload``) and a
probe module; the real starter (TensorFlow imported) forks every CPU session of the
other tests (tests/test_session.py checks their results say so)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench.hardware import GpuInfo, Hardware
from bench.launch import prestart
from bench.launch.prestart import Forked, StarterError, _import_env, _Starter, forkable
from tests.helpers import tiny_spec

PROBE = [sys.executable, "-m", "tests.forked_probe"]


@pytest.fixture
def starter():
    s = _Starter(dict(os.environ), preload=False)
    yield s
    s.close()


def _fork_probe(starter: _Starter, tmp_path: Path, name: str = "probe"):
    turn_r, turn_w = os.pipe()
    done_r, done_w = os.pipe()
    log = tmp_path / f"{name}.log"
    try:
        child = starter.fork([*PROBE, str(turn_r), str(done_w)], str(log),
                             {**os.environ, "PROBE_VAR": name}, (turn_r, done_w))
    finally:
        os.close(turn_r)
        os.close(done_w)
    return child, turn_w, done_r, log


def test_a_forked_child_gets_its_argv_env_pipes_and_session_and_is_ours_to_wait(
        starter, tmp_path):
    assert prestart._become_subreaper()
    child, turn_w, done_r, log = _fork_probe(starter, tmp_path)
    assert child.poll() is None  # waiting for its turn
    os.write(turn_w, b"g")
    assert os.read(done_r, 1) == b"g"  # the pipe ends reached it at the numbers named
    assert child.wait(timeout=30) == 7 and child.poll() == 7
    text = log.read_text()
    assert "var probe" in text and f"cwd {os.getcwd()}" in text and "session True" in text
    assert starter.preimported_s == 0.0 and starter.broken is None
    # A second child from the same starter: one import serves many.
    again, turn_w2, done_r2, _ = _fork_probe(starter, tmp_path, "second")
    os.write(turn_w2, b"h")
    assert os.read(done_r2, 1) == b"h" and again.wait(timeout=30) == 7
    assert again.pid != child.pid
    for fd in (turn_w, done_r, turn_w2, done_r2):
        os.close(fd)


def test_a_forked_child_is_killed_with_its_group_and_its_wait_is_bounded(starter, tmp_path):
    child, turn_w, done_r, _ = _fork_probe(starter, tmp_path)
    with pytest.raises(subprocess.TimeoutExpired):
        child.wait(timeout=0.2)
    os.killpg(child.pid, signal.SIGKILL)  # what kill_group does: its own session
    assert child.wait(timeout=30) == -signal.SIGKILL
    os.close(turn_w)
    os.close(done_r)


def test_a_dead_starter_is_broken_and_children_start_afresh(starter, tmp_path, monkeypatch,
                                                            capsys):
    child, turn_w, done_r, _ = _fork_probe(starter, tmp_path)
    os.write(turn_w, b"g")
    child.wait(timeout=30)
    assert starter.proc is not None
    os.killpg(starter.proc.pid, signal.SIGKILL)
    starter.proc.wait(timeout=30)
    with pytest.raises(StarterError, match="starter"):
        _fork_probe(starter, tmp_path, "after")
    assert starter.broken
    with pytest.raises(StarterError):  # never asked again
        _fork_probe(starter, tmp_path, "again")
    # start_child then falls back to a fresh process.
    monkeypatch.setattr(prestart, "_starters", {_import_env(os.environ): starter})
    monkeypatch.setattr(prestart, "forkable", lambda *a, **k: True)
    with open(tmp_path / "fresh.log", "ab") as fh:
        proc = prestart.start_child([sys.executable, "-c", "raise SystemExit(3)"], log=fh,
                                    env=dict(os.environ), lane_ok=True)
    assert isinstance(proc, subprocess.Popen) and proc.wait(timeout=30) == 3
    said = capsys.readouterr().err
    assert "start afresh" in said and "cannot fork" in said
    with open(tmp_path / "fresh.log", "ab") as fh:  # said once
        prestart.start_child([sys.executable, "-c", "pass"], log=fh, env=dict(os.environ),
                             lane_ok=True).wait(timeout=30)
    assert "afresh" not in capsys.readouterr().err
    os.close(turn_w)
    os.close(done_r)


def _zombies_of(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if fields[0] == "Z" and int(fields[1]) == pid:
                found.append(int(entry.name))
    return found


def test_a_child_that_fails_before_it_is_ready_is_said_and_reaped(starter, tmp_path):
    assert prestart._become_subreaper()
    before = _zombies_of(os.getpid())
    log = tmp_path / "bad.log"
    with pytest.raises(StarterError, match="ended before it was ready"):
        starter.fork([*PROBE, "1", "2"], str(log), dict(os.environ), (1,))
    assert "fds must be distinct, above 2" in log.read_text()  # in its own log
    deadline = time.monotonic() + 10  # reaped by the intermediate, soon on a busy machine
    while _zombies_of(os.getpid()) != before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _zombies_of(os.getpid()) == before


def test_a_starter_that_never_gets_ready_is_broken_within_its_deadline(tmp_path, monkeypatch):
    # A starter whose interpreter cannot import it ends at once: said, not waited on.
    s = _Starter({**os.environ, "PYTHONPATH": "/nonexistent"}, preload=False)
    monkeypatch.setattr(prestart, "STARTER_MODULE", "bench.child.no_such_starter")
    t = time.monotonic()
    with pytest.raises(StarterError, match="ended before it could import"):
        s.fork([*PROBE, "3", "4"], str(tmp_path / "x.log"), dict(os.environ), ())
    assert time.monotonic() - t < 30 and "no_such_starter" in (s.broken or "")
    s.close()


def test_forked_waits_read_exit_codes_as_popen_does():
    assert prestart._become_subreaper()
    pid = os.fork()
    if pid == 0:
        os._exit(5)
    assert Forked(pid, ["x"]).wait(timeout=30) == 5
    pid = os.fork()
    if pid == 0:
        time.sleep(30)
        os._exit(0)
    child = Forked(pid, ["x"])
    os.kill(pid, signal.SIGTERM)
    assert child.wait(timeout=30) == -signal.SIGTERM


def test_the_import_environment_leaves_out_what_is_read_after_the_import():
    base = {"PATH": "/bin", "TF_ENABLE_ONEDNN_OPTS": "1"}
    task = {**base, "TF_CONFIG": "{}", "STRATBENCH_WORKERS": "2"}
    assert _import_env(task) == _import_env(base)
    assert _import_env({**base, "TF_ENABLE_ONEDNN_OPTS": "0"}) != _import_env(base)


def _hw(gpus=(), tpu=False) -> Hardware:
    return Hardware("cpu", 2, None, gpus=tuple(gpus), tpu=tpu)


@pytest.mark.parametrize("case, expected", [
    ("plain", True), ("other python", False), ("not a child module", False),
    ("the starter itself", False), ("lane", False), ("gpu", False), ("tpu", False),
    ("switched off", False), ("switched off for the child", False)])
def test_forkable_only_where_the_child_gets_what_a_fresh_one_would(case, expected,
                                                                    monkeypatch):
    gpu = GpuInfo(0, "H100", 80 * 1024, "GPU-1")
    hw = {"gpu": _hw([gpu]), "tpu": _hw(tpu=True)}.get(case, _hw())
    monkeypatch.setattr(prestart, "detect", lambda: hw)
    monkeypatch.delenv(prestart.PRESTART_VAR, raising=False)
    if case == "switched off":
        monkeypatch.setenv(prestart.PRESTART_VAR, "0")
    cmd = {"other python": ["/other/python", "-m", "bench.child.arms"],
           "not a child module": [sys.executable, "-m", "bench.cli"],
           "the starter itself": [sys.executable, "-m", prestart.STARTER_MODULE]
           }.get(case, [sys.executable, "-m", "bench.child.arms", "--arms", "x"])
    env = {prestart.PRESTART_VAR: "0"} if case == "switched off for the child" else {}
    assert forkable(cmd, env, lane_ok=case != "lane") is expected


def test_the_starter_lane_is_tensorflow_with_keras_3():
    assert prestart.starter_lane([tiny_spec()])
    assert not prestart.starter_lane([tiny_spec(), tiny_spec(keras=2)])
    assert not prestart.starter_lane([tiny_spec(backend="jax", strategy="data_parallel")])
    assert not prestart.starter_lane([])
