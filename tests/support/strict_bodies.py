"""Requests of the strict-body tests: the paths of every request model, the bodies each
test sends, a request's raw body, what a refused request must leave as it was, the 422
problem code, and a refusal checked whole."""

from __future__ import annotations

from typing import Any

import httpx

TOKEN = "{token}"
OPEN = "/v1/streams/strict/generations"
APPEND = "/v1/generations/{token}/events"
RESUME = "/v1/streams/strict/resume"
RESUME_ANY = "/v1/resume"
EXPLAIN = "/admin/v1/explain"


async def state(client: httpx.AsyncClient, token: str) -> Any:
    """What a refused request must leave as it was: the stream and the generation's events."""
    stream = (await client.get("/v1/streams/strict")).json()
    page = (await client.get(f"/v1/generations/{token}/events")).json()
    return stream["generations"], stream["current"]["tail_seq"], page["events"]


async def post_raw(client: httpx.AsyncClient, path: str, token: str, raw: bytes) -> httpx.Response:
    """POST `raw` as JSON to `path`, the placeholder token replaced by `token` in both."""
    return await client.post(
        path.format(token=token),
        content=raw.replace(TOKEN.encode(), token.encode()),
        headers={"content-type": "application/json"},
    )


def problem_code(answer: httpx.Response) -> str:
    assert answer.status_code == 422, answer.text
    assert answer.headers["content-type"] == "application/problem+json"
    code: str = answer.json()["code"]
    return code


async def assert_refused(
    client: httpx.AsyncClient,
    path: str,
    token: str,
    raw: bytes,
    code: str,
    *,
    saying: str | None = None,
) -> None:
    """`post_raw` refuses the body: a 422 problem of `code` (its detail saying `saying`, when
    given), and the stream and its events as they were before it (`state`)."""
    before = await state(client, token)
    answer = await post_raw(client, path, token, raw)
    assert problem_code(answer) == code
    if saying is not None:
        assert saying in answer.json()["detail"]
    assert await state(client, token) == before


# (path, body): every field of every request model, with a value lax parsing would take.
LAX = [
    (OPEN, {"max_events": "47"}),
    (OPEN, {"max_events": 47.0}),
    (OPEN, {"max_events": True}),
    (OPEN, {"ttl_seconds": "60"}),
    (OPEN, {"ttl_seconds": 60.0}),
    (OPEN, {"producer": 7}),
    (OPEN, {"reason": ["initial"]}),
    (OPEN, {"surprise": 1}),
    (APPEND, {"events": [{"data": "x"}], "first_seq": "1"}),
    (APPEND, {"events": [{"data": "x"}], "first_seq": 1.0}),
    (APPEND, {"events": [{"data": "x"}], "first_seq": True}),
    (APPEND, {"events": [{"data": "x"}], "terminal": "true"}),
    (APPEND, {"events": [{"data": "x"}], "terminal": 1}),
    (APPEND, {"events": [{"data": 5}]}),
    (APPEND, {"events": [{"data": "x", "event": 5}]}),
    (APPEND, {"events": [{"data": "x", "id": "t:1"}]}),
    (APPEND, {"events": {"0": {"data": "x"}}}),
    (APPEND, {"events": [{"data": "x"}], "tenant": "other"}),
    (RESUME, {"last_event_id": 1}),
    (RESUME, {"last_event_id": "{token}:1", "limit": "10"}),
    (RESUME, {"last_event_id": "{token}:1", "limit": 10.0}),
    (RESUME, {"last_event_id": "{token}:1", "after": 0}),
    (RESUME_ANY, {"last_event_id": ["{token}:1"]}),
    (EXPLAIN, {"last_event_id": 1}),
    (EXPLAIN, {"last_event_id": "{token}:1", "stream_id": 5}),
    (EXPLAIN, {"last_event_id": "{token}:1", "verbose": True}),
]


# Raw bodies that json.loads accepts but strict JSON does not.
DUPLICATED = [
    (OPEN, b'{"max_events": 5, "max_events": 6}'),
    (APPEND, b'{"events": [{"data": "a", "data": "b"}]}'),
    (APPEND, b'{"events": [], "terminal": false, "terminal": true}'),
    (RESUME, b'{"last_event_id": "{token}:1", "last_event_id": "{token}:0"}'),
    (EXPLAIN, b'{"last_event_id": "x:1", "last_event_id": "{token}:1"}'),
]


# A lone surrogate, wherever a string enters a body: a key or any value.
SURROGATES = [
    (OPEN, b'{"producer": "p\\ud800"}'),
    (APPEND, b'{"events": [{"data": "\\udfff"}]}'),
    (APPEND, b'{"events": [{"data": "x", "event": "e\\ud83d"}]}'),
    (APPEND, b'{"events": [{"data": "x", "\\ud800": 1}]}'),
    (RESUME, b'{"last_event_id": "\\ud800:1"}'),
    (RESUME_ANY, b'{"last_event_id": "{token}\\udc00:1"}'),
    (EXPLAIN, b'{"last_event_id": "\\ud800:1"}'),
    (EXPLAIN, b'{"last_event_id": "x:1", "tenant": "t\\ud800"}'),
]
