"""Which MCP session is storing or replaying: a context variable set per HTTP request.

The SDK's `EventStore` is one object shared by every session of a
`StreamableHTTPSessionManager`, and neither `store_event` nor `replay_events_after` is told
the session. Its stream ids (`"1"`, `"_GET_stream"`) repeat in every session, so a store
keyed by them alone lets one session replay another's stream. The session therefore comes
from the request context:

- `SessionScopeMiddleware` wraps the SDK's ASGI app and, for every HTTP request, sets the
  context variable `current_scope()` reads: the *scope key* of the request's session.
- A request without `mcp-session-id` (the `initialize` that opens a session) gets a new
  random key, and when its response carries the new `mcp-session-id`, the session is bound
  to that key. The key is random rather than the session id because the SDK stores the
  first (priming) event of `initialize` before that response exists.
- A request with `mcp-session-id` gets its session's key; a session this process has not
  bound gets a fresh key that matches nothing (the SDK answers 404 to it anyway).

Why a context variable reaches every call: the SDK stores priming events in the request's
own task, replays in a task spawned by that request's response, and stores every other
message in the session's message-router task, which `anyio` spawns while serving
`initialize`, copying that request's context (and so its key). Sessions live in one process
(the SDK keeps them in memory), so the bindings can too.
"""

from __future__ import annotations

import secrets
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from starlette.types import ASGIApp, Message, Receive, Scope, Send

SESSION_HEADER = b"mcp-session-id"

_current: ContextVar[str | None] = ContextVar("mcp_eventlog_session_scope", default=None)


def current_scope() -> str | None:
    """The scope key of the MCP session being served, or None outside the middleware."""
    return _current.get()


@contextmanager
def session_scope(key: str) -> Iterator[None]:
    """Run a block as the session `key`: for hosts that are not ASGI apps, and for tests."""
    token = _current.set(key)
    try:
        yield
    finally:
        _current.reset(token)


def new_scope_key() -> str:
    """A fresh scope key: URL-safe, without `.`, unguessable."""
    return secrets.token_urlsafe(16)


class SessionScopes:
    """The scope key of each MCP session of this process (at most `max_sessions`).

    The oldest binding is forgotten past the bound (the SDK ends idle sessions without
    telling anyone); a forgotten session's later replays then match nothing and are
    refused, which is safe. `on_end` (if given) is told the key of every session that
    ended or was forgotten, so what was kept for it (leases to renew) can go too.
    """

    def __init__(
        self, max_sessions: int = 10_000, on_end: Callable[[str], None] | None = None
    ) -> None:
        self._keys: OrderedDict[str, str] = OrderedDict()
        self._max_sessions = max_sessions
        self._on_end = on_end

    def key_of(self, session_id: str) -> str | None:
        """The scope key bound to `session_id`, if any."""
        key = self._keys.get(session_id)
        if key is not None:
            self._keys.move_to_end(session_id)
        return key

    def bind(self, session_id: str, key: str) -> None:
        """Bind a new session to the key its opening request ran with."""
        self._keys[session_id] = key
        self._keys.move_to_end(session_id)
        while len(self._keys) > self._max_sessions:
            _, forgotten = self._keys.popitem(last=False)
            self._ended(forgotten)

    def unbind(self, session_id: str) -> None:
        """Forget an ended session."""
        key = self._keys.pop(session_id, None)
        if key is not None:
            self._ended(key)

    def _ended(self, key: str) -> None:
        if self._on_end is not None:
            self._on_end(key)


class SessionScopeMiddleware:
    """ASGI middleware that runs each request of the wrapped MCP app in its session's scope.

    `on_shutdown` (if given) runs when the app's lifespan shuts down, before it reports
    completion: the event store closes its connection pool there.
    """

    def __init__(
        self,
        app: ASGIApp,
        scopes: SessionScopes,
        on_shutdown: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self.app = app
        self.scopes = scopes
        self.on_shutdown = on_shutdown

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self.app(scope, receive, self._lifespan_send(send))
            return
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        session_id = _header(scope, SESSION_HEADER)
        if session_id is None:
            key = new_scope_key()
            send = self._bind_on_response(send, key)
        else:
            key = self.scopes.key_of(session_id) or new_scope_key()
            if scope["method"] == "DELETE":
                send = self._unbind_on_response(send, session_id)
        token = _current.set(key)
        try:
            await self.app(scope, receive, send)
        finally:
            _current.reset(token)

    def _bind_on_response(self, send: Send, key: str) -> Send:
        async def bind(message: Message) -> None:
            if message["type"] == "http.response.start" and message["status"] < 400:
                session_id = _header(message, SESSION_HEADER)
                if session_id is not None:
                    self.scopes.bind(session_id, key)
            await send(message)

        return bind

    def _unbind_on_response(self, send: Send, session_id: str) -> Send:
        async def unbind(message: Message) -> None:
            if message["type"] == "http.response.start" and message["status"] < 300:
                self.scopes.unbind(session_id)
            await send(message)

        return unbind

    def _lifespan_send(self, send: Send) -> Send:
        async def lifespan_send(message: Message) -> None:
            if message["type"] == "lifespan.shutdown.complete" and self.on_shutdown is not None:
                await self.on_shutdown()
            await send(message)

        return lifespan_send


def _header(scope_or_message: Scope | Message, name: bytes) -> str | None:
    for key, value in scope_or_message.get("headers", ()):
        if key.lower() == name:
            text: str = value.decode("latin-1")
            return text
    return None
