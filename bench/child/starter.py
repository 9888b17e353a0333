"""A pre-imported starter: TensorFlow imported once, child processes forked from it.

    python -m bench.child.starter --socket FD

Every child process paid for ``import tensorflow`` and Keras (about 2 s of one core
on a 2-core AMD EPYC, 6.5 s each when a session pair's six processes start at once),
and a 10-minute CPU sweep starts about fifty of them: a minute of the sweep spent
importing the same modules again. The starter imports them once (the Keras 3 lane of
TensorFlow, as a child would: ``select_keras(3)``, the lean import, the harness's own
child modules) and then, for each request the launcher sends on its socket, forks a
process that becomes that child: its own session (process group), its log on
stdout and stderr, the environment and working directory asked for, the pipe ends
passed with the request at the numbers the command line names, and then the
module run as ``python -m`` would run it.

Nothing runs in the starter but imports: no TensorFlow context, device or thread
pool exists before the fork, so each child configures its devices, its cores and its
thread pools itself, as a fresh process does (``bench.child.main.start_process``).
What a child measures is unchanged; its start-up lacks the import, which
``Startup.preimported_s`` gives apart (the starter's own import time,
``bench.child.preimport``).

The child is forked through an intermediate process that exits at once, so the
launcher (a child subreaper, ``bench.launch.prestart``) adopts it and waits on it as
on a process it started itself. The starter ends when its socket closes (the
launcher gone) and with its parent (``PR_SET_PDEATHSIG``).

Protocol, one request at a time: a JSON line ``{"argv": [...], "env": {...}, "cwd":
"...", "log": "...", "fds": [n, ...]}`` with the pipe ends as SCM_RIGHTS (in ``fds``'
order, each to be placed at its number), answered by ``{"pid": N}`` or ``{"error":
"..."}``. Before the first request the starter says ``{"ready": import_s}``.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import io
import json
import os
import runpy
import signal
import socket
import sys
import time
import traceback
import warnings
from typing import Any

from bench.child import preimport

PR_SET_PDEATHSIG = 1
# The numbers passed fds are moved to before each goes to its own: above any the
# command line names (pipe ends of a launcher with a few hundred open files).
SPARE_FD = 1000


def _die_with_parent() -> None:
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def preload() -> float:
    """Import what every TensorFlow child of the Keras 3 lane imports, in the order a
    child does (the lane chosen, optional packages skipped); the seconds it took."""
    t = time.perf_counter()
    from bench.child.backends.tf.keras_lane import select_keras
    from bench.child.backends.tf.lean_import import skip_optional_while_tensorflow_imports

    select_keras(3)
    skip_optional_while_tensorflow_imports()
    import keras  # noqa: F401
    import tensorflow  # noqa: F401

    import bench.child.backends.tf
    import bench.child.backends.tf.after
    import bench.child.backends.tf.build
    import bench.child.backends.tf.devices
    import bench.child.backends.tf.fit
    import bench.child.backends.tf.ps
    import bench.child.backends.tf.trainer
    import bench.child.main
    import bench.child.probes.hooks
    import bench.child.windows  # noqa: F401
    return time.perf_counter() - t


def _readline(sock: socket.socket, buf: bytearray) -> tuple[bytes | None, list[int]]:
    """One request line and the fds that came with it (None at end of file)."""
    fds: list[int] = []
    while b"\n" not in buf:
        data, got, _, _ = socket.recv_fds(sock, 1 << 16, 16)
        fds += got
        if not data:
            return None, fds
        buf += data
    line, _, rest = bytes(buf).partition(b"\n")
    buf[:] = rest
    return line, fds


def _send(sock: socket.socket, doc: dict[str, Any]) -> None:
    sock.sendall(json.dumps(doc).encode() + b"\n")


def _become(req: dict[str, Any], fds: list[int], sock: socket.socket, ready_w: int,
            preimported_s: float) -> None:
    """In the forked child: take the request's session, files and environment, say so
    on ``ready_w``, and run its module. Never returns."""
    code = 1
    try:
        os.setsid()
        sock.close()
        # A fresh interpreter's dispositions: Ctrl-C raises KeyboardInterrupt, a
        # write to a closed pipe raises BrokenPipeError (Python ignores SIGPIPE and
        # SIGXFSZ), the rest as the kernel has them.
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for sig in (signal.SIGPIPE, signal.SIGXFSZ):
            signal.signal(sig, signal.SIG_IGN)
        for sig in (signal.SIGTERM, signal.SIGCHLD, signal.SIGUSR1, signal.SIGHUP):
            signal.signal(sig, signal.SIG_DFL)
        log = os.open(req["log"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(log, 1)
        os.dup2(log, 2)
        # The pipe ends go to the numbers the command line names; first everything
        # that could sit at one of those numbers moves out of the way.
        wanted = [int(n) for n in req.get("fds", [])]
        if len(set(wanted)) != len(wanted) or any(not 2 < n < SPARE_FD - 1 for n in wanted):
            raise ValueError(f"fds must be distinct, above 2 and below {SPARE_FD - 1}. "
                             f"Received: fds={wanted}")
        ready_w = os.dup2(ready_w, SPARE_FD - 1)
        spare = [os.dup2(fd, SPARE_FD + i) for i, fd in enumerate(fds)]
        for have, want in zip(spare, wanted, strict=True):
            os.dup2(have, want)
        low = 3
        for keep in sorted({ready_w, *wanted}):
            os.closerange(low, keep)
            low = keep + 1
        os.closerange(low, max(SPARE_FD + len(fds) + 1, os.sysconf("SC_OPEN_MAX")))
        os.environ.clear()
        os.environ.update(req["env"])
        os.chdir(req["cwd"])
        argv = list(req["argv"])
        module = argv[argv.index("-m") + 1]
        sys.argv = [module, *argv[argv.index("-m") + 2:]]
        # Unbuffered, as PYTHONUNBUFFERED makes a fresh child's.
        sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), write_through=True)
        sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), write_through=True,
                                      errors="backslashreplace")
        preimport.PREIMPORTED_S = preimported_s
        os.write(ready_w, b"k")
        os.close(ready_w)
        warnings.filterwarnings("ignore", category=RuntimeWarning, module="runpy")
        runpy.run_module(module, run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:  # a child's failure goes to its log, as a fresh one's would
        traceback.print_exc()
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def _fork(req: dict[str, Any], fds: list[int], sock: socket.socket,
          preimported_s: float) -> int:
    """Fork the requested child through an intermediate that exits once the child has
    its own session, so that the child's parent becomes the launcher; its pid."""
    pid_r, pid_w = os.pipe()
    middle = os.fork()
    if middle == 0:
        try:
            os.close(pid_r)
            ready_r, ready_w = os.pipe()
            child = os.fork()
            if child == 0:
                os.close(ready_r)
                os.close(pid_w)
                _become(req, fds, sock, ready_w, preimported_s)
            os.close(ready_w)
            ok = os.read(ready_r, 1) == b"k"
            if not ok:  # it ended: reaped here, not left to the launcher as a zombie
                os.waitpid(child, 0)
            os.write(pid_w, json.dumps({"pid": child} if ok else
                                       {"error": f"the forked child {child} ended before "
                                                 f"it was ready"}).encode())
        finally:
            os._exit(0)
    os.close(pid_w)
    with os.fdopen(pid_r, "rb") as fh:
        answer = fh.read()
    os.waitpid(middle, 0)
    doc = json.loads(answer or b'{"error": "the intermediate process died"}')
    if "pid" not in doc:
        raise RuntimeError(doc["error"])
    return int(doc["pid"])


def serve(sock: socket.socket, *, imports: bool = True) -> None:
    """Preload (``imports``), say ready, then fork one child per request until end of
    file."""
    preimported_s = preload() if imports else 0.0
    _send(sock, {"ready": preimported_s})
    buf = bytearray()
    while True:
        line, fds = _readline(sock, buf)
        if line is None:
            return
        try:
            req = json.loads(line)
            _send(sock, {"pid": _fork(req, fds, sock, preimported_s)})
        except Exception as exc:  # the launcher then starts that child itself
            _send(sock, {"error": f"{type(exc).__name__}: {exc}"})
        finally:
            for fd in fds:
                with contextlib.suppress(OSError):
                    os.close(fd)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.child.starter")
    parser.add_argument("--socket", type=int, required=True)
    parser.add_argument("--no-preload", action="store_true",
                        help="import nothing first: the protocol alone (its tests)")
    args = parser.parse_args(argv)
    _die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the launcher's Ctrl-C is its own
    sock = socket.socket(fileno=args.socket)
    try:
        serve(sock, imports=not args.no_preload)
    except BaseException:
        traceback.print_exc()
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
