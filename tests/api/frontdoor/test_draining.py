"""Shutdown without waiting on live readers (`app/api/frontdoor/draining.py`): a stop
signal drains first, then runs the handler that was there."""

from __future__ import annotations

import asyncio
import signal
import threading
from collections.abc import Iterator
from types import FrameType

import pytest

from app.api.frontdoor.draining import SIGNALS, drained_on_signal


@pytest.fixture
def stop_handlers() -> Iterator[list[tuple[str, int]]]:
    """Callable handlers on the stop signals (as a server installs), recording each call."""
    calls: list[tuple[str, int]] = []

    def previous(signum: int, frame: FrameType | None) -> None:
        calls.append(("previous", signum))

    saved = {sig: signal.getsignal(sig) for sig in SIGNALS}
    for sig in SIGNALS:
        signal.signal(sig, previous)
    try:
        yield calls
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)


async def test_a_stop_signal_drains_then_calls_the_handler_that_was_there(
    stop_handlers: list[tuple[str, int]],
) -> None:
    drained = asyncio.Event()
    installed = signal.getsignal(signal.SIGTERM)
    with drained_on_signal(drained.set):
        assert signal.getsignal(signal.SIGTERM) is not installed
        signal.raise_signal(signal.SIGTERM)
        async with asyncio.timeout(5):
            await drained.wait()
        assert stop_handlers == [("previous", signal.SIGTERM)]
    assert signal.getsignal(signal.SIGTERM) is installed  # put back as it was


async def test_a_default_handler_is_left_alone() -> None:
    saved = signal.getsignal(signal.SIGTERM)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        with drained_on_signal(lambda: None):
            assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    finally:
        signal.signal(signal.SIGTERM, saved)


def test_outside_the_main_thread_nothing_is_wrapped(
    stop_handlers: list[tuple[str, int]],
) -> None:
    installed = signal.getsignal(signal.SIGTERM)
    seen: list[object] = []

    def in_a_thread() -> None:
        with drained_on_signal(lambda: None):
            seen.append(signal.getsignal(signal.SIGTERM))

    thread = threading.Thread(target=in_a_thread)
    thread.start()
    thread.join()
    assert seen == [installed]
