"""`python -m bench.probes.heads`: what the connection guard costs per request.

uvicorn's httptools protocol and the service's guarded one (`app/api/frontdoor/connections.py`)
side by side, in one process, on the same event loop and a transport that discards what
it is given: each request is a typical head (13 headers, ~600 bytes) answered by an ASGI
app that sends a 2-byte body, and the time measured is `data_received` alone (parse,
checks, the request's task made): the protocol's own work per request, not the app's.
Interleaved rounds; prints µs per request (median and range of the rounds) and the
per-round ratio guarded/plain.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from typing import Any

from uvicorn.config import Config
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.server import ServerState

from app.api.frontdoor.connections import LIMITS_KEY, ConnectionLimits, GuardedHttpToolsProtocol
from app.settings import Settings

REQUEST = (
    b"POST /v1/generations/Qm9vx2Qm9vx2Qm9vx2Qm9v/events HTTP/1.1\r\n"
    b"Host: 127.0.0.1:8080\r\nUser-Agent: python-httpx/0.28.1\r\nAccept: */*\r\n"
    b"Accept-Encoding: gzip, deflate\r\nConnection: keep-alive\r\n"
    b"Authorization: Bearer writer-key-of-tenant-a-0001\r\n"
    b"Content-Type: application/json\r\nContent-Length: 28\r\n"
    b"X-Request-ID: 6f1c2b2e6f0a4a4c9a7d1b2c3d4e5f60\r\nMcp-Session-Id: s-1\r\n"
    b"Traceparent: 00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01\r\n"
    b"Baggage: a=b\r\nX-Forwarded-For: 10.0.0.1\r\n\r\n"
    b'{"events": [{"data": "x"}]}\n'
)


async def _app(scope: Any, receive: Any, send: Any) -> None:
    await receive()
    await send({"type": "http.response.start", "status": 201, "headers": []})
    await send({"type": "http.response.body", "body": b"{}"})


class _Sink(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.closing = False

    def write(self, data: Any) -> None:
        pass

    def is_closing(self) -> bool:
        return self.closing

    def close(self) -> None:
        self.closing = True

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 8080) if name in ("sockname", "peername") else default

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


async def _round(kind: type[HttpToolsProtocol], requests: int) -> float:
    """Seconds per request spent reading the head (`data_received`: parse, checks, the
    request's task made), for `requests` on one kept-alive connection; the app's answer
    runs outside the measured part."""
    config = Config(app=_app, access_log=False, log_level="warning", lifespan="off")
    config.load()
    state = ServerState()
    limits = ConnectionLimits.of(Settings())
    protocol = kind(config=config, server_state=state, app_state={LIMITS_KEY: limits})
    protocol.connection_made(_Sink())
    spent = 0.0
    clock = time.process_time  # CPU time: the other processes of a loaded machine do not count
    for _ in range(requests):
        started = clock()
        protocol.data_received(REQUEST)
        spent += clock() - started
        while state.tasks:
            await asyncio.gather(*state.tasks)
    protocol.connection_lost(None)
    return spent / requests


async def compare(rounds: int, requests: int) -> str:
    """Interleaved rounds of both protocols; the report."""
    plain: list[float] = []
    guarded: list[float] = []
    await _round(HttpToolsProtocol, requests // 10)  # warm up
    await _round(GuardedHttpToolsProtocol, requests // 10)
    for _ in range(rounds):
        plain.append(await _round(HttpToolsProtocol, requests))
        guarded.append(await _round(GuardedHttpToolsProtocol, requests))
    ratios = [g / p for p, g in zip(plain, guarded, strict=True)]

    def spread(values: list[float], scale: float, unit: str) -> str:
        low, mid, high = (scale * f(values) for f in (min, statistics.median, max))
        return f"{mid:.2f}{unit} ({low:.2f}-{high:.2f})"

    return "\n".join(
        [
            f"{rounds} rounds of {requests} requests, head read per request: median (range)",
            f"plain httptools: {spread(plain, 1e6, ' µs')}",
            f"guarded:         {spread(guarded, 1e6, ' µs')}",
            f"ratio guarded/plain: {spread(ratios, 1, '')}",
        ]
    )


def main() -> int:
    """Run the comparison and print it."""
    parser = argparse.ArgumentParser(prog="bench.probes.heads", description=__doc__)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--requests", type=int, default=20_000)
    args = parser.parse_args()
    print(asyncio.run(compare(args.rounds, args.requests)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
