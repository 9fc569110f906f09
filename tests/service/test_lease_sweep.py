"""The lease sweep records each lapsed generation once, however many notice at once, and an
append that meets a lapsed lease refuses it and records it, without waiting for a sweep."""

from __future__ import annotations

import asyncio
import re
from datetime import timedelta
from pathlib import Path

import httpx
import pytest

from app.service.clock import utc_now
from app.settings import Settings
from app.storage import generations
from app.storage.database import Database
from tests.support.app import app_client, make_settings
from tests.support.databases import empty_postgres
from tests.support.live_readers import WAIT
from tests.support.processes import ServerProcess
from tests.support.writer_calls import append, open_generation

COUNT = 20


async def test_an_append_meeting_a_lapsed_lease_is_refused_and_records_it(
    database_url: str,
) -> None:
    settings = make_settings(database_url, lease_sweep_seconds=0)  # no sweep at all
    async with app_client(settings) as client:
        token = (await open_generation(client, "lazy", lease_seconds=1))["generation"]
        await append(client, token, ["a"])
        await asyncio.sleep(1.2)
        refused = await append(client, token, ["b"], expect=409)
        assert refused["code"] == "abandoned"
        current = (await client.get("/v1/streams/lazy")).json()["current"]
        assert current["abandoned"] is True
        assert current["tail_seq"] == 1


async def test_concurrent_sweeps_record_each_generation_once(database_url: str) -> None:
    settings = make_settings(database_url)
    databases = [Database(settings) for _ in range(4)]
    try:
        async with app_client(make_settings(database_url, lease_sweep_seconds=0)) as client:
            for i in range(COUNT):
                await open_generation(client, f"race-{i}", lease_seconds=1)
        later = utc_now() + timedelta(seconds=2)

        async def sweep(database: Database) -> int:
            recorded = await database.write(
                lambda conn: generations.abandon_lapsed(conn, later, limit=COUNT)
            )
            return len(recorded)

        counts = await asyncio.gather(*(sweep(db) for db in databases))
        assert sum(counts) == COUNT
    finally:
        for database in databases:
            await database.close()


@pytest.mark.process
@pytest.mark.postgresql
async def test_two_replicas_on_one_postgresql_record_each_abandonment_once(
    postgres_database: str, tmp_path: Path
) -> None:
    await empty_postgres(postgres_database)
    env = {
        "EVENTLOG_LEASE_SWEEP_SECONDS": "0.05",  # both sweep all the time: they race
        "EVENTLOG_MIGRATE_ON_START": "false",
        "EVENTLOG_LOG_LEVEL": "warning",
    }
    a = ServerProcess(postgres_database, log_path=tmp_path / "a.log", env=env)
    b = ServerProcess(postgres_database, log_path=tmp_path / "b.log", env=env)
    with a, b:
        async with httpx.AsyncClient(base_url=a.base_url, timeout=WAIT) as http:
            for i in range(COUNT):
                await open_generation(http, f"replicas-{i}", lease_seconds=1)
            async with asyncio.timeout(WAIT):
                while sum([await _abandoned(a.base_url), await _abandoned(b.base_url)]) < COUNT:  # noqa: ASYNC110 (another process's counter: asked until it agrees)
                    await asyncio.sleep(0.1)
            await asyncio.sleep(0.5)  # both go on sweeping: nothing is recorded twice
            assert await _abandoned(a.base_url) + await _abandoned(b.base_url) == COUNT
            stats = (await http.get("/admin/v1/stats")).json()["generations"]
            assert stats["abandoned"] == COUNT


async def _abandoned(base_url: str) -> float:
    async with httpx.AsyncClient(base_url=base_url, timeout=WAIT) as http:
        text = (await http.get("/metrics")).text
    found = re.search(r"^eventlog_abandoned_generations_total (\S+)$", text, re.MULTILINE)
    assert found is not None, "no eventlog_abandoned_generations_total in /metrics"
    return float(found.group(1))


def test_settings_bounds() -> None:
    assert Settings(writer_lease_seconds=1).writer_lease_seconds == 1
    with pytest.raises(ValueError, match="writer_lease_seconds"):
        Settings(writer_lease_seconds=0)
