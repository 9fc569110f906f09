"""The key a route asks for, checked from the request's headers alone.

A route says which key it needs through its dependencies (`AdminDep`, `PrincipalDep` of
`app/api/deps.py`); FastAPI checks it when the handler runs, which for a route with a
body is after the body was read. `RouteKeys` answers the same question earlier, from the
matched route and the headers: the front door asks it before a byte of a body is read
(`app/api/frontdoor/bodies.py`), and a WebSocket route can ask it once, at the upgrade.
"""

from __future__ import annotations

from collections.abc import Mapping

from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute, APIWebSocketRoute

from app.api.auth import Keyring, Principal, Scope
from app.api.deps import get_admin, get_principal

_SCOPE_OF_DEPENDENCY: dict[object, Scope] = {get_admin: Scope.ADMIN, get_principal: Scope.WRITER}
_SCOPE_ORDER = (Scope.ADMIN, Scope.WRITER)

Headers = Mapping[bytes, bytes]


class RouteKeys:
    """Checks a request's key against the scope its route asks for."""

    def __init__(self, keyring: Keyring) -> None:
        self._keyring = keyring
        self._scopes: dict[int, Scope | None] = {}

    def check(self, headers: Headers, route: object) -> Principal | None:
        """The caller, when the route asks for a key: `Unauthenticated` / `Forbidden` else.

        None when the route asks for no key (health, metrics, the console's files).
        """
        needed = self.scope_needed(route)
        if needed is None:
            return None
        authorization = headers.get(b"authorization")
        principal = self._keyring.authenticate(
            None if authorization is None else authorization.decode("latin-1")
        )
        return Keyring.require(principal, needed)

    def scope_needed(self, route: object) -> Scope | None:
        """The key scope the route asks for through its dependencies (None: no key)."""
        key = id(route)
        if key not in self._scopes:
            needed: set[Scope] = set()
            if isinstance(route, APIRoute | APIWebSocketRoute):
                needed = {
                    _SCOPE_OF_DEPENDENCY[call]
                    for call in _calls(route.dependant)
                    if call in _SCOPE_OF_DEPENDENCY
                }
            self._scopes[key] = next((s for s in _SCOPE_ORDER if s in needed), None)
        return self._scopes[key]


def _calls(dependant: Dependant) -> list[object]:
    calls: list[object] = []
    for sub in dependant.dependencies:
        calls.append(sub.call)
        calls.extend(_calls(sub))
    return calls
