"""Request accounting (`app/api/frontdoor/accounting.py`), on both databases: one access
line and one count per request with its id, 499 for a client that left, streamed answers
passed through, one traceback for an error nobody answered."""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import AsyncIterator

import httpx
import pytest
from fastapi.responses import StreamingResponse
from starlette.types import Message

from app.logs import TEXT_FORMAT, RequestIdFilter, TextFormatter
from tests.support.app import make_settings, started_app
from tests.support.front_door import Call, assert_problem, headers_of, http_scope, run


def _sample(metrics: str, status: str, route: str) -> float:
    for line in metrics.splitlines():
        wanted = (f'status="{status}"', f'route="{route}"')
        if line.startswith("eventlog_http_requests_total{") and all(w in line for w in wanted):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


async def test_a_client_that_leaves_mid_body_is_499_not_500(
    database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    async with started_app(make_settings(database_url)) as (app, http):
        token = (await http.post("/v1/streams/s1/generations")).json()["generation"]
        body = b'{"events": [{"data": "' + b"x" * 100 + b'"}]}'
        gone = Call(body, chunks=2)
        gone.disconnect_after_first = True
        headers = headers_of(content_type="application/json", content_length=str(len(body)))
        await run(app, gone, "POST", f"/v1/generations/{token}/events", **headers)
        assert gone.status is None  # nobody to answer
        metrics = (await http.get("/metrics")).text
        page = (await http.get(f"/v1/generations/{token}/events")).json()
    route = "/v1/generations/{generation}/events"
    assert _sample(metrics, "499", route) == 1
    assert _sample(metrics, "500", route) == 0
    [line] = [r for r in caplog.records if r.name == "app.access" and r.status == 499]  # type: ignore[attr-defined]
    assert line.route == route  # type: ignore[attr-defined]
    assert page["events"] == []
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


async def test_a_streamed_answer_passes_through_and_a_reader_leaving_ends_it(
    database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Never buffered: the first event arrives while the stream is still open; a reader
    that disconnects ends it as a normal 200, not an error."""
    caplog.set_level(logging.INFO)
    produced_more = asyncio.Event()
    first_sent = asyncio.Event()

    async def events() -> AsyncIterator[bytes]:
        yield b"id: t:1\ndata: one\n\n"
        await first_sent.wait()
        produced_more.set()
        await asyncio.Event().wait()  # an idle live stream: only the reader's exit ends it
        yield b""

    async def live() -> StreamingResponse:
        return StreamingResponse(events(), media_type="text/event-stream")

    async with started_app(make_settings(database_url)) as (app, http):
        app.add_api_route("/test/live", live)
        left = asyncio.Event()
        sent: list[Message] = []

        async def receive() -> Message:
            await left.wait()
            return {"type": "http.disconnect"}

        async def send(message: Message) -> None:
            sent.append(message)
            if message.get("body"):
                first_sent.set()

        scope = http_scope("GET", "/test/live", {})
        streaming = asyncio.create_task(app(scope, receive, send))
        async with asyncio.timeout(30):
            await produced_more.wait()
        bodies = [m.get("body") for m in sent if m["type"] == "http.response.body"]
        assert bodies == [b"id: t:1\ndata: one\n\n"]  # sent while the stream is still open
        left.set()
        async with asyncio.timeout(30):
            await streaming
        metrics = (await http.get("/metrics")).text
    assert sent[0]["status"] == 200
    assert _sample(metrics, "200", "/test/live") == 1
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


async def test_an_unexpected_error_is_one_traceback_and_a_problem(
    database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    async def broken() -> None:
        raise RuntimeError("a bug")

    async with started_app(make_settings(database_url)) as (app, http):
        app.add_api_route("/test/broken", broken)
        answer = await http.get("/test/broken")
    assert_problem(answer, 500, "internal_error")
    assert answer.headers["x-request-id"]
    tracebacks = [r for r in caplog.records if r.exc_info]
    assert len(tracebacks) == 1
    assert "a bug" in str(tracebacks[0].exc_info[1])  # type: ignore[index]


async def test_a_text_log_line_cannot_be_forged_and_has_route_and_duration(
    client: httpx.AsyncClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    forged = "/nope%0a2026-11-30 12:00:00,000 ERROR app.api [x] forged%1b[31m"
    assert (await client.get(forged)).status_code == 404
    assert (await client.post("/v1/streams/s1/generations")).status_code == 201
    formatter = TextFormatter(fmt=TEXT_FORMAT)
    lines = [formatter.format(r) for r in caplog.records if r.name == "app.access"]
    assert len(lines) == 2
    assert not any(set(line) & {"\n", "\x1b"} for line in lines)
    assert "/nope\\n2026-11-30 12:00:00,000 ERROR" in lines[0]
    assert "\\x1b[31m" in lines[0]
    assert " 404 <unmatched> " in lines[0]
    assert " 201 /v1/streams/{stream_id}/generations " in lines[1]
    assert lines[1].endswith("ms")


async def test_one_log_line_per_request_with_its_id_and_never_event_data(
    client: httpx.AsyncClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    opened = await client.post("/v1/streams/s1/generations", headers={"X-Request-ID": "req-42"})
    assert opened.headers["x-request-id"] == "req-42"
    token = opened.json()["generation"]
    appended = await client.post(
        f"/v1/generations/{token}/events", json={"events": [{"data": "TOP-SECRET-PAYLOAD"}]}
    )
    generated = appended.headers["x-request-id"]
    assert re.fullmatch(r"[0-9a-f]{32}", generated)
    insane = await client.get("/healthz", headers={"X-Request-ID": "bad id\twith spaces"})
    assert insane.headers["x-request-id"] != "bad id\twith spaces"
    access = [r for r in caplog.records if r.name == "app.access"]
    assert len(access) == 3
    first = access[0]
    assert (first.request_id, first.route, first.status) == (  # type: ignore[attr-defined]
        "req-42",
        "/v1/streams/{stream_id}/generations",
        201,
    )
    assert access[1].request_id == generated  # type: ignore[attr-defined]
    assert "TOP-SECRET-PAYLOAD" not in caplog.text


async def test_an_invalid_verdict_is_a_warning_with_the_request_id(
    client: httpx.AsyncClient,
) -> None:
    seen: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = seen.append  # type: ignore[method-assign]
    handler.addFilter(RequestIdFilter())  # as the configured handler stamps every line
    audit_log = logging.getLogger("app.service.audit")
    audit_log.addHandler(handler)
    try:
        await client.post(
            "/v1/resume",
            json={"last_event_id": "AAAAAAAAAAAAAAAAAAAAAA:1"},
            headers={"X-Request-ID": "r1"},
        )
        token = (await client.post("/v1/streams/s1/generations")).json()["generation"]
        await client.post("/v1/streams/s1/resume", json={"last_event_id": f"{token}:0"})
    finally:
        audit_log.removeHandler(handler)
    warnings = [r for r in seen if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "unknown_generation" in warnings[0].getMessage()
    assert warnings[0].request_id == "r1"  # type: ignore[attr-defined]
