"""How the gateway names what it records: the stores' convention, docs/stream-names.md.

A stream is `mcp.<scope>.<sdk stream, escaped>`. The scope is one MCP session's: here it
is a keyed hash (HMAC-SHA-256 under `EVENTLOG_GATEWAY_SECRET`) of the session id *and* of
the caller's credential (its `Authorization` header), so every replica that shares the
secret names a session's streams alike with no state of its own, a token of another
session or of another credential names a stream outside the caller's scope
(`cross_session`), and the name shows neither the session id nor the credential. The
SDK stream is the request id as a string (`"7"`, `"req-7"`), or `_GET_stream`, as the
Python store names them; escaping and hashing are the convention's, checked against
`tests/fixtures/stream-convention.json` like both stores.

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
import re
import secrets
from collections import OrderedDict
from dataclasses import dataclass

PREFIX = "mcp"
GET_STREAM = "_GET_stream"
MAX_STREAM_ID = 256
_PLAIN = re.compile(rb"[A-Za-z0-9_.-]")
_ESCAPE = re.compile(r"~([0-9a-f]{2})")
_HASHED = "~h"
_DECIMAL = re.compile(r"-?(0|[1-9][0-9]{0,17})")
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


def sdk_stream_of(request_id: object) -> str:
    """The SDK's name of a request's stream: its JSON-RPC id as a string."""
    return request_id if isinstance(request_id, str) else str(request_id)


def request_id_of(sdk_stream: str) -> int | str | None:
    """The JSON-RPC id of the request whose stream is `sdk_stream` (None: the GET stream)."""
    if sdk_stream == GET_STREAM:
        return None
    return int(sdk_stream) if _DECIMAL.fullmatch(sdk_stream) else sdk_stream


def _escape(sdk_stream: str) -> str:
    return "".join(
        chr(byte) if _PLAIN.fullmatch(bytes([byte])) else f"~{byte:02x}"
        for byte in sdk_stream.encode()
    )


def _unescape(escaped: str) -> str | None:
    raw = _ESCAPE.sub(lambda m: chr(int(m.group(1), 16)), escaped)
    try:
        return raw.encode("latin-1").decode()
    except (UnicodeEncodeError, UnicodeDecodeError):
        return None


class StreamNames:
    """Names SDK streams as service streams and reads the names back (the convention's
    escaping; an id too long is named by its SHA-256, remembered for `max_hashed` names)."""

    def __init__(self, max_hashed: int = 10_000) -> None:
        self._hashed: OrderedDict[str, str] = OrderedDict()
        self._max_hashed = max_hashed

    def name(self, scope: str, sdk_stream: str) -> str:
        """The service stream id of `sdk_stream` in the session `scope`."""
        head = f"{PREFIX}.{scope}."
        escaped = _escape(sdk_stream)
        if len(head) + len(escaped) <= MAX_STREAM_ID:
            return head + escaped
        digest = _HASHED + hashlib.sha256(sdk_stream.encode()).hexdigest()
        self._hashed[digest] = sdk_stream
        self._hashed.move_to_end(digest)
        while len(self._hashed) > self._max_hashed:
            self._hashed.popitem(last=False)
        return head + digest

    def parse(self, stream_id: str) -> tuple[str, str] | None:
        """`(scope, sdk_stream)` of a name made by `name`, or None if it is not one."""
        prefix, _, rest = stream_id.partition(".")
        scope, dot, escaped = rest.partition(".")
        if prefix != PREFIX or not scope or not dot:
            return None
        if escaped.startswith(_HASHED):
            sdk_stream = self._hashed.get(escaped)
            return None if sdk_stream is None else (scope, sdk_stream)
        sdk_stream = _unescape(escaped)
        return None if sdk_stream is None else (scope, sdk_stream)
