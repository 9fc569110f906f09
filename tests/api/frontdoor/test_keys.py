"""The key a route asks for (`app/api/frontdoor/keys.py`), read from its dependencies."""

from __future__ import annotations

import pytest
from fastapi import Depends, WebSocket
from fastapi.routing import APIWebSocketRoute

from app.api.auth import Keyring
from app.api.auth import Scope as KeyScope
from app.api.deps import get_admin
from app.api.frontdoor.keys import RouteKeys
from app.errors import Forbidden, Unauthenticated
from tests.support.operators import ADMIN, WRITER_A, keyed_settings


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
