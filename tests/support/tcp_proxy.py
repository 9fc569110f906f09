"""A TCP proxy that cuts connections mid-stream, as a dropped network would.

`TcpProxy(target_port)` listens on a free port of 127.0.0.1 and relays every connection
to the target, byte for byte, in its own thread (so sync and async tests alike can use
it). `cut()` aborts every connection open right now in both directions (a reset, no
goodbye), and new connections are relayed again afterwards: a client that reconnects
gets through. `refusing` makes it refuse new connections until cleared; `target_port`
may be changed at any time (new connections go there: a load balancer's failover).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from tests.support.processes import StartedInWith, free_port

T = TypeVar("T")


class TcpProxy(StartedInWith):
    """Relay 127.0.0.1:`port` to 127.0.0.1:`target_port`; `cut()` drops what is open."""

    def __init__(self, target_port: int, port: int | None = None) -> None:
        self.target_port = target_port
        self.port = port or free_port()
        self.refusing = False
        self.accepted = 0
        self.cuts = 0
        self.targets: list[int] = []  # the target port of each connection relayed
        self._loop = asyncio.new_event_loop()
        self._pairs: set[tuple[asyncio.StreamWriter, asyncio.StreamWriter]] = set()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server: asyncio.Server | None = None

    @property
    def base_url(self) -> str:
        """The proxy's address, as an HTTP base URL."""
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        """Start listening (returns once the port is bound)."""
        self._thread.start()
        self._server = self._run(asyncio.start_server(self._relay, "127.0.0.1", self.port))

    def stop(self) -> None:
        """Cut everything, stop listening, end the thread."""
        self.cut()
        if self._server is not None:
            self._server.close()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)
        self._loop.close()

    def cut(self) -> int:
        """Abort every open connection now; returns how many were cut."""
        return self._run(self._cut())

    def _run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(timeout=10)

    async def _cut(self) -> int:
        pairs, self._pairs = self._pairs, set()
        for client, upstream in pairs:
            for writer in (client, upstream):
                writer.transport.abort()
        self.cuts += len(pairs)
        return len(pairs)

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.refusing:
            writer.transport.abort()
            return
        self.accepted += 1
        try:
            target = self.target_port
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", target)
        except OSError:
            writer.transport.abort()
            return
        pair = (writer, up_writer)
        self._pairs.add(pair)
        self.targets.append(target)
        try:
            await asyncio.gather(_pump(reader, up_writer), _pump(up_reader, writer))
        finally:
            self._pairs.discard(pair)
            for w in pair:
                w.transport.abort()


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(OSError, asyncio.IncompleteReadError):
        while chunk := await reader.read(65536):
            writer.write(chunk)
            await writer.drain()
    with contextlib.suppress(OSError):
        if writer.can_write_eof():
            writer.write_eof()
