"""The lease renewer of an `EventLogEventStore`: the generations it writes stay leased
while the process is alive, however long a tool stays silent."""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Callable

import anyio
import sniffio

from mcp_eventlog_client import EventLogClient, EventLogError
from mcp_eventlog_client.mcp.owners import Owners

log = logging.getLogger("mcp_eventlog_client.mcp.store")

DEFAULT_LEASE_SECONDS = 30
"""The service's default writer lease, used to pace renewals until a generation says."""


class LeaseRenewer:
    """Every lease / 3, renews in one burst the leases of the generations that no
    acknowledged append renewed since the last round (`silent(written_before)` names them),
    and of finished request generations until their `keep_finished` time.

    One renewer task per event loop (asyncio only), started with the first generation.
    """

    def __init__(
        self,
        client: EventLogClient,
        owners: Owners,
        silent: Callable[[float], list[str]],
        *,
        lease_seconds: int | None,
        bound: int,
    ) -> None:
        self._client = client
        self._owners = owners
        self._silent = silent
        self._bound = bound
        self._lease_seconds = float(lease_seconds or DEFAULT_LEASE_SECONDS)
        self._task: asyncio.Task[None] | None = None
        # Finished request generations whose leases are renewed until then (loop time).
        self._finished: OrderedDict[str, float] = OrderedDict()
        self.renewals = 0
        """Lease renewals sent (appends renew too; only silent generations are renewed)."""

    def granted(self, lease_seconds: int | None) -> None:
        """A generation was opened with this lease: renew at least as often as it needs."""
        if lease_seconds:
            self._lease_seconds = min(self._lease_seconds, float(lease_seconds))

    def keep_finished(self, token: str | None, seconds: float) -> None:
        """Renew the lease of the finished request generation `token` for `seconds` more."""
        if token is None or seconds <= 0:
            return
        self._finished[token] = anyio.current_time() + seconds
        self._finished.move_to_end(token)
        while len(self._finished) > self._bound:
            self._finished.popitem(last=False)

    def start(self) -> None:
        """The renewer of this event loop, unless one runs already (or the loop is not
        asyncio's)."""
        try:
            loop = asyncio.get_running_loop()
            library = sniffio.current_async_library()
        except (RuntimeError, sniffio.AsyncLibraryNotFoundError):
            return
        task = self._task
        if library != "asyncio" or (
            task is not None and not task.done() and task.get_loop() is loop
        ):
            return
        self._task = loop.create_task(self._renew_leases())

    def stop(self) -> None:
        """Stop renewing."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()

    async def _renew_leases(self) -> None:
        while True:
            interval = self._lease_seconds / 3
            await asyncio.sleep(interval)
            try:
                await self.renew_silent(anyio.current_time() - interval)
            except Exception:  # the next round tries again; never stop renewing
                log.exception("renewing the writer leases failed")

    async def renew_silent(self, written_before: float) -> None:
        """Renew the leases of the generations not written since `written_before`, and of
        the finished ones still kept (a broken one no longer is)."""
        silent = self._silent(written_before)
        now = anyio.current_time()
        for token, until in list(self._finished.items()):
            owner = self._owners.get(token)
            if until < now or (owner is not None and owner.broken):
                del self._finished[token]
            else:
                silent.append(token)
        if not silent:
            return
        outcomes = await self._client.renew_leases(silent)
        self.renewals += len(silent)
        for token, outcome in outcomes.items():
            if isinstance(outcome, EventLogError):
                log.warning("the lease of generation %s was not renewed: %s", token, outcome)
