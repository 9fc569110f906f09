"""The official Python client through the gateway: sessions, calls, and a cut connection."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from typing import Any

import httpx2
from mcp.client.session import ClientSession

from tests.support.sdk_session import (
    Progress,
    call_progress,
    client_session,
    progress_of,
    text_of,
)

# The session, the call and what it says are the SDK client's own
# (`tests/support/sdk_session.py`); here, what the gateway's tests add: a cut connection.
__all__ = [
    "CuttingTransport",
    "Progress",
    "call_progress",
    "mcp_client",
    "progress_of",
    "seqs_of",
    "text_of",
]


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


def mcp_client(
    url: str,
    *,
    session_id: str | None = None,
    headers: dict[str, str] | None = None,
    transport: httpx2.AsyncBaseTransport | None = None,
    end_session: bool = True,
) -> AbstractAsyncContextManager[tuple[ClientSession, list[str], list[Any]]]:
    """An SDK client session on `url` (the gateway's MCP endpoint); with `session_id` it
    joins that session (not initialized again)."""
    return client_session(
        url,
        session_id=session_id,
        initialize=session_id is None,
        end_session=end_session,
        headers=headers,
        transport=transport,
    )


def seqs_of(tokens: list[str]) -> list[tuple[str, int]]:
    """`(token, seq)` of each event id."""
    return [(t.rsplit(":", 1)[0], int(t.rsplit(":", 1)[1])) for t in tokens]
