"""Who may knock (`app/api/frontdoor/hosts.py`), on both databases: the `Host` a request
names and the `Origin` a browser sends, for HTTP requests and WebSocket upgrades alike."""

from __future__ import annotations

import json
from typing import Any

import httpx
from fastapi import FastAPI, WebSocket
from starlette.types import Message

from tests.support.app import started_app
from tests.support.front_door import assert_problem, open_settings
from tests.support.operators import WRITER_A, keyed_settings

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


# --- bodies: after the key, within the budget -------------------------------------------


# --- the access log ---------------------------------------------------------------------


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


# --- small things -----------------------------------------------------------------------
