"""The decision audit log's table: record a batch, list recent ones, count, trim.

Functions over a synchronous `Connection`, inside the caller's transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import datetime

from sqlalchemy import ColumnElement, and_, delete, func, insert, or_, select
from sqlalchemy.engine import Connection

from app.storage.records import DecisionEntry
from app.storage.schema import decisions

MAX_LAST_EVENT_ID = 300  # a longer claim is malformed anyway; its first 300 chars are kept


@dataclass(frozen=True, slots=True)
class DecisionFilter:
    """Which recorded decisions to list; None matches any."""

    stream_id: str | None = None
    verdict: str | None = None
    reason: str | None = None
    tenant: str | None = None


def record(conn: Connection, entries: Sequence[DecisionEntry]) -> None:
    """Insert a batch of decisions."""
    if entries:
        conn.execute(insert(decisions), [asdict(entry) for entry in entries])


def recent(conn: Connection, where: DecisionFilter, limit: int) -> list[DecisionEntry]:
    """The newest decisions matching `where`, newest first."""
    query = select(decisions).order_by(decisions.c.id.desc()).limit(limit)
    for column, value in (
        (decisions.c.stream_id, where.stream_id),
        (decisions.c.verdict, where.verdict),
        (decisions.c.reason, where.reason),
        (decisions.c.tenant, where.tenant),
    ):
        if value is not None:
            query = query.where(column == value)
    return [
        DecisionEntry(**{k: v for k, v in row._mapping.items() if k != "id"})
        for row in conn.execute(query)
    ]


def verdict_counts(conn: Connection) -> dict[tuple[str, str], int]:
    """How many recorded decisions each (verdict, reason) has."""
    query = select(decisions.c.verdict, decisions.c.reason, func.count()).group_by(
        decisions.c.verdict, decisions.c.reason
    )
    return {(row[0], row[1]): int(row[2]) for row in conn.execute(query)}


def trim(conn: Connection, *, older_than: datetime, keep: int, limit: int) -> int:
    """Delete up to `limit` decisions older than `older_than` or, within each tenant,
    beyond that tenant's newest `keep`, oldest first.

    Per tenant, so that one tenant's resumes never push another's entries out: the log
    holds at most `keep` entries per tenant, and tenants are as many as the configured keys
    name.
    """
    over: list[ColumnElement[bool]] = [decisions.c.decided_at < older_than]
    crowded = select(decisions.c.tenant).group_by(decisions.c.tenant).having(func.count() > keep)
    for tenant in conn.execute(crowded).scalars():
        # The newest entry of the tenant's that is beyond its `keep` newest: it and every
        # older one of the tenant's go.
        last_doomed = conn.execute(
            select(decisions.c.id)
            .where(decisions.c.tenant == tenant)
            .order_by(decisions.c.id.desc())
            .offset(keep)
            .limit(1)
        ).scalar_one()
        over.append(and_(decisions.c.tenant == tenant, decisions.c.id <= last_doomed))
    doomed = select(decisions.c.id).where(or_(*over)).order_by(decisions.c.id).limit(limit)
    ids = conn.execute(doomed).scalars().all()
    if ids:
        conn.execute(delete(decisions).where(decisions.c.id.in_(ids)))
    return len(ids)
