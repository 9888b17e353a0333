"""Refused up front, with the value named: ``--out`` of report, nightly and worker, and
an in-process strategy on several MIG slices. No TensorFlow: command lines through
``bench.cli.main.main`` stop before any run; the hardware is a hand-built Hardware."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.cli.main import main
from bench.exits import Exit
from bench.hardware import GpuInfo, Hardware
from bench.strategies import STRATEGIES
from tests.gpu_fakes import mig_uuid, uuid_of
from tests.helpers import tiny_spec


def _usage_error(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    try:
        code = main(list(argv))
    except SystemExit as exc:  # argparse's own usage errors
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    assert code == Exit.USAGE, out + err
    assert "Traceback" not in err
    return err


@pytest.fixture
def a_file(tmp_path: Path) -> Path:
    path = tmp_path / "notes.txt"
    path.write_text("mine\n")
    return path


def test_report_out_naming_a_file(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                  a_file: Path) -> None:
    (tmp_path / "sweep").mkdir()
    err = _usage_error(capsys, "report", str(tmp_path / "sweep"), "--out", str(a_file))
    assert "--out must name a directory" in err and f"--out={a_file}" in err
    err = _usage_error(capsys, "report", str(tmp_path / "sweep"), "--out",
                       str(a_file / "report"))
    assert "--out must be a directory this user can write in" in err
    assert a_file.read_text() == "mine\n"


def test_nightly_out_naming_a_file_runs_nothing(capsys: pytest.CaptureFixture[str],
                                                a_file: Path) -> None:
    err = _usage_error(capsys, "nightly", "--out", str(a_file))
    assert "--out must name a directory" in err and f"--out={a_file}" in err
    err = _usage_error(capsys, "nightly", "--out", str(a_file), "--report-only")
    assert "--report-only needs an existing nightly directory" in err and str(a_file) in err
    assert a_file.read_text() == "mine\n"


def test_worker_out_naming_a_file(capsys: pytest.CaptureFixture[str], a_file: Path) -> None:
    err = _usage_error(capsys, "worker", "--workload", "mlp", "--strategy",
                       "multi_worker_mirrored", "--out", str(a_file))
    assert "argument --out" in err and "must name a directory" in err and str(a_file) in err


def test_worker_cluster_that_does_not_fit_is_a_usage_error(
        capsys: pytest.CaptureFixture[str], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    # Raised by bench.launch.worker, reported by the CLI: one UsageError (bench.errors).
    monkeypatch.setenv("TF_CONFIG", "not json")
    err = _usage_error(capsys, "worker", "--workload", "mlp", "--strategy",
                       "multi_worker_mirrored", "--out", str(tmp_path))
    assert "TF_CONFIG must be JSON" in err and "Received: TF_CONFIG='not json'" in err


def test_worker_out_is_created_when_missing(tmp_path: Path) -> None:
    from bench.cli.worker import _out_dir

    assert _out_dir(str(tmp_path / "new" / "sweep")).is_dir()


# -- MIG slices ---------------------------------------------------------------------------
def _slice(gpu: int, k: int) -> GpuInfo:
    return GpuInfo(gpu, f"NVIDIA A100 MIG 3g.40gb Device {k}", 40960, "550.54.15",
                   uuid=mig_uuid(gpu, k), mig="3g.40gb")


TWO_SLICES = Hardware("Test CPU", 8, 2**36, gpus=(_slice(0, 0), _slice(0, 1)))
WHOLE = Hardware("Test CPU", 8, 2**36,
                 gpus=tuple(GpuInfo(i, "NVIDIA A100", 81920, "550.54.15", uuid=uuid_of(i))
                            for i in range(2)))


@pytest.mark.parametrize("strategy", ["mirrored", "central_storage"])
def test_in_process_strategies_on_several_mig_slices_are_unsupported(strategy: str) -> None:
    factory = STRATEGIES.get(strategy)
    why = factory.unsupported_reason(tiny_spec(strategy=strategy, devices=2), TWO_SLICES)
    assert why is not None and "only one MIG slice" in why and "devices=2" in why
    assert factory.unsupported_reason(tiny_spec(strategy=strategy, devices=1),
                                      TWO_SLICES) is None
    assert factory.unsupported_reason(tiny_spec(strategy=strategy, devices=2), WHOLE) is None


@pytest.mark.parametrize("strategy", ["multi_worker_mirrored", "independent",
                                      "parameter_server"])
def test_one_process_per_slice_runs_on_mig(strategy: str) -> None:
    spec = tiny_spec(strategy=strategy, devices=2)
    assert STRATEGIES.get(strategy).unsupported_reason(spec, TWO_SLICES) is None
