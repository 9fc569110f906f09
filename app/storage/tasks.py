"""Tasks: the task record and its attempts' generations, one query per question.

Functions over a synchronous `Connection`, inside the caller's transaction (see
`app/storage/generations.py`). A task's attempt N is generation N (its epoch) of the stream
`task:<task_id>`; `open_attempt` opens it and moves the task's `attempt` and `generation`
in one transaction, so the two never disagree. The worker lease is the task's
(`lease_expires_at`); the attempt's generation carries the same lease, written by the same
statements, so that neither runs out before the other.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from datetime import datetime, timedelta
from math import ceil
from typing import Any

from sqlalchemy import ColumnElement, delete, func, select, tuple_, update
from sqlalchemy.engine import Connection

from app.domain.ids import StreamKey, new_token
from app.domain.tasks import ACTIVE, TaskStatus, task_stream_id, worker_lost_error
from app.storage import generations
from app.storage.changes import touched
from app.storage.dialect import dialect_of
from app.storage.generations import NewGeneration
from app.storage.records import GenerationRecord
from app.storage.schema import generations as generations_table
from app.storage.schema import tasks
from app.storage.task_rows import GENERATION_COLUMNS, NewTaskRows

_ACTIVE = [status.value for status in ACTIVE]


@dataclass(frozen=True, slots=True)
class TaskRecord:
    """One task, as stored."""

    task_id: str
    tenant: str
    principal: str | None
    status: str
    status_message: str | None
    created_at: datetime
    last_updated_at: datetime
    ttl_ms: int
    poll_interval_ms: int
    expires_at: datetime
    attempt: int
    generation: str
    lease_seconds: int
    lease_expires_at: datetime | None
    request: Any
    result: Any
    error: Any
    input_requests: Any
    input_responses: Any
    cancel_requested_at: datetime | None
    settled_at: datetime | None

    @classmethod
    def from_row(cls, row: Mapping[Any, Any]) -> TaskRecord:
        """A `tasks` row."""
        return cls(**{f.name: row[f.name] for f in fields(cls)})

    @property
    def state(self) -> TaskStatus:
        """The status as the domain's enum."""
        return TaskStatus(self.status)

    def lapsed(self, now: datetime) -> bool:
        """Whether the worker's lease ran out while the task was still active."""
        return (
            self.status in _ACTIVE
            and self.lease_expires_at is not None
            and self.lease_expires_at <= now
        )


@dataclass(frozen=True, slots=True)
class NewTask:
    """What a creator asks for."""

    tenant: str
    principal: str | None
    ttl_ms: int
    poll_interval_ms: int
    lease_seconds: int
    request: Any
    producer: str | None
    max_events: int


def find(
    conn: Connection, task_id: str, now: datetime, *, tenant: str | None, lock: bool = False
) -> TaskRecord | None:
    """The task (within `tenant`, if given) unless it expired; `lock` holds its row."""
    query = select(tasks).where(tasks.c.task_id == task_id, tasks.c.expires_at > now)
    if tenant is not None:
        query = query.where(tasks.c.tenant == tenant)
    if lock:
        query = query.with_for_update()
    row = conn.execute(query).one_or_none()
    return None if row is None else TaskRecord.from_row(row._mapping)


def create(conn: Connection, new: NewTask, now: datetime) -> tuple[TaskRecord, GenerationRecord]:
    """Store a `working` task and open its first attempt's generation, without a read: the
    task's stream is new, so its generation is epoch 1 and the rows are known in advance."""
    rows = _first_rows(new_token(), new_token(), new, now)
    stored = dialect_of(conn).create_task(conn, rows)
    stream = {"stream_id": rows.stream["stream_id"], "tenant": new.tenant}
    gen = GenerationRecord.from_row({**stored.generation, **stream})
    touched(conn, gen.stream_pk)
    generations.remember(conn, gen)
    return TaskRecord.from_row(stored.task), gen


def _first_rows(task_id: str, token: str, new: NewTask, now: datetime) -> NewTaskRows:
    lease = now + timedelta(seconds=new.lease_seconds)
    # The events outlive the task: the generation's TTL counts from its last write, which
    # is never before the task's creation.
    ttl_seconds = ceil(new.ttl_ms / 1000)
    stream = {
        "tenant": new.tenant,
        "stream_id": task_stream_id(task_id),
        "last_epoch": 1,
        "created_at": now,
        "updated_at": now,
    }
    generation = dict.fromkeys(GENERATION_COLUMNS) | {
        "token": token,
        "epoch": 1,
        "reason": "initial",
        "producer": new.producer,
        "head_seq": 1,
        "tail_seq": 0,
        "retained_events": 0,
        "retained_bytes": 0,
        "terminal": False,
        "max_events": new.max_events,
        "ttl_seconds": ttl_seconds,
        "created_at": now,
        "last_append_at": now,
        "expires_at": now + timedelta(seconds=ttl_seconds),
        "lease_seconds": new.lease_seconds,
        "lease_expires_at": lease,
        "pipeline": 0,
    }
    task = {
        "task_id": task_id,
        "tenant": new.tenant,
        "principal": new.principal,
        "status": TaskStatus.WORKING.value,
        "created_at": now,
        "last_updated_at": now,
        "ttl_ms": new.ttl_ms,
        "poll_interval_ms": new.poll_interval_ms,
        "expires_at": now + timedelta(milliseconds=new.ttl_ms),
        "attempt": 1,
        "generation": token,
        "lease_seconds": new.lease_seconds,
        "lease_expires_at": lease,
        "request": new.request,
    }
    return NewTaskRows(stream, generation, task)


def open_attempt(
    conn: Connection,
    task: TaskRecord,
    *,
    lease_seconds: int,
    producer: str | None,
    max_events: int,
    now: datetime,
) -> tuple[TaskRecord, GenerationRecord]:
    """A new attempt: its generation supersedes the old one (fencing the old worker's
    appends) in the transaction that moves the task's `attempt` (fencing its writes)."""
    lease = now + timedelta(seconds=lease_seconds)
    new = NewTask(task.tenant, None, task.ttl_ms, 0, lease_seconds, None, producer, max_events)
    gen = _open_generation(conn, task.task_id, new, "failover", producer, lease, now)
    values = {
        "attempt": gen.epoch,
        "generation": gen.token,
        "lease_seconds": lease_seconds,
        "lease_expires_at": lease,
        "last_updated_at": now,
    }
    return change(conn, task, values), gen


def _open_generation(
    conn: Connection,
    task_id: str,
    new: NewTask,
    reason: str,
    producer: str | None,
    lease: datetime,
    now: datetime,
) -> GenerationRecord:
    # The events outlive the task: the generation's TTL counts from its last write, which
    # is never before the task's creation.
    ttl_seconds = ceil(new.ttl_ms / 1000)
    request = NewGeneration(reason, producer, new.max_events, ttl_seconds)
    gen = generations.open_generation(
        conn, StreamKey(new.tenant, task_stream_id(task_id)), request, now
    )
    conn.execute(
        update(generations_table)
        .where(generations_table.c.id == gen.pk)
        .values(lease_seconds=new.lease_seconds, lease_expires_at=lease)
    )
    return gen


def change(conn: Connection, task: TaskRecord, values: Mapping[str, Any]) -> TaskRecord:
    """Write `values` into the task's row (its caller holds the row); the row as it is now
    (written and returned by one `UPDATE … RETURNING`, or read when there is nothing to write)."""
    mine = tasks.c.task_id == task.task_id
    if values:
        query: Any = update(tasks).where(mine).values(**values).returning(*tasks.c)
    else:
        query = select(tasks).where(mine)
    return TaskRecord.from_row(conn.execute(query).one()._mapping)


def renew(conn: Connection, task: TaskRecord, now: datetime) -> datetime:
    """Renew the worker lease of the task's current attempt, and of its generation."""
    lease = now + timedelta(seconds=task.lease_seconds)
    conn.execute(
        update(tasks).where(tasks.c.task_id == task.task_id).values(lease_expires_at=lease)
    )
    conn.execute(
        update(generations_table)
        .where(generations_table.c.token == task.generation)
        .values(lease_expires_at=lease)
    )
    return lease


def finish_events(conn: Connection, task: TaskRecord, now: datetime) -> None:
    """Make the current attempt's generation terminal at its tail: the task settled, so its
    live readers get `end` and a late append of its worker is refused `terminal`.

    One guarded UPDATE: a generation already terminal (or purged) is left as it is."""
    g = generations_table.c
    finished = conn.execute(
        update(generations_table)
        .where(g.token == task.generation, g.terminal.is_(False))
        .values(terminal=True, terminal_seq=g.tail_seq, terminal_at=now)
        .returning(g.stream_pk)
    ).scalar_one_or_none()
    if finished is not None:
        touched(conn, finished)


def settle_lapsed(conn: Connection, task_id: str, now: datetime) -> TaskRecord | None:
    """Fail the task `worker_lost` if its lease ran out while it was active: one guarded
    UPDATE, so that of several replicas noticing at once exactly one records it (the others
    match no row). Returns the task as settled by this call, or None."""
    result = conn.execute(
        update(tasks)
        .where(tasks.c.task_id == task_id, _lapsed(now), tasks.c.expires_at > now)
        .values(
            status=TaskStatus.FAILED.value,
            status_message="the task's worker was lost",
            error=worker_lost_error(),
            lease_expires_at=None,
            last_updated_at=now,
            settled_at=now,
        )
    )
    if result.rowcount != 1:
        return None
    task = find(conn, task_id, now, tenant=None)
    assert task is not None, "a task settled in this transaction is found in it"
    finish_events(conn, task, now)
    return task


def _lapsed(now: datetime) -> ColumnElement[bool]:
    return tasks.c.status.in_(_ACTIVE) & (tasks.c.lease_expires_at <= now)


def lapsed(conn: Connection, now: datetime, limit: int) -> list[str]:
    """Up to `limit` active, unexpired tasks whose worker lease ran out."""
    query = (
        select(tasks.c.task_id)
        .where(_lapsed(now), tasks.c.expires_at > now)
        .order_by(tasks.c.lease_expires_at)
        .limit(limit)
    )
    return list(conn.execute(query).scalars())


def delete_expired(conn: Connection, now: datetime, limit: int) -> int:
    """Delete up to `limit` tasks past their TTL (their events expire with their generations)."""
    query = select(tasks.c.task_id).where(tasks.c.expires_at <= now).limit(limit)
    ids = list(conn.execute(query).scalars())
    if ids:
        conn.execute(delete(tasks).where(tasks.c.task_id.in_(ids), tasks.c.expires_at <= now))
    return len(ids)


def listing(
    conn: Connection,
    now: datetime,
    *,
    status: str | None = None,
    tenant: str | None = None,
    after: tuple[datetime, str] | None = None,
    limit: int = 100,
) -> list[TaskRecord]:
    """Unexpired tasks, newest first (by creation, then id), for operators."""
    query = (
        select(tasks)
        .where(tasks.c.expires_at > now)
        .order_by(tasks.c.created_at.desc(), tasks.c.task_id.desc())
        .limit(limit)
    )
    if status is not None:
        query = query.where(tasks.c.status == status)
    if tenant is not None:
        query = query.where(tasks.c.tenant == tenant)
    if after is not None:
        query = query.where(tuple_(tasks.c.created_at, tasks.c.task_id) < tuple_(*after))
    return [TaskRecord.from_row(row._mapping) for row in conn.execute(query)]


def counts(conn: Connection, now: datetime) -> dict[str, int]:
    """How many unexpired tasks there are in each status."""
    query = (
        select(tasks.c.status, func.count())
        .where(tasks.c.expires_at > now)
        .group_by(tasks.c.status)
    )
    return {row[0]: int(row[1]) for row in conn.execute(query)}
