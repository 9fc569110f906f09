"""The front door (`app/api/frontdoor/stack.py` and its pieces), on both databases: who may knock
(Host, Origin; at a WebSocket upgrade too), what a request must declare, that a body is read
only after the key is checked and within the process's budget, and how each request is
logged and counted (499, one traceback)."""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx
import pytest
from fastapi import Depends, FastAPI, WebSocket
from fastapi.responses import StreamingResponse
from fastapi.routing import APIWebSocketRoute
from starlette.types import Message

from app.api.auth import Keyring
from app.api.auth import Scope as KeyScope
from app.api.deps import get_admin
from app.api.frontdoor.keys import RouteKeys
from app.errors import Forbidden, Unauthenticated
from app.logs import TEXT_FORMAT, TextFormatter
from app.settings import Settings
from tests.support.app import make_settings, started_app
from tests.support.operators import ADMIN, WRITER_A, keyed_settings

TOKEN = "AAAAAAAAAAAAAAAAAAAAAA"
FORM = {"content-type": "application/x-www-form-urlencoded"}


def open_settings(database_url: str, **overrides: Any) -> Settings:
    """No keys and the default host list (loopback only), unlike most tests' settings."""
    return make_settings(database_url, allowed_hosts=None, **overrides)


@pytest.fixture
async def open_app(database_url: str) -> AsyncIterator[tuple[FastAPI, httpx.AsyncClient]]:
    async with started_app(open_settings(database_url)) as (app, _client):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8080") as http:
            yield app, http


def assert_problem(answer: httpx.Response, status: int, code: str) -> None:
    assert answer.status_code == status, answer.text
    assert answer.headers["content-type"] == "application/problem+json"
    assert answer.json()["code"] == code


# --- who may knock ----------------------------------------------------------------------


async def test_an_open_service_answers_only_as_loopback(
    open_app: tuple[FastAPI, httpx.AsyncClient],
) -> None:
    """DNS rebinding: a page of attacker.example resolving to 127.0.0.1 reads nothing."""
    _app, http = open_app
    token = (await http.post("/v1/streams/s1/generations")).json()["generation"]
    await http.post(f"/v1/generations/{token}/events", json={"events": [{"data": "SECRET"}]})
    for host in ("attacker.example", "attacker.example:8080", "127.0.0.1.nip.io", ""):
        read = await http.get(f"/v1/generations/{token}/events", headers={"host": host})
        assert_problem(read, 421, "host_not_allowed")
        assert "SECRET" not in read.text
        opened = await http.post("/v1/streams/s1/generations", headers={"host": host})
        assert_problem(opened, 421, "host_not_allowed")
    for host in ("127.0.0.1:8080", "127.0.0.1", "localhost:8080", "LOCALHOST", "[::1]:8080"):
        read = await http.get(f"/v1/generations/{token}/events", headers={"host": host})
        assert read.status_code == 200, (host, read.text)
    assert (await http.get("/v1/streams/s1")).json()["generations"] == 1  # never fenced


async def test_hosts_with_keys_and_listed_hosts(database_url: str) -> None:
    """With keys, any Host is served (the key protects); a listed set is enforced always."""
    auth = {"authorization": f"Bearer {WRITER_A}", "host": "eventlog.internal:8080"}
    async with started_app(keyed_settings(database_url, allowed_hosts=None)) as (_app, http):
        assert (await http.get("/v1/streams/nope", headers=auth)).status_code == 404
    listed = keyed_settings(database_url, allowed_hosts=("eventlog.example",))
    async with started_app(listed) as (_app, http):
        assert_problem(await http.get("/v1/streams/nope", headers=auth), 421, "host_not_allowed")
        auth["host"] = "EventLog.Example"
        assert (await http.get("/v1/streams/nope", headers=auth)).status_code == 404
    anything = keyed_settings(database_url, allowed_hosts=("*",))
    async with started_app(anything) as (_app, http):
        assert (await http.get("/healthz", headers={"host": "whatever"})).status_code == 200


async def test_a_page_of_another_origin_is_refused(database_url: str) -> None:
    """A browser's Origin must be the service's own or listed; MCP clients send none."""
    listed = open_settings(database_url, allowed_origins=("http://localhost:3000",))
    async with started_app(listed) as (app, _client):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8080") as http:
            for origin in ("http://attacker.example", "null", "http://127.0.0.1:9999"):
                refused = await http.post("/v1/streams/s1/generations", headers={"origin": origin})
                assert_problem(refused, 403, "origin_not_allowed")
            assert (await http.get("/v1/streams/s1")).status_code == 404  # nothing opened
            for origin in ("http://127.0.0.1:8080", "http://localhost:3000", None):
                headers = {} if origin is None else {"origin": origin}
                opened = await http.post("/v1/streams/s1/generations", headers=headers)
                assert opened.status_code == 201, (origin, opened.text)


async def test_a_cross_site_form_post_neither_opens_nor_fences(
    open_app: tuple[FastAPI, httpx.AsyncClient],
) -> None:
    """A body-less POST declaring a form (what `<form method=post>` sends) is 415."""
    _app, http = open_app
    live = (await http.post("/v1/streams/s1/generations")).json()["generation"]
    for kind in ("application/x-www-form-urlencoded", "multipart/form-data", "text/plain"):
        for path in ("/v1/streams/s1/generations", f"/admin/v1/generations/{live}/terminate"):
            refused = await http.post(path, headers={"content-type": kind})
            assert_problem(refused, 415, "unsupported_media_type")
    appended = await http.post(f"/v1/generations/{live}/events", json={"events": [{"data": "x"}]})
    assert appended.status_code == 201, appended.text  # still current, not terminal
    assert (await http.get("/v1/streams/s1")).json()["generations"] == 1


async def test_an_encoded_body_is_refused(open_app: tuple[FastAPI, httpx.AsyncClient]) -> None:
    _app, http = open_app
    for encoding in ("gzip", "deflate", "br"):
        refused = await http.post(
            "/v1/streams/s1/generations",
            content=b"{}",
            headers={"content-type": "application/json", "content-encoding": encoding},
        )
        assert_problem(refused, 415, "unsupported_media_type")
    plain = await http.post(
        "/v1/streams/s1/generations",
        content=b"{}",
        headers={"content-type": "application/json", "content-encoding": "identity"},
    )
    assert plain.status_code == 201


# --- bodies: after the key, within the budget -------------------------------------------


Receive = Callable[[], Awaitable[Message]]


def http_scope(method: str, path: str, headers: dict[str, str]) -> dict[str, Any]:
    headers = {"host": "eventlog.test", **headers}
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()],
        "client": ("127.0.0.1", 50000),
        "server": ("eventlog.test", 80),
    }


class Call:
    """One raw ASGI request: what the app asked of `receive`, and what it sent."""

    def __init__(self, body: bytes, *, chunks: int = 1) -> None:
        size = max(1, len(body) // chunks)
        self.parts = [body[i : i + size] for i in range(0, len(body), size)] or [b""]
        self.received = 0
        self.sent: list[Message] = []
        self.more = asyncio.Event()  # set to let the parts after the first arrive
        self.waiting = asyncio.Event()  # set when the app waits for the second part
        self.disconnect_after_first = False

    async def receive(self) -> Message:
        self.received += 1
        if self.received == 1:
            return self._part(0)
        if self.disconnect_after_first:
            return {"type": "http.disconnect"}
        self.waiting.set()
        await self.more.wait()
        if self.received - 1 < len(self.parts):
            return self._part(self.received - 1)
        await asyncio.Event().wait()  # after the body: nothing until the test ends
        raise AssertionError("unreachable")

    def _part(self, index: int) -> Message:
        more = index + 1 < len(self.parts)
        return {"type": "http.request", "body": self.parts[index], "more_body": more}

    async def send(self, message: Message) -> None:
        self.sent.append(message)

    @property
    def status(self) -> int | None:
        starts = [m for m in self.sent if m["type"] == "http.response.start"]
        return int(starts[0]["status"]) if starts else None


async def run(app: FastAPI, call: Call, method: str, path: str, **headers: str) -> Call:
    await app(http_scope(method, path, _headers(**headers)), call.receive, call.send)
    return call


async def test_no_body_is_read_before_the_key_and_the_route_are_checked(
    database_url: str,
) -> None:
    """401, 403 and 404 come before a single byte of the body is asked for."""
    body = b'{"events": [{"data": "' + b"x" * 4000 + b'"}]}'
    length = str(len(body))
    json_type = {"content_type": "application/json", "content_length": length}
    async with started_app(keyed_settings(database_url)) as (app, _client):
        nobody = await run(app, Call(body), "POST", f"/v1/generations/{TOKEN}/events", **json_type)
        assert (nobody.status, nobody.received) == (401, 0)
        writer = await run(
            app,
            Call(body),
            "POST",
            "/admin/v1/explain",
            authorization=f"Bearer {WRITER_A}",
            **json_type,
        )
        assert (writer.status, writer.received) == (403, 0)
        admin = await run(
            app,
            Call(body),
            "POST",
            f"/v1/generations/{TOKEN}/events",
            authorization=f"Bearer {ADMIN}",
            **json_type,
        )
        assert (admin.status, admin.received) == (403, 0)
        unknown = await run(
            app, Call(body), "POST", "/v1/no-such-route", authorization=f"Bearer {WRITER_A}"
        )
        assert (unknown.status, unknown.received) == (404, 0)
        allowed = await run(
            app,
            Call(body),
            "POST",
            f"/v1/generations/{TOKEN}/events",
            authorization=f"Bearer {WRITER_A}",
            **json_type,
        )
        assert (allowed.status, allowed.received) == (404, 1)  # read, then unknown_generation


def _headers(**headers: str) -> dict[str, str]:
    return {k.replace("_", "-"): v for k, v in headers.items()}


async def test_bodies_held_at_once_are_bounded_and_given_back(database_url: str) -> None:
    """Past `max_body_bytes_in_flight`, 503 `overloaded` with Retry-After; then it recovers."""
    settings = make_settings(database_url, max_body_bytes=1000, max_body_bytes_in_flight=1500)
    async with started_app(settings) as (app, http):
        token = (await http.post("/v1/streams/s1/generations")).json()["generation"]
        slow_body = b'{"events": [{"data": "' + b"a" * 960 + b'"}]}'
        assert len(slow_body) <= 1000
        slow = Call(slow_body, chunks=2)
        headers = _headers(content_type="application/json", content_length=str(len(slow_body)))
        scope = http_scope("POST", f"/v1/generations/{token}/events", headers)
        holding = asyncio.create_task(app(scope, slow.receive, slow.send))
        async with asyncio.timeout(30):
            await slow.waiting.wait()  # its budget is taken; the rest of its body is awaited
        other = {"events": [{"data": "b" * 600}]}
        refused = await http.post(f"/v1/generations/{token}/events", json=other)
        assert_problem(refused, 503, "overloaded")
        assert refused.headers["retry-after"] == "1"
        small = await http.post(f"/v1/generations/{token}/events", json={"events": [{"data": "c"}]})
        assert small.status_code == 201  # what fits in what is left still goes through
        slow.more.set()
        async with asyncio.timeout(30):
            await holding
        assert slow.status == 201
        again = await http.post(f"/v1/generations/{token}/events", json=other)
        assert again.status_code == 201, again.text  # the budget was given back
        page = (await http.get(f"/v1/generations/{token}/events")).json()
        assert [e["data"][0] for e in page["events"]] == ["c", "a", "b"]


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
        headers = _headers(content_type="application/json", content_length=str(len(body)))
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


# --- the access log ---------------------------------------------------------------------


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


def test_a_traceback_in_a_text_line_is_indented_and_escaped() -> None:
    try:
        raise ValueError("bad\n2026-11-30 12:00:00,000 ERROR forged\x1b]0;title\x07")
    except ValueError:
        record = logging.LogRecord("app", logging.ERROR, __file__, 1, "boom", (), sys.exc_info())
    record.request_id = None
    text = TextFormatter(fmt=TEXT_FORMAT).format(record)
    first, *rest = text.splitlines()
    assert first.endswith("boom")
    assert rest
    assert all(line.startswith("    ") for line in rest)
    assert not set(text) & {"\x1b", "\x07"}


# --- a WebSocket upgrade: the same host check, the same key check -----------------------


def websocket_scope(host: str, *, denial: bool) -> dict[str, Any]:
    extensions = {"websocket.http.response": {}} if denial else {}
    return {
        "type": "websocket",
        "asgi": {"version": "3.0", "spec_version": "2.4"},
        "scheme": "ws",
        "path": "/test/ws",
        "raw_path": b"/test/ws",
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", host.encode())],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8080),
        "subprotocols": [],
        "extensions": extensions,
    }


async def upgrade(app: FastAPI, scope: dict[str, Any]) -> list[Message]:
    sent: list[Message] = []
    messages = [{"type": "websocket.connect"}]

    async def receive() -> Message:
        return messages.pop() if messages else {"type": "websocket.disconnect", "code": 1000}

    async def send(message: Message) -> None:
        sent.append(message)

    await app(scope, receive, send)
    return sent


async def test_a_websocket_upgrade_passes_the_host_check(
    open_app: tuple[FastAPI, httpx.AsyncClient],
) -> None:
    """A rebound name cannot open a WebSocket either: 421 as a denial response, or a close."""
    app, _http = open_app

    async def hello(websocket: WebSocket) -> None:
        await websocket.accept()
        await websocket.close()

    app.add_api_websocket_route("/test/ws", hello)
    denied = await upgrade(app, websocket_scope("attacker.example", denial=True))
    assert [m["type"] for m in denied] == [
        "websocket.http.response.start",
        "websocket.http.response.body",
    ]
    assert denied[0]["status"] == 421
    assert json.loads(denied[1]["body"])["code"] == "host_not_allowed"
    closed = await upgrade(app, websocket_scope("attacker.example", denial=False))
    assert closed == [{"type": "websocket.close", "code": 1008, "reason": "host_not_allowed"}]
    accepted = await upgrade(app, websocket_scope("127.0.0.1:8080", denial=True))
    assert [m["type"] for m in accepted] == ["websocket.accept", "websocket.close"]


def test_the_key_check_reads_a_websocket_routes_scope() -> None:
    """`RouteKeys` answers from the route's dependencies and the headers, at an upgrade too."""

    async def endpoint(websocket: WebSocket) -> None:
        raise AssertionError("never called")

    keys = RouteKeys(Keyring(keyed_settings("sqlite+aiosqlite://").keys))
    route = APIWebSocketRoute("/test/ws", endpoint, dependencies=[Depends(get_admin)])
    assert keys.scope_needed(route) is KeyScope.ADMIN
    with pytest.raises(Unauthenticated):
        keys.check({}, route)
    with pytest.raises(Forbidden):
        keys.check({b"authorization": f"Bearer {WRITER_A}".encode()}, route)
    admin = keys.check({b"authorization": f"Bearer {ADMIN}".encode()}, route)
    assert admin is not None
    assert admin.may(KeyScope.ADMIN)
    assert keys.check({}, APIWebSocketRoute("/test/open", endpoint)) is None


# --- small things -----------------------------------------------------------------------


async def test_head_on_health_and_readiness(client: httpx.AsyncClient) -> None:
    for path in ("/healthz", "/readyz"):
        answer = await client.head(path)
        assert answer.status_code == 200
        assert answer.content == b""


async def test_a_trailing_slash_is_not_redirected(client: httpx.AsyncClient) -> None:
    """A redirect would echo the request's Host into Location."""
    answer = await client.post("/v1/streams/s1/generations/", headers={"host": "eventlog.test"})
    assert_problem(answer, 404, "not_found")
    assert "location" not in answer.headers
