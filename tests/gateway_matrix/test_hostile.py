"""The gateway against hostile callers and hostile upstreams (on SQLite), real processes.

Callers: a foreign Origin or Host (DNS rebinding) and a body over the limit are refused
before anything reaches the upstream. Upstreams (tests/support/upstreams/hostile_upstream.py):
malformed SSE, a byte-at-a-time drip, a 10 MiB event. And 500 concurrent sessions on the
Python SDK upstream. Each gets a clear answer; the gateway's RSS is measured and bounded
(tests/support/process_memory.py), and once the clients are gone no recording is left
running (`eventlog_gateway_recordings` back to 0).
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.gateway_matrix.conftest import matrix_gateway
from tests.support import mcp_raw
from tests.support.mcp_raw import HEADERS, initialize
from tests.support.process_memory import MIB, RssSampler
from tests.support.processes import ServerProcess, free_port
from tests.support.upstreams import upstream_process
from tests.support.waiting import until

pytestmark = pytest.mark.process

INIT = initialize("hostile")


@pytest.fixture(scope="module")
def python_stack(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[ServerProcess, str]]:
    """The Python SDK upstream and a gateway on SQLite in front of it: (gateway, upstream)."""
    workdir = tmp_path_factory.mktemp("hostile")
    with upstream_process("python", workdir) as up:
        database = f"sqlite+aiosqlite:///{workdir / 'gateway.db'}"
        with matrix_gateway(f"{up.base_url}/mcp", database, workdir) as gw:
            yield gw, up.base_url


@pytest.fixture(scope="module")
def hostile_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """The hostile upstream and a gateway on SQLite in front of it; yields the gateway."""
    workdir = tmp_path_factory.mktemp("hostile-upstream")
    port = free_port()
    argv = ["-m", "tests.support.upstreams.hostile_upstream", "--port", str(port)]
    log = workdir / "hostile-upstream.log"
    with ServerProcess.program(argv, port=port, log_path=log) as up:
        database = f"sqlite+aiosqlite:///{workdir / 'gateway.db'}"
        with matrix_gateway(f"{up.base_url}/mcp", database, workdir) as gw:
            yield gw


async def seen_count(upstream: str) -> int:
    async with httpx.AsyncClient() as http:
        seen: dict[str, list[Any]] = (await http.get(f"{upstream}/test/seen")).json()
        return len(seen["headers"])


async def open_session(http: httpx.AsyncClient, gateway: str) -> str:
    return await mcp_raw.open_session(http, f"{gateway}/mcp", client="hostile")


async def call(
    http: httpx.AsyncClient, gateway: str, sid: str, arguments: dict[str, Any], rid: int = 1
) -> tuple[int, list[dict[str, Any]]]:
    """A tools/call; its status and every JSON-RPC message of its SSE (or JSON) answer."""
    body = {
        "jsonrpc": "2.0",
        "id": rid,
        "method": "tools/call",
        "params": {"name": "progress", "arguments": arguments, "_meta": {"progressToken": rid}},
    }
    headers = {**HEADERS, "mcp-session-id": sid}
    messages: list[dict[str, Any]] = []
    async with http.stream("POST", f"{gateway}/mcp", json=body, headers=headers) as response:
        if "text/event-stream" not in response.headers.get("content-type", ""):
            await response.aread()
            return response.status_code, [response.json()] if response.content else []
        data: list[str] = []
        async for line in response.aiter_lines():
            if line.startswith("data:"):
                data.append(line[5:].strip())
            elif line == "" and data:
                text = "\n".join(data)
                data = []
                if not text:
                    continue
                try:
                    messages.append(json.loads(text))
                except json.JSONDecodeError:
                    messages.append({"unparsable": text})  # relayed as it came
                    continue
                if messages[-1].get("id") == rid:
                    break
        return response.status_code, messages


@pytest.mark.parametrize(
    ("header", "statuses"),
    [(("origin", "http://evil.example"), (403,)), (("host", "evil.example"), (400, 421))],
    ids=["origin", "host"],
)
async def test_a_foreign_origin_or_host_is_refused_before_the_upstream(
    python_stack: tuple[ServerProcess, str], header: tuple[str, str], statuses: tuple[int, ...]
) -> None:
    server, upstream = python_stack
    gateway = server.base_url
    before = await seen_count(upstream)
    async with httpx.AsyncClient() as http:
        headers = {**HEADERS, header[0]: header[1]}
        response = await http.post(f"{gateway}/mcp", json=INIT, headers=headers)
    assert response.status_code in statuses, response.text
    assert await seen_count(upstream) == before


async def test_a_huge_body_is_refused_413_before_anything_is_sent(
    python_stack: tuple[ServerProcess, str],
) -> None:
    """Only the head of a 17 MiB POST is sent: the gateway answers 413 from its
    Content-Length, without waiting for the body, and the upstream sees nothing."""
    server, upstream = python_stack
    before = await seen_count(upstream)
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    head = (
        "POST /mcp HTTP/1.1\r\n"
        f"host: 127.0.0.1:{server.port}\r\n"
        "content-type: application/json\r\n"
        "accept: application/json, text/event-stream\r\n"
        f"content-length: {17 * MIB}\r\n\r\n"
    )
    writer.write(head.encode())
    await writer.drain()
    async with asyncio.timeout(30):
        status_line = await reader.readline()
        rest = await reader.readuntil(b"\r\n\r\n")
    writer.close()
    assert status_line.split()[1] == b"413", status_line
    assert b"application/problem+json" in rest.lower(), rest
    assert await seen_count(upstream) == before


async def test_malformed_sse_from_the_upstream_fails_the_call_visibly(
    hostile_stack: ServerProcess,
) -> None:
    async with httpx.AsyncClient(timeout=30) as http:
        sid = await open_session(http, hostile_stack.base_url)
        began = time.monotonic()
        status, messages = await call(http, hostile_stack.base_url, sid, {"mode": "malformed"})
        took = time.monotonic() - began
        assert took < 15, took
        if status == 200:
            # The request fails with the gateway's JSON-RPC error, not silence.
            (last,) = [m for m in messages if m.get("id") == 1]
            assert last["error"]["code"] == -32011, last
        else:
            assert status == 502, messages
        assert (await http.get(f"{hostile_stack.base_url}/healthz")).status_code == 200


async def test_a_slow_drip_upstream_is_relayed_to_its_end(hostile_stack: ServerProcess) -> None:
    async with httpx.AsyncClient(timeout=60) as http:
        sid = await open_session(http, hostile_stack.base_url)
        status, messages = await call(
            http, hostile_stack.base_url, sid, {"mode": "drip", "interval": 0.005}
        )
    assert status == 200
    assert messages[-1]["result"]["content"][0]["text"] == "counted to 1", messages


async def test_a_10_mib_event_is_relayed_or_refused_clearly_with_bounded_memory(
    hostile_stack: ServerProcess,
) -> None:
    assert hostile_stack.pid is not None
    with RssSampler(hostile_stack.pid) as rss:
        async with httpx.AsyncClient(timeout=60) as http:
            sid = await open_session(http, hostile_stack.base_url)
            status, messages = await call(http, hostile_stack.base_url, sid, {"mode": "huge"})
    assert status == 200, messages
    final = messages[-1]
    assert final.get("id") == 1, final
    if "result" in final:
        (progress,) = [m for m in messages if m.get("method") == "notifications/progress"]
        assert len(progress["params"]["message"]) == 10 * MIB
    else:
        assert final["error"]["code"] == -32011, final
    # One 10 MiB event held a few times over (read, stored, relayed), not without bound.
    assert rss.growth < 200 * MIB, rss.growth / MIB


def _recordings(metrics: str) -> float:
    found = re.search(r"^eventlog_gateway_recordings(?:\{[^}]*\})? (\S+)$", metrics, re.M)
    return float(found.group(1)) if found else 0.0


@pytest.mark.soak  # 500 sessions: about 25 s of CI's budget, in `make soak`
async def test_500_concurrent_sessions_bounded_memory_and_nothing_left_running(
    python_stack: tuple[ServerProcess, str],
) -> None:
    server, _upstream = python_stack
    gateway = server.base_url
    count = 500
    limits = httpx.Limits(max_connections=100)
    assert server.pid is not None
    pid = server.pid
    with RssSampler(pid) as rss:
        async with httpx.AsyncClient(timeout=120, limits=limits) as http:

            async def one(index: int) -> str:
                sid = await open_session(http, gateway)
                _status, messages = await call(http, gateway, sid, {"n": 3}, rid=index + 1)
                return str(messages[-1].get("result", {}).get("content", [{}])[0].get("text"))

            outcomes = await asyncio.gather(*(one(i) for i in range(count)), return_exceptions=True)
    failures = [repr(o) for o in outcomes if not isinstance(o, str)]
    assert not failures, f"{len(failures)} of {count} sessions failed: {failures[:3]}"
    assert outcomes == ["counted to 3"] * count
    # Measured under shared load; bound generous but finite.
    assert rss.growth < 400 * MIB, rss.growth / MIB
    async with httpx.AsyncClient() as http:

        async def idle() -> bool:
            return _recordings((await http.get(f"{gateway}/metrics")).text) == 0

        await until(idle)
