"""The lease sweep of tasks: a task whose worker stopped renewing its lease is settled
`failed` / `worker_lost` within the lease plus one sweep period, whether or not anyone
reads it; and tasks past their TTL are deleted.

Every replica sweeps; each lapsed task is settled by one guarded UPDATE
(`app/storage/tasks.py`), so when several replicas meet one task at once, exactly one
records it and the others change nothing. The sweep also counts tasks by status for the
metrics.
"""

from __future__ import annotations

import logging

from sqlalchemy.engine import Connection

from app.service.background import PeriodicWorker, periodically
from app.service.clock import Clock, utc_now
from app.service.observer import Observer
from app.settings.slices import LeaseSettings
from app.storage import tasks as store
from app.storage.database import Database

log = logging.getLogger(__name__)


class TaskSweeper(PeriodicWorker[LeaseSettings]):
    """Settles lapsed tasks and deletes expired ones, every `lease_sweep_seconds`, at most
    `batch` (the retention batch size) a statement."""

    def __init__(
        self,
        database: Database,
        settings: LeaseSettings,
        *,
        batch: int,
        observer: Observer | None = None,
        clock: Clock = utc_now,
    ) -> None:
        super().__init__(database, settings, observer=observer, clock=clock)
        self.batch = batch

    async def run(self) -> None:
        """A sweep every `lease_sweep_seconds`, for ever (a background task)."""
        await periodically(
            self._settings.sweep_seconds,
            self.sweep_once,
            logger=log,
            failed="task sweep failed, retrying next period: %s",
        )

    async def sweep_once(self) -> int:
        """One sweep: returns how many tasks this replica settled `worker_lost`."""
        batch, settled = self.batch, 0
        now = self._clock()
        due = await self._database.read(lambda conn: store.lapsed(conn, now, batch))
        for task_id in due:

            def settle(conn: Connection, task_id: str = task_id) -> bool:
                return store.settle_lapsed(conn, task_id, self._clock()) is not None

            if await self._database.write(settle):
                settled += 1
                log.warning(
                    "task %s: its worker's lease lapsed; settled failed/worker_lost", task_id
                )
        if settled:
            self._observer.tasks_lost(settled)
        await self._database.write(lambda conn: store.delete_expired(conn, self._clock(), batch))
        counts = await self._database.read(lambda conn: store.counts(conn, self._clock()))
        self._observer.tasks_counted(counts)
        return settled
