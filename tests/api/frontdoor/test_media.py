"""Request bodies are strict, field by field, on both databases.

These are the direct tests a fuzzer missed: each sends a value that lax parsing would
coerce ("47" → 47, 1.0 → 1, 1 → true, a duplicated key → its last value) and checks it is
refused with 422 and that nothing was stored. If a request model lost `strict=True` (or
`extra="forbid"`), or the front door's JSON pass went lax, one of these fails.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

TOKEN = "{token}"

OPEN = "/v1/streams/strict/generations"
APPEND = "/v1/generations/{token}/events"
RESUME = "/v1/streams/strict/resume"
RESUME_ANY = "/v1/resume"
EXPLAIN = "/admin/v1/explain"

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


@pytest.fixture
async def token(client: httpx.AsyncClient) -> str:
    """A generation of stream `strict` with one event."""
    gen = (await client.post(OPEN)).json()["generation"]
    stored = await client.post(APPEND.format(token=gen), json={"events": [{"data": "kept"}]})
    assert stored.status_code == 201
    return str(gen)


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


@pytest.mark.parametrize(("path", "body"), LAX, ids=[f"{p} {json.dumps(b)}" for p, b in LAX])
async def test_a_value_lax_parsing_would_coerce_is_refused(
    client: httpx.AsyncClient, token: str, path: str, body: dict[str, Any]
) -> None:
    before = await state(client, token)
    answer = await post_raw(client, path, token, json.dumps(body).encode())
    assert problem_code(answer) == "validation_error"
    assert await state(client, token) == before


@pytest.mark.parametrize(("path", "raw"), DUPLICATED, ids=[r.decode() for _p, r in DUPLICATED])
async def test_a_key_twice_in_one_object_is_refused(
    client: httpx.AsyncClient, token: str, path: str, raw: bytes
) -> None:
    before = await state(client, token)
    answer = await post_raw(client, path, token, raw)
    assert problem_code(answer) == "invalid_json"
    assert "appears twice" in answer.json()["detail"]
    assert await state(client, token) == before


@pytest.mark.parametrize(("path", "raw"), SURROGATES, ids=[r.decode() for _p, r in SURROGATES])
async def test_a_lone_surrogate_anywhere_in_a_body_is_refused(
    client: httpx.AsyncClient, token: str, path: str, raw: bytes
) -> None:
    """Never a 500, never stored, never decided (so never in the audit log)."""
    before = await state(client, token)
    answer = await post_raw(client, path, token, raw)
    assert problem_code(answer) == "validation_error"
    assert "UTF-8" in answer.json()["detail"]
    assert await state(client, token) == before
    decisions = (await client.get("/admin/v1/decisions")).json()["decisions"]
    assert decisions == []


async def test_paired_surrogate_escapes_are_text(client: httpx.AsyncClient, token: str) -> None:
    """An emoji from an ASCII-only JSON encoder (`\\ud83d\\ude00`) is valid and stored."""
    raw = b'{"events": [{"data": "\\ud83d\\ude00 ok", "event": "smile\\ud83d\\ude00"}]}'
    answer = await client.post(
        APPEND.format(token=token), content=raw, headers={"content-type": "application/json"}
    )
    assert answer.status_code == 201, answer.text
    page = (await client.get(f"/v1/generations/{token}/events")).json()
    assert (page["events"][-1]["data"], page["events"][-1]["event"]) == ("😀 ok", "smile😀")


@pytest.mark.parametrize(
    "query",
    ["after=1_0", "after=%2010", "after=10%20", "after=%2B1", "after=1%0A", "limit=1_0", "limit="],
)
async def test_query_integers_are_plain_digits(
    client: httpx.AsyncClient, token: str, query: str
) -> None:
    answer = await client.get(f"/v1/generations/{token}/events?{query}")
    assert problem_code(answer) == "validation_error"
    admin = await client.get(f"/admin/v1/generations/{token}/events?{query}")
    assert problem_code(admin) == "validation_error"


@pytest.mark.parametrize("query", ["limit=1_0", "limit=%201", "limit=%2B1"])
async def test_admin_list_limits_are_plain_digits(client: httpx.AsyncClient, query: str) -> None:
    for path in ("/admin/v1/streams", "/admin/v1/decisions"):
        assert problem_code(await client.get(f"{path}?{query}")) == "validation_error"


async def test_leading_zeros_are_still_a_number(client: httpx.AsyncClient, token: str) -> None:
    answer = await client.get(f"/v1/generations/{token}/events?after=00&limit=010")
    assert answer.status_code == 200
    assert [e["data"] for e in answer.json()["events"]] == ["kept"]


@pytest.mark.parametrize(
    "label",
    ["\x1b[31mred", "\x1b]0;title\x07", "a\tb", "\x7f", "\x85", "abc\u202edcba", "x\u2066y"],
)
async def test_control_and_bidi_characters_are_refused_in_labels(
    client: httpx.AsyncClient, token: str, label: str
) -> None:
    """A producer or an event type is shown to operators: no escape sequence gets in."""
    before = await state(client, token)
    opened = await client.post(OPEN, json={"producer": label})
    assert problem_code(opened) == "validation_error"
    appended = await client.post(
        APPEND.format(token=token), json={"events": [{"data": "x", "event": label}]}
    )
    assert problem_code(appended) == "validation_error"
    assert await state(client, token) == before


async def test_data_is_free_text(client: httpx.AsyncClient, token: str) -> None:
    """Event data may hold any valid text (tabs, escapes, bidi): it is the writer's."""
    data = "line 1\n\tline 2 \x1b[0m \u202e\r\n"
    answer = await client.post(APPEND.format(token=token), json={"events": [{"data": data}]})
    assert answer.status_code == 201, answer.text
    page = (await client.get(f"/v1/generations/{token}/events")).json()
    assert page["events"][-1]["data"] == data
