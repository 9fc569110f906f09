"""The composition root: the one place that builds the service's parts and wires them.

`create_app` (the HTTP service) and `mcp-eventlog gc` (one retention pass) both start from
`build(settings)`; nothing else constructs a database, a service or a background task.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING

from app.errors import StorageError
from app.service.admin import AdminService
from app.service.admission import Admission
from app.service.audit import DecisionAudit
from app.service.background import Background
from app.service.eventlog import EventLogService, WriteLimits
from app.service.hub import Hub
from app.service.leases import Leases
from app.service.live import LiveReads
from app.service.observer import Observer, Observers
from app.service.reading import ReadPath
from app.service.retention import RetentionWorker
from app.service.task_admin import TaskAdmin
from app.service.task_sweep import TaskSweeper
from app.service.tasks import TaskService
from app.settings import Settings
from app.storage.database import Database
from app.storage.migrate import head_revision

if TYPE_CHECKING:
    from app.telemetry.tracing import Tracing


class NotReady(StrEnum):
    """Why a process is not ready to take traffic."""

    DATABASE = "database"
    SCHEMA = "schema"
    WRITES = "writes"
    BACKGROUND = "background"


@dataclass(slots=True)
class Container:
    """Every long-lived part of one service process, typed."""

    settings: Settings
    database: Database
    observer: Observer
    reads: ReadPath
    eventlog: EventLogService
    admin: AdminService
    audit: DecisionAudit
    retention: RetentionWorker
    leases: Leases
    hub: Hub
    """The wake-up hub (its `drain` ends every live reader at shutdown)."""
    admission: Admission
    live: LiveReads
    background: Background
    tasks: TaskService
    task_admin: TaskAdmin
    task_sweeper: TaskSweeper
    tracing: Tracing | None = None
    # The newest migration, read from the scripts on first use (they are files, not the DB).
    _head: str | None = field(default=None, init=False)

    @asynccontextmanager
    async def running(self) -> AsyncIterator[Container]:
        """Start the background tasks; on exit stop them, flush the audit log, close."""
        self.background.start()
        try:
            yield self
        finally:
            await self.close()

    async def close(self) -> None:
        """Stop the background tasks, write what the audit log holds, close the database;
        then export the spans still batched."""
        await self.background.stop()
        with suppress(StorageError):
            await self.audit.flush()
        await self.database.close()
        if self.tracing is not None:
            await asyncio.to_thread(self.tracing.shutdown)

    async def unready(self) -> tuple[NotReady, str] | None:
        """Why the process should not take traffic now (and in words), or None when it may."""
        try:
            revision = await self.database.revision()
        except StorageError:
            return NotReady.DATABASE, "the database does not answer"
        if self._head is None:
            self._head = await asyncio.to_thread(head_revision)
        if revision != self._head:
            return (
                NotReady.SCHEMA,
                f"the schema is at {revision or 'nothing'}; the newest migration is {self._head}",
            )
        try:
            await self.database.check_writable()
        except StorageError as error:
            return NotReady.WRITES, f"the database cannot be written: {error.detail}"
        if self.background.down:
            return NotReady.BACKGROUND, f"restarting: {', '.join(sorted(self.background.down))}"
        return None


def build(
    settings: Settings, observers: Iterable[Observer] = (), tracing: Tracing | None = None
) -> Container:
    """Build (without starting anything) the parts of a service on `settings.database_url`;
    with `tracing`, its statements and decisions are traced."""
    database = Database(settings)
    if tracing is not None:
        tracing.instrument_database(database)
    outside = Observers(observers)
    audit = DecisionAudit(database, enabled=settings.decision_log, observer=outside)
    observer = Observers((outside, audit))
    reads = ReadPath(database, settings.streams, settings.pages, tracing)
    retention = RetentionWorker(database, settings.retention, observer=observer)
    leases = Leases(database, settings.leases, observer)
    hub = Hub(
        database.wakeup_sources(),
        observer,
        fanout_per_reader=settings.live.fanout_ms_per_reader / 1000,
        fanout_max=settings.live.fanout_max_ms / 1000,
    )
    admission = Admission(
        observer,
        max_readers=settings.live.max_readers,
        tenant_max=_tenant_max(settings),
        max_bytes_in_flight=settings.live.max_response_bytes_in_flight,
        max_pages=settings.live.max_pages_in_flight,
    )
    limits = WriteLimits(settings.streams, settings.bodies, settings.leases)
    eventlog = EventLogService(database, reads, limits, observer, leases=leases, catch_up=hub)
    background = Background(observer)
    background.add("live-wakeups", hub.run)
    if settings.decision_log:
        background.add("decision-audit-flusher", audit.run)
    if settings.retention_interval_seconds > 0:
        background.add("retention-worker", retention.run)
    task_sweeper = TaskSweeper(
        database, settings.leases, observer=observer, batch=settings.retention.batch_size
    )
    if settings.lease_sweep_seconds > 0:
        background.add("lease-sweep", leases.run)
        background.add("task-lease-sweep", task_sweeper.run)
    return Container(
        settings=settings,
        database=database,
        observer=observer,
        reads=reads,
        eventlog=eventlog,
        admin=AdminService(database, reads, audit, retention),
        audit=audit,
        retention=retention,
        leases=leases,
        hub=hub,
        admission=admission,
        live=LiveReads(eventlog, reads, hub, admission, settings.live, settings.pages, observer),
        background=background,
        tasks=TaskService(database, eventlog, settings.tasks, limits),
        task_admin=TaskAdmin(database, settings.pages),
        task_sweeper=task_sweeper,
        tracing=tracing,
    )


def _tenant_max(settings: Settings) -> int:
    """The most live slots one tenant may hold: all of them when the keys name one tenant
    (or none, the open service), else its share, `EVENTLOG_LIVE_TENANT_SHARE`."""
    if len({key.tenant for key in settings.keys}) <= 1:
        return settings.live_max_readers
    return max(1, math.ceil(settings.live_max_readers * settings.live_tenant_share))
