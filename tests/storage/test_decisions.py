"""The decision audit log is bounded per tenant, on both databases: the retention pass
keeps each tenant's newest `EVENTLOG_DECISION_LOG_MAX_ROWS` entries, so that one tenant's
many resumes never remove another tenant's entries.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from app.service.retention import RetentionWorker
from tests.support.app import state_of
from tests.support.operators import ADMIN, WRITER_A, WRITER_B, KeyedApp, keyed_settings, ok
from tests.support.operators import running_app as keyed_app

KEEP = 30


@pytest.fixture
async def running(database_url: str) -> AsyncIterator[KeyedApp]:
    async with keyed_app(keyed_settings(database_url, decision_log_max_rows=KEEP)) as app:
        yield app


async def _resumes(writer: httpx.AsyncClient, stream: str, count: int) -> None:
    gen = await ok(await writer.post(f"/v1/streams/{stream}/generations"), 201)
    token = gen["generation"]
    events = {"events": [{"data": "x"}]}
    await ok(await writer.post(f"/v1/generations/{token}/events", json=events), 201)
    for n in range(count):
        # Alternate a good claim and a spoofed one: both are entries of the tenant's.
        claim = f"{token}:1" if n % 2 else "spoofed-token:1"
        await ok(await writer.post(f"/v1/streams/{stream}/resume", json={"last_event_id": claim}))


async def _entries(admin: httpx.AsyncClient, tenant: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = (
        await ok(await admin.get("/admin/v1/decisions", params={"tenant": tenant, "limit": 1000}))
    )["decisions"]
    return found


async def test_one_tenants_resumes_do_not_flush_anothers_audit_trail(
    running: KeyedApp,
) -> None:
    a, b, admin = running.as_key(WRITER_A), running.as_key(WRITER_B), running.as_key(ADMIN)
    await _resumes(a, "a-stream", 10)
    a_before = await _entries(admin, "a")
    assert len(a_before) == 10
    await _resumes(b, "b-stream", 15 * KEEP)  # the flood: far more than the cap
    await state_of(running.app).container.audit.flush()
    container = state_of(running.app).container
    report = await RetentionWorker(container.database, container.settings.retention).run_once()
    assert report.trimmed_decisions == 15 * KEEP - KEEP
    assert await _entries(admin, "a") == a_before  # every one of A's, untouched
    b_after = await _entries(admin, "b")
    assert len(b_after) == KEEP  # B keeps its own newest
    # A tenant over its cap loses its oldest: A's own flood trims A alone.
    await _resumes(a, "a-stream-2", KEEP)
    await container.audit.flush()
    again = await RetentionWorker(container.database, container.settings.retention).run_once()
    assert again.trimmed_decisions == 10
    assert len(await _entries(admin, "a")) == KEEP
    assert len(await _entries(admin, "b")) == KEEP
