"""The MCP storage convention: how MCP streams and messages are kept in the service.

Written once in `docs/stream-names.md` and checked against one table
(`tests/fixtures/stream-convention.json`) by the Python store, the TypeScript store and the
service's gateway. This module is the one Python implementation: the store
(`mcp_eventlog_client.mcp`) and the gateway (`app.gateway`, which depends on this package
at its own version) both use it. It imports neither the MCP SDK nor anything that does,
so the service, which does not install the SDK, can import it.

- Names: a service stream id is `mcp.<scope>.<sdk stream, escaped>`. The scope is one MCP
  session's (the store's random key, the gateway's keyed hash); the SDK stream is the
  request id as a string (`"7"`, `"req-7"`), or `_GET_stream`. Escaping keeps the id within
  the contract's alphabet and is reversible, so a resume answer's `stream_id` tells which
  session and which SDK stream a token belongs to; an id too long to fit escaped is named
  by its SHA-256 (`StreamNames`).
- Messages: a priming event (no message) is an empty event of type `priming`, stored and
  never replayed; a message whose JSON fits in `max_event_bytes` of UTF-8 is one event of
  type `message`; a larger one is cut into `n` parts, never inside a character, stored in
  order as `message-part <i>/<n>` — all of one message in one append, so a reader never
  sees part of it. A replay joins the parts (`Reassembly`) and sends the message once, with
  its last part's id.
- Refusals: a resume that cannot be honoured fails the request with the JSON-RPC error
  `-32010` (`RESUME_REFUSED`), `data: {verdict, reason, detail}` (`refusal_error`).
"""

from __future__ import annotations

import hashlib
import re
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Final

from mcp_eventlog_client.errors import EventLogError

PREFIX: Final = "mcp"
GET_STREAM: Final = "_GET_stream"
"""The SDK's name of the standalone GET stream (no request waits on it)."""
MAX_STREAM_ID: Final = 256
_PLAIN = re.compile(rb"[A-Za-z0-9_.-]")
_ESCAPE = re.compile(r"~([0-9a-f]{2})")
_HASHED = "~h"
_DECIMAL = re.compile(r"-?(0|[1-9][0-9]{0,17})")

MESSAGE_EVENT: Final = "message"
PRIMING_EVENT: Final = "priming"
PART_EVENT: Final = "message-part"
_PART = re.compile(r"message-part ([1-9][0-9]*)/([1-9][0-9]*)")

RESUME_REFUSED: Final = -32010
"""JSON-RPC error code (implementation-defined range) of a refused resume."""


def _escape(sdk_stream: str) -> str:
    # `~` is in the contract's alphabet but not in `_PLAIN`, so it can mark an escape.
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
    """Names SDK streams as service streams and reads the names back.

    An SDK stream id too long to fit escaped (a client may pick any JSON-RPC request id) is
    named by its SHA-256 instead; only this process can read such a name back, which is
    enough, since an MCP session lives in one process. At most `max_hashed` such names are
    remembered.
    """

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


def sdk_stream_of(request_id: object) -> str:
    """The SDK's name of a request's stream: its JSON-RPC id as a string."""
    return request_id if isinstance(request_id, str) else str(request_id)


def request_id_of(sdk_stream: str | None) -> int | str | None:
    """The JSON-RPC id of the request whose stream is `sdk_stream` (None: none, or the
    GET stream). A decimal id is a number (the official clients number their requests,
    and the TypeScript ones match responses by `Number(id)`), any other the string it is."""
    if sdk_stream is None or sdk_stream == GET_STREAM:
        return None
    return int(sdk_stream) if _DECIMAL.fullmatch(sdk_stream) else sdk_stream


def split_utf8(data: str, limit: int) -> list[str]:
    """`data` cut into pieces of at most `limit` UTF-8 bytes, never inside a character."""
    raw = data.encode()
    if len(raw) <= limit:
        return [data]
    pieces: list[str] = []
    start = 0
    while start < len(raw):
        end = min(start + limit, len(raw))
        while end < len(raw) and raw[end] & 0xC0 == 0x80:  # a UTF-8 continuation byte
            end -= 1
        if end == start:
            raise ValueError(f"a limit of {limit} bytes is smaller than one character")
        pieces.append(raw[start:end].decode())
        start = end
    return pieces


def stored_events(data: str | None, max_event_bytes: int) -> list[tuple[str, str]]:
    """The `(event type, data)` of the events that store one message's JSON, in order, for
    one append (`None`: a priming event)."""
    if data is None:
        return [(PRIMING_EVENT, "")]
    parts = split_utf8(data, max_event_bytes)
    if len(parts) == 1:
        return [(MESSAGE_EVENT, data)]
    count = len(parts)
    return [(f"{PART_EVENT} {index}/{count}", part) for index, part in enumerate(parts, start=1)]


def part_of(event_type: str | None) -> tuple[int, int] | None:
    """`(i, n)` of a `message-part <i>/<n>` event, None for any other type."""
    part = _PART.fullmatch(event_type or "")
    return None if part is None else (int(part.group(1)), int(part.group(2)))


class Unjoinable(EventLogError):
    """Stored events that are not messages of this convention; `reason` (also its `code`)
    is the refusal's reason."""

    reason = "not_a_message"

    def __init__(self, detail: str) -> None:
        super().__init__(0, self.reason, detail)

    def __str__(self) -> str:
        # The detail alone: it is what a refusal's `detail` and a log line carry.
        return self.detail


class MidMessage(Unjoinable):
    """A replay began inside a split message (or its parts are out of order): the id it
    resumes from was never handed out."""

    reason = "mid_message"


class NotAMessage(Unjoinable):
    """A stored event's data is not a JSON-RPC message."""

    reason = "not_a_message"


@dataclass(slots=True)
class Reassembly:
    """Joins stored events back into messages' JSON, in order, skipping priming events.

    `feed` returns a message's JSON when an event completes one, and raises `MidMessage`
    for a part out of its place (or an event inside a split message). Parts left over when
    a page ends belong to a message whose last parts are on the next page (a message is
    one atomic append).
    """

    parts: list[str] = field(default_factory=list)
    count: int = 0
    delivered: int = 0

    def feed(self, event_type: str | None, data: str) -> str | None:
        """The whole message completed by this event, if any."""
        part = part_of(event_type)
        if part is None:
            if self.parts:
                raise MidMessage(f"a {event_type!r} event inside a split message")
            if event_type == PRIMING_EVENT:
                return None
            self.delivered += 1
            return data
        index, count = part
        if index != len(self.parts) + 1 or (self.parts and count != self.count) or index > count:
            raise MidMessage(f"part {index}/{count} without the parts before it")
        self.parts.append(data)
        self.count = count
        if index < count:
            return None
        message = "".join(self.parts)
        self.parts.clear()
        self.delivered += 1
        return message


def refusal_error(verdict: str, reason: str, detail: str) -> dict[str, Any]:
    """The JSON-RPC `error` member of a refused resume: `code`, `message`, `data`."""
    return {
        "code": RESUME_REFUSED,
        "message": f"cannot resume ({verdict}: {reason}); discard partial output and re-issue",
        "data": {"verdict": verdict, "reason": reason, "detail": detail},
    }
