"""Inputs are never silently changed: a value the sweep cannot use is an error naming it
and the valid choices (exit 2, no traceback); a value only some strategies take is
dropped for the others with one line saying so. In-process through ``main``; nothing
here starts TensorFlow (every case stops before a run)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from bench.cli.main import main
from bench.exits import Exit

MLP = ["--workload", "mlp", "--size", "tiny"]


def run_main(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """Exit code, stdout and stderr of one command line (argparse errors included)."""
    try:
        code = main(list(argv))
    except SystemExit as exc:  # argparse's own usage errors
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def usage_error(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    code, out, err = run_main(capsys, *argv)
    assert code == Exit.USAGE, out + err
    assert "Traceback" not in err
    return err


def test_a_value_no_strategy_takes_is_an_error_with_the_choices(
        capsys: pytest.CaptureFixture[str]) -> None:
    err = usage_error(capsys, "run", *MLP, "--strategy", "mirrored",
                      "--cross-device-ops", "hierachical_copy")
    assert "hierachical_copy" in err
    assert "default, hierarchical_copy, reduction_to_one_device, nccl" in err


def test_a_valid_value_for_other_strategies_only_is_an_error(
        capsys: pytest.CaptureFixture[str]) -> None:
    err = usage_error(capsys, "run", *MLP, "--strategy", "central_storage",
                      "--cross-device-ops", "hierarchical_copy")
    assert "hierarchical_copy" in err and "central_storage" in err
    assert "taken by mirrored" in err and "Valid for this sweep: default" in err


@pytest.mark.parametrize(("flag", "value", "needle"), [
    ("--communication", "ring", "taken by multi_worker_mirrored"),
    ("--communication", "bogus", "auto, ring, nccl"),
    ("--partitioner", "fixed", "taken by parameter_server"),
    ("--workers", "2", "taken by multi_worker_mirrored, parameter_server"),
    ("--ps-tasks", "2", "taken by parameter_server"),
])
def test_strategy_knobs_no_strategy_takes_are_errors(
        capsys: pytest.CaptureFixture[str], flag: str, value: str, needle: str) -> None:
    err = usage_error(capsys, "run", *MLP, "--strategy", "mirrored", flag, value)
    assert f"={value!r}" in err or f"={int(value)}" in err
    assert needle in err


def test_a_value_some_strategies_take_is_dropped_for_the_others_with_one_line(
        capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_main(capsys, "list", *MLP, "--strategy", "mirrored,central_storage",
                              "--devices", "2", "--batch", "32",
                              "--cross-device-ops", "hierarchical_copy")
    assert code == Exit.OK, out + err
    notes = [ln for ln in err.splitlines() if "note:" in ln]
    assert len(notes) == 1, err
    assert "hierarchical_copy" in notes[0] and "central_storage" in notes[0]
    assert "2 configuration(s)" in out
    assert "mirrored(hierarchical_copy)" in out and "central_storage n=2" in out


def test_a_value_every_strategy_takes_gives_no_note(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_main(capsys, "list", *MLP, "--strategy", "mirrored",
                              "--cross-device-ops", "default,hierarchical_copy")
    assert code == Exit.OK and "note:" not in err
    assert "2 configuration(s)" in out


def test_allreduce_probe_checks_communication_against_its_strategies(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    err = usage_error(capsys, "allreduce", "--strategy", "mirrored", "--communication",
                      "ring", "--out", str(tmp_path / "probe"))
    assert "taken by multi_worker_mirrored" in err
    assert not (tmp_path / "probe").exists()  # refused before anything was created


@pytest.mark.parametrize("flag", ["--devices", "--batch", "--strategy"])
@pytest.mark.parametrize("value", ["1,,2", "1,2,", ","])
def test_empty_list_items_are_usage_errors(capsys: pytest.CaptureFixture[str], flag: str,
                                           value: str) -> None:
    args = {"--devices": ["--strategy", "mirrored"], "--batch": ["--strategy", "mirrored"],
            "--strategy": []}[flag]
    err = usage_error(capsys, "list", *MLP, *args, flag, value)
    assert "empty items" in err and repr(value) in err and flag in err


def test_out_naming_a_file_is_a_usage_error(capsys: pytest.CaptureFixture[str],
                                            tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("mine\n")
    for command in ("run", "list"):
        err = usage_error(capsys, command, *MLP, "--strategy", "one_device", "--out", str(path))
        assert "is a file" in err and str(path) in err
    assert path.read_text() == "mine\n"


def test_out_below_a_file_is_a_usage_error(capsys: pytest.CaptureFixture[str],
                                           tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("mine\n")
    err = usage_error(capsys, "run", *MLP, "--strategy", "one_device",
                      "--out", str(path / "sweep"))
    assert "--out must be a directory this user can write in" in err


def _unwritable_dir(tmp_path: Path) -> Path:
    """A directory this process cannot create things in, root or not."""
    if os.geteuid() != 0:
        locked = tmp_path / "locked"
        locked.mkdir()
        locked.chmod(stat.S_IRUSR | stat.S_IXUSR)
        return locked / "sweep"
    # Root writes through permission bits; sysfs refuses new entries even to root.
    if not Path("/sys/kernel").is_dir():
        pytest.skip("running as root without /sys: no directory root cannot write in")
    return Path("/sys/kernel/stratbench-test-sweep")


def test_out_in_an_unwritable_directory_is_a_usage_error(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    target = _unwritable_dir(tmp_path)
    err = usage_error(capsys, "run", *MLP, "--strategy", "one_device", "--out", str(target))
    assert "--out must be a directory this user can write in" in err and str(target) in err


def test_a_bad_run_count_creates_no_sweep_directory(capsys: pytest.CaptureFixture[str],
                                                     tmp_path: Path) -> None:
    err = usage_error(capsys, "run", *MLP, "--strategy", "one_device", "--runs", "0",
                      "--out", str(tmp_path / "sweep"))
    assert "--runs must be at least 1" in err
    assert not (tmp_path / "sweep").exists()
