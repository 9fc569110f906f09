"""PostgreSQL itself goes away under load: the service answers 503 problem+json
`database_unavailable` while it is away, recovers by itself (no service restart) when it
is back, and loses no acknowledged event.

This runs on a private PostgreSQL (`private_postgres.py`): stopping the machine's shared
server would break other test runs. The quick variant does one stop/start cycle; the soak
variant does many, half of them `immediate` stops (a database crash, WAL recovery).
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass, field
from pathlib import Path

import asyncpg
import httpx
import pytest

from tests.support import private_postgres
from tests.support.app import app_client, make_settings
from tests.support.ledger import Batch, GenerationLedger, check_generation, read_generations
from tests.support.processes import ServerProcess
from tests.support.soak import soak_enabled

pytestmark = [pytest.mark.process, pytest.mark.postgresql]

RECOVERY_TIMEOUT = 30.0


@dataclass
class PatientWriter:
    """Appends with `first_seq`; a 503 leaves the batch in doubt, resent until answered."""

    stream_id: str
    rng: random.Random
    gen: GenerationLedger | None = None
    unavailable: list[httpx.Response] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    async def run(self, http: httpx.AsyncClient, stop: asyncio.Event) -> None:
        opened = await http.post(f"/v1/streams/{self.stream_id}/generations")
        assert opened.status_code == 201, opened.text
        self.gen = GenerationLedger(opened.json()["generation"], 1, 10_000)
        while not stop.is_set():
            gen = self.gen
            batch = gen.in_doubt or Batch(
                gen.next_seq,
                [
                    f"{self.stream_id}/{gen.next_seq + i}/{self.rng.random()}"
                    for i in range(self.rng.randint(1, 4))
                ],
            )
            gen.in_doubt = batch
            body = {"events": [{"data": d} for d in batch.data], "first_seq": batch.first_seq}
            try:
                answer = await http.post(f"/v1/generations/{gen.token}/events", json=body)
            except httpx.TransportError as error:  # the service itself must stay up
                self.failures.append(f"transport error: {error!r}")
                return
            if answer.status_code in (200, 201):
                gen.acknowledge(batch)
            elif answer.status_code == 503:
                self.unavailable.append(answer)
                await asyncio.sleep(0.1)
            else:
                self.failures.append(f"{answer.status_code} {answer.text}")
                return


def check_unavailable(answer: httpx.Response) -> None:
    """The 503 the README promises: problem+json, `database_unavailable`, Retry-After."""
    assert answer.headers["content-type"].startswith("application/problem+json")
    assert answer.json()["code"] == "database_unavailable"
    assert answer.headers.get("retry-after") == "1"


async def outage(pg: private_postgres.PrivatePostgres, http: httpx.AsyncClient, mode: str) -> None:
    """Stop PostgreSQL, see 503s on writes and resumes, start it, wait for recovery."""
    await asyncio.to_thread(pg.stop, mode)
    try:
        for request in (
            http.post("/v1/streams/probe/generations"),
            http.post("/v1/resume", json={"last_event_id": "AAAAAAAAAAAAAAAAAAAAAA:1"}),
        ):
            answer = await request
            assert answer.status_code == 503, answer.text
            check_unavailable(answer)
        assert (await http.get("/healthz")).status_code == 200
        await asyncio.sleep(0.5)
    finally:
        await asyncio.to_thread(pg.start)
    deadline = asyncio.get_running_loop().time() + RECOVERY_TIMEOUT
    while (await http.post("/v1/streams/probe/generations")).status_code != 201:
        assert asyncio.get_running_loop().time() < deadline, "no recovery without a restart"
        await asyncio.sleep(0.2)


async def verify(url: str, writers: list[PatientWriter]) -> list[str]:
    """Every acknowledged event stored, no partial batch, counters agreeing."""
    problems: list[str] = []
    stored_of = await read_generations(url, [w.gen.token for w in writers if w.gen is not None])
    for writer in writers:
        assert writer.gen is not None
        stored = stored_of[writer.gen.token]
        assert stored is not None
        problems += check_generation(writer.gen, stored)
    return problems


async def test_postgres_restart_under_load(
    private_pg: private_postgres.PrivatePostgres, tmp_path: Path
) -> None:
    """503 while PostgreSQL is away, recovery by itself, nothing acknowledged lost."""
    cycles = 8 if soak_enabled() else 1
    server = ServerProcess(private_pg.url, log_path=tmp_path / "server.log")
    server.start()
    rng = random.Random()
    writers = [PatientWriter(f"pg-restart-{i}", random.Random(rng.random())) for i in range(4)]
    stop = asyncio.Event()
    try:
        async with httpx.AsyncClient(base_url=server.base_url, timeout=30) as http:
            tasks = [asyncio.create_task(w.run(http, stop)) for w in writers]
            for cycle in range(cycles):
                await asyncio.sleep(rng.uniform(0.3, 1.0))
                await outage(private_pg, http, "immediate" if cycle % 2 else "fast")
            await asyncio.sleep(0.5)  # writers resend their in-doubt batches and go on
            stop.set()
            await asyncio.wait_for(asyncio.gather(*tasks), timeout=60)
    finally:
        stop.set()
        server.stop()
    assert [f for w in writers for f in w.failures] == []
    for answer in (a for w in writers for a in w.unavailable):
        check_unavailable(answer)
    assert all(w.gen is not None and w.gen.in_doubt is None for w in writers)
    assert await verify(private_pg.url, writers) == []
    assert sum(len(w.gen.acked) for w in writers if w.gen) > 0


async def test_connecting_while_postgres_shuts_down_is_503(
    private_pg: private_postgres.PrivatePostgres,
) -> None:
    """A smart shutdown waits for an open session and refuses new ones with 57P03: 503."""
    held = await asyncpg.connect(host="127.0.0.1", port=private_pg.port, user="postgres")
    try:
        await asyncio.to_thread(private_pg.stop_without_waiting, "smart")
        async with app_client(make_settings(private_pg.url)) as http:
            answer = await http.post("/v1/streams/probe/generations")
        assert answer.status_code == 503, answer.text
        check_unavailable(answer)
    finally:
        await held.close()
        await asyncio.to_thread(private_pg.wait_stopped)
