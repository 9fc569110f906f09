"""Request bodies are bounded before any parsing: in size, in time, and all together.

The front door (`app/api/frontdoor/bodies.py`) reads a body only once the caller is known and the
route exists; then it reads it whole, so a slow or oversized body never reaches a handler
(or a transaction). Buffering costs one copy of a body bounded by `max_body_bytes`; what
bounds the sum over concurrent requests is a `BodyBudget`: the bytes of bodies held at
once by this process, refused with 503 past the budget, returned when the request ends.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass

from starlette.requests import ClientDisconnect
from starlette.types import Receive

from app.errors import BodyTimeout, BodyTooLarge, Overloaded

Headers = Mapping[bytes, bytes]


class BodyBudget:
    """The bytes of request bodies this process holds at once, against a limit.

    One event loop serves a process, so plain integers are enough (no lock).
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.held = 0

    def take(self, size: int) -> bool:
        """Hold `size` more bytes; False (and nothing held) when that is over the limit."""
        if self.held + size > self.limit:
            return False
        self.held += size
        return True

    def give(self, size: int) -> None:
        """Return bytes taken with `take`."""
        self.held -= size


@dataclass(slots=True)
class HeldBody:
    """The bytes one request holds of the budget; `release()` gives them back (once)."""

    budget: BodyBudget
    size: int = 0

    def take(self, size: int) -> None:
        """Hold `size` more bytes, or `Overloaded` when the budget has not got them."""
        if not self.budget.take(size):
            raise Overloaded("the service holds too many request bodies at once; retry shortly")
        self.size += size

    def release(self) -> None:
        """Give back everything held."""
        self.budget.give(self.size)
        self.size = 0


@dataclass(frozen=True, slots=True)
class BodyReader:
    """Reads one request's body under the size limit and the timeout, into a `HeldBody`."""

    max_bytes: int
    timeout: float

    def check_declared_size(self, headers: Headers) -> None:
        """`BodyTooLarge` at once when the declared length is over the limit."""
        declared = declared_length(headers)
        if declared is not None and declared > self.max_bytes:
            raise BodyTooLarge(f"the body is over {self.max_bytes} bytes")

    async def read(self, headers: Headers, receive: Receive, held: HeldBody) -> bytes:
        """The whole body, or `BodyTooLarge`, `BodyTimeout`, `Overloaded`, `ClientDisconnect`."""
        self.check_declared_size(headers)
        declared = declared_length(headers)
        if declared is not None:
            held.take(declared)
        try:
            # A timeout block, not `wait_for`: on Python 3.11 that runs the read in a task of
            # its own, which costs a body request about a quarter of the front door's time.
            async with asyncio.timeout(self.timeout):
                return await self._read(receive, declared, held)
        except TimeoutError:
            raise BodyTimeout(f"the body took over {self.timeout:g}s") from None

    async def _read(self, receive: Receive, declared: int | None, held: HeldBody) -> bytes:
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise ClientDisconnect
            chunk: bytes = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                raise BodyTooLarge(f"the body is over {self.max_bytes} bytes")
            if declared is None:
                # Chunked: the size is only known as it arrives, so it is taken as it does.
                held.take(len(chunk))
            chunks.append(chunk)
            if not message.get("more_body", False):
                return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def declared_length(headers: Headers) -> int | None:
    """The request's `Content-Length`, or None (chunked, or not a number)."""
    value = headers.get(b"content-length")
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        return None


def has_body(headers: Headers) -> bool:
    """Whether the request carries a body (a length above zero, or chunked)."""
    if b"transfer-encoding" in headers:
        return True
    return (declared_length(headers) or 0) > 0
