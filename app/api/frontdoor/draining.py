"""Shutdown without waiting on live readers: the first SIGTERM (or SIGINT) drains the
fan-out at once, before uvicorn starts waiting for connections to close.

uvicorn, on a signal, stops listening and waits for every open connection to end (up to
`timeout_graceful_shutdown`, `EVENTLOG_SHUTDOWN_TIMEOUT_SECONDS`) before the lifespan's
shutdown runs: a live reader, whose response never ends by itself, would hold the process
for `EVENTLOG_LIVE_MAX_SECONDS`. So while the service runs, the signal handler uvicorn
installed is wrapped: the fan-out is drained (every live reader is sent a reconnect hint
and its response ends; every long-poll answers what it has), then uvicorn's own handler
runs as before, and in-flight appends finish within the graceful timeout. Only where a
server installed a handler (a callable one, in the main thread) is anything wrapped: an
in-process test app leaves the signals alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import threading
from collections.abc import Callable, Iterator
from types import FrameType

SIGNALS = (signal.SIGTERM, signal.SIGINT)


@contextlib.contextmanager
def drained_on_signal(drain: Callable[[], None]) -> Iterator[None]:
    """While the block runs, the process's stop signals call `drain` (in the event loop)
    before the handler that was there."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    loop = asyncio.get_running_loop()
    wrapped: dict[signal.Signals, Callable[[int, FrameType | None], object]] = {}

    for sig in SIGNALS:
        previous = signal.getsignal(sig)
        if not callable(previous):
            continue

        def handler(
            signum: int,
            frame: FrameType | None,
            previous: Callable[[int, FrameType | None], object] = previous,
        ) -> None:
            loop.call_soon_threadsafe(drain)
            previous(signum, frame)

        wrapped[sig] = previous
        signal.signal(sig, handler)
    try:
        yield
    finally:
        for sig, previous in wrapped.items():
            signal.signal(sig, previous)
