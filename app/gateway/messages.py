"""What the gateway stores for a JSON-RPC message, and the errors it makes itself.

Storage follows the stores' convention (docs/stream-names.md, "Messages"): a priming event
is one empty event of type `priming`; a message is one event of type `message`, or, over
`max_event_bytes`, `n` events `message-part <i>/<n>` cut between characters — all of one
message in one append. A replay skips priming events and joins parts (`Joiner`).

The errors: `-32010` (a refused resume, the stores' refusal: `data: {verdict, reason,
detail, discard_client_state}`; no `id` member when the request is unknown) and `-32011`
(the upstream was lost before it answered: `data.reason: "upstream_lost"`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Final

from app.domain.append import EventBody

MESSAGE_EVENT: Final = "message"
PRIMING_EVENT: Final = "priming"
PART_EVENT: Final = "message-part"
RESUME_REFUSED: Final = -32010
UPSTREAM_LOST: Final = -32011
_PART = re.compile(r"message-part ([1-9][0-9]*)/([1-9][0-9]*)")


def bodies_of(data: str, max_event_bytes: int) -> list[EventBody]:
    """The events that store one message's JSON (one append)."""
    parts = split_utf8(data, max_event_bytes)
    if len(parts) == 1:
        return [EventBody(data=data, event=MESSAGE_EVENT)]
    count = len(parts)
    return [
        EventBody(data=part, event=f"{PART_EVENT} {index}/{count}")
        for index, part in enumerate(parts, start=1)
    ]


def priming_body() -> EventBody:
    """The stored form of a priming event."""
    return EventBody(data="", event=PRIMING_EVENT)


def split_utf8(data: str, limit: int) -> list[str]:
    """`data` cut into pieces of at most `limit` UTF-8 bytes, never inside a character."""
    raw = data.encode()
    if len(raw) <= limit:
        return [data]
    pieces: list[str] = []
    start = 0
    while start < len(raw):
        end = min(start + limit, len(raw))
        while end < len(raw) and raw[end] & 0xC0 == 0x80:  # a continuation byte
            end -= 1
        if end == start:
            raise ValueError(f"a limit of {limit} bytes is smaller than one character")
        pieces.append(raw[start:end].decode())
        start = end
    return pieces


class Unjoinable(ValueError):
    """Stored events that are not whole messages of the convention."""


class Joiner:
    """Turns stored events, in order, back into messages (priming skipped, parts joined)."""

    def __init__(self) -> None:
        self._parts: list[str] = []
        self._count = 0

    def add(self, event: str | None, data: str) -> str | None:
        """The message this event completes, or None (a priming event, or a part)."""
        if event == PRIMING_EVENT:
            self._expect_whole()
            return None
        part = _PART.fullmatch(event or "")
        if part is None:
            self._expect_whole()
            return data
        index, count = int(part.group(1)), int(part.group(2))
        if index != len(self._parts) + 1 or (self._parts and count != self._count):
            raise Unjoinable("a message part out of its place")
        self._parts.append(data)
        self._count = count
        if index < count:
            return None
        whole, self._parts = "".join(self._parts), []
        return whole

    def _expect_whole(self) -> None:
        if self._parts:
            raise Unjoinable("a split message is cut short")


@dataclass(frozen=True, slots=True)
class Message:
    """What the gateway needs of one JSON-RPC message: its id and whether it answers."""

    id: object
    is_response: bool


def inspect(data: str) -> Message | None:
    """The JSON-RPC message in `data` (None: not a JSON-RPC object)."""
    try:
        value = json.loads(data)
    except ValueError:
        return None
    if not isinstance(value, dict):
        return None
    is_response = "method" not in value and ("result" in value or "error" in value)
    return Message(value.get("id"), is_response)


def same_id(a: object, b: object) -> bool:
    """Whether two JSON-RPC ids are the same JSON value: `true` is not `1`, `1` is not
    `"1"` (Python's `==` says `True == 1`); a number equals a number of the same value."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    return type(a) is type(b) and a == b


def requests_in(body: bytes) -> list[dict[str, Any]]:
    """The JSON-RPC requests (with an id and a method) of a POST body (a batch or one)."""
    try:
        value = json.loads(body)
    except ValueError:
        return []
    items = value if isinstance(value, list) else [value]
    return [
        item
        for item in items
        if isinstance(item, dict) and "method" in item and item.get("id") is not None
    ]


def error_response(
    request_id: object, code: int, message: str, data: dict[str, Any], *, known: bool = True
) -> str:
    """A JSON-RPC error response; `known` False leaves the `id` member out."""
    body: dict[str, Any] = {"jsonrpc": "2.0"}
    if known:
        body["id"] = request_id
    body["error"] = {"code": code, "message": message, "data": data}
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False)


def refusal(request_id: object, verdict: str, reason: str, detail: str, *, known: bool) -> str:
    """The stores' refusal of a resume (`-32010`)."""
    data = {
        "verdict": verdict,
        "reason": reason,
        "detail": detail,
        "discard_client_state": verdict == "reset",
    }
    message = f"cannot resume ({verdict}: {reason}); discard partial output and re-issue"
    return error_response(request_id, RESUME_REFUSED, message, data, known=known)


def recording_abandoned(request_id: object, detail: str) -> str:
    """The error of a request whose recording stopped with its replica (the generation's
    writer lease ran out): the answer will never come, the client should re-issue."""
    data = {"reason": "abandoned", "detail": detail}
    return error_response(
        request_id, UPSTREAM_LOST, "the gateway replica recording the response was lost", data
    )


def upstream_lost(request_id: object, detail: str) -> str:
    """The terminal error of a request whose upstream went away before answering."""
    data = {"reason": "upstream_lost", "detail": detail}
    return error_response(request_id, UPSTREAM_LOST, "the upstream MCP server was lost", data)
