"""One JSON-RPC request to the upstream read to its answer (`app/gateway/task_calls.py`):
a JSON response or the matching message of an SSE one, the notifications on the way, and
`Unanswered` for anything that carries no answer."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import httpx
import pytest

from app.gateway.task_calls import Unanswered, call

REQUEST = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "x"}}
ANSWER = {"jsonrpc": "2.0", "id": 3, "result": {"content": []}}


class Upstream:
    """An upstream that answers every request with one prepared response."""

    def __init__(self, status: int, content_type: str, body: bytes) -> None:
        self.response = httpx.Response(status, headers={"content-type": content_type}, content=body)
        self.sent: list[bytes] = []

    async def open(
        self, method: str, headers: Iterable[tuple[str, str]], body: bytes = b""
    ) -> httpx.Response:
        self.sent.append(body)
        return self.response


def sse(*messages: dict[str, Any]) -> bytes:
    return b"".join(f"data: {json.dumps(m)}\n\n".encode() for m in messages)


async def test_a_json_answer_is_returned() -> None:
    upstream = Upstream(200, "application/json", json.dumps(ANSWER).encode())
    assert await call(upstream, [], REQUEST) == ANSWER  # type: ignore[arg-type]
    assert json.loads(upstream.sent[0]) == REQUEST


async def test_an_sse_answer_is_its_matching_message_with_notifications_on_the_way() -> None:
    progress = {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"p": 1}}
    other = {"jsonrpc": "2.0", "id": 99, "result": {}}
    body = b"data: not json\n\n" + sse(progress, other, ANSWER)
    upstream = Upstream(200, "text/event-stream", body)
    heard: list[dict[str, Any]] = []

    async def notified(message: dict[str, Any]) -> None:
        heard.append(message)

    assert await call(upstream, [], REQUEST, notified) == ANSWER  # type: ignore[arg-type]
    assert heard == [progress]


@pytest.mark.parametrize(
    ("status", "content_type", "body"),
    [
        (500, "text/plain", b"boom"),
        (200, "application/json", b'{"jsonrpc": "2.0", "id": 3}'),
        (200, "text/event-stream", sse({"jsonrpc": "2.0", "id": 4, "result": {}})),
    ],
    ids=["not json", "no result or error", "the stream ends first"],
)
async def test_a_response_without_the_answer_is_unanswered(
    status: int, content_type: str, body: bytes
) -> None:
    with pytest.raises(Unanswered):
        await call(Upstream(status, content_type, body), [], REQUEST)  # type: ignore[arg-type]
