"""The official SDK's client of the test MCP server (`mcp_server.py`): a session, a call of
its `progress` tool that records notifications and resumption tokens, and what a result
says. The client tests of the Python SDK store share these."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
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
    """Progress notifications as one call sees them, and events to await on the way."""

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
        """Set once progress step `step` and its resumption token have both arrived."""
        return self.when(lambda: len(self.steps) >= step and len(self.tokens) > step)

    def tokens_counted(self, count: int) -> anyio.Event:
        """Set once `count` event ids (priming events' included) have arrived."""
        return self.when(lambda: len(self.tokens) >= count)

    def token_of(self, step: int) -> str:
        """The event id of progress step `step` (`tokens[0]` is the priming event's)."""
        return self.tokens[step]

    async def on_progress(self, progress: float, total: float | None, message: str | None) -> None:
        self.steps.append(progress)
        self._check()

    async def on_token(self, token: str) -> None:
        self.tokens.append(token)
        self._check()

    def _check(self) -> None:
        # The SDK calls the two callbacks from different tasks, in either order.
        for condition, event in self.waiting:
            if condition():
                event.set()


@asynccontextmanager
async def mcp_client(
    url: str, *, session_id: str | None = None, initialize: bool = True, end_session: bool = True
) -> AsyncIterator[tuple[ClientSession, list[str], list[Any]]]:
    """An SDK client session on the test server at `url` (its `/mcp`): `client_session`'s."""
    async with client_session(
        f"{url}/mcp", session_id=session_id, initialize=initialize, end_session=end_session
    ) as opened:
        yield opened


@asynccontextmanager
async def client_session(
    endpoint: str,
    *,
    session_id: str | None = None,
    initialize: bool = True,
    end_session: bool = True,
    headers: dict[str, str] | None = None,
    transport: httpx2.AsyncBaseTransport | None = None,
) -> AsyncIterator[tuple[ClientSession, list[str], list[Any]]]:
    """An SDK client session on the MCP `endpoint`; yields it, its session id (once known)
    and what it was sent.

    The third value collects every notification the session's message handler sees.

    With `session_id` it joins that (existing) session instead of opening one; with
    `end_session=False` leaving does not end the session on the server. `headers` go with
    every request, over `transport` when given.
    """
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
        streamable_http_client(endpoint, http_client=http, terminate_on_close=end_session) as (
            read,
            write,
        ),
        ClientSession(read, write, message_handler=on_message) as session,
    ):
        if initialize:
            await session.initialize()
        yield session, session_ids, notifications


async def call_progress(
    session: ClientSession,
    progress: Progress,
    *,
    resumption_token: str | None = None,
    **arguments: Any,
) -> types.CallToolResult:
    """Call the `progress` tool, recording its notifications and resumption tokens."""
    request = types.CallToolRequest(
        params=types.CallToolRequestParams(name="progress", arguments=arguments)
    )
    metadata = ClientMessageMetadata(
        resumption_token=resumption_token, on_resumption_token_update=progress.on_token
    )
    return await session.send_request(
        request, types.CallToolResult, metadata=metadata, progress_callback=progress.on_progress
    )


def progress_of(notifications: list[Any]) -> list[float]:
    """The progress values among the notifications a session was sent."""
    return [m.params.progress for m in notifications if isinstance(m, types.ProgressNotification)]


def text_of(result: types.CallToolResult) -> str:
    """The text of a tool result."""
    content = result.content[0]
    assert isinstance(content, types.TextContent)
    return content.text
