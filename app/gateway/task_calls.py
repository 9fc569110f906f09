"""One JSON-RPC request to the upstream, read to its answer: the response object (JSON, or
the matching message of an SSE response) and, on the way, each notification it carried.

The upstream may answer a 2026-07-28 request either way; both are read here, so the task
host and the worker never care which.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import httpx

from app.errors import UpstreamError, UpstreamUnavailable
from app.gateway.sse import SseParser, SseTooLarge
from app.gateway.upstream import Upstream

Notified = Callable[[dict[str, Any]], Awaitable[None]]
_MAX_EVENT = 16 * 1024 * 1024


class Unanswered(UpstreamError):
    """The upstream's response carried no answer to the request (closed early, not
    JSON-RPC, an HTTP error without a JSON-RPC body)."""

    code = "upstream_unavailable"


async def call(
    upstream: Upstream,
    headers: Iterable[tuple[str, str]],
    message: dict[str, Any],
    on_notification: Notified | None = None,
) -> dict[str, Any]:
    """Send `message`; the upstream's JSON-RPC response to it (with `result` or `error`).

    `UpstreamUnavailable` when the upstream cannot be reached, `Unanswered` when it
    answered something else.
    """
    body = json.dumps(message).encode()
    response = await upstream.open("POST", headers, body)
    try:
        content_type = response.headers.get("content-type", "")
        if content_type.startswith("text/event-stream"):
            return await _from_stream(response, message.get("id"), on_notification)
        raw = await response.aread()
    except httpx.HTTPError as broken:
        detail = f"the upstream's answer broke off: {type(broken).__name__}"
        raise UpstreamUnavailable(detail) from None
    finally:
        await response.aclose()
    return _answer_in(raw, response.status_code)


def _answer_in(raw: bytes, status: int) -> dict[str, Any]:
    try:
        answer = json.loads(raw)
    except ValueError:
        raise Unanswered(f"the upstream answered HTTP {status} without JSON-RPC") from None
    if isinstance(answer, dict) and ("result" in answer or "error" in answer):
        return answer
    raise Unanswered(f"the upstream answered HTTP {status} without a JSON-RPC response")


async def _from_stream(
    response: httpx.Response, request_id: object, on_notification: Notified | None
) -> dict[str, Any]:
    parser = SseParser(_MAX_EVENT)
    try:
        async for text in response.aiter_text():
            for event in parser.feed(text):
                if not event.data:
                    continue
                try:
                    message = json.loads(event.data)
                except ValueError:
                    continue
                if not isinstance(message, dict):
                    continue
                if "id" in message and ("result" in message or "error" in message):
                    if message["id"] == request_id:
                        return message
                elif "method" in message and "id" not in message and on_notification:
                    await on_notification(message)
    except SseTooLarge:
        raise Unanswered("the upstream sent an event over the limit") from None
    raise Unanswered("the upstream's stream ended before the answer")
