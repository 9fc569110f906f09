"""A TCP relay in front of the service, as a real process: the network between a client and
the service, which a test can cut, or which does not pass WebSockets.

`python -m tests.support.relay --port P --upstream URL --control-port C [--refuse-upgrades]`
relays every connection to 127.0.0.1:P to the upstream's host and port, byte for byte.
With `--refuse-upgrades` a connection whose first request asks for a WebSocket upgrade is
answered `502` (as a proxy that passes only plain HTTP) and never reaches the upstream.

Control (plain HTTP on 127.0.0.1:C): `POST /cut` drops every relayed connection at once
(both sides reset, as a broken network); `GET /stats` answers how many connections were
relayed, how many of them were upgrades, how many upgrades were refused and how many
connections were cut. Everything is bounded: each connection lives while both sides do.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import httpx

from tests.support.processes import ServerProcess, free_port


@dataclass
class Relay:
    """The relay's state."""

    host: str
    port: int
    refuse_upgrades: bool
    open: set[asyncio.StreamWriter] = field(default_factory=set)
    stats: dict[str, int] = field(
        default_factory=lambda: {"connections": 0, "upgrades": 0, "refused": 0, "cut": 0}
    )


async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Copy until either side ends."""
    with contextlib.suppress(ConnectionError, OSError):
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    with contextlib.suppress(ConnectionError, OSError):
        writer.close()


async def relay(relay: Relay, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """One client connection."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
        writer.close()
        return
    relay.stats["connections"] += 1
    upgrade = b"upgrade: websocket" in head.lower()
    if upgrade:
        relay.stats["upgrades"] += 1
        if relay.refuse_upgrades:
            relay.stats["refused"] += 1
            body = b"this proxy passes no WebSocket"
            writer.write(
                b"HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/plain\r\nConnection: close\r\n"
                + f"Content-Length: {len(body)}\r\n\r\n".encode()
                + body
            )
            with contextlib.suppress(ConnectionError):
                await writer.drain()
            writer.close()
            return
    try:
        up_reader, up_writer = await asyncio.open_connection(relay.host, relay.port)
    except OSError:
        writer.close()
        return
    up_writer.write(head)
    relay.open.update((writer, up_writer))
    try:
        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))
    finally:
        relay.open.difference_update((writer, up_writer))


async def control(relay: Relay, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """`POST /cut` and `GET /stats`."""
    with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
        head = await reader.readuntil(b"\r\n\r\n")
        line = head.split(b"\r\n", 1)[0].decode()
        if line.startswith("POST /cut"):
            relay.stats["cut"] += len(relay.open) // 2
            for stream in list(relay.open):
                stream.transport.abort()
            relay.open.clear()
        body = json.dumps(relay.stats).encode()
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n"
            + f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        await writer.drain()
    writer.close()


async def main() -> None:
    """Relay and answer control requests until killed."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--upstream", required=True)
    parser.add_argument("--control-port", type=int, required=True)
    parser.add_argument("--refuse-upgrades", action="store_true")
    args = parser.parse_args()
    upstream = urlsplit(args.upstream)
    state = Relay(upstream.hostname or "127.0.0.1", upstream.port or 80, args.refuse_upgrades)
    relaying = await asyncio.start_server(lambda r, w: relay(state, r, w), "127.0.0.1", args.port)
    controlling = await asyncio.start_server(
        lambda r, w: control(state, r, w), "127.0.0.1", args.control_port
    )
    async with relaying, controlling:
        await asyncio.gather(relaying.serve_forever(), controlling.serve_forever())


@dataclass(frozen=True)
class RelayProcess:
    """A running relay: the URL to give clients, and its control."""

    url: str
    control: str

    def cut(self) -> dict[str, int]:
        """Drop every relayed connection; the stats after it."""
        stats: dict[str, int] = httpx.post(f"{self.control}/cut", timeout=10).json()
        return stats

    def stats(self) -> dict[str, int]:
        """What the relay has seen."""
        stats: dict[str, int] = httpx.get(f"{self.control}/stats", timeout=10).json()
        return stats


@contextmanager
def relay_process(
    upstream: str, workdir: Path, *, refuse_upgrades: bool = False
) -> Iterator[RelayProcess]:
    """The relay in front of `upstream`, as a process."""
    port, control_port = free_port(), free_port()
    argv = ["-m", "tests.support.relay", "--port", str(port), "--upstream", upstream]
    argv += ["--control-port", str(control_port)]
    if refuse_upgrades:
        argv.append("--refuse-upgrades")
    log = workdir / f"relay-{port}.log"
    # Ready once its control port answers (the relayed port would count as a connection).
    with ServerProcess.program(argv, port=control_port, log_path=log):
        yield RelayProcess(f"http://127.0.0.1:{port}", f"http://127.0.0.1:{control_port}")


if __name__ == "__main__":
    asyncio.run(main())
