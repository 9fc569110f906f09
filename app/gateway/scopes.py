"""The scopes the gateway records streams under (docs/stream-names.md).

A stream is named by the stores' convention, `mcp.<scope>.<sdk stream, escaped>`
(`mcp_eventlog_client.convention`, shared with the Python store). The scope is one MCP
session's: here it is a keyed hash (HMAC-SHA-256 under `EVENTLOG_GATEWAY_SECRET`) of the
session id *and* of the caller's credential (its `Authorization` header), so every replica
that shares the secret names a session's streams alike with no state of its own, a token
of another session or of another credential names a stream outside the caller's scope
(`cross_session`), and the name shows neither the session id nor the credential.

A request with no MCP session (a stateless upstream) has no session to scope it by, and
the request ids of different clients collide (every client's first call is `1`): such a
response is recorded under a scope of its own, `<nonce><mac>` (`Scopes.fresh`), a random
128-bit nonce and a keyed hash of that nonce and the credential. Two calls never share a
stream, and the scope proves, to any replica with the key and no state of its own, which
credential may read it (`Scopes.owns`).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from dataclasses import dataclass

_PART_CHARS = 22  # 128 bits in unpadded URL-safe base64
_PRINCIPAL = "\x00task-principal"  # no MCP session id holds a NUL: never a session's scope
_SESSIONLESS = b"sessionless\n"  # a sessionless mac never equals a session's scope


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def scope_of(secret: bytes, session_id: str | None, credential: str | None) -> str:
    """The scope of an MCP session as one credential sees it: 22 URL-safe characters."""
    message = f"{session_id or ''}\n{credential or ''}".encode()
    return _b64(hmac.new(secret, message, hashlib.sha256).digest()[:16])


def _sessionless_mac(secret: bytes, nonce: str, credential: str | None) -> str:
    message = _SESSIONLESS + f"{nonce}\n{credential or ''}".encode()
    return _b64(hmac.new(secret, message, hashlib.sha256).digest()[:16])


class Scopes:
    """The scopes of recorded streams under one key (see the module)."""

    def __init__(self, secret: bytes) -> None:
        self._secret = secret

    def of_session(self, session_id: str, credential: str | None) -> str:
        """The scope of an MCP session as one credential sees it (`scope_of`)."""
        return scope_of(self._secret, session_id, credential)

    def fresh(self, credential: str | None) -> str:
        """A scope of its own for one sessionless response: 44 URL-safe characters."""
        nonce = _b64(secrets.token_bytes(16))
        return nonce + _sessionless_mac(self._secret, nonce, credential)

    def principal(self, credential: str | None) -> str | None:
        """The task principal of a credential (None: no credential): a keyed hash, so the
        credential is never stored and every replica of one key names it alike."""
        if credential is None:
            return None
        return scope_of(self._secret, _PRINCIPAL, credential)

    def owns(self, scope: str, session_id: str | None, credential: str | None) -> bool:
        """Whether a caller of this session (None: none) and credential may read `scope`."""
        if session_id is not None:
            return hmac.compare_digest(scope, self.of_session(session_id, credential))
        if len(scope) != 2 * _PART_CHARS:
            return False  # a session's scope: never a sessionless caller's
        nonce, mac = scope[:_PART_CHARS], scope[_PART_CHARS:]
        return hmac.compare_digest(mac, _sessionless_mac(self._secret, nonce, credential))


@dataclass(frozen=True, slots=True)
class Caller:
    """Who sent a request, as far as scopes go: its MCP session (if any) and credential."""

    scopes: Scopes
    session_id: str | None
    credential: str | None

    @property
    def session_scope(self) -> str | None:
        """The scope of the caller's session (None: no session, nothing is its own)."""
        if self.session_id is None:
            return None
        return self.scopes.of_session(self.session_id, self.credential)

    def recording_scope(self) -> str:
        """The scope a response to this caller is recorded under (fresh when sessionless)."""
        if self.session_id is None:
            return self.scopes.fresh(self.credential)
        return self.scopes.of_session(self.session_id, self.credential)

    def owns(self, scope: str) -> bool:
        """Whether this caller may read the streams of `scope`."""
        return self.scopes.owns(scope, self.session_id, self.credential)
