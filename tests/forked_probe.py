"""A child for tests/test_prestart.py, forked by a starter: it says what it was given
(argv, one variable, its directory, its session), reads a byte on the fd named by
its first argument and writes it on the fd named by its second, then exits 7."""

import os
import sys

turn_r, done_w = int(sys.argv[1]), int(sys.argv[2])
print("argv", sys.argv[1:], flush=True)
print("var", os.environ.get("PROBE_VAR"), flush=True)
print("cwd", os.getcwd(), flush=True)
print("session", os.getsid(0) == os.getpid(), flush=True)
os.write(done_w, os.read(turn_r, 1))
sys.exit(7)
