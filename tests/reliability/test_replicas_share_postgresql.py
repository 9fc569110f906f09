"""Real server processes: the first command on a fresh machine, and two replicas on one
PostgreSQL database sharing the work without process-local locks."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest

from tests.support.processes import running_server


async def test_serve_migrates_the_default_sqlite_file(tmp_path: Path) -> None:
    with running_server({}, cwd=tmp_path) as url:
        async with httpx.AsyncClient(base_url=url) as client:
            opened = await client.post("/v1/streams/first/generations")
            assert opened.status_code == 201, opened.text
    assert (tmp_path / "eventlog.db").exists()


@pytest.mark.postgresql
async def test_two_processes_share_one_postgresql(postgres_database: str) -> None:
    env = {"EVENTLOG_DATABASE_URL": postgres_database}
    with running_server(env) as one, running_server(env) as two:
        async with httpx.AsyncClient(base_url=one) as p1, httpx.AsyncClient(base_url=two) as p2:
            stream = f"replicas-{id(p1)}"
            token = (await p1.post(f"/v1/streams/{stream}/generations")).json()["generation"]

            async def writer(client: httpx.AsyncClient, w: int) -> list[int]:
                seqs: list[int] = []
                for b in range(10):
                    answer = await client.post(
                        f"/v1/generations/{token}/events",
                        json={"events": [{"data": f"{w}.{b}.{i}"} for i in range(3)]},
                    )
                    assert answer.status_code == 201, answer.text
                    seqs += [int(i.rsplit(":", 1)[1]) for i in answer.json()["event_ids"]]
                return seqs

            results = await asyncio.gather(*(writer(p1 if w % 2 else p2, w) for w in range(8)))
            every = sorted(s for r in results for s in r)
            assert every == list(range(1, 8 * 10 * 3 + 1))

            # a failover opened through the other replica fences the stale producer
            fresh = (
                await p2.post(f"/v1/streams/{stream}/generations", json={"reason": "failover"})
            ).json()
            stale = await p1.post(
                f"/v1/generations/{token}/events", json={"events": [{"data": "late"}]}
            )
            assert (stale.status_code, stale.json()["code"]) == (409, "superseded")
            verdict = (
                await p1.post(
                    f"/v1/streams/{stream}/resume", json={"last_event_id": f"{token}:240"}
                )
            ).json()
            assert (verdict["verdict"], verdict["reason"]) == ("reset", "superseded")
            assert verdict["generation"] == fresh["generation"]
