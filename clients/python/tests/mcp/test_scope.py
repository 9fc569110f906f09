"""The session scope middleware: each request runs with its MCP session's scope key."""

from __future__ import annotations

from typing import Any

from mcp_eventlog_client.mcp.scope import SessionScopeMiddleware, SessionScopes, current_scope
from starlette.types import Message, Receive, Scope, Send


class FakeMcpApp:
    """Answers like the SDK: a new session id to a request without one; records the scope."""

    def __init__(self) -> None:
        self.seen: list[str | None] = []
        self.issued = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await send({"type": "lifespan.shutdown.complete"})
            return
        self.seen.append(current_scope())
        headers = [(k, v) for k, v in scope["headers"] if k == b"mcp-session-id"]
        if not headers:
            self.issued += 1
            headers = [(b"mcp-session-id", f"session-{self.issued}".encode())]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": b""})


async def request(app: Any, method: str = "POST", session: str | None = None) -> None:
    """One HTTP request through `app`."""
    headers = [] if session is None else [(b"mcp-session-id", session.encode())]
    scope = {"type": "http", "method": method, "headers": headers, "path": "/mcp"}

    async def receive() -> Message:
        return {"type": "http.request", "body": b""}

    async def send(message: Message) -> None:
        pass

    await app(scope, receive, send)


async def test_requests_of_one_session_share_a_scope_and_sessions_do_not() -> None:
    fake = FakeMcpApp()
    scopes = SessionScopes()
    app = SessionScopeMiddleware(fake, scopes)
    await request(app)  # initialize: session-1
    await request(app)  # initialize: session-2
    await request(app, session="session-1")
    await request(app, "GET", session="session-2")
    await request(app, session="session-unknown")
    first, second, again_first, again_second, unknown = fake.seen
    assert None not in fake.seen
    assert (again_first, again_second) == (first, second)
    assert len({first, second, unknown}) == 3
    assert current_scope() is None


async def test_ending_a_session_forgets_its_scope() -> None:
    fake = FakeMcpApp()
    scopes = SessionScopes()
    app = SessionScopeMiddleware(fake, scopes)
    await request(app)
    assert scopes.key_of("session-1") == fake.seen[0]
    await request(app, "DELETE", session="session-1")
    assert scopes.key_of("session-1") is None


def test_the_oldest_session_is_forgotten_past_the_bound() -> None:
    scopes = SessionScopes(max_sessions=2)
    scopes.bind("a", "ka")
    scopes.bind("b", "kb")
    assert scopes.key_of("a") == "ka"  # used: now the newest
    scopes.bind("c", "kc")
    assert (scopes.key_of("a"), scopes.key_of("b"), scopes.key_of("c")) == ("ka", None, "kc")


async def test_an_ended_or_forgotten_session_is_told_once() -> None:
    ended: list[str] = []
    fake = FakeMcpApp()
    scopes = SessionScopes(max_sessions=2, on_end=ended.append)
    app = SessionScopeMiddleware(fake, scopes)
    await request(app)
    await request(app, "DELETE", session="session-1")
    await request(app, "DELETE", session="session-1")  # already gone: not told again
    scopes.bind("a", "ka")
    scopes.bind("b", "kb")
    scopes.bind("c", "kc")  # past the bound: "a" is forgotten
    assert ended == [fake.seen[0], "ka"]


async def test_lifespan_shutdown_closes_the_store_first() -> None:
    order: list[str] = []

    async def on_shutdown() -> None:
        order.append("closed")

    app = SessionScopeMiddleware(FakeMcpApp(), SessionScopes(), on_shutdown=on_shutdown)

    async def receive() -> Message:
        return {"type": "lifespan.shutdown"}

    async def send(message: Message) -> None:
        order.append(message["type"])

    await app({"type": "lifespan"}, receive, send)
    assert order == ["closed", "lifespan.shutdown.complete"]
