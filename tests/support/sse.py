"""Live readers for the tests: a real SSE parser (httpx-sse) over a real connection.

A `Reader` follows `GET /v1/streams/{id}/live` in a task and queues what it parses, so a
test awaits the next event with a deadline instead of sleeping.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx
from httpx_sse import ServerSentEvent, aconnect_sse

WAIT = 30.0  # seconds: generous, the machine is shared


@dataclass
class Reader:
    """One live reader: the events it parsed, in order, and how its connection ended."""

    events: asyncio.Queue[ServerSentEvent] = field(default_factory=asyncio.Queue)
    status: int | None = None
    retry: int | None = None
    ended: asyncio.Event = field(default_factory=asyncio.Event)
    seen: list[ServerSentEvent] = field(default_factory=list)

    async def next(self, within: float = WAIT) -> ServerSentEvent:
        """The next event (data, reset or end), or a TimeoutError after `within` seconds."""
        async with asyncio.timeout(within):
            return await self.events.get()

    async def take(self, count: int, within: float = WAIT) -> list[ServerSentEvent]:
        """The next `count` events."""
        return [await self.next(within) for _ in range(count)]

    @property
    def last_id(self) -> str | None:
        """The id of the last data event (what an EventSource would send back)."""
        ids = [event.id for event in self.seen if event.id]
        return ids[-1] if ids else None


def control(event: ServerSentEvent) -> dict[str, Any]:
    """The JSON data of a control event (`reset`, `end`)."""
    data: dict[str, Any] = json.loads(event.data)
    return data


@asynccontextmanager
async def reading(
    base_url: str,
    stream_id: str,
    last_event_id: str | None = None,
    *,
    query: str | None = None,
    headers: dict[str, str] | None = None,
) -> AsyncIterator[Reader]:
    """Follow a stream live while the block runs (the connection closes at its end)."""
    reader = Reader()
    sent = dict(headers or {})
    if last_event_id is not None:
        sent["Last-Event-ID"] = last_event_id
    params = {} if query is None else {"last_event_id": query}
    opened = asyncio.Event()

    url = f"/v1/streams/{stream_id}/live"
    timeout = httpx.Timeout(WAIT, read=None)

    async def follow() -> None:
        try:
            async with (
                httpx.AsyncClient(base_url=base_url, timeout=timeout) as http,
                aconnect_sse(http, "GET", url, headers=sent, params=params) as source,
            ):
                reader.status = source.response.status_code
                opened.set()
                if reader.status != 200:
                    return
                async for event in source.aiter_sse():
                    if event.retry is not None:
                        reader.retry = event.retry
                    reader.seen.append(event)
                    reader.events.put_nowait(event)
        finally:
            opened.set()
            reader.ended.set()

    task = asyncio.create_task(follow())
    try:
        async with asyncio.timeout(WAIT):
            await opened.wait()
        yield reader
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
