"""Writer leases: renewing them, and the sweep that records lapsed ones as abandoned.

Every replica sweeps, every `EVENTLOG_LEASE_SWEEP_SECONDS`: one guarded UPDATE
(`generations.abandon_lapsed`) records each generation whose lease ran out while it was
open, so that several replicas noticing at once record it once (the guard is re-checked
on the row a waiting UPDATE gets). The sweep only *records* and wakes readers: appends,
renewals and resumes look at the lease themselves (`GenerationRecord.lapsed`), so what
they answer never depends on the sweep's timing. Live readers and long-polls are told by
the wake-up the recording sends, so within the lease plus one sweep period.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from sqlalchemy.engine import Connection

from app.domain.append import AppendConflict
from app.errors import ConflictingBatch, Rejected, StorageError
from app.service.background import periodically
from app.service.clock import Clock, utc_now
from app.service.observer import Observer
from app.settings.slices import LeaseSettings
from app.storage import generations
from app.storage.database import Database
from app.storage.records import Abandoned, Lease

log = logging.getLogger(__name__)

_SWEEP_BATCH = 500


class Leases:
    """Renew writer leases (REST and channel) and record lapsed ones (the sweep)."""

    def __init__(
        self,
        database: Database,
        settings: LeaseSettings,
        observer: Observer,
        clock: Clock = utc_now,
    ) -> None:
        self._database = database
        self._settings = settings
        self._observer = observer
        self._clock = clock

    async def renew(self, tenant: str, token: str) -> Lease:
        """Renew one generation's lease; refused as an append to it would be (a lease that
        already ran out: `abandoned`, recorded now if the sweep had not)."""
        now = self._clock()

        def renew_in(conn: Connection) -> Lease:
            return generations.renew_lease(conn, token, tenant=tenant, now=now)

        try:
            return await self._database.write(renew_in)
        except ConflictingBatch as refused:
            await self.refused(token, refused)
            raise

    async def renew_many(self, tenant: str, tokens: Sequence[str]) -> list[Lease | Rejected]:
        """Renew several generations' leases in one write (a channel that renews all it
        writes at once): per token, in order, its lease or the refusal a single renewal
        would get."""
        now = self._clock()

        def renew_in(conn: Connection) -> list[Lease | Rejected]:
            outcomes: list[Lease | Rejected] = []
            for token in tokens:
                try:
                    outcomes.append(generations.renew_lease(conn, token, tenant=tenant, now=now))
                except Rejected as refused:  # raised before it wrote anything
                    outcomes.append(refused)
            return outcomes

        outcomes = await self._database.write(renew_in, weight=max(1, len(tokens)))
        for token, outcome in zip(tokens, outcomes, strict=True):
            if isinstance(outcome, ConflictingBatch):
                await self.refused(token, outcome)
        return outcomes

    async def refused(self, token: str, refused: ConflictingBatch) -> None:
        """A write to `token` was refused: if it met a lapsed lease, record it now (the
        sweep would, a period later); a failure to record is the sweep's to repeat."""
        if refused.conflict is AppendConflict.ABANDONED:
            try:
                await self.record(token)
            except StorageError as error:
                log.warning("recording abandoned generation %s failed: %s", token, error)

    async def record(self, token: str | None = None) -> Sequence[Abandoned]:
        """Record generations whose lease ran out (only `token`'s, when given) as
        abandoned; answer those this call recorded (none that another already had)."""
        now = self._clock()

        def sweep_in(conn: Connection) -> list[Abandoned]:
            return generations.abandon_lapsed(conn, now, token=token, limit=_SWEEP_BATCH)

        recorded = await self._database.write(sweep_in)
        if recorded:
            self._observer.abandoned(len(recorded))
            for gen in recorded:
                log.info("generation %s abandoned: its writer's lease ran out", gen.token)
        return recorded

    async def sweep_once(self) -> int:
        """Record every lapsed lease now (batch after batch); how many were recorded."""
        total = 0
        while len(batch := await self.record()) == _SWEEP_BATCH:
            total += len(batch)
        return total + len(batch)

    async def run(self) -> None:
        """A sweep every `lease_sweep_seconds`, for ever (a background task)."""
        await periodically(
            self._settings.sweep_seconds,
            self.sweep_once,
            logger=log,
            failed="lease sweep failed, retrying next period: %s",
        )
