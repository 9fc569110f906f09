"""A task's creation in storage: the task, its stream and its first generation written
together without reading anything back, as a later read finds them, on both databases; on
PostgreSQL in one statement between BEGIN and COMMIT."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlalchemy import event

from app.domain.ids import StreamKey
from app.domain.tasks import task_stream_id
from app.settings import Settings
from app.storage import generations
from app.storage import tasks as store
from app.storage.database import Database
from app.storage.tasks import NewTask

NOW = datetime(2026, 12, 3, 12, 0, 0, 500_000, tzinfo=UTC)
NEW = NewTask(
    tenant="t",
    principal="alice",
    ttl_ms=90_500,
    poll_interval_ms=250,
    lease_seconds=20,
    request={"method": "tools/call", "params": {"name": "greet"}},
    producer="gateway",
    max_events=100,
)


async def test_a_created_task_is_what_a_read_finds(settings: Settings) -> None:
    db = Database(settings)
    statements: list[str] = []
    for engine in db.sync_engines:
        event.listen(engine, "before_cursor_execute", lambda *a: statements.append(a[2]))
    try:
        task, gen = await db.write(lambda c: store.create(c, NEW, NOW))
        written = [s.split()[0].upper() for s in statements if not s.startswith("BEGIN")]
        found = await db.read(lambda c: store.find(c, task.task_id, NOW, tenant="t"))
        stored_gen = await db.read(lambda c: generations.get(c, task.generation, tenant="t"))
        opened = await db.read(lambda c: generations.stream(c, StreamKey("t", gen.stream_id)))
        known = await db.read(lambda c: generations.remembered(c, gen.token, "t"))
    finally:
        await db.close()
    assert found == task
    assert stored_gen == gen
    assert (task.status, task.attempt, task.generation, task.principal) == (
        "working",
        1,
        gen.token,
        "alice",
    )
    assert task.expires_at == NOW + timedelta(milliseconds=90_500)
    assert task.lease_expires_at == NOW + timedelta(seconds=20)
    assert (task.result, task.error, task.settled_at) == (None, None, None)
    assert task.request == NEW.request
    assert (gen.epoch, gen.reason, gen.supersedes, gen.stream_id) == (
        1,
        "initial",
        None,
        task_stream_id(task.task_id),
    )
    assert (gen.head_seq, gen.tail_seq, gen.terminal, gen.max_events) == (1, 0, False, 100)
    assert (gen.ttl_seconds, gen.lease_seconds, gen.lease_expires_at) == (
        91,
        20,
        NOW + timedelta(seconds=20),
    )
    assert gen.expires_at == NOW + timedelta(seconds=91)
    assert opened is not None
    assert opened.generations == 1
    assert opened.current == gen
    assert known is not None
    assert known.pk == gen.pk
    if settings.database_url.startswith("postgresql"):
        assert written == ["WITH"]  # the NOTIFY is inside it
    else:
        assert written.count("INSERT") == 3
        assert "SELECT" not in written
