"""Live reads stay bounded against hostile and careless callers and end cleanly when the
process stops, each on a real server process, on SQLite and PostgreSQL.

- Readers that never read (raw sockets that never `recv()`): the server's RSS stays
  bounded under 2,000 of them (live pages are read at most `EVENTLOG_LIVE_PAGE_BYTES` at a
  time, handed to the connection in `EVENTLOG_LIVE_CHUNK_BYTES` chunks and held in a
  process-wide budget of bytes in flight), and page requests are capped (503
  `too_many_pages` with `Retry-After`).
- One tenant cannot take every live slot (`EVENTLOG_LIVE_TENANT_SHARE`); long-polls are
  counted under the same caps, and one whose client left is dropped at once.
- SIGTERM with a `curl -N`-like reader open: the reader is told to reconnect and its
  response ends at once, the process exits within seconds, and the reader continues
  exactly on another process from its last id.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import time
from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from tests.support.live_readers import (
    WAIT,
    LiveReader,
    metric,
    metric_reaches,
    stalled_socket,
)
from tests.support.process_memory import MIB, RssSampler
from tests.support.processes import ServerProcess
from tests.support.writer_calls import append_data, open_token

pytestmark = pytest.mark.process

GAUGE = "eventlog_live_readers"
QUIET = {"EVENTLOG_LOG_LEVEL": "warning", "EVENTLOG_RETENTION_INTERVAL_SECONDS": "0"}


@contextlib.asynccontextmanager
async def server(
    database_url: str, tmp_path: Path, name: str = "server", **env: str
) -> AsyncIterator[ServerProcess]:
    process = ServerProcess(database_url, log_path=tmp_path / f"{name}.log", env={**QUIET, **env})
    await asyncio.to_thread(process.start)
    try:
        yield process
    finally:
        await asyncio.to_thread(process.stop)


# -- readers that never read ---------------------------------------------------------------

SLOW_READERS = int(os.environ.get("EVENTLOG_TEST_SLOW_READERS", "2000"))
SLOW_EVENTS, SLOW_EVENT_BYTES = 4, 256 * 1024  # 1 MiB in the generation the readers follow
# What a reader that does not read may cost the server: its socket, uvicorn's protocol and
# write buffer (a chunk and the transport's high-water mark), three tasks and a generator;
# pages are shared or held in the process's budget. Before: the whole page rendered per
# reader (~10 MiB each; 150 readers took 199 -> 1,618 MiB).
SLOW_PER_READER = 96 * 1024
SLOW_FIXED = 160 * MIB  # the budget of bytes in flight (64 MiB) and the allocator's slack


async def stall(base: str, stream: str, count: int) -> list[socket.socket]:
    """`count` live requests whose sockets are never read, opened 100 at a time (each batch
    once the last one is served: a loaded machine's pool is not flooded with 2,000 reads)."""
    socks: list[socket.socket] = []
    for start in range(0, count, 100):
        socks += await asyncio.gather(
            *(
                asyncio.to_thread(stalled_socket, base, stream)
                for _ in range(min(100, count - start))
            )
        )
        await metric_reaches(base, GAUGE, len(socks), WAIT * 2)
    return socks


async def test_readers_that_never_read_hold_bounded_memory(
    database_url: str, tmp_path: Path
) -> None:
    env = {
        "EVENTLOG_LIVE_MAX_READERS": str(SLOW_READERS + 10),
        "EVENTLOG_LIVE_HEARTBEAT_SECONDS": "60",
    }
    async with (
        server(database_url, tmp_path, **env) as service,
        httpx.AsyncClient(base_url=service.base_url, timeout=WAIT) as http,
    ):
        token = await open_token(http, "never-read")
        for n in range(SLOW_EVENTS):
            await append_data(http, token, f"{n:08d}" + "z" * (SLOW_EVENT_BYTES - 8))
        socks: list[socket.socket] = []
        try:
            with RssSampler(service.pid or 0, interval=0.1) as memory:
                socks = await stall(service.base_url, "never-read", SLOW_READERS)
                await metric_reaches(service.base_url, GAUGE, SLOW_READERS, WAIT * 4)
                # Every reader was handed what it will take: the server holds it now.
                await asyncio.sleep(2)
            bound = SLOW_FIXED + SLOW_READERS * SLOW_PER_READER
            print(
                f"{SLOW_READERS} readers that never read: server RSS "
                f"{memory.baseline / MIB:.0f} -> {memory.peak / MIB:.0f} MiB "
                f"(+{memory.growth / MIB:.0f} MiB; bound {bound / MIB:.0f} MiB)"
            )
            assert memory.growth <= bound, f"+{memory.growth / MIB:.0f} MiB"
        finally:
            for sock in socks:
                sock.close()
        await metric_reaches(service.base_url, GAUGE, 0, WAIT * 2)


async def test_page_requests_are_capped_with_a_stable_503(
    database_url: str, tmp_path: Path
) -> None:
    env = {"EVENTLOG_MAX_PAGES_IN_FLIGHT": "3", "EVENTLOG_LIVE_MAX_WAIT_SECONDS": "20"}
    async with (
        server(database_url, tmp_path, **env) as service,
        httpx.AsyncClient(base_url=service.base_url, timeout=WAIT) as http,
    ):
        token = await open_token(http, "paged")
        url = f"/v1/generations/{token}/events"
        waits = [asyncio.create_task(http.get(url, params={"wait": 20})) for _ in range(3)]
        try:
            await metric_reaches(service.base_url, GAUGE, 3)  # the waits hold their places
            refused = await http.get(url)
            assert refused.status_code == 503, refused.text
            assert refused.json()["code"] == "too_many_pages"
            assert refused.headers["retry-after"]
        finally:
            await append_data(http, token, "wakes them")
            answers = await asyncio.gather(*waits)
        assert [a.status_code for a in answers] == [200, 200, 200]
        assert (await http.get(url)).status_code == 200  # the places are free again


# -- tenant shares, counted long-polls, waiters whose client left ---------------------------

KEYS = [
    {"scope": "writer", "tenant": "alpha", "key": "alpha-writer-key-0001"},
    {"scope": "writer", "tenant": "beta", "key": "beta-writer-key-00001"},
    {"scope": "admin", "tenant": "alpha", "key": "alpha-admin-key-00001"},
]


def authed(base: str, key: str) -> httpx.AsyncClient:
    headers = {"Authorization": f"Bearer {key}"}
    return httpx.AsyncClient(base_url=base, timeout=WAIT, headers=headers)


async def gauge(base: str) -> float:
    async with authed(base, "alpha-admin-key-00001") as admin:
        text = (await admin.get("/metrics")).text
    line = next(line for line in text.splitlines() if line.startswith(f"{GAUGE} "))
    return float(line.split()[1])


async def gauge_reaches(base: str, value: float, within: float = WAIT) -> None:
    async with asyncio.timeout(within):
        while await gauge(base) != value:  # noqa: ASYNC110 — another process's gauge
            await asyncio.sleep(0.05)


async def test_one_tenant_cannot_take_every_live_slot(database_url: str, tmp_path: Path) -> None:
    env = {
        "EVENTLOG_KEYS": json.dumps(KEYS),
        "EVENTLOG_LIVE_MAX_READERS": "4",
        "EVENTLOG_ALLOWED_HOSTS": '["127.0.0.1"]',
    }
    async with (
        server(database_url, tmp_path, **env) as service,
        authed(service.base_url, "alpha-writer-key-0001") as alpha,
        authed(service.base_url, "beta-writer-key-00001") as beta,
    ):
        await open_token(alpha, "shared-slots")
        await open_token(beta, "shared-slots")
        held: list[contextlib.AbstractAsyncContextManager[httpx.Response]] = []
        try:
            statuses = []
            for _ in range(3):
                stream = alpha.stream("GET", "/v1/streams/shared-slots/live")
                held.append(stream)
                statuses.append((await stream.__aenter__()).status_code)
            assert statuses == [200, 200, 503], "one tenant took more than its share"
            other = beta.stream("GET", "/v1/streams/shared-slots/live")
            held.append(other)
            assert (await other.__aenter__()).status_code == 200
        finally:
            for stream in held:
                await stream.__aexit__(None, None, None)


LONG_POLLS = 200


async def test_long_polls_are_counted_and_dropped_when_their_client_leaves(
    database_url: str, tmp_path: Path
) -> None:
    env = {
        "EVENTLOG_LIVE_MAX_READERS": str(LONG_POLLS),
        "EVENTLOG_LIVE_MAX_WAIT_SECONDS": "60",
        "EVENTLOG_MAX_PAGES_IN_FLIGHT": str(LONG_POLLS + 10),
    }
    async with (
        server(database_url, tmp_path, **env) as service,
        httpx.AsyncClient(base_url=service.base_url, timeout=WAIT) as http,
    ):
        base = service.base_url
        token = await open_token(http, "long-polled")
        url = urlsplit(base)
        request = (
            f"GET /v1/generations/{token}/events?wait=60 HTTP/1.1\r\nHost: {url.netloc}\r\n\r\n"
        ).encode()
        socks = []
        try:
            for _ in range(LONG_POLLS):
                sock = socket.create_connection((url.hostname, url.port))
                sock.sendall(request)
                socks.append(sock)
            # Counted under the reader cap: the cap is full, a live reader is refused.
            await metric_reaches(base, GAUGE, LONG_POLLS, WAIT * 2)
            refused = await http.get("/v1/streams/long-polled/live")
            assert (refused.status_code, refused.json()["code"]) == (503, "too_many_readers")
        finally:
            for sock in socks:
                sock.close()
        left = time.monotonic()
        await metric_reaches(base, GAUGE, 0, WAIT)  # dropped at once, before any append
        dropped = time.monotonic() - left
        assert dropped < 10, f"waiters whose client left were held {dropped:.1f}s"
        await append_data(http, token, "nobody waits")  # nothing is read for the gone waiters
        assert await metric(base, GAUGE) == 0


# -- shutdown -----------------------------------------------------------------------------------


async def test_sigterm_ends_live_readers_at_once_and_they_continue_elsewhere(
    database_url: str, tmp_path: Path
) -> None:
    env = {"EVENTLOG_LIVE_HEARTBEAT_SECONDS": "60", "EVENTLOG_LIVE_RETRY_MS": "100"}
    async with (
        server(database_url, tmp_path, "a", **env) as a,
        server(database_url, tmp_path, "b", **env) as b,
        httpx.AsyncClient(base_url=b.base_url, timeout=WAIT) as http,
    ):
        token = await open_token(http, "stopping")
        await append_data(http, token, "1", "2")
        text = ""
        async with (
            httpx.AsyncClient(base_url=a.base_url, timeout=httpx.Timeout(WAIT)) as raw,
            raw.stream("GET", "/v1/streams/stopping/live") as response,  # curl -N
        ):
            chunks = response.aiter_text()
            while text.count("\n\n") < 2:
                text += await anext(chunks)
            appends = [asyncio.create_task(append_data(http, token, f"{n}")) for n in (3, 4)]
            assert a.pid is not None
            stopped = time.monotonic()
            os.kill(a.pid, signal.SIGTERM)
            async with asyncio.timeout(WAIT):
                async for chunk in chunks:  # the response ends (no event marks it)
                    text += chunk
            ended = time.monotonic() - stopped
            await asyncio.gather(*appends)
        exited = await asyncio.to_thread(wait_exit, a, WAIT)
        print(f"SIGTERM: response ended after {ended:.2f}s, process exited after {exited:.2f}s")
        assert ended < 5, f"the live response outlived SIGTERM by {ended:.1f}s"
        assert exited < 8, f"the process took {exited:.1f}s to exit"
        assert "retry: 100\n" in text.split(": closing", 1)[-1], text[-200:]
        last_id = [line[4:] for line in text.splitlines() if line.startswith("id: ")][-1]
        # The reader reconnects with its last id, elsewhere, and continues exactly.
        reader = LiveReader(b.base_url, "stopping", last_id=last_id).start()
        try:
            await reader.wait_until(lambda r: len(r.events) >= 4 - int(last_id.rsplit(":")[1]))
            seqs = [int(last_id.rsplit(":")[1]), *(e.seq for e in reader.events)]
            assert seqs == list(range(seqs[0], 5)), seqs
        finally:
            await reader.stop()


def wait_exit(process: ServerProcess, within: float) -> float:
    """Seconds until the process exits (after a signal it was sent)."""
    began = time.monotonic()
    popen = process._process
    assert popen is not None
    popen.wait(timeout=within)
    process._process = None
    return time.monotonic() - began
