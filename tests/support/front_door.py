"""Calls of the front door's tests: raw ASGI requests that record what the app asked of
`receive` and what it sent, an open service's settings, and the problem assertion."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
from fastapi import FastAPI
from starlette.types import Message

from app.settings import Settings
from tests.support.app import make_settings


def open_settings(database_url: str, **overrides: Any) -> Settings:
    """No keys and the default host list (loopback only), unlike most tests' settings."""
    return make_settings(database_url, allowed_hosts=None, **overrides)


def assert_problem(answer: httpx.Response, status: int, code: str) -> None:
    assert answer.status_code == status, answer.text
    assert answer.headers["content-type"] == "application/problem+json"
    assert answer.json()["code"] == code


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
    await app(http_scope(method, path, headers_of(**headers)), call.receive, call.send)
    return call


def headers_of(**headers: str) -> dict[str, str]:
    return {k.replace("_", "-"): v for k, v in headers.items()}
