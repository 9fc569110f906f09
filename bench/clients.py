"""The Python side of a message: HTTP clients compared, and what the store adds.

`python -m bench.clients < spec.json` prints one JSON result. It runs in its own process
on the stdlib asyncio loop (as the MCP SDK's `MCPServer.run` serves), one request at a
time, so every figure is a per-request latency. Kinds:

- `clients`: the same append (one ~200-byte event) POSTed to the no-op endpoint by each
  client in turn, in interleaved blocks (A, B, C, … then again), so every client sees
  the same machine. Clients:
  - `httpx`: the project's own `ServiceConnection.request` (httpx.AsyncClient, `json=`,
    retries, typed errors): the client as MCP servers use it today;
  - `httpx+sniffio`: the same, with `import sniffio` failing at once instead of
    searching sys.path about 4 times per request (httpcore asks; anyio 4 no longer
    installs sniffio): what adding `sniffio` to the dependencies would buy;
  - `httpx-tuned`: one `httpx.AsyncClient` with the body pre-encoded (`content=`),
    `trust_env=False` and an explicit `AsyncHTTPTransport(retries=0)`;
  - `httpx-transport`: that transport called directly (`handle_async_request`): httpx's
    connection pool without the client's request/response machinery;
  - `aiohttp`: one `aiohttp.ClientSession`, the body pre-encoded;
  - `raw`: `bench/wire.py`, a bare asyncio HTTP/1.1 exchange: the floor of any Python
    client on this loop.
- `store_event`: `EventLogEventStore.store_event` on the real service, one message after
  another on one stream (a progress notification, as the SDK's router hands it), and the
  bare `EventLogClient.append` of the same event, interleaved in blocks.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import httpx

from bench.load import latency_summary
from bench.wire import Connection, WireError
from bench.workload import PROGRESS, append_body

HOST = "127.0.0.1"
Request = Callable[[], Awaitable[object]]
Close = Callable[[], Awaitable[None]]


async def _httpx_service(port: int, path: str) -> tuple[Request, Close]:
    from mcp_eventlog_client import ServiceConnection

    conn = ServiceConnection(f"http://{HOST}:{port}")
    doc = json.loads(append_body(1))

    async def send() -> object:
        return await conn.request("POST", path, json=doc, retry=True)

    return send, conn.aclose


async def _httpx_sniffio(port: int, path: str) -> tuple[Request, Close]:
    """`httpx` as today, but `import sniffio` answered at once from `sys.modules`."""
    send, close = await _httpx_service(port, path)

    async def sniffed() -> object:
        # httpcore asks `import sniffio` ~4 times per request; anyio 4 no longer installs
        # it, so every ask searches sys.path and fails. A None entry fails at once (as a
        # cached import would succeed at once): the cost of that search, isolated.
        missing = "sniffio" not in sys.modules
        if missing:
            sys.modules["sniffio"] = None  # type: ignore[assignment]
        try:
            return await send()
        finally:
            if missing:
                del sys.modules["sniffio"]

    return sniffed, close


async def _httpx_tuned(port: int, path: str) -> tuple[Request, Close]:
    client = httpx.AsyncClient(
        base_url=f"http://{HOST}:{port}",
        transport=httpx.AsyncHTTPTransport(retries=0),
        trust_env=False,
        timeout=10.0,
    )
    body = append_body(1)
    headers = {"content-type": "application/json"}

    async def send() -> object:
        response = await client.post(path, content=body, headers=headers)
        return json.loads(response.content)

    return send, client.aclose


async def _httpx_transport(port: int, path: str) -> tuple[Request, Close]:
    transport = httpx.AsyncHTTPTransport(retries=0)
    body = append_body(1)
    url = httpx.URL(f"http://{HOST}:{port}{path}")
    headers = [
        (b"host", f"{HOST}:{port}".encode()),
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
    ]

    async def send() -> object:
        request = httpx.Request("POST", url, headers=headers, content=body)
        response = await transport.handle_async_request(request)
        payload = await response.aread()
        await response.aclose()
        return json.loads(payload)

    return send, transport.aclose


async def _aiohttp(port: int, path: str) -> tuple[Request, Close]:
    session = aiohttp.ClientSession(
        base_url=f"http://{HOST}:{port}",
        timeout=aiohttp.ClientTimeout(total=10.0),
        connector=aiohttp.TCPConnector(limit=16),
    )
    body = append_body(1)
    headers = {"content-type": "application/json"}

    async def send() -> object:
        async with session.post(path, data=body, headers=headers) as response:
            return json.loads(await response.read())

    return send, session.close


async def _raw(port: int, path: str) -> tuple[Request, Close]:
    conn = Connection(HOST, port)
    body = append_body(1)

    async def send() -> object:
        try:
            status, payload = await conn.request("POST", path, body)
        except WireError:  # the server closed the idle kept-alive connection: reconnect
            await conn.close()
            status, payload = await conn.request("POST", path, body)
        if status >= 400:
            raise RuntimeError(f"{status} {payload[:200]!r}")
        return json.loads(payload)

    return send, conn.close


CLIENTS: dict[str, Callable[[int, str], Awaitable[tuple[Request, Close]]]] = {
    "httpx": _httpx_service,
    "httpx+sniffio": _httpx_sniffio,
    "httpx-tuned": _httpx_tuned,
    "httpx-transport": _httpx_transport,
    "aiohttp": _aiohttp,
    "raw": _raw,
}


async def _timed(send: Request, n: int) -> list[float]:
    out = []
    for _ in range(n):
        began = time.perf_counter()
        await send()
        out.append(time.perf_counter() - began)
    return out


def _summary(samples: list[float], blocks: list[list[float]]) -> dict[str, Any]:
    return {
        "requests": len(samples),
        **latency_summary(samples),
        "p50_ms_per_block": [statistics.median(b) * 1e3 for b in blocks],
    }


async def run_clients(spec: dict[str, Any]) -> dict[str, Any]:
    """Each client's per-request latency on the no-op endpoint, in interleaved blocks."""
    port, path = spec["port"], spec.get("path", "/v1/generations/noop/events")
    names: list[str] = spec.get("clients", list(CLIENTS))
    made = {name: await CLIENTS[name](port, path) for name in names}
    try:
        for send, _ in made.values():  # connect, warm every code path
            await _timed(send, spec.get("warmup", 50))
        blocks: dict[str, list[list[float]]] = {name: [] for name in names}
        for _ in range(spec["blocks"]):
            for name, (send, _) in made.items():
                # Untimed first: uvicorn closes a connection idle for 5 s (the other
                # clients' blocks), and the reconnect is not what is measured.
                await _timed(send, 3)
                blocks[name].append(await _timed(send, spec["requests"]))
    finally:
        for _, close in made.values():
            await close()
    return {name: _summary([s for b in bs for s in b], bs) for name, bs in blocks.items()}


async def run_store_event(spec: dict[str, Any]) -> dict[str, Any]:
    """`store_event` and the bare `append` on the real service, interleaved in blocks."""
    from mcp_types import jsonrpc_message_adapter

    from mcp_eventlog_client import NewEvent
    from mcp_eventlog_client.mcp import EventLogEventStore, session_scope

    message = jsonrpc_message_adapter.validate_json(PROGRESS)
    store = EventLogEventStore(f"http://{HOST}:{spec['port']}", max_events=1_000_000)
    client = store.client
    stored: list[list[float]] = []
    bare: list[list[float]] = []
    try:
        with session_scope("bench-clients"):
            generation = await client.open_generation("bench.bare", max_events=1_000_000)
            seq = 0

            async def append() -> object:
                nonlocal seq
                seq += 1
                event = NewEvent(message.model_dump_json(by_alias=True, exclude_unset=True))
                return await client.append(generation.token, [event], first_seq=seq)

            async def store_one() -> object:
                return await store.store_event("1", message)

            await _timed(store_one, spec.get("warmup", 50))
            await _timed(append, spec.get("warmup", 50))
            for _ in range(spec["blocks"]):
                stored.append(await _timed(store_one, spec["requests"]))
                bare.append(await _timed(append, spec["requests"]))
    finally:
        await store.aclose()
    return {
        "store_event": _summary([s for b in stored for s in b], stored),
        "client_append": _summary([s for b in bare for s in b], bare),
    }


_KINDS = {"clients": run_clients, "store_event": run_store_event}


def main() -> int:
    """Read the spec from stdin, run it on the stdlib asyncio loop, print JSON."""
    spec = json.load(sys.stdin)
    json.dump(asyncio.run(_KINDS[spec["kind"]](spec)), sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
