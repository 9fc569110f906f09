"""Reading a generation row: the columns, the query by token, the record it becomes."""

from __future__ import annotations

from typing import Any

from sqlalchemy import RowMapping, Select, select

from app.storage.records import GenerationRecord
from app.storage.schema import generations, streams

GENERATION_COLUMNS = (
    generations,
    streams.c.stream_id,
    streams.c.tenant,
)


def select_generation(tenant: str, *, token: str) -> Select[Any]:
    """The generation with `token`, if its stream belongs to `tenant`."""
    return (
        select(*GENERATION_COLUMNS)
        .join(streams, streams.c.id == generations.c.stream_pk)
        .where(generations.c.token == token, streams.c.tenant == tenant)
    )


def to_generation(row: RowMapping) -> GenerationRecord:
    """A generation row (joined with its stream's id and tenant) as a record."""
    return GenerationRecord(
        pk=row["id"],
        token=row["token"],
        stream_pk=row["stream_pk"],
        stream_id=row["stream_id"],
        tenant=row["tenant"],
        epoch=row["epoch"],
        reason=row["reason"],
        producer=row["producer"],
        head_seq=row["head_seq"],
        tail_seq=row["tail_seq"],
        retained_events=row["retained_events"],
        retained_bytes=row["retained_bytes"],
        terminal=row["terminal"],
        terminal_seq=row["terminal_seq"],
        max_events=row["max_events"],
        ttl_seconds=row["ttl_seconds"],
        supersedes=row["supersedes"],
        created_at=row["created_at"],
        last_append_at=row["last_append_at"],
        expires_at=row["expires_at"],
        terminal_at=row["terminal_at"],
        superseded_at=row["superseded_at"],
        expired_at=row["expired_at"],
    )
