"""httpx transports that stand between the client and the service, to lose or fake answers."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx


class DropFirstResponse(httpx.AsyncBaseTransport):
    """Let the service process a request, then lose its answer (as a read timeout would)."""

    def __init__(self, inner: httpx.AsyncBaseTransport, method: str, path_suffix: str) -> None:
        self.inner = inner
        self.method, self.path_suffix = method, path_suffix
        self.dropped = 0
        self.sent = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self.inner.handle_async_request(request)
        matches = request.method == self.method and request.url.path.endswith(self.path_suffix)
        if not matches:
            return response
        self.sent += 1
        if self.dropped:
            return response
        await response.aread()
        self.dropped += 1
        raise httpx.ReadTimeout("the answer was lost", request=request)


class AnswerFirst(httpx.AsyncBaseTransport):
    """Answer the first `count` requests with `response` without reaching the service."""

    def __init__(self, inner: httpx.AsyncBaseTransport, response: httpx.Response, count: int):
        self.inner, self.response, self.left = inner, response, count
        self.headers: list[httpx.Headers] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.headers.append(request.headers)
        if self.left:
            self.left -= 1
            return self.response
        return await self.inner.handle_async_request(request)


class RefuseConnections(httpx.AsyncBaseTransport):
    """Fail the first `count` requests as a refused connection would."""

    def __init__(self, inner: httpx.AsyncBaseTransport, count: int) -> None:
        self.inner, self.left = inner, count
        self.refused = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if self.left:
            self.left -= 1
            self.refused += 1
            raise httpx.ConnectError("connection refused (injected)", request=request)
        return await self.inner.handle_async_request(request)


class _CutAfter(httpx.AsyncByteStream):
    def __init__(self, inner: httpx.AsyncByteStream, marker: bytes) -> None:
        self.inner, self.marker = inner, marker

    async def __aiter__(self) -> AsyncIterator[bytes]:
        seen = b""
        async for chunk in self.inner:
            start = len(seen)
            seen += chunk
            end = seen.find(self.marker)
            if end < 0:
                yield chunk
                continue
            yield seen[start : end + len(self.marker)]  # up to the marker, not a byte more
            raise httpx.ReadError("connection dropped (injected)")

    async def aclose(self) -> None:
        await self.inner.aclose()


class DropStreamOnce(httpx.AsyncBaseTransport):
    """Cut the first streamed response right after `marker`, as a dropped connection
    would (the bytes up to the cut arrive, none after it)."""

    def __init__(self, inner: httpx.AsyncBaseTransport, marker: bytes) -> None:
        self.inner, self.marker = inner, marker
        self.requests: list[httpx.Request] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        response = await self.inner.handle_async_request(request)
        if len(self.requests) > 1:
            return response
        assert isinstance(response.stream, httpx.AsyncByteStream)
        return httpx.Response(
            response.status_code,
            headers=response.headers,
            stream=_CutAfter(response.stream, self.marker),
            request=request,
            extensions=response.extensions,
        )
