"""Durable MCP tasks: the task record's use cases (docs/tasks.md).

The requester's calls (get, input, cancel) are bound to the task's principal; the worker's
(status, renew, events, a new attempt) are fenced by its `attempt`. Each call is one write
or one read of the database, so any replica answers it from what is stored. A task whose
worker lease ran out is settled `failed` / `worker_lost` by whichever call or sweep meets
it first (`app/storage/tasks.py`: one guarded UPDATE), before anything else is decided.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

from sqlalchemy.engine import Connection

from app.domain.append import EventBody
from app.domain.paging import PageRefusal
from app.domain.tasks import (
    TaskRefusal,
    TaskStatus,
    accepted_responses,
    check_transition,
    check_worker,
    payload_problem,
)
from app.errors import InvalidRequest, PageOutOfRange, TaskConflict, TaskEventsGone, UnknownTask
from app.service.clock import Clock, utc_now
from app.service.eventlog import EventLogService, WriteLimits
from app.settings.slices import TaskSettings
from app.storage import generations
from app.storage import tasks as store
from app.storage.database import Database
from app.storage.records import AppendResult
from app.storage.tasks import NewTask, TaskRecord

T = TypeVar("T")
_ANYONE = object()  # a worker's call: fenced by its attempt, not bound to a principal


@dataclass(frozen=True, slots=True)
class Answered:
    """A requester's input: the task after it, and the keys that were taken."""

    task: TaskRecord
    accepted: list[str]


class TaskService:
    """The task record's use cases, within one tenant at a time."""

    def __init__(
        self,
        database: Database,
        eventlog: EventLogService,
        settings: TaskSettings,
        limits: WriteLimits,
        clock: Clock = utc_now,
    ) -> None:
        self._database = database
        self._eventlog = eventlog
        self._settings = settings
        self._streams = limits.streams
        self._lease_seconds = limits.leases.writer_lease_seconds
        self._clock = clock

    async def create(
        self,
        tenant: str,
        *,
        principal: str | None,
        ttl_ms: int | None = None,
        poll_interval_ms: int | None = None,
        request: Any = None,
        lease_seconds: int | None = None,
        producer: str | None = None,
    ) -> TaskRecord:
        """Store a `working` task with attempt 1; returns once it is committed."""
        s, streams = self._settings, self._streams
        ttl = s.default_ttl_ms if ttl_ms is None else ttl_ms
        if ttl > streams.max_ttl_seconds * 1000:
            raise InvalidRequest(f"ttl_ms is over the limit ({streams.max_ttl_seconds * 1000})")
        new = NewTask(
            tenant=tenant,
            principal=principal,
            ttl_ms=ttl,
            poll_interval_ms=s.poll_interval_ms if poll_interval_ms is None else poll_interval_ms,
            lease_seconds=self._lease_seconds if lease_seconds is None else lease_seconds,
            request=request,
            producer=producer,
            max_events=streams.default_max_events,
        )
        now = self._clock()
        task, _ = await self._database.write(lambda conn: store.create(conn, new, now))
        return task

    async def get(self, tenant: str, task_id: str, principal: str | None) -> TaskRecord:
        """The task as its requester sees it (`UnknownTask` for anyone else)."""
        now = self._clock()
        task = await self._database.read(lambda conn: store.find(conn, task_id, now, tenant=tenant))
        if task is None or task.principal != principal:
            raise UnknownTask(task_id)
        if task.lapsed(now):
            return await self._write(tenant, task_id, principal, lambda conn, found: found)
        return task

    async def transition(
        self,
        tenant: str,
        task_id: str,
        *,
        attempt: int,
        status: TaskStatus,
        status_message: str | None = None,
        result: Any = None,
        error: Any = None,
        input_requests: Any = None,
    ) -> TaskRecord:
        """Move the task, as the holder of `attempt`; renews its lease (ends it when terminal)."""
        problem = payload_problem(status, result=result, error=error, input_requests=input_requests)
        if problem is not None:
            raise InvalidRequest(problem)

        def move(conn: Connection, task: TaskRecord) -> TaskRecord | TaskConflict:
            refusal = check_transition(task.attempt, attempt, task.state, status)
            if refusal is not None:
                return _conflict(refusal, task, attempt, status)
            now = self._clock()
            values: dict[str, Any] = {
                "status": status.value,
                "status_message": status_message,
                "last_updated_at": now,
            }
            if status is TaskStatus.INPUT_REQUIRED:
                values |= {"input_requests": input_requests, "input_responses": {}}
            if status.terminal:
                values |= {"result": result, "error": error, "settled_at": now}
                values["lease_expires_at"] = None
                moved = store.change(conn, task, values)
                store.finish_events(conn, moved, now)
                return moved
            moved = store.change(conn, task, values)
            store.renew(conn, moved, now)
            return store.change(conn, moved, {})

        return await self._write(tenant, task_id, _ANYONE, move)

    async def renew(
        self, tenant: str, task_id: str, *, attempt: int, status_message: str | None = None
    ) -> TaskRecord:
        """Renew the worker lease of `attempt` (a worker with nothing else to say), and
        optionally say how it is going."""

        def renew(conn: Connection, task: TaskRecord) -> TaskRecord | TaskConflict:
            refusal = check_worker(task.attempt, attempt, task.state)
            if refusal is not None:
                return _conflict(refusal, task, attempt, None)
            now = self._clock()
            store.renew(conn, task, now)
            values: dict[str, Any] = {}
            if status_message is not None:
                values = {"status_message": status_message, "last_updated_at": now}
            return store.change(conn, task, values)

        return await self._write(tenant, task_id, _ANYONE, renew)

    async def new_attempt(
        self,
        tenant: str,
        task_id: str,
        *,
        supersedes: int,
        lease_seconds: int | None = None,
        producer: str | None = None,
    ) -> TaskRecord:
        """Take the task over from the holder of attempt `supersedes`: a new attempt and a
        new generation of its events, fencing the old worker's writes and appends."""
        lease = self._lease_seconds if lease_seconds is None else lease_seconds
        max_events = self._streams.default_max_events

        def take_over(conn: Connection, task: TaskRecord) -> TaskRecord | TaskConflict:
            refusal = check_worker(task.attempt, supersedes, task.state)
            if refusal is not None:
                return _conflict(refusal, task, supersedes, None)
            taken, _ = store.open_attempt(
                conn,
                task,
                lease_seconds=lease,
                producer=producer,
                max_events=max_events,
                now=self._clock(),
            )
            return taken

        return await self._write(tenant, task_id, _ANYONE, take_over)

    async def answer_input(
        self, tenant: str, task_id: str, principal: str | None, responses: dict[str, Any]
    ) -> Answered:
        """Record the requester's answers to outstanding input requests (others ignored)."""
        accepted: list[str] = []

        def answer(conn: Connection, task: TaskRecord) -> TaskRecord | TaskConflict:
            if task.state.terminal:
                return TaskConflict(TaskRefusal.TERMINAL, f"the task is {task.status}")
            if task.state is not TaskStatus.INPUT_REQUIRED:
                return task
            taken = accepted_responses(task.input_requests, task.input_responses, responses)
            if not taken:
                return task
            accepted[:] = sorted(taken)
            merged = {**(task.input_responses or {}), **taken}
            return store.change(
                conn, task, {"input_responses": merged, "last_updated_at": self._clock()}
            )

        task = await self._write(tenant, task_id, principal, answer)
        return Answered(task, accepted)

    async def cancel(self, tenant: str, task_id: str, principal: str | None) -> TaskRecord:
        """Settle the task `cancelled` (a terminal task stays as it is): its worker's next
        write is refused `terminal`, which is how it learns to stop."""

        def cancel(conn: Connection, task: TaskRecord) -> TaskRecord:
            if task.state.terminal:
                return task
            now = self._clock()
            values = {
                "status": TaskStatus.CANCELLED.value,
                "status_message": "cancelled by the requester",
                "cancel_requested_at": now,
                "settled_at": now,
                "last_updated_at": now,
                "lease_expires_at": None,
            }
            cancelled = store.change(conn, task, values)
            store.finish_events(conn, cancelled, now)
            return cancelled

        return await self._write(tenant, task_id, principal, cancel)

    async def append(
        self,
        tenant: str,
        task_id: str,
        *,
        attempt: int,
        batch: Sequence[EventBody],
        first_seq: int | None,
    ) -> tuple[TaskRecord, AppendResult]:
        """Append progress events to the attempt's generation, renewing its lease.

        The lease is renewed first, fenced by `attempt`; the append then goes the ordinary
        way (limits, retries, metrics) to the generation that attempt owns, which refuses it
        `superseded` or `terminal` if the task moved on meanwhile.
        """
        task = await self.renew(tenant, task_id, attempt=attempt)
        result = await self._eventlog.append(
            tenant, task.generation, batch, first_seq=first_seq, terminal=False
        )
        return task, result

    async def events_of(
        self, tenant: str, task_id: str, principal: str | None
    ) -> tuple[TaskRecord, str]:
        """The task and its current attempt's generation (whose events a reader pages)."""
        task = await self.get(tenant, task_id, principal)
        return task, task.generation

    @asynccontextmanager
    async def gone_as_evicted(self, tenant: str, token: str) -> AsyncIterator[None]:
        """A page of a task's events that starts before what is retained (evicted, or
        purged by its TTL) is `TaskEventsGone`, carrying the first seq still there."""
        try:
            yield
        except PageOutOfRange as refused:
            if refused.refusal is PageRefusal.BEYOND_TAIL:
                raise
            gen = await self._database.read(
                lambda conn: generations.find(conn, token, tenant=tenant)
            )
            earliest = 1 if gen is None else gen.head_seq
            raise TaskEventsGone(refused.detail, earliest) from refused

    async def _write(
        self,
        tenant: str,
        task_id: str,
        principal: object,
        work: Callable[[Connection, TaskRecord], T | TaskConflict],
    ) -> T:
        """Run `work` on the task's locked row, after settling a lapsed lease; a refusal it
        returns is raised once the transaction (with that settling) is committed."""

        def run(conn: Connection) -> T | TaskConflict:
            now = self._clock()
            task = store.find(conn, task_id, now, tenant=tenant, lock=True)
            if task is None or (principal is not _ANYONE and task.principal != principal):
                raise UnknownTask(task_id)
            if task.lapsed(now):
                settled = store.settle_lapsed(conn, task_id, now)
                task = settled or task
            return work(conn, task)

        outcome = await self._database.write(run)
        if isinstance(outcome, TaskConflict):
            raise outcome
        return outcome


def _conflict(
    refusal: TaskRefusal, task: TaskRecord, attempt: int, target: TaskStatus | None
) -> TaskConflict:
    if refusal is TaskRefusal.SUPERSEDED:
        detail = f"attempt {attempt} was superseded by attempt {task.attempt}"
    elif refusal is TaskRefusal.UNKNOWN_ATTEMPT:
        detail = f"attempt {attempt} was never started (the task is at attempt {task.attempt})"
    elif refusal is TaskRefusal.TERMINAL:
        detail = f"the task is {task.status}; a terminal status is final"
    else:
        assert target is not None
        detail = f"a task that is {task.status} cannot become {target.value}"
    return TaskConflict(refusal, detail)
