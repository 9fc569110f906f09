"""Waiting on a condition that no event announces (a database row, another process)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

PATIENCE_SECONDS = 30.0  # generous: a loaded 2-core machine must never make a test flaky


async def until(check: Callable[[], Awaitable[bool]]) -> None:
    """Return once `check()` is true; `TimeoutError` after `PATIENCE_SECONDS`."""
    async with asyncio.timeout(PATIENCE_SECONDS):
        while not await check():  # noqa: ASYNC110 (nothing to await but the state itself)
            await asyncio.sleep(0.05)
