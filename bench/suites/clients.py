"""The Python side of a message: HTTP clients compared, and what the store adds.

`python -m bench.suites.clients < spec.json` prints one JSON result. It runs in its own process
on the stdlib asyncio loop (as the MCP SDK's `MCPServer.run` serves), one request at a
time, so every figure is a per-request latency; each result also has the process's CPU
time per request. Kinds:

- `clients`: the same append (one ~200-byte event) POSTed to the no-op endpoint by each
  client in turn, in interleaved blocks (A, B, C, … then again), so every client sees
  the same machine. Clients:
  - `httpx-client`: `ServiceConnection` sending through an `httpx.AsyncClient`, as
    version 0.1.0 sent every request (retries, typed errors; sniffio now installed);
  - `httpx-transport`: `ServiceConnection` calling httpx's own transport directly (no
    client machinery, `trust_env` off): the tuned httpx transport;
  - `aiohttp-transport`: `ServiceConnection` with its default transport, aiohttp's
    wire behind httpx's transport seam (`httpx-aiohttp`), called directly;
  - `aiohttp`: one bare `aiohttp.ClientSession`, the body pre-encoded: no retries, no
    typed errors — the library's own floor;
  - `raw`: `bench/loads/http_client.py`, a bare asyncio HTTP/1.1 exchange: the floor of any Python
    client on this loop.
- `store_event`: `EventLogEventStore.store_event` on the real service, one message after
  another on one stream (a progress notification, as the SDK's router hands it), and the
  bare `EventLogClient.append` of the same event, interleaved in blocks, with the store's
  client on the transport `spec["transport"]` (`default` or `httpx`: REST appends;
  `channel`: the appends over the append channel, the store's default).

`python -m bench.suites.clients --table [--rounds N] [--requests N]` runs the comparison of
the client row in one go, side by side in interleaved rounds: the service (SQLite,
`synchronous=FULL`) and the no-op endpoint as processes, wrk's one-connection p50 of
each (the service's own p50 and the HTTP floor), `store_event` on both transports, and
every client on the no-op; it prints the table and writes
`bench/results/clients.json`.
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

from bench.loads.http_client import Connection, WireError
from bench.loads.load import latency_summary
from bench.loads.payload import PROGRESS, append_body

HOST = "127.0.0.1"
Request = Callable[[], Awaitable[object]]
Close = Callable[[], Awaitable[None]]


def _connection(port: int, path: str, **how: Any) -> tuple[Request, Close]:
    """`ServiceConnection.request` (retries, typed errors) on the transport `how` says."""
    from mcp_eventlog_client import ServiceConnection

    conn = ServiceConnection(f"http://{HOST}:{port}", **how)
    doc = json.loads(append_body(1))

    async def send() -> object:
        return await conn.request("POST", path, json=doc, retry=True)

    async def close() -> None:
        await conn.aclose()
        if "http" in how:
            await how["http"].aclose()

    return send, close


async def _httpx_client(port: int, path: str) -> tuple[Request, Close]:
    return _connection(port, path, http=httpx.AsyncClient(timeout=10.0))


async def _httpx_transport(port: int, path: str) -> tuple[Request, Close]:
    return _connection(port, path, transport=httpx.AsyncHTTPTransport(trust_env=False))


async def _aiohttp_transport(port: int, path: str) -> tuple[Request, Close]:
    return _connection(port, path)  # the default transport


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
    "httpx-client": _httpx_client,
    "httpx-transport": _httpx_transport,
    "aiohttp-transport": _aiohttp_transport,
    "aiohttp": _aiohttp,
    "raw": _raw,
}

_cpu: dict[int, float] = {}  # id(samples list) -> CPU seconds spent producing it


async def _timed(send: Request, n: int) -> list[float]:
    out: list[float] = []
    cpu = time.process_time()
    for _ in range(n):
        began = time.perf_counter()
        await send()
        out.append(time.perf_counter() - began)
    _cpu[id(out)] = time.process_time() - cpu
    return out


def _summary(samples: list[float], blocks: list[list[float]]) -> dict[str, Any]:
    cpu = sum(_cpu.get(id(b), 0.0) for b in blocks)
    return {
        "requests": len(samples),
        **latency_summary(samples),
        "cpu_ms_per_request": cpu / max(len(samples), 1) * 1e3,
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
    from mcp_eventlog_client import EventLogClient, NewEvent
    from mcp_eventlog_client.mcp import EventLogEventStore, session_scope
    from mcp_types import jsonrpc_message_adapter

    message = jsonrpc_message_adapter.validate_json(PROGRESS)
    url = f"http://{HOST}:{spec['port']}"
    transport = (
        httpx.AsyncHTTPTransport(trust_env=False) if spec.get("transport") == "httpx" else None
    )
    # `channel`: the appends over the append channel (the store's default), on the
    # default HTTP transport for everything else; `default` and `httpx`: REST appends.
    over = "channel" if spec.get("transport") == "channel" else "rest"
    client = EventLogClient(url, transport=transport, append_transport=over)
    store = EventLogEventStore(client=client, max_events=1_000_000)
    stored: list[list[float]] = []
    bare: list[list[float]] = []
    wire: list[list[float]] = []
    raw_close: Close | None = None
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

            wired = await client.open_generation("bench.loads.http_client", max_events=1_000_000)
            raw_send, raw_close = await _raw(spec["port"], f"/v1/generations/{wired.token}/events")
            sides = ((stored, store_one), (bare, append), (wire, raw_send))
            for _, send in sides:
                await _timed(send, spec.get("warmup", 50))
            # Small blocks, round-robin: the three see the same moments of the machine.
            for _ in range(spec["blocks"]):
                for samples, send in sides:
                    samples.append(await _timed(send, spec["requests"]))
    finally:
        await client.aclose()
        if raw_close is not None:
            await raw_close()
    return {
        "store_event": _summary([s for b in stored for s in b], stored),
        "client_append": _summary([s for b in bare for s in b], bare),
        "wire_append": _summary([s for b in wire for s in b], wire),
    }


_KINDS = {"clients": run_clients, "store_event": run_store_event}
TRANSPORTS = ("channel", "default", "httpx")


def table(rounds: int, requests: int, seconds: float) -> dict[str, Any]:
    """The client row, side by side in interleaved rounds (see the module)."""
    import tempfile
    from contextlib import ExitStack
    from pathlib import Path

    from bench import seed, servers
    from bench.loads import wrk
    from bench.suites import append_cost

    out: dict[str, Any] = {"load": wrk.tool(), "rounds": []}
    with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
        workdir = Path(tmp)
        url = f"sqlite+aiosqlite:///{workdir}/clients.db"
        seed.migrate(url)
        noop = stack.enter_context(servers.noop(workdir))
        service = stack.enter_context(servers.service(url, workdir, name="service-sqlite"))
        tokens = append_cost.open_generations(service.port, "bench-clients", 1)
        for index in range(rounds):
            measured: dict[str, Any] = {
                "service_wrk": wrk.append(service.port, tokens, batch=1, seconds=seconds),
                "noop_wrk": wrk.append(noop.port, ["noop"], batch=1, seconds=seconds),
            }
            for transport in TRANSPORTS:
                measured[f"store_event_{transport}"] = append_cost.clients_process(
                    {
                        "kind": "store_event",
                        "port": service.port,
                        "transport": transport,
                        "blocks": 8,
                        "requests": max(requests // 8, 10),
                    }
                )
            measured["noop_clients"] = append_cost.clients_process(
                {"kind": "clients", "port": noop.port, "blocks": 1, "requests": requests}
            )
            out["rounds"].append(measured)
            append_cost.say(f"clients round {index + 1}/{rounds} done")
    return out


def _median(values: list[float], sign: str = "") -> str:
    low, high = min(values), max(values)
    return f"{statistics.median(values):{sign}.3f} ({low:{sign}.2f}..{high:{sign}.2f})"


def print_table(result: dict[str, Any]) -> None:
    """The figures as Markdown: medians of the rounds (range in brackets), milliseconds."""
    rounds = result["rounds"]
    service = [r["service_wrk"]["p50_ms"] for r in rounds]
    print(f"load tool: {result['load']}; {len(rounds)} interleaved rounds; ms, median (range)")
    print("\n| figure | p50 | over the service's own p50 |")
    print("|---|---|---|")
    print(f"| the service's own p50 (wrk, 1 connection) | {_median(service)} | — |")
    for transport in TRANSPORTS:
        for kind in ("store_event", "client_append"):
            p50 = [r[f"store_event_{transport}"][kind]["p50_ms"] for r in rounds]
            over = [p - s for p, s in zip(p50, service, strict=True)]
            label = f"`{kind}`, {transport} transport"
            print(f"| {label} | {_median(p50)} | {_median(over, '+')} |")
    ratio = [
        r["store_event_channel"]["store_event"]["p50_ms"] / r["service_wrk"]["p50_ms"]
        for r in rounds
    ]
    print(f"\n`store_event` over the channel ÷ the service's own REST p50: {_median(ratio)}")
    print(
        "\nThe same, against a bare asyncio exchange with the service"
        " (`bench/loads/http_client.py`)"
    )
    print("in the same process, in 8 round-robin blocks per round:\n")
    print("| figure | p50 | minus the bare exchange's p50 |")
    print("|---|---|---|")
    for transport in TRANSPORTS:
        runs = [r[f"store_event_{transport}"] for r in rounds]
        wire = [run["wire_append"]["p50_ms"] for run in runs]
        print(f"| bare exchange ({transport} run) | {_median(wire)} | — |")
        for kind in ("store_event", "client_append"):
            p50 = [run[kind]["p50_ms"] for run in runs]
            over = [p - w for p, w in zip(p50, wire, strict=True)]
            print(f"| `{kind}`, {transport} transport | {_median(p50)} | {_median(over, '+')} |")
    noop = [r["noop_wrk"]["p50_ms"] for r in rounds]
    print("\n| client on the no-op | p50 | over wrk's p50 | CPU per request |")
    print("|---|---|---|---|")
    print(f"| wrk | {_median(noop)} | — | — |")
    for name in CLIENTS:
        p50 = [r["noop_clients"][name]["p50_ms"] for r in rounds]
        cpu = [r["noop_clients"][name]["cpu_ms_per_request"] for r in rounds]
        over = [p - w for p, w in zip(p50, noop, strict=True)]
        print(f"| {name} | {_median(p50)} | {_median(over, '+')} | {_median(cpu)} |")


def main() -> int:
    """Read the spec from stdin, run it on the stdlib asyncio loop, print JSON; or, with
    `--table`, run the whole comparison and print it."""
    if "--table" in sys.argv:
        import argparse
        from pathlib import Path

        parser = argparse.ArgumentParser(prog="bench.suites.clients")
        parser.add_argument("--table", action="store_true")
        parser.add_argument("--rounds", type=int, default=5)
        parser.add_argument("--requests", type=int, default=400)
        parser.add_argument("--seconds", type=float, default=2.0)
        parser.add_argument("--results", default="clients.json", help="file in bench/results/")
        args = parser.parse_args()
        result = table(args.rounds, args.requests, args.seconds)
        results = Path(__file__).resolve().parents[1] / "results" / args.results
        results.write_text(json.dumps(result, indent=1) + "\n")
        print_table(result)
        return 0
    spec = json.load(sys.stdin)
    json.dump(asyncio.run(_KINDS[spec["kind"]](spec)), sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
