"""httpx transports that stand between the client and the service, to lose or fake answers."""

from __future__ import annotations

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
