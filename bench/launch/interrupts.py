"""Ctrl-C and SIGTERM held back while a child process is started and recorded.

Every launcher starts its children in sessions of their own, so a Ctrl-C reaches
only the parent, whose KeyboardInterrupt path kills the children it knows of. A
signal that lands between the fork and the moment the new ``Popen`` is on that list
would leave a child nobody kills: ``Popen`` raises out of its wait for the exec (the
child is already running) or the assignment never happens. ``interrupts_deferred``
closes that window: a SIGINT or SIGTERM received inside the block is recorded and
delivered again, to whatever handled it before, as the block ends.

Signal masks would not do: a blocked mask is inherited by the child through fork and
exec, and would leave it deaf to SIGTERM.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType

DEFERRED = (signal.SIGINT, signal.SIGTERM)


@contextlib.contextmanager
def interrupts_deferred() -> Iterator[None]:
    """Hold SIGINT and SIGTERM until the block ends, then deliver the first one received.

    Only the main thread can handle signals (and only there do they raise), so in any
    other thread this is a plain block. Blocks nest: the inner one delivers to the
    outer one's recorder.
    """
    previous = {sig: signal.getsignal(sig) for sig in DEFERRED}
    if threading.current_thread() is not threading.main_thread() or \
            any(handler is None for handler in previous.values()):
        # None: a handler set outside Python, which could not be put back.
        yield
        return
    received: list[int] = []

    def record(signum: int, frame: FrameType | None) -> None:
        received.append(signum)

    for sig in DEFERRED:
        signal.signal(sig, record)
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if received:
            # Delivered through the restored disposition: KeyboardInterrupt under the
            # CLI's handler or Python's default, termination under SIG_DFL, nothing
            # where it was ignored.
            signal.raise_signal(received[0])
