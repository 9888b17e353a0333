"""A side under another interpreter (``--baseline-python`` / ``--candidate-python``).

Fake interpreters are shell scripts on tmp_path that record how they were started.
Only the last test runs TensorFlow: its script execs this venv's python, and one
cheap real run shows that the child ran under the script with this checkout importable.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

import pytest

from bench.exits import Exit
from bench.launch.interpreter import probe
from bench.launch.launcher import child_command, run_isolated
from bench.regress.interleave import BASELINE, CANDIDATE
from bench.results.schema import RunResult
from bench.results.store import SweepStore
from bench.spec import RunSpec
from tests.helpers import fake_figures, fake_result, tiny_spec

ROOT = Path(__file__).resolve().parents[1]


def script(path: Path, body: str) -> Path:
    """An executable shell script at ``path``."""
    path.write_text("#!/bin/sh\n" + body, encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def recording(tmp_path: Path, then: str) -> tuple[Path, Path]:
    """A fake interpreter that logs its first argument, the first line of its second,
    and PYTHONPATH, then does ``then``."""
    log = tmp_path / "invocations.log"
    return script(tmp_path / "python",
                  f'second=$(printf "%s" "$2" | head -n 1)\n'
                  f'echo "$1 $second PYTHONPATH=$PYTHONPATH" >> {log}\n{then}\n'), log


def answering(tmp_path: Path, tensorflow: str = "9.9.9") -> Path:
    """A fake interpreter whose probe answer says TensorFlow ``tensorflow``."""
    answer = json.dumps({"tensorflow": tensorflow, "python": "3.11.7", "executable": "x"})
    return script(tmp_path / "python", f"echo '{answer}'\n")


def test_every_task_of_a_multi_process_run_starts_under_the_given_interpreter(
        tmp_path: Path) -> None:
    # The main task (the chief) waits until all four tasks have started (bounded), then
    # fails; the others wait to be killed with the run.
    log = tmp_path / "invocations.log"
    python, _ = recording(tmp_path, f"""case "$*" in
  *'"main": true'*)
    for _ in $(seq 200); do [ "$(wc -l < {log})" -ge 4 ] && break; sleep 0.05; done
    exit 3;;
  *) exec sleep 60;;
esac""")
    spec = tiny_spec(strategy="parameter_server", devices=2)
    result = run_isolated(spec, tmp_path / "run.log", python=str(python))
    lines = log.read_text().splitlines()
    assert result.status == "failed"
    assert len(lines) == 4  # chief, ps and two workers: every task of the run
    assert all(line.startswith("-m bench.child ") for line in lines)
    assert all(f"PYTHONPATH={ROOT}" in line for line in lines)  # the checkout, first
    assert result.launcher["python"] == str(python)


def test_a_child_without_an_interpreter_starts_under_this_one() -> None:
    assert child_command("bench.child", "--x") == [sys.executable, "-m", "bench.child", "--x"]
    assert child_command("bench.child", python="/v/bin/python")[0] == "/v/bin/python"


@pytest.mark.parametrize("make,message", [
    (lambda d: str(d / "missing"), "there is no such file"),
    (lambda d: str(d), "must name an executable file"),
    (lambda d: str(script(d / "plain", "exit 0\n").chmod(0o644) or d / "plain"),
     "must name an executable file"),
    (lambda d: str(script(d / "py", "echo \"ModuleNotFoundError: No module named "
                                    "'tensorflow'\" >&2\nexit 1\n")),
     "cannot import TensorFlow .*exit 1: ModuleNotFoundError: No module named 'tensorflow'"),
    (lambda d: str(script(d / "py", "echo hello\n")), "printed no probe answer"),
])
def test_an_unusable_interpreter_is_a_usage_error_naming_the_flag_and_value(
        tmp_path: Path, make: object, message: str) -> None:
    from bench.errors import UsageError

    given = make(tmp_path)  # type: ignore[operator]
    with pytest.raises(UsageError, match=message) as exc:
        probe(given, "--candidate-python")
    assert f"Received: --candidate-python={given}" in str(exc.value)


def test_a_probe_answer_names_the_interpreter_and_its_tensorflow(tmp_path: Path) -> None:
    found = probe(str(answering(tmp_path, "2.16.1")), "--baseline-python")
    assert found.path == str(tmp_path / "python") and found.tensorflow == "2.16.1"
    assert found.describe() == f"{tmp_path / 'python'} (TensorFlow 2.16.1, Python 3.11.7)"


def fake_replicate(seen: list[tuple[str, str | None]]) -> object:
    def run(store: SweepStore, spec: RunSpec, replicate: int = 1,
            env: dict[str, str] | None = None, python: str | None = None,
            **_: object) -> RunResult:
        seen.append((store.root.name, python))
        result = fake_result("ok")
        result.figures = fake_figures((1000.0, 1000.0))
        result.environment = {"interpreter": python or sys.executable, "machine_id": "m"}
        return result
    return run


AB = ["ab", "--workload", "mlp", "--strategy", "one_device", "--size", "tiny",
      "--budget", "1m", "--order-seed", "1"]


def test_bench_ab_runs_the_candidate_under_its_interpreter_and_says_which(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    from bench.cli import ab as ab_cli
    from bench.cli.main import main

    python = answering(tmp_path, "2.16.1")
    seen: list[tuple[str, str | None]] = []
    monkeypatch.setattr(ab_cli, "run_replicate", fake_replicate(seen))
    rc = main([*AB, "--candidate-python", str(python), "--pairs", "processes",
               "--out", str(tmp_path / "ab")])
    out = capsys.readouterr().out
    assert rc == Exit.OK, out  # identical figures: SAME
    assert set(seen) == {(BASELINE, None), (CANDIDATE, str(python))}
    assert f"candidate = python {python} (TensorFlow 2.16.1, Python 3.11.7)" in out


def test_interpreter_sides_are_duets_each_process_under_its_own_interpreter(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    from bench.cli.main import main
    from bench.regress import window_pairs as wp

    python = answering(tmp_path, "2.16.1")
    duets: list[dict[str | None, str]] = []

    def fake_duet(specs: list[RunSpec], logs: list[Path], *, rounds: int, seed: int,
                  envs: object, pythons: list[str | None]) -> list[RunResult]:
        duets.append({p: s.label() for p, s in zip(pythons, specs, strict=True)})
        out = []
        for _ in specs:
            result = fake_result("ok")
            result.figures = fake_figures(tuple(1000.0 for _ in range(rounds)))
            out.append(result)
        return out

    monkeypatch.setattr(wp, "run_duet", fake_duet)
    rc = main([*AB, "--candidate-python", str(python), "--out", str(tmp_path / "ab")])
    out = capsys.readouterr().out
    assert rc == Exit.OK, out
    assert "two live processes taking turns window by window (the sides start under " \
           "different interpreters)" in out
    assert duets and all(set(d) == {None, str(python)} for d in duets)


@pytest.mark.parametrize("flag", ["--baseline-python", "--candidate-python"])
def test_bench_ab_refuses_an_interpreter_without_tensorflow_before_any_run(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
        capsys: pytest.CaptureFixture[str], flag: str) -> None:
    from bench.cli import ab as ab_cli
    from bench.cli.main import main

    bad = script(tmp_path / "py", "echo \"No module named 'tensorflow'\" >&2\nexit 1\n")
    seen: list[tuple[str, str | None]] = []
    monkeypatch.setattr(ab_cli, "run_replicate", fake_replicate(seen))
    rc = main([*AB, flag, str(bad), "--out", str(tmp_path / "ab")])
    err = capsys.readouterr().err
    assert rc == Exit.USAGE and seen == []
    assert f"Received: {flag}={bad}" in err


def test_a_real_run_under_a_recording_interpreter(tmp_path: Path) -> None:
    """The child runs under the script, imports this checkout, and says so in its result."""
    python, log = recording(tmp_path, f'exec {sys.executable} "$@"')
    found = probe(str(python), "--candidate-python")
    spec = tiny_spec(strategy="one_device", devices=1, repeats=1, max_seconds=0.05,
                     min_steps=2, max_steps=5, warmup_steps=1)
    from bench.launch.sweep import run_replicate

    result = run_replicate(SweepStore(tmp_path / "sweep"), spec, python=found.path)
    assert result.status == "ok", result.reason
    starts = [line.split(" PYTHONPATH")[0] for line in log.read_text().splitlines()]
    assert starts == ["-c import json, sys", "-m bench.child"]  # the probe, then the run
    assert result.launcher["python"] == str(python)
    env = result.environment
    assert env["tensorflow"] == found.tensorflow
    assert os.path.samefile(env["interpreter"], sys.executable)  # what the script exec'd
