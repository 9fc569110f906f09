"""Bearer keys, scopes and tenants: who is calling, and what it may see.

Keys come from `EVENTLOG_KEYS` (see the README). Only their SHA-256 digests are kept in
memory, and a presented key is compared with every digest in constant time, so neither
the key nor the position of a match leaks through timing. A plain SHA-256 is enough here:
keys are long random secrets, not passwords that need a slow hash against guessing.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from app.errors import Forbidden, Unauthenticated
from app.settings import KeySpec

OPEN_TENANT = "default"


class Scope(StrEnum):
    """What a key may do: write (and resume) its tenant's streams, or operate on all."""

    WRITER = "writer"
    ADMIN = "admin"


@dataclass(frozen=True, slots=True)
class Principal:
    """Who is calling: the tenant whose streams it writes, and its scopes."""

    tenant: str
    scopes: frozenset[Scope]

    def may(self, scope: Scope) -> bool:
        """Whether the caller holds `scope`."""
        return scope in self.scopes


OPEN_PRINCIPAL = Principal(tenant=OPEN_TENANT, scopes=frozenset(Scope))


def key_digest(key: str) -> bytes:
    """The SHA-256 digest a key is stored and compared as."""
    return hashlib.sha256(key.encode()).digest()


class Keyring:
    """The configured keys, as digests; empty means the service runs open."""

    def __init__(self, specs: Iterable[KeySpec]) -> None:
        self._entries = tuple((spec.digest, _principal_of(spec)) for spec in specs)

    @property
    def open(self) -> bool:
        """Whether no keys are configured (every caller is the one open principal)."""
        return not self._entries

    def authenticate(self, authorization: str | None) -> Principal:
        """The principal of an `Authorization: Bearer <key>` header, or `Unauthenticated`."""
        if self.open:
            return OPEN_PRINCIPAL
        scheme, _, key = (authorization or "").partition(" ")
        if scheme.lower() != "bearer" or not key.strip():
            raise Unauthenticated("send Authorization: Bearer <key>")
        digest = key_digest(key.strip())
        found: Principal | None = None
        # Every digest is compared (no early exit), so the time taken does not say which.
        for stored, principal in self._entries:
            if hmac.compare_digest(stored, digest):
                found = principal
        if found is None:
            raise Unauthenticated("the key is not valid")
        return found

    @staticmethod
    def require(principal: Principal, scope: Scope) -> Principal:
        """The principal itself when it holds `scope`, else `Forbidden`."""
        if not principal.may(scope):
            raise Forbidden(f"this key lacks the {scope.value!r} scope")
        return principal


def _principal_of(spec: KeySpec) -> Principal:
    return Principal(tenant=spec.tenant, scopes=frozenset({Scope(spec.scope)}))
