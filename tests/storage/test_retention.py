"""The retention worker on both databases: TTL expiry, tombstones, the per-stream cap, the
audit log's bounds, the advisory lock, and a race with live appends."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from app.domain.outcomes import RetentionPass
from app.service.clock import utc_now
from app.service.retention import RetentionWorker
from app.settings import Settings
from app.storage.retention import RETENTION_LOCK_KEY
from tests.support.app import make_settings, state_of
from tests.support.operators import KeyedApp, ok, running_app


@pytest.fixture
def settings(database_url: str) -> Settings:
    return make_settings(database_url, retention_interval_seconds=0, tombstone_ttl_seconds=60)


@pytest.fixture
async def running(settings: Settings) -> AsyncIterator[KeyedApp]:
    async with running_app(settings) as app:
        yield app


@pytest.fixture
def http(running: KeyedApp) -> httpx.AsyncClient:
    return running.as_key(None)


def worker_at(running: KeyedApp, later: float, **overrides: Any) -> RetentionWorker:
    """A worker whose clock runs `later` seconds ahead of the real one."""
    container = state_of(running.app).container
    settings = container.settings.model_copy(update=overrides)
    return RetentionWorker(
        container.database, settings.retention, clock=lambda: utc_now() + timedelta(seconds=later)
    )


async def open_with(http: httpx.AsyncClient, stream: str, count: int, **options: Any) -> str:
    gen = await ok(await http.post(f"/v1/streams/{stream}/generations", json=options or None), 201)
    token: str = gen["generation"]
    if count:
        events = [{"data": f"{stream}-{i}"} for i in range(1, count + 1)]
        await ok(await http.post(f"/v1/generations/{token}/events", json={"events": events}), 201)
    return token


async def verdict(http: httpx.AsyncClient, stream: str, claim: str) -> tuple[str, str]:
    body = await ok(await http.post(f"/v1/streams/{stream}/resume", json={"last_event_id": claim}))
    return body["verdict"], body["reason"]


async def test_ttl_expiry_purges_events_and_keeps_a_tombstone(
    running: KeyedApp, http: httpx.AsyncClient
) -> None:
    short = await open_with(http, "short", 5, ttl_seconds=1)
    long = await open_with(http, "long", 2, ttl_seconds=3600)
    report = await worker_at(running, 5).run_once()
    assert (report.ran, report.expired, report.purged_events) == (True, 1, 5)
    assert await verdict(http, "short", f"{short}:2") == ("reset", "expired")
    gone = await http.get(f"/v1/generations/{short}/events")
    assert (gone.status_code, gone.json()["code"]) == (410, "expired")
    tomb = await ok(await http.get(f"/admin/v1/generations/{short}"))
    assert tomb["expired"] is True
    assert (tomb["head_seq"], tomb["tail_seq"], tomb["retained_events"]) == (6, 5, 0)
    assert tomb["retained_bytes"] == 0
    assert await verdict(http, "long", f"{long}:1") == ("resume", "ok")
    again = await worker_at(running, 5).run_once()
    assert (again.expired, again.purged_events) == (0, 0)


async def test_an_expired_generation_refuses_appends(
    running: KeyedApp, http: httpx.AsyncClient
) -> None:
    # An event stored into a tombstone could never be delivered (every resume is reset),
    # so acknowledging it would be losing it: 409 `expired`, and nothing is stored.
    token = await open_with(http, "lapsed", 2, ttl_seconds=1)
    await worker_at(running, 5).run_once()
    url = f"/v1/generations/{token}/events"
    for body in ({"events": [{"data": "late"}]}, {"events": [{"data": "late"}], "first_seq": 3}):
        refused = await http.post(url, json=body)
        assert (refused.status_code, refused.json()["code"]) == (409, "expired")
    tomb = await ok(await http.get(f"/admin/v1/generations/{token}"))
    assert (tomb["tail_seq"], tomb["retained_events"]) == (2, 0)


async def test_tombstones_and_empty_streams_go_after_their_own_ttl(
    running: KeyedApp, http: httpx.AsyncClient
) -> None:
    token = await open_with(http, "s1", 3, ttl_seconds=1)
    await open_with(http, "kept", 1)
    await worker_at(running, 5).run_once()
    # 30 s after expiry: the tombstone (TTL 60 s) still says `expired`, not a spoof.
    assert (await worker_at(running, 35).run_once()).deleted_tombstones == 0
    assert await verdict(http, "s1", f"{token}:1") == ("reset", "expired")
    report = await worker_at(running, 70).run_once()
    assert (report.deleted_tombstones, report.deleted_streams) == (1, 1)
    assert await verdict(http, "s1", f"{token}:1") == ("invalid", "unknown_generation")
    assert (await http.get("/admin/v1/streams/s1")).status_code == 404
    assert (await http.get("/admin/v1/streams/kept")).status_code == 200


async def test_a_stream_keeps_at_most_its_newest_generations(
    running: KeyedApp, http: httpx.AsyncClient
) -> None:
    tokens = [await open_with(http, "retried", 2) for _ in range(5)]
    report = await worker_at(running, 0, max_generations_per_stream=2).run_once()
    assert (report.capped, report.purged_events) == (3, 6)
    detail = await ok(await http.get("/admin/v1/streams/retried"))
    assert [g["expired"] for g in detail["generations"]] == [True, True, True, False, False]
    # An old token is still known: a reset, never `unknown_generation`.
    assert await verdict(http, "retried", f"{tokens[0]}:2") == ("reset", "superseded")
    assert await verdict(http, "retried", f"{tokens[-1]}:2") == ("resume", "ok")


async def test_the_decision_log_is_bounded_by_count_and_age(
    running: KeyedApp, http: httpx.AsyncClient
) -> None:
    token = await open_with(http, "s1", 1)
    for _ in range(5):
        await verdict(http, "s1", f"{token}:1")
    assert len((await ok(await http.get("/admin/v1/decisions")))["decisions"]) == 5
    trimmed = await worker_at(running, 0, decision_log_max_rows=3).run_once()
    assert trimmed.trimmed_decisions == 2
    assert len((await ok(await http.get("/admin/v1/decisions")))["decisions"]) == 3
    aged = await worker_at(running, 120, decision_log_max_age_seconds=60).run_once()
    assert aged.trimmed_decisions == 3
    assert (await ok(await http.get("/admin/v1/decisions")))["decisions"] == []


@pytest.mark.parametrize("backend", ["postgresql"])
async def test_one_pass_at_a_time_across_replicas(
    running: KeyedApp, http: httpx.AsyncClient, database_url: str
) -> None:
    await open_with(http, "s1", 1, ttl_seconds=1)
    other_replica = create_async_engine(database_url)
    try:
        async with other_replica.connect() as conn:
            held = await conn.execute(
                text("SELECT pg_try_advisory_lock(:k)"), {"k": RETENTION_LOCK_KEY}
            )
            assert held.scalar_one() is True
            assert await worker_at(running, 5).run_once() == RetentionPass(ran=False)
            await conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": RETENTION_LOCK_KEY})
        report = await worker_at(running, 5).run_once()
        assert (report.ran, report.expired) == (True, 1)
    finally:
        await other_replica.dispose()


async def test_retention_racing_live_appends_loses_no_acknowledged_event(
    running: KeyedApp, http: httpx.AsyncClient
) -> None:
    # Idle generations (TTL 1 s) that the worker purges while a live one (TTL 2 s) is
    # appended to without pause; the worker's clock runs 1 s ahead, so only a stall of a
    # whole second would make the live generation look expired.
    idle = [await open_with(http, f"idle.{i}", 300, ttl_seconds=1) for i in range(8)]
    live = await open_with(http, "live", 0, ttl_seconds=2)
    acknowledged: list[tuple[str, str]] = []
    stop_at = time.monotonic() + 1.5

    async def append_forever() -> None:
        n = 0
        while time.monotonic() < stop_at:
            data = [f"live-{n + i}" for i in range(3)]
            body = await ok(
                await http.post(
                    f"/v1/generations/{live}/events",
                    json={"events": [{"data": d} for d in data]},
                ),
                201,
            )
            acknowledged.extend(zip(body["event_ids"], data, strict=True))
            n += 3

    async def collect_forever() -> list[RetentionPass]:
        reports = []
        while time.monotonic() < stop_at:
            reports.append(await worker_at(running, 1.0).run_once())
        return reports

    _, reports = await asyncio.gather(append_forever(), collect_forever())
    assert sum(r.expired for r in reports) == len(idle)
    assert sum(r.purged_events for r in reports) == 300 * len(idle)
    stored: list[tuple[str, str]] = []
    after = 0
    while True:
        page = await ok(await http.get(f"/v1/generations/{live}/events", params={"after": after}))
        stored += [(e["id"], e["data"]) for e in page["events"]]
        if page["next_after"] is None:
            break
        after = page["next_after"]
    assert len(acknowledged) > 30
    assert stored == acknowledged
    assert await verdict(http, "live", f"{live}:0") == ("resume", "ok")
    for token in idle:
        assert (await ok(await http.get(f"/admin/v1/generations/{token}")))["expired"] is True


async def test_the_worker_runs_in_the_background(database_url: str) -> None:
    settings = make_settings(database_url, retention_interval_seconds=0.05)
    async with running_app(settings) as running:
        http = running.as_key(None)
        token = await open_with(http, "s1", 2, ttl_seconds=1)
        deadline = time.monotonic() + 10
        # A pass is counted when it ends, after its events are deleted: wait for that.
        while "eventlog_purged_events_total 2.0" not in (await http.get("/metrics")).text:
            assert time.monotonic() < deadline, "the background worker never purged it"
            await asyncio.sleep(0.1)
        assert await verdict(http, "s1", f"{token}:1") == ("reset", "expired")
        exposition = (await http.get("/metrics")).text
    assert 'eventlog_retention_runs_total{outcome="ran"}' in exposition
