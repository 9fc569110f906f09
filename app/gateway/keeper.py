"""Keeps the writer leases of the generations this gateway process is recording.

A recording's generation has a writer lease (`EVENTLOG_WRITER_LEASE_SECONDS`); every append
renews it, but a tool call may stay silent for minutes. While the process is alive, the
keeper renews the leases of every unfinished recording's generation at once (one write),
every third of the lease, so a live recording is never abandoned however silent its
upstream, and a recording whose process died is abandoned within the lease plus one sweep
— its followers on other replicas then get `-32011` (`abandoned`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Collection

from app.errors import EventLogError
from app.service.leases import Leases

log = logging.getLogger(__name__)


class LeaseKeeper:
    """Renews the leases of the tokens `tokens()` names, every `period` seconds."""

    def __init__(
        self, leases: Leases, tenant: str, period: float, tokens: Callable[[], Collection[str]]
    ) -> None:
        self._leases = leases
        self._tenant = tenant
        self._period = period
        self._tokens = tokens
        self._task: asyncio.Task[None] | None = None

    def ensure_running(self) -> None:
        """Start the renewals (called with the first recording; idempotent)."""
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._run(), name="gateway lease keeper")

    async def renew_now(self) -> int:
        """Renew every current token's lease once; how many were renewed."""
        tokens = sorted(set(self._tokens()))
        if not tokens:
            return 0
        outcomes = await self._leases.renew_many(self._tenant, tokens)
        refused = [t for t, o in zip(tokens, outcomes, strict=True) if isinstance(o, Exception)]
        if refused:  # finished or fenced meanwhile: the recording itself finds out
            log.debug("leases not renewed (finished or fenced): %s", refused)
        return len(tokens) - len(refused)

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self._period)
            try:
                await self.renew_now()
            except EventLogError as error:  # the log away: the next round tries again
                log.warning("renewing the recordings' leases failed: %s", error)
            except Exception:
                log.exception("renewing the recordings' leases failed")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
