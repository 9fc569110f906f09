"""The official Python client through the gateway: sessions, calls, and a cut connection."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx2
import mcp_types as types
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.message import ClientMessageMetadata


@dataclass
class Progress:
    """What one call sees: progress values and resumption tokens, and events to await."""

    steps: list[float] = field(default_factory=list)
    tokens: list[str] = field(default_factory=list)
    waiting: list[tuple[Callable[[], bool], anyio.Event]] = field(default_factory=list)

    def when(self, condition: Callable[[], bool]) -> anyio.Event:
        """Set once `condition()` holds."""
        event = anyio.Event()
        self.waiting.append((condition, event))
        self._check()
        return event

    def at(self, step: int) -> anyio.Event:
        """Set once step `step` and its token (after the priming one) have arrived."""
        return self.when(lambda: len(self.steps) >= step and len(self.tokens) > step)

    async def on_progress(self, progress: float, total: float | None, message: str | None) -> None:
        self.steps.append(progress)
        self._check()

    async def on_token(self, token: str) -> None:
        self.tokens.append(token)
        self._check()

    def _check(self) -> None:
        for condition, event in self.waiting:
            if condition():
                event.set()


class CuttingTransport(httpx2.AsyncBaseTransport):
    """Cuts the first tool call's SSE response after `after` events, as a dropped
    connection would: the client then reconnects by itself with its last id."""

    def __init__(self, after: int) -> None:
        self._inner = httpx2.AsyncHTTPTransport()
        self._after = after
        self.cut = False

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await self._inner.handle_async_request(request)
        body = request.content if request.method == "POST" else b""
        if self.cut or b'"tools/call"' not in body:
            return response
        self.cut = True
        return httpx2.Response(
            response.status_code,
            headers=response.headers,
            stream=_Cut(response.stream, self._after),  # type: ignore[arg-type]
            request=request,
        )

    async def aclose(self) -> None:
        await self._inner.aclose()


class _Cut(httpx2.AsyncByteStream):
    def __init__(self, inner: httpx2.AsyncByteStream, after: int) -> None:
        self._inner = inner
        self._after = after

    async def __aiter__(self) -> AsyncIterator[bytes]:
        seen = 0
        async for chunk in self._inner:
            seen += chunk.count(b"\n\n")
            yield chunk
            if seen >= self._after:
                break
        await self._inner.aclose()

    async def aclose(self) -> None:
        await self._inner.aclose()


@asynccontextmanager
async def mcp_client(
    url: str,
    *,
    session_id: str | None = None,
    headers: dict[str, str] | None = None,
    transport: httpx2.AsyncBaseTransport | None = None,
    end_session: bool = True,
) -> AsyncIterator[tuple[ClientSession, list[str], list[Any]]]:
    """An SDK client session on `url` (the gateway's MCP endpoint); with `session_id` it
    joins that session (not initialized again)."""
    session_ids: list[str] = [] if session_id is None else [session_id]
    notifications: list[Any] = []

    async def remember_session(response: httpx2.Response) -> None:
        sid = response.headers.get("mcp-session-id")
        if sid and not session_ids:
            session_ids.append(sid)

    async def on_message(message: Any) -> None:
        notifications.append(message)

    sent = dict(headers or {})
    if session_id is not None:
        sent |= {"mcp-session-id": session_id, "mcp-protocol-version": "2025-11-25"}
    http = httpx2.AsyncClient(
        headers=sent, timeout=30, transport=transport, event_hooks={"response": [remember_session]}
    )
    async with (
        http,
        streamable_http_client(url, http_client=http, terminate_on_close=end_session) as (r, w),
        ClientSession(r, w, message_handler=on_message) as session,
    ):
        if session_id is None:
            await session.initialize()
        yield session, session_ids, notifications


def call_progress(
    session: ClientSession,
    progress: Progress,
    *,
    resumption_token: str | None = None,
    **arguments: Any,
) -> Awaitable[types.CallToolResult]:
    """Call the upstream's `progress` tool, recording its notifications and tokens."""
    request = types.CallToolRequest(
        params=types.CallToolRequestParams(name="progress", arguments=arguments)
    )
    metadata = ClientMessageMetadata(
        resumption_token=resumption_token, on_resumption_token_update=progress.on_token
    )
    return session.send_request(
        request, types.CallToolResult, metadata=metadata, progress_callback=progress.on_progress
    )


def text_of(result: types.CallToolResult) -> str:
    """The text of a tool result."""
    content = result.content[0]
    assert isinstance(content, types.TextContent)
    return content.text


def progress_of(notifications: list[Any]) -> list[float]:
    """The progress values among the notifications a session was sent unsolicited."""
    return [m.params.progress for m in notifications if isinstance(m, types.ProgressNotification)]


def seqs_of(tokens: list[str]) -> list[tuple[str, int]]:
    """`(token, seq)` of each event id."""
    return [(t.rsplit(":", 1)[0], int(t.rsplit(":", 1)[1])) for t in tokens]
