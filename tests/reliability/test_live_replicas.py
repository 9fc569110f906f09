"""Live reads across server processes: a reader on one replica follows what another writes.

- PostgreSQL: two replicas on one database. A reader on B receives, in order and exactly
  once, 1,000 events appended on A while A's generation is superseded half-way (a reset,
  then the new generation from seq 1) and while PostgreSQL is restarted (B's listener
  comes back and nothing is lost). This runs on a private PostgreSQL (`private_postgres`):
  restarting the machine's shared server would break other test runs.
- SQLite: two processes on one file. A reader on B hears A's appends through B's poll of
  the file (`EVENTLOG_LIVE_POLL_SECONDS`), a supersede and a terminal included.

The replicas' heartbeat is two minutes, far beyond any wait here, so every event that
arrives was brought by a wake-up from the other process (a notification, a poll), not by
a reader's periodic re-read.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from tests.support import private_postgres
from tests.support.live_readers import WAIT, LiveReader, SseEvent, metric_reaches
from tests.support.processes import ServerProcess

pytestmark = pytest.mark.process

REPLICA_ENV = {
    "EVENTLOG_LIVE_HEARTBEAT_SECONDS": "120",
    "EVENTLOG_LIVE_RETRY_MS": "200",
    "EVENTLOG_RETENTION_INTERVAL_SECONDS": "0",
    "EVENTLOG_MIGRATE_ON_START": "false",
    "EVENTLOG_LOG_LEVEL": "warning",
}
LISTENER_UP = 'eventlog_live_wakeup_source_up{source="postgresql"}'


@dataclass
class Replicas:
    """Two service processes on one database: A (the writers') and B (the reader's)."""

    a: ServerProcess
    b: ServerProcess


@contextmanager
def replicas(url: str, workdir: Path, **env: str) -> Iterator[Replicas]:
    """Start A and B on `url`; stop both at the end."""
    with ExitStack() as stack:
        started = []
        for name in ("a", "b"):
            server = ServerProcess(
                url, log_path=workdir / f"{name}.log", env={**REPLICA_ENV, **env}
            )
            stack.callback(server.stop)
            server.start()
            started.append(server)
        yield Replicas(*started)


@dataclass
class PatientWriter:
    """Appends one event at a time with `first_seq`; while the database is away (503) it
    resends the same batch until it is answered, so nothing is stored twice or skipped."""

    http: httpx.AsyncClient
    acked: dict[str, list[str]] = field(default_factory=dict)  # token -> data, in seq order
    unavailable: int = 0
    refused: asyncio.Event = field(default_factory=asyncio.Event)

    async def open(self, stream: str, **body: str) -> str:
        answer = await self.http.post(f"/v1/streams/{stream}/generations", json=body or None)
        assert answer.status_code == 201, answer.text
        token: str = answer.json()["generation"]
        self.acked[token] = []
        return token

    async def append(self, token: str, data: str, *, terminal: bool = False) -> None:
        seq = len(self.acked[token]) + 1
        body = {"events": [{"data": data}], "first_seq": seq, "terminal": terminal}
        while True:
            answer = await self.http.post(f"/v1/generations/{token}/events", json=body)
            if answer.status_code in (200, 201):
                assert answer.json()["event_ids"] == [f"{token}:{seq}"]
                self.acked[token].append(data)
                return
            assert answer.status_code == 503, answer.text
            assert answer.json()["code"] == "database_unavailable"
            self.unavailable += 1
            self.refused.set()
            await asyncio.sleep(0.1)  # Retry-After says 1 s; sooner keeps the test short

    async def append_all(self, token: str, numbers: range) -> None:
        for n in numbers:
            await self.append(token, f"{token}/{n}")


def expected_events(writer: PatientWriter, first: str, second: str) -> list[tuple[str, str]]:
    """(id or event type, data) of the first generation, the reset, the second one."""
    out = [(f"{first}:{seq}", data) for seq, data in enumerate(writer.acked[first], 1)]
    out.append(("reset", "superseded"))
    out += [(f"{second}:{seq}", data) for seq, data in enumerate(writer.acked[second], 1)]
    return out


def received(reader: LiveReader) -> list[tuple[str, str]]:
    return [described(event) for event in reader.events]


def described(event: SseEvent) -> tuple[str, str]:
    if event.id is not None:
        return event.id, event.data
    return event.event, str(event.control().get("reason"))


HALF = 500


@contextmanager
def frozen(server: ServerProcess) -> Iterator[None]:
    """SIGSTOP the process for the block (it hears nothing, answers nothing), then SIGCONT."""
    assert server.pid is not None
    os.kill(server.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(server.pid, signal.SIGCONT)


@pytest.mark.postgresql
async def test_a_reader_on_b_gets_every_event_from_a_through_a_supersede_and_a_restart(
    private_pg: private_postgres.PrivatePostgres, tmp_path: Path
) -> None:
    """1,000 events on A, a reader on B: the first generation, a reset, the second one.

    PostgreSQL is restarted while the reader waits, caught up: A writes the rest while B
    cannot listen (stopped by SIGSTOP until A is done), so the idle reader can only learn of
    it from B's catch-up after its listener comes back. A second reader connects to B while
    the database is away (503, and an EventSource tries again) and gets the second
    generation from seq 1.
    """
    with replicas(private_pg.url, tmp_path) as servers:
        a, b = servers.a, servers.b
        async with httpx.AsyncClient(base_url=a.base_url, timeout=WAIT) as http:
            writer = PatientWriter(http)
            first = await writer.open("replicated")
            await metric_reaches(b.base_url, LISTENER_UP, 1)
            reader = LiveReader(b.base_url, "replicated", reconnect=True).start()
            late = LiveReader(b.base_url, "replicated", reconnect=True)
            try:
                await reader.wait_until(lambda r: r.statuses == [200])
                await writer.append_all(first, range(1, HALF + 1))
                # Superseded while the reader is still catching up on it: the reader gets
                # the rest of it, then the reset, then the new one from seq 1.
                second = await writer.open("replicated", reason="failover")
                await writer.append_all(second, range(1, HALF // 2 + 1))
                before_restart = HALF + 1 + HALF // 2
                await reader.wait_until(lambda r: len(r.events) == before_restart)

                await asyncio.to_thread(private_pg.stop, "immediate")
                rest = range(HALF // 2 + 1, HALF + 1)
                writing = asyncio.create_task(writer.append_all(second, rest))
                async with asyncio.timeout(WAIT):
                    await writer.refused.wait()  # A answers 503 while the database is away
                await metric_reaches(b.base_url, LISTENER_UP, 0)
                late.start()
                await late.wait_until(lambda r: len(r.refusals) > 0)  # B: 503 too
                with frozen(b):
                    await asyncio.to_thread(private_pg.start)
                    await asyncio.wait_for(writing, WAIT * 2)
                assert len(reader.events) == before_restart  # nothing could tell it yet
                await metric_reaches(b.base_url, LISTENER_UP, 1)  # B listens again
                await reader.wait_until(lambda r: len(r.events) == 2 * HALF + 1)
                await late.wait_until(lambda r: len(r.events) == HALF)
            finally:
                await reader.stop()
                await late.stop()
        log_b = b.log()
    print(
        f"reader on B: {len(reader.statuses)} connection(s); the late one: "
        f"{[r.status for r in late.refusals]} then {late.statuses[-1]}; "
        f"A answered 503 {writer.unavailable} times while PostgreSQL was away"
    )
    assert received(reader) == expected_events(writer, first, second)
    assert reader.events[HALF].control() == {
        "verdict": "reset",
        "reason": "superseded",
        "discard_client_state": True,
        "generation": second,
    }
    assert reader.statuses == [200], log_b  # one connection throughout
    assert received(late) == expected_events(writer, first, second)[HALF + 1 :]
    assert {r.status for r in late.refusals} == {503}
    assert {r.problem()["code"] for r in late.refusals} == {"database_unavailable"}


SQLITE_POLL = 0.2


async def test_a_reader_on_b_hears_appends_on_a_through_the_sqlite_file(
    sqlite_template: Path, tmp_path: Path
) -> None:
    path = tmp_path / "eventlog.db"
    shutil.copyfile(sqlite_template, path)
    url = f"sqlite+aiosqlite:///{path}"
    with replicas(url, tmp_path, EVENTLOG_LIVE_POLL_SECONDS=str(SQLITE_POLL)) as servers:
        async with httpx.AsyncClient(base_url=servers.a.base_url, timeout=WAIT) as http:
            writer = PatientWriter(http)
            first = await writer.open("shared-file")
            reader = LiveReader(servers.b.base_url, "shared-file").start()
            try:
                await reader.wait_until(lambda r: r.statuses == [200])
                heard = []
                for n in range(1, 21):
                    await writer.append(first, f"{first}/{n}")
                    appended = time.monotonic()
                    await reader.wait_until(lambda r, n=n: len(r.events) >= n)
                    heard.append(time.monotonic() - appended)
                second = await writer.open("shared-file", reason="retry")
                await writer.append(second, f"{second}/1", terminal=True)
                await reader.wait_until(lambda r: r.ended)
            finally:
                await reader.stop()
    heard.sort()
    print(
        f"B heard A's appends after {heard[len(heard) // 2] * 1000:.0f} ms (median), "
        f"{heard[-1] * 1000:.0f} ms (most); poll every {SQLITE_POLL * 1000:.0f} ms"
    )
    end = reader.events[-1]
    assert received(reader)[:-1] == expected_events(writer, first, second)
    assert (end.event, end.control()) == ("end", {"generation": second, "terminal_seq": 1})
    assert reader.errors == []
    assert reader.refusals == []
