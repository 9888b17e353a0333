"""Run one configuration in a fresh child process with a hard timeout.

The child gets its own session (process group), so a timeout or Ctrl-C kills
it and anything it spawned with SIGKILL: TensorFlow processes can ignore
SIGTERM and collectives can block forever, so terminate() is not enough.
Whatever happens, the caller gets a RunResult with a status and a reason.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.env import fingerprint, now_iso
from bench.hardware import Hardware, detect
from bench.results import STATUSES, Figures, RunResult, figures_from_dict
from bench.spec import RunSpec
from bench.strategies import STRATEGIES

KILL_GRACE_S = 10.0
TAIL_LINES = 25
# TensorFlow start-up chatter that survives TF_CPP_MIN_LOG_LEVEL; never a reason.
_NOISE = re.compile(
    r"oneDNN custom operations|cpu_feature_guard|rebuild TensorFlow with|"
    r"All log messages before absl::InitializeLog|Memory patch applied|"
    r"will not be optimized because the dataset does not implement|"
    r"Unable to register cu(DNN|FFT|BLAS) factory|computation placer already registered")
_OOM_TEXT = re.compile(r"ResourceExhaustedError|OOM when allocating|MemoryError|"
                       r"out of memory|Cannot allocate memory|std::bad_alloc")


@dataclass(frozen=True)
class Paths:
    """Where one configuration's files go inside a sweep directory."""

    result: Path
    log: Path

    @classmethod
    def for_spec(cls, sweep_dir: Path, spec: RunSpec) -> Paths:
        key = spec.key()
        return cls(sweep_dir / "results" / f"{key}.json", sweep_dir / "logs" / f"{key}.log")


def log_tail(path: Path, lines: int = TAIL_LINES) -> str:
    """Last ``lines`` meaningful lines of a child log (start-up noise removed)."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    kept = [ln for ln in text.splitlines() if ln.strip() and not _NOISE.search(ln)]
    return "\n".join(kept[-lines:])


def child_env() -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
    env["PYTHONUNBUFFERED"] = "1"
    # The child must import this checkout, wherever the CLI was started from.
    root = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    return env


def kill_group(proc: subprocess.Popen[Any]) -> None:
    """SIGKILL the child's whole process group and reap it (bounded wait)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):  # a process stuck in D state
        proc.wait(timeout=KILL_GRACE_S)


def make_result(spec: RunSpec, status: str, reason: str | None, *,
                figures: Figures | None = None, environment: dict[str, Any] | None = None,
                started_at: str = "", wall_s: float = 0.0,
                launcher: dict[str, Any] | None = None) -> RunResult:
    return RunResult(
        key=spec.key(), spec=spec, status=status, reason=reason,
        replicas=spec.replicas, global_batch=spec.global_batch,
        per_replica_batch=spec.per_replica_batch, figures=figures,
        environment=environment if environment is not None else fingerprint(with_tf=False),
        started_at=started_at or now_iso(), finished_at=now_iso(), wall_s=wall_s,
        launcher=launcher or {})


def unsupported_result(spec: RunSpec, hw: Hardware | None = None) -> RunResult | None:
    """A result for a spec that cannot run on this hardware, or None if it can."""
    reason = STRATEGIES.get(spec.strategy).unsupported_reason(spec, hw or detect())
    return None if reason is None else make_result(spec, "unsupported", reason)


def run_isolated(spec: RunSpec, log_path: Path, timeout_s: float | None = None) -> RunResult:
    """Run ``spec`` in a child process; never raises for a failed run.

    KeyboardInterrupt is re-raised after the child's process group is killed.
    """
    pre = unsupported_result(spec)
    if pre is not None:
        return pre
    timeout = timeout_s if timeout_s is not None else spec.timeout_s
    started = now_iso()
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="stratbench-") as tmp:
        spec_file, payload_file = Path(tmp) / "spec.json", Path(tmp) / "payload.json"
        spec_file.write_text(json.dumps(spec.to_dict()), encoding="utf-8")
        cmd = [sys.executable, "-m", "bench.child", "--spec", str(spec_file),
               "--out", str(payload_file)]
        t0 = time.monotonic()
        with open(log_path, "ab") as log:
            launch_ts = time.time()
            proc = subprocess.Popen([*cmd, "--launch-ts", repr(launch_ts)], stdout=log,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    env=child_env(), start_new_session=True)
            timed_out = False
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                timed_out = True
            except BaseException:
                kill_group(proc)
                raise
            finally:
                # Nothing of a run outlives it: kill stragglers even after a normal exit.
                kill_group(proc)
        wall = time.monotonic() - t0
        info = {"pid": proc.pid, "returncode": proc.returncode, "timeout_s": timeout,
                "log": str(log_path), "command": cmd}
        payload = _read_payload(payload_file)
    tail = log_tail(log_path)
    if timed_out and payload is None:
        return make_result(spec, "timeout", f"killed after exceeding the {timeout:g} s timeout"
                           f"\n--- log tail ---\n{tail}", started_at=started, wall_s=wall,
                           launcher=info)
    if payload is None:
        rc = proc.returncode
        oom = rc == -signal.SIGKILL or bool(_OOM_TEXT.search(tail))
        why = ("killed by SIGKILL (likely the kernel's OOM killer)" if rc == -signal.SIGKILL
               else f"exited with code {rc} without writing a result")
        return make_result(spec, "oom" if oom else "failed", f"child {why}"
                           f"\n--- log tail ---\n{tail}", started_at=started, wall_s=wall,
                           launcher=info)
    status, reason = payload["status"], payload.get("reason")
    if status in ("failed", "oom") and tail:
        reason = f"{reason}\n--- log tail ---\n{tail}"
    figures = figures_from_dict(payload["figures"]) if payload.get("figures") else None
    return make_result(spec, status, reason, figures=figures,
                       environment=payload.get("environment"), started_at=started,
                       wall_s=wall, launcher=info)


def _read_payload(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, json.JSONDecodeError) as exc:
        return {"status": "failed", "reason": f"child wrote an unreadable payload: {exc}"}
    if not isinstance(data, dict) or data.get("status") not in STATUSES:
        return {"status": "failed", "reason": f"child wrote a malformed payload: {data!r:.200}"}
    return data
