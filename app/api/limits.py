"""Request bodies are bounded in size and in time before any parsing happens."""

from __future__ import annotations

import asyncio
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.api.problems import problem


class BodyLimitMiddleware:
    """Read the whole body first: 413 past `max_bytes`, 408 past `timeout` seconds.

    Buffering costs one copy of a body that is already bounded by `max_bytes`; in return
    a slow or oversized body never reaches a handler (or a transaction).
    """

    def __init__(self, app: ASGIApp, *, max_bytes: int, timeout: float) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.timeout = timeout

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD", "OPTIONS"):
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.max_bytes:
            await self._refuse_too_large(scope, receive, send)
            return
        try:
            body = await asyncio.wait_for(self._read(receive), self.timeout)
        except _TooLarge:
            await self._refuse_too_large(scope, receive, send)
            return
        except TimeoutError:
            response = problem(408, "body_timeout", f"the body took over {self.timeout:g}s")
            await response(scope, receive, send)
            return
        except _Disconnected:
            return
        await self.app(scope, _replay(body, receive), send)

    async def _read(self, receive: Receive) -> bytes:
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise _Disconnected
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                raise _TooLarge
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)

    async def _refuse_too_large(self, scope: Scope, receive: Receive, send: Send) -> None:
        response = problem(
            413, "body_too_large", f"the body is over {self.max_bytes} bytes", headers=_CLOSE
        )
        await response(scope, receive, send)


_CLOSE = {"Connection": "close"}


class _TooLarge(Exception):
    pass


class _Disconnected(Exception):
    pass


def _content_length(scope: Scope) -> int | None:
    for name, value in scope["headers"]:
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


def _replay(body: bytes, receive: Receive) -> Receive:
    sent = False

    async def replayed() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            message: dict[str, Any] = {"type": "http.request", "body": body, "more_body": False}
            return message
        return await receive()

    return replayed
