"""A resume costs a few indexed lookups and one range read, however much is stored.

The test records every statement a resume sends, checks that their number does not grow
with the stored history, and asks each database for its plan: no statement may scan a
table (SQLite: no `SCAN`; PostgreSQL: no `Seq Scan`, after `ANALYZE` on a filled table).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
from fastapi import FastAPI
from sqlalchemy import event, insert
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncEngine

from app.settings import Settings
from app.storage.schema import events, generations, streams
from tests.support.app import started_app, state_of
from tests.support.writer_calls import append, open_generation, resume

Statement = tuple[str, Any]


async def _fill(engine: AsyncEngine, streams_count: int, per_generation: int) -> None:
    """Bulk history straight through the schema: many streams, two generations each."""
    now = datetime.now(UTC)
    base = 1_000_000  # ids far from the ones the API hands out
    stream_rows = [
        {
            "id": base + s,
            "tenant": "default",
            "stream_id": f"fill-{s}",
            "last_epoch": 2,
            "created_at": now,
            "updated_at": now,
        }
        for s in range(streams_count)
    ]
    generation_rows = [
        {
            "id": base + 2 * s + e,
            "token": f"fill{s}x{e}",
            "stream_pk": base + s,
            "epoch": e + 1,
            "reason": "initial",
            "producer": None,
            "head_seq": 1,
            "tail_seq": per_generation,
            "retained_events": per_generation,
            "retained_bytes": per_generation,
            "terminal": False,
            "terminal_seq": None,
            "max_events": per_generation,
            "ttl_seconds": 60,
            "supersedes": None,
            "created_at": now,
            "last_append_at": now,
            "terminal_at": None,
            "expires_at": now + timedelta(seconds=60),
            "expired_at": None,
            "superseded_at": now if e == 0 else None,
        }
        for s in range(streams_count)
        for e in (0, 1)
    ]
    event_rows = [
        {"generation_pk": g["id"], "seq": q, "event": None, "data": "x", "nbytes": 1}
        for g in generation_rows
        for q in range(1, per_generation + 1)
    ]
    async with engine.begin() as conn:
        await conn.execute(insert(streams), stream_rows)
        await conn.execute(insert(generations), generation_rows)
        await conn.execute(insert(events), event_rows)


@contextmanager
def _recorded(app: FastAPI) -> Iterator[list[Statement]]:
    seen: list[Statement] = []
    engine = state_of(app).container.database.engine.sync_engine

    def capture(_conn: Connection, _cursor: Any, statement: str, params: Any, *_: Any) -> None:
        if statement.lstrip().upper().startswith("SELECT"):
            seen.append((statement, params))

    event.listen(engine, "before_cursor_execute", capture)
    try:
        yield seen
    finally:
        event.remove(engine, "before_cursor_execute", capture)


# How each database explains a statement, and what it runs first to plan as it would on a
# filled table (PostgreSQL plans from statistics that ANALYZE gathers).
_EXPLAIN = {"sqlite": ("EXPLAIN QUERY PLAN ", ()), "postgresql": ("EXPLAIN ", ("ANALYZE",))}


async def _plans(app: FastAPI, backend: str, statements: list[Statement]) -> list[str]:
    engine = state_of(app).container.database.engine
    prefix, first = _EXPLAIN[backend]
    plans = []
    async with engine.connect() as conn:
        for setup in first:
            await conn.exec_driver_sql(setup)
        for statement, params in statements:
            rows = (await conn.exec_driver_sql(prefix + statement, tuple(params))).all()
            plans.append("\n".join(str(row[-1]) for row in rows))
    return plans


async def _statements_of_resumes(client: httpx.AsyncClient, app: FastAPI) -> list[Statement]:
    a = (await open_generation(client, "probe"))["generation"]
    await append(client, a, [str(i) for i in range(50)])
    b = (await open_generation(client, "probe"))["generation"]
    await append(client, b, ["b"])
    with _recorded(app) as seen:
        assert (await resume(client, f"{b}:40", "probe"))["reason"] == "beyond_tail"
        assert (await resume(client, f"{b}:0", "probe"))["reason"] == "ok"
        assert (await resume(client, f"{a}:45", "probe"))["reason"] == "superseded"
    return seen


async def test_resume_statements_do_not_grow_and_use_indexes(
    settings: Settings, backend: str
) -> None:
    async with started_app(settings) as (app, client):
        small = await _statements_of_resumes(client, app)
        await _fill(state_of(app).container.database.engine, streams_count=5000, per_generation=10)
        large = await _statements_of_resumes(client, app)
        # resume: generation lookup + one range read; superseded: + current lookup + range.
        assert len(small) == len(large) <= 7
        for plan in await _plans(app, backend, large):
            assert "SCAN " not in plan.replace("SCAN CONSTANT", ""), plan
            assert "Seq Scan" not in plan, plan
