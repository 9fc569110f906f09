"""The operator's view of tasks: every tenant's, by status, with attempts and events."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.engine import Connection

from app.domain.ids import StreamKey
from app.domain.tasks import task_stream_id
from app.errors import UnknownTask
from app.service.clock import Clock, utc_now
from app.settings.slices import PageLimits
from app.storage import events, generations
from app.storage import tasks as store
from app.storage.database import Database
from app.storage.records import EventPage, GenerationRecord
from app.storage.tasks import TaskRecord

EVENTS_SHOWN = 100


@dataclass(frozen=True, slots=True)
class TaskDetail:
    """A task, every attempt's generation still kept (epoch order), and the first events
    of its current attempt that are retained."""

    task: TaskRecord
    attempts: list[GenerationRecord]
    current: GenerationRecord | None
    events: EventPage | None


class TaskAdmin:
    """Operator reads of tasks (across tenants)."""

    def __init__(self, database: Database, pages: PageLimits, clock: Clock = utc_now) -> None:
        self._database = database
        self._max_bytes = pages.max_bytes
        self._clock = clock

    async def listing(
        self,
        *,
        status: str | None,
        tenant: str | None,
        after: tuple[datetime, str] | None,
        limit: int,
    ) -> list[TaskRecord]:
        """Unexpired tasks, newest first."""
        now = self._clock()

        def read(conn: Connection) -> list[TaskRecord]:
            return store.listing(conn, now, status=status, tenant=tenant, after=after, limit=limit)

        return await self._database.read(read)

    async def detail(self, task_id: str) -> TaskDetail:
        """One task with its attempts and events (`UnknownTask` once expired)."""
        now = self._clock()

        def read(conn: Connection) -> TaskDetail | None:
            task = store.find(conn, task_id, now, tenant=None)
            if task is None:
                return None
            key = StreamKey(task.tenant, task_stream_id(task.task_id))
            attempts = generations.of_stream(conn, key)
            current = next((g for g in attempts if g.token == task.generation), None)
            page = None
            if current is not None and not current.expired:
                after = current.head_seq - 1
                page = events.read_page(
                    conn, current, after=after, limit=EVENTS_SHOWN, max_bytes=self._max_bytes
                )
            return TaskDetail(task, attempts, current, page)

        found = await self._database.read(read)
        if found is None:
            raise UnknownTask(task_id)
        return found

    async def counts(self) -> dict[str, int]:
        """Unexpired tasks by status."""
        now = self._clock()
        return await self._database.read(lambda conn: store.counts(conn, now))
