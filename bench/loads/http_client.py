"""A minimal keep-alive HTTP/1.1 client for the load process.

Why not httpx for the load: on this 2-core machine httpx's per-request overhead made the
load process, not the server, the bottleneck (measured against the no-op endpoint; see
the README's Performance section). This client does one thing: send a request on a kept
connection and read a `Content-Length` (or chunked) response. Loopback only.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any


class WireError(Exception):
    """The server answered in a way this client does not speak, or hung up."""


class Connection:
    """One persistent HTTP/1.1 connection to `host:port`."""

    def __init__(self, host: str, port: int) -> None:
        self._host = host
        self._port = port
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None

    async def _open(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        if self._reader is None or self._writer is None:
            self._reader, self._writer = await asyncio.open_connection(self._host, self._port)
        return self._reader, self._writer

    async def request(self, method: str, path: str, body: bytes | None = None) -> tuple[int, bytes]:
        """Send one request and return (status, body)."""
        reader, writer = await self._open()
        head = f"{method} {path} HTTP/1.1\r\nhost: {self._host}:{self._port}\r\n"
        if body is not None:
            head += f"content-type: application/json\r\ncontent-length: {len(body)}\r\n"
        writer.write(head.encode() + b"\r\n" + (body or b""))
        status_line = await reader.readline()
        if not status_line:
            await self.close()
            raise WireError("connection closed")
        status = int(status_line.split(b" ", 2)[1])
        length: int | None = None
        chunked = False
        close = False
        while True:
            line = await reader.readline()
            if line in (b"\r\n", b""):
                break
            name, _, value = line.partition(b":")
            name = name.strip().lower()
            if name == b"content-length":
                length = int(value)
            elif name == b"transfer-encoding" and b"chunked" in value.lower():
                chunked = True
            elif name == b"connection" and b"close" in value.lower():
                close = True
        payload = await _read_chunked(reader) if chunked else await reader.readexactly(length or 0)
        if close:
            await self.close()
        return status, payload

    async def json(self, method: str, path: str, doc: Any = None) -> tuple[int, Any]:
        """A request with a JSON body (or none), answered with a JSON body."""
        body = None if doc is None else json.dumps(doc).encode()
        status, payload = await self.request(method, path, body)
        return status, json.loads(payload) if payload else None

    async def close(self) -> None:
        """Close the connection (reopened by the next request)."""
        if self._writer is not None:
            self._writer.close()
            with contextlib.suppress(OSError):
                await self._writer.wait_closed()
        self._reader = self._writer = None


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    parts: list[bytes] = []
    while True:
        size = int((await reader.readline()).split(b";")[0], 16)
        if size == 0:
            await reader.readline()
            return b"".join(parts)
        parts.append(await reader.readexactly(size))
        await reader.readline()
