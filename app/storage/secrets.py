"""The `secrets` table: values every replica of one database shares, created once.

`shared(conn, name, candidate, now)` stores `candidate` under `name` unless a value is
there already, and answers the value that is there: the first writer's. Inside one write
transaction (READ COMMITTED on PostgreSQL, the one write lock on SQLite): a racing insert
waits on the primary key until the other commits, then does nothing, and the SELECT after
it sees the committed row — so every replica that asks, at once or later, gets one value.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select
from sqlalchemy.engine import Connection

from app.storage.dialect import dialect_of
from app.storage.schema import secrets as secrets_table


def shared(conn: Connection, name: str, candidate: str, now: datetime) -> str:
    """The value of `name`, inserting `candidate` first if there is none."""
    conn.execute(
        dialect_of(conn)
        .insert_ignore(secrets_table, (secrets_table.c.name,))
        .values(name=name, value=candidate, created_at=now)
    )
    value: str = conn.execute(
        select(secrets_table.c.value).where(secrets_table.c.name == name)
    ).scalar_one()
    return value
