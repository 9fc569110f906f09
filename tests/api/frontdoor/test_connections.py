"""The connection adapter (`app/api/frontdoor/connections.py`) in process, against the
pinned uvicorn: what it relies on of uvicorn's private protocol is what it was written
against, and each of its refusals is the problem the table says. The same checks on a real
server, through sockets, are `tests/reliability/test_request_heads.py`.
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import json
from typing import Any

import pytest
import uvicorn
from uvicorn.config import Config
from uvicorn.lifespan.on import LifespanOn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle
from uvicorn.server import Server, ServerState

from app.api.frontdoor.connections import (
    CONNECTION_CODES,
    LIMITS_KEY,
    ConnectionLimits,
    GuardedHttpToolsProtocol,
    HeaderTimeout,
    HeadRefused,
    SharedConnectionLimits,
)
from app.api.problems import PROBLEM_CODES
from app.errors import NotAdmitted

# The uvicorn the adapter was read against (constraints.txt) and the members of its
# protocol it calls, overrides or repeats (`_feed` is `data_received` with the refusals
# answered), by a digest of their source. When uvicorn changes one of them, re-read the
# adapter against the new source, then update the digest here.
PINNED_UVICORN = "0.54.0"
RELIED_ON = {
    "__init__": "4f08999410347141",
    "connection_made": "6efb565ff3d36b91",
    "connection_lost": "c91a4c9bf2e29c55",
    "data_received": "010a7ae59a5d3b1a",
    "on_headers_complete": "1ea8589acfad92d8",
    "on_message_complete": "1fbad42dc31fc01f",
    "_unset_keepalive_if_required": "00a6a4e47214e68e",
    "_should_upgrade": "8fcad1ab8e096739",
    "handle_websocket_upgrade": "179c4f769386ab89",
    "_unsupported_upgrade_warning": "55bbd2762b189d9a",
    "send_400_response": "ae5a4a3782b646fd",
}
CYCLE_INIT = "4d2f220910c33c12"  # `cycle.response_complete`, `cycle.keep_alive`

LIMITS = ConnectionLimits(
    max_header_bytes=1024, max_headers=10, header_timeout=0.1, max_connections=2
)
HEAD = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n"


def _digest(member: Any) -> str:
    return hashlib.sha256(inspect.getsource(member).encode()).hexdigest()[:16]


def test_the_adapted_uvicorn_is_the_pinned_one() -> None:
    assert uvicorn.__version__ == PINNED_UVICORN
    changed = {
        name: _digest(getattr(HttpToolsProtocol, name))
        for name, digest in RELIED_ON.items()
        if _digest(getattr(HttpToolsProtocol, name)) != digest
    }
    assert not changed, f"uvicorn's HttpToolsProtocol changed: {changed}"
    assert _digest(RequestResponseCycle.__init__) == CYCLE_INIT


def test_the_server_shares_the_lifespan_state_with_its_protocols() -> None:
    """How the limits reach the protocol: the lifespan's `state` is the dict uvicorn hands
    every connection's protocol as `app_state`."""
    assert "app_state=self.lifespan.state" in inspect.getsource(Server.startup)
    assert '"state": self.state' in inspect.getsource(LifespanOn.main)


class _Transport(asyncio.Transport):
    """Keeps what the protocol writes; closes when told."""

    def __init__(self) -> None:
        super().__init__()
        self.written = b""
        self.closed = False

    def write(self, data: Any) -> None:
        self.written += bytes(data)

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 8080) if name in ("sockname", "peername") else default

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


async def _ok(scope: Any, receive: Any, send: Any) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"ok"})


def _protocol(state: ServerState | None = None) -> GuardedHttpToolsProtocol:
    config = Config(app=_ok, access_log=False, log_level="warning", lifespan="off")
    config.load()
    return GuardedHttpToolsProtocol(
        config=config, server_state=state or ServerState(), app_state={LIMITS_KEY: LIMITS}
    )


def _opened(state: ServerState | None = None) -> tuple[GuardedHttpToolsProtocol, _Transport]:
    protocol = _protocol(state)
    transport = _Transport()
    protocol.connection_made(transport)
    return protocol, transport


def _problem(written: bytes) -> tuple[int, dict[str, Any], bytes]:
    head, _, body = written.partition(b"\r\n\r\n")
    assert b"content-type: application/problem+json" in head.lower(), head
    assert head.lower().count(b"connection: close") == 1, head
    return int(head.split(b" ", 2)[1]), json.loads(body), head


async def _served(protocol: GuardedHttpToolsProtocol, state: ServerState) -> None:
    while state.tasks:
        await asyncio.gather(*state.tasks)


async def test_a_head_within_the_limits_reaches_the_app() -> None:
    state = ServerState()
    protocol, transport = _opened(state)
    protocol.data_received(HEAD + b"\r\n")
    await _served(protocol, state)
    assert transport.written.startswith(b"HTTP/1.1 200"), transport.written
    assert not transport.closed
    protocol.connection_lost(None)


@pytest.mark.parametrize(
    ("head", "setting"),
    [
        (HEAD + b"X-Big: " + b"a" * 2048, "EVENTLOG_MAX_HEADER_BYTES"),
        (HEAD + b"X-H: v\r\n" * LIMITS.max_headers + b"\r\n", "EVENTLOG_MAX_HEADERS"),
    ],
    ids=["bytes", "lines"],
)
async def test_a_head_over_its_bytes_or_lines_is_431_and_closes(head: bytes, setting: str) -> None:
    protocol, transport = _opened()
    protocol.data_received(head)
    status, problem, _ = _problem(transport.written)
    assert (status, problem["code"]) == (431, "headers_too_large")
    assert setting in problem["detail"]
    assert transport.closed


async def test_half_a_head_past_the_timeout_is_408_and_nothing_is_a_plain_close() -> None:
    half, half_transport = _opened()
    half.data_received(HEAD)
    _silent, silent_transport = _opened()
    await asyncio.sleep(LIMITS.header_timeout * 3)
    status, problem, _ = _problem(half_transport.written)
    assert (status, problem["code"]) == (408, "header_timeout")
    assert (silent_transport.written, silent_transport.closed) == (b"", True)


async def test_a_connection_past_the_cap_is_503_with_retry_after() -> None:
    state = ServerState()
    held = [_opened(state) for _ in range(LIMITS.max_connections)]
    assert not any(transport.written for _, transport in held)
    _, transport = _opened(state)
    status, problem, head = _problem(transport.written)
    assert (status, problem["code"]) == (503, "too_many_connections")
    assert b"retry-after: 1" in head.lower()
    assert transport.closed
    for protocol, _ in held:
        protocol.connection_lost(None)


def test_each_refusal_is_an_error_of_the_tree_with_a_row() -> None:
    assert issubclass(HeadRefused, NotAdmitted)
    assert HeaderTimeout("late").code == "header_timeout"
    assert {"header_timeout", "headers_too_large", "too_many_connections"} == CONNECTION_CODES
    assert set(PROBLEM_CODES) >= CONNECTION_CODES


async def test_the_protocol_needs_the_limits_the_app_shared() -> None:
    config = Config(app=_ok, access_log=False, log_level="warning", lifespan="off")
    config.load()
    with pytest.raises(TypeError, match=LIMITS_KEY):
        GuardedHttpToolsProtocol(config=config, server_state=ServerState(), app_state={})


async def test_the_limits_are_put_in_the_lifespan_state_only() -> None:
    seen: list[str] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        seen.append(scope["type"])

    shared = SharedConnectionLimits(app, limits=LIMITS)
    state: dict[str, Any] = {}
    await shared({"type": "lifespan", "state": state}, _never, _never)
    assert state == {LIMITS_KEY: LIMITS}
    request: dict[str, Any] = {"type": "http", "state": {}}
    await shared(request, _never, _never)
    assert request["state"] == {}
    assert seen == ["lifespan", "http"]


async def _never(*_: Any) -> Any:
    raise AssertionError("not called")
