"""A client that stops reading a big call: the gateway's memory stays bounded, the
recording goes on, and the client that reads again gets every message once, in order,
with the log's ids; a client that leaves takes what was held for it with it.

Real processes on SQLite: an upstream that streams `COUNT` progress notifications of
`SIZE` bytes (`tests/support/upstreams/flood_upstream.py`), the gateway (`python -m app
gateway`, the default `EVENTLOG_GATEWAY_RELAY_BUFFER_BYTES`), and clients (httpx) that
read the first kilobyte and then stop. The gateway's RSS is sampled meanwhile
(`tests/support/process_memory.py`).

What is measured is what the stopped client adds, so two other costs are kept out of it:
the gateway serves one such call to a client that reads it all before any measure (the
SQLite page caches of its read connections, the allocator's arenas are then in the
baseline), and the upstream sends at `RATE`, which the log keeps up with (an upstream
faster than the log piles messages up in the recorder, waiting for their commit, whoever
reads them — the recording's own memory, not the relay's).
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.gateway.sse import SseEvent, SseParser
from tests.support.gateway import gateway_process_of
from tests.support.mcp_raw import HEADERS, initialize
from tests.support.process_memory import MIB, RssSampler, rss
from tests.support.processes import ServerProcess, free_port
from tests.support.soak import soak_enabled
from tests.support.waiting import until

pytestmark = pytest.mark.process

SIZE = 4096
COUNT = 30_000 if soak_enabled() else 10_000  # 40 MiB of messages (soak: 120 MiB)
RATE = 10 * MIB  # bytes a second: 4 s for the quick test's call (soak: 12 s)
# What a stopped client may add, whatever COUNT is: its relay buffer (1 MiB by default),
# the pages read back from the log for it (256 KiB each) and the allocator's slack around
# them. Without a bound the gateway held every byte the client had not read (and more:
# each message's string and its encoded copy).
BOUND = 16 * MIB
# The log keeps the whole call (a generation keeps 10,000 events by default: a longer
# call's first events are evicted while it is recorded, and a client behind them is reset).
ENV = {"EVENTLOG_DEFAULT_MAX_EVENTS": str(2 * COUNT)}
INIT = initialize("slow")


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[tuple[ServerProcess, str]]:
    """The flood upstream and a gateway in front of it, after one call read promptly (see
    the module): (gateway, upstream URL). Each test has its own: what one test's call left
    in the allocator's free lists would be reused by the next one's."""
    workdir = tmp_path
    port = free_port()
    argv = ["-m", "tests.support.upstreams.flood_upstream", "--port", str(port)]
    database = f"sqlite+aiosqlite:///{workdir / 'gateway.db'}"
    with (
        ServerProcess.program(argv, port=port, log_path=workdir / "flood.log") as upstream,
        gateway_process_of(f"{upstream.base_url}/mcp", database, workdir, env=ENV) as gateway,
        httpx.Client(base_url=gateway.base_url, timeout=60) as http,
    ):
        opened = http.post("/mcp", json=INIT, headers=HEADERS)
        headers = {**HEADERS, "mcp-session-id": opened.headers["mcp-session-id"]}
        with http.stream("POST", "/mcp", json=flood(COUNT), headers=headers) as response:
            read = b"".join(response.iter_raw())
        check_every_message_once_in_order(events_of(read), COUNT)
        yield gateway, upstream.base_url


@pytest.fixture
async def http(stack: tuple[ServerProcess, str]) -> AsyncIterator[httpx.AsyncClient]:
    """A client of the gateway."""
    async with httpx.AsyncClient(base_url=stack[0].base_url, timeout=60) as client:
        yield client


def flood(count: int, **arguments: int) -> dict[str, Any]:
    """The `tools/call` of the upstream's flood."""
    arguments = {"count": count, "size": SIZE, "rate": RATE, **arguments}
    params = {"name": "flood", "arguments": arguments, "_meta": {"progressToken": 1}}
    return {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}


async def call(http: httpx.AsyncClient, count: int, **arguments: int) -> dict[str, Any]:
    """A new session's flood call: the keyword arguments of its POST."""
    opened = await http.post("/mcp", json=INIT, headers=HEADERS)
    opened.raise_for_status()
    session = opened.headers["mcp-session-id"]
    return {"json": flood(count, **arguments), "headers": {**HEADERS, "mcp-session-id": session}}


async def recording_over(http: httpx.AsyncClient) -> None:
    """Until the gateway has no recording in flight (the call's is stored to its end)."""

    async def idle() -> bool:
        metrics = (await http.get("/metrics")).text
        found = re.search(r"^eventlog_gateway_recordings(?:\{[^}]*\})? (\S+)$", metrics, re.M)
        return found is not None and float(found.group(1)) == 0

    await until(idle)


async def first_kilobyte(chunks: AsyncIterator[bytes]) -> bytes:
    read = b""
    while len(read) < 1024:
        read += await anext(chunks)
    return read


def events_of(body: bytes) -> list[SseEvent]:
    return SseParser(2 * SIZE).feed(body.decode())


def check_every_message_once_in_order(events: list[SseEvent], count: int) -> None:
    """Priming, `count` notifications, the result: each once, in order, ids `<token>:1…`."""
    assert events, "nothing received"
    token = (events[0].id or "").rsplit(":", 1)[0]
    assert [e.id for e in events] == [f"{token}:{seq}" for seq in range(1, count + 3)]
    assert events[0].data == ""  # the gateway's priming event
    steps = [json.loads(e.data or "") for e in events[1:-1]]
    assert [s["params"]["progress"] for s in steps] == list(range(1, count + 1))
    assert all(len(s["params"]["message"]) == SIZE for s in steps)
    result = json.loads(events[-1].data or "")
    assert result["id"] == 1
    assert result["result"]["content"][0]["text"] == f"flooded {count}"


async def test_a_client_that_stops_reading_costs_bounded_memory_and_gets_all_later(
    stack: tuple[ServerProcess, str], http: httpx.AsyncClient
) -> None:
    gateway, _ = stack
    assert gateway.pid is not None
    with RssSampler(gateway.pid) as sampled:
        async with http.stream("POST", "/mcp", **await call(http, COUNT)) as response:
            assert response.status_code == 200
            chunks = response.aiter_raw()
            received = [await first_kilobyte(chunks)]
            # The client reads nothing more: the upstream floods on, the gateway records
            # every message of it.
            await recording_over(http)
            stopped = sampled.growth
            received.extend([chunk async for chunk in chunks])  # it reads again, to the end
    print(f"gateway RSS: +{stopped / MIB:.1f} MiB stopped, +{sampled.growth / MIB:.1f} MiB peak")
    assert stopped < BOUND, f"the gateway grew {stopped / MIB:.1f} MiB for a stopped client"
    assert sampled.growth < BOUND, f"and {sampled.growth / MIB:.1f} MiB sending it the rest"
    check_every_message_once_in_order(events_of(b"".join(received)), COUNT)


async def test_a_client_that_leaves_mid_call_takes_its_memory_with_it(
    stack: tuple[ServerProcess, str], http: httpx.AsyncClient
) -> None:
    gateway, upstream = stack
    assert gateway.pid is not None
    before = rss(gateway.pid)
    most = COUNT - 100
    async with http.stream("POST", "/mcp", **await call(http, COUNT, pause_at=most)) as response:
        chunks = response.aiter_raw()  # held: a dropped iterator would close the stream
        first = events_of(await first_kilobyte(chunks))
        token = (first[0].id or "").rsplit(":", 1)[0]

        async def recorded_most() -> bool:
            generation = (await http.get(f"/admin/v1/generations/{token}")).json()
            return bool(generation["tail_seq"] >= most + 1)

        await until(recorded_most)
        stopped = rss(gateway.pid)
        await chunks.aclose()
    # The client has left; the recording is still in flight (the upstream waits at `most`).
    left = rss(gateway.pid)
    async with httpx.AsyncClient() as plain:
        (await plain.post(f"{upstream}/go")).raise_for_status()
    await recording_over(http)
    generation = (await http.get(f"/admin/v1/generations/{token}")).json()
    print(f"gateway RSS: {before / MIB:.1f}, {stopped / MIB:.1f} stopped, {left / MIB:.1f} left")
    assert left - before < BOUND, f"{(left - before) / MIB:.1f} MiB held for a client gone"
    assert generation["terminal"] is True  # and the recording went on to the end
    assert generation["tail_seq"] == COUNT + 2  # priming, every notification, result
