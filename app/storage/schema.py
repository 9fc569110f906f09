"""The tables. Alembic migrations are the authority; a test proves these agree with them."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Column,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
    UniqueConstraint,
)
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator

metadata = MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
        "uq": "uq_%(table_name)s_%(column_0_N_name)s",
        "ck": "ck_%(table_name)s_%(constraint_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    }
)


class UtcDateTime(TypeDecorator[datetime]):
    """Timezone-aware UTC on both databases (SQLite stores no offset; we put it back)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is not None and value.tzinfo is None:
            raise ValueError("naive datetime")
        return None if value is None else value.astimezone(UTC)

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        stamp: datetime = value
        return stamp.replace(tzinfo=UTC) if stamp.tzinfo is None else stamp.astimezone(UTC)


# SQLite only auto-increments an INTEGER PRIMARY KEY; PostgreSQL gets a 64-bit identity.
_Id = BigInteger().with_variant(Integer(), "sqlite")

streams = Table(
    "streams",
    metadata,
    Column("id", _Id, primary_key=True, autoincrement=True),
    Column("tenant", String(64), nullable=False),
    Column("stream_id", String(256), nullable=False),
    Column("last_epoch", Integer, nullable=False),
    Column("created_at", UtcDateTime(), nullable=False),
    Column("updated_at", UtcDateTime(), nullable=False),
    UniqueConstraint("tenant", "stream_id"),
)

generations = Table(
    "generations",
    metadata,
    Column("id", _Id, primary_key=True, autoincrement=True),
    Column("token", String(64), nullable=False),
    Column("stream_pk", _Id, ForeignKey("streams.id", ondelete="CASCADE"), nullable=False),
    Column("epoch", Integer, nullable=False),
    Column("reason", String(16), nullable=False),
    Column("producer", String(256), nullable=True),
    Column("head_seq", BigInteger, nullable=False),
    Column("tail_seq", BigInteger, nullable=False),
    Column("retained_events", BigInteger, nullable=False),
    Column("retained_bytes", BigInteger, nullable=False),
    Column("terminal", Boolean, nullable=False),
    Column("terminal_seq", BigInteger, nullable=True),
    Column("max_events", Integer, nullable=False),
    Column("ttl_seconds", Integer, nullable=False),
    Column("supersedes", String(64), nullable=True),
    Column("created_at", UtcDateTime(), nullable=False),
    Column("last_append_at", UtcDateTime(), nullable=False),
    # last write (open, append, terminal) + ttl_seconds: what the retention worker scans.
    Column("expires_at", UtcDateTime(), nullable=False),
    Column("terminal_at", UtcDateTime(), nullable=True),
    Column("superseded_at", UtcDateTime(), nullable=True),
    Column("expired_at", UtcDateTime(), nullable=True),
    # The writer lease: renewed by every append and by the lease call; a generation that is
    # neither terminal nor superseded whose lease ran out is abandoned (abandoned_at set
    # once, by whichever replica notices first). Null lease_expires_at: opened before
    # leases existed, never abandoned.
    Column("lease_seconds", Integer, nullable=False, server_default="30"),
    Column("lease_expires_at", UtcDateTime(), nullable=True),
    # How many events past its acknowledged tail the writer may have shown a client.
    Column("pipeline", Integer, nullable=False, server_default="0"),
    Column("abandoned_at", UtcDateTime(), nullable=True),
    UniqueConstraint("token"),
    UniqueConstraint("stream_pk", "epoch"),
)

events = Table(
    "events",
    metadata,
    Column(
        "generation_pk",
        _Id,
        ForeignKey("generations.id", ondelete="CASCADE"),
        nullable=False,
    ),
    Column("seq", BigInteger, nullable=False),
    Column("event", String(256), nullable=True),
    Column("data", Text, nullable=False),
    Column("nbytes", Integer, nullable=False),
    PrimaryKeyConstraint("generation_pk", "seq"),
    # Events are read and evicted by (generation, seq) ranges only: cluster them on it.
    sqlite_with_rowid=False,
)

Index("ix_generations_expires_at", generations.c.expires_at)
# The lease sweep finds lapsed leases by their expiry.
Index("ix_generations_lease_expires_at", generations.c.lease_expires_at)
# The retention worker deletes tombstones by their age.
Index("ix_generations_expired_at", generations.c.expired_at)
# The admin listing pages streams by id across tenants and filters by prefix.
Index("ix_streams_stream_id", streams.c.stream_id)

# The decision audit log: one row per resume decision, bounded by count and age (the
# retention worker trims it), so it is never the history of record, only recent evidence.
decisions = Table(
    "decisions",
    metadata,
    Column("id", _Id, primary_key=True, autoincrement=True),
    Column("decided_at", UtcDateTime(), nullable=False),
    Column("tenant", String(64), nullable=False),
    Column("stream_id", String(256), nullable=True),
    Column("last_event_id", String(300), nullable=False),
    Column("verdict", String(16), nullable=False),
    Column("reason", String(32), nullable=False),
    Column("generation", String(64), nullable=True),
    Column("events", Integer, nullable=False),
)

Index("ix_decisions_decided_at", decisions.c.decided_at)
Index("ix_decisions_stream_id", decisions.c.stream_id)

# Values every replica of one database must share, created once by whichever replica needs
# them first (the gateway's stream-naming key when EVENTLOG_GATEWAY_SECRET is not set).
secrets = Table(
    "secrets",
    metadata,
    Column("name", String(64), primary_key=True),
    Column("value", Text, nullable=False),
    Column("created_at", UtcDateTime(), nullable=False),
)

# Durable MCP tasks (docs/tasks.md). A task's events are the log stream `task:<task_id>`,
# one generation per attempt; `attempt` is that generation's epoch and `generation` its
# token, both changed in the one transaction that opens it. `lease_expires_at` is the
# worker lease of the current attempt (null once the task is terminal): a task that is
# neither terminal nor expired whose lease ran out is settled `failed` / `worker_lost` by
# one guarded UPDATE of whichever replica notices first.
tasks = Table(
    "tasks",
    metadata,
    Column("task_id", String(64), primary_key=True),
    Column("tenant", String(64), nullable=False),
    Column("principal", String(256), nullable=True),
    Column("status", String(16), nullable=False),
    Column("status_message", Text, nullable=True),
    Column("created_at", UtcDateTime(), nullable=False),
    Column("last_updated_at", UtcDateTime(), nullable=False),
    Column("ttl_ms", BigInteger, nullable=False),
    Column("poll_interval_ms", Integer, nullable=False),
    # created_at + ttl_ms: from then on the task is unknown_task, and retention removes it.
    Column("expires_at", UtcDateTime(), nullable=False),
    Column("attempt", Integer, nullable=False),
    Column("generation", String(64), nullable=False),
    Column("lease_seconds", Integer, nullable=False),
    Column("lease_expires_at", UtcDateTime(), nullable=True),
    Column("request", JSON(none_as_null=True), nullable=True),
    Column("result", JSON(none_as_null=True), nullable=True),
    Column("error", JSON(none_as_null=True), nullable=True),
    Column("input_requests", JSON(none_as_null=True), nullable=True),
    Column("input_responses", JSON(none_as_null=True), nullable=True),
    Column("cancel_requested_at", UtcDateTime(), nullable=True),
    Column("settled_at", UtcDateTime(), nullable=True),
)

# The lease sweep finds lapsed leases, retention expired tasks, the admin list and the
# metrics filter and count by status.
Index("ix_tasks_lease_expires_at", tasks.c.lease_expires_at)
Index("ix_tasks_expires_at", tasks.c.expires_at)
Index("ix_tasks_status", tasks.c.status)
