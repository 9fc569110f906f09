"""A counting TCP proxy in front of PostgreSQL: what one append sends, message by message.

The service connects to this proxy instead of 127.0.0.1:5432; the proxy forwards bytes
both ways unchanged and parses the client's side of the protocol (v3 frontend messages):
simple queries (`Q`, with their text), Parse (`P`, statement name and text), Bind (`B`,
which prepared statement), Execute, Describe, Sync, Flush. From those it counts, per
connection and in total:

- round trips: how many times the client sent something after the server had answered
  (one wait for the network and the server each);
- statements: each `Q` and each Bind/Execute of a prepared statement, with its SQL.
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
import threading
from collections import Counter
from dataclasses import dataclass, field


@dataclass
class Tally:
    """Everything counted so far; `mark()` starts a new window."""

    messages: Counter[str] = field(default_factory=Counter)
    round_trips: int = 0
    statements: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def mark(self) -> None:
        """Forget what was counted (the next window starts now)."""
        with self.lock:
            self.messages.clear()
            self.round_trips = 0
            self.statements.clear()

    def snapshot(self) -> tuple[Counter[str], int, list[str]]:
        """A copy of the window's counts."""
        with self.lock:
            return Counter(self.messages), self.round_trips, list(self.statements)


_NAMES = {
    "Q": "Query",
    "P": "Parse",
    "B": "Bind",
    "E": "Execute",
    "D": "Describe",
    "S": "Sync",
    "H": "Flush",
    "C": "Close",
    "X": "Terminate",
    "p": "Password",
}


_SSL_REQUEST = 80877103
_GSS_REQUEST = 80877104


class _Conn:
    """One proxied connection's parser state."""

    def __init__(self, tally: Tally) -> None:
        self.tally = tally
        self.buffer = b""
        self.started = False
        self.server_spoke = False
        self.prepared: dict[str, str] = {}

    def from_client(self, data: bytes) -> None:
        with self.tally.lock:
            if self.server_spoke:
                self.tally.round_trips += 1
                self.server_spoke = False
            self.buffer += data
            self._parse()

    def from_server(self) -> None:
        self.server_spoke = True

    def _parse(self) -> None:
        while True:
            if not self.started:  # StartupMessage / SSLRequest: length, no type byte
                if len(self.buffer) < 8:
                    return
                length, code = struct.unpack("!II", self.buffer[:8])
                if len(self.buffer) < length:
                    return
                self.buffer = self.buffer[length:]
                # An SSL or GSS request comes before the real StartupMessage.
                self.started = code not in (_SSL_REQUEST, _GSS_REQUEST)
                if self.started:
                    self.tally.messages["Startup (new connection)"] += 1
                continue
            if len(self.buffer) < 5:
                return
            kind = chr(self.buffer[0])
            (length,) = struct.unpack("!I", self.buffer[1:5])
            if len(self.buffer) < 1 + length:
                return
            body = self.buffer[5 : 1 + length]
            self.buffer = self.buffer[1 + length :]
            self._message(kind, body)

    def _message(self, kind: str, body: bytes) -> None:
        self.tally.messages[_NAMES.get(kind, kind)] += 1
        if kind == "Q":
            self.tally.statements.append(body.rstrip(b"\0").decode(errors="replace"))
        elif kind == "P":
            name, _, rest = body.partition(b"\0")
            query = rest.partition(b"\0")[0].decode(errors="replace")
            self.prepared[name.decode()] = query
            self.tally.statements.append(f"[parse {name.decode() or 'unnamed'}] {query}")
        elif kind == "B":
            _portal, _, rest = body.partition(b"\0")
            name = rest.partition(b"\0")[0].decode()
            self.tally.statements.append(f"[execute] {self.prepared.get(name, name)}")


class CountingProxy:
    """Listens on 127.0.0.1:<port> in a thread of its own; forwards to `upstream`."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.tally = Tally()
        self.port = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._server: asyncio.base_events.Server | None = None

    def __enter__(self) -> CountingProxy:
        self._thread = threading.Thread(target=self._run, name="pgwire-proxy", daemon=True)
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("the counting proxy did not start")
        return self

    def __exit__(self, *_exc: object) -> None:
        if self._loop is not None and self._server is not None:
            self._loop.call_soon_threadsafe(self._server.close)
            self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(10)

    def _run(self) -> None:
        loop = self._loop = asyncio.new_event_loop()
        self._server = loop.run_until_complete(asyncio.start_server(self._handle, "127.0.0.1", 0))
        self.port = self._server.sockets[0].getsockname()[1]
        self._ready.set()
        with contextlib.suppress(RuntimeError):
            loop.run_forever()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        conn = _Conn(self.tally)

        async def pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter, client: bool) -> None:
            try:
                while data := await src.read(65536):
                    if client:
                        conn.from_client(data)
                    else:
                        conn.from_server()
                    dst.write(data)
                    await dst.drain()
            except (ConnectionError, asyncio.CancelledError):
                pass
            finally:
                with contextlib.suppress(Exception):
                    dst.close()

        await asyncio.gather(
            pump(reader, up_writer, client=True), pump(up_reader, writer, client=False)
        )
