"""How MCP messages are stored as the service's events, and read back.

The convention both MCP stores (this one and the TypeScript one) follow, written once in
`docs/stream-names.md` and checked by both test suites against one table
(`tests/fixtures/stream-convention.json`):

- A priming event (the SDK's `message is None`) is an empty event of type `priming`,
  stored and never replayed.
- A message whose JSON fits in one event (`max_event_bytes` of UTF-8, the service's
  `EVENTLOG_MAX_EVENT_BYTES`, 1 MiB by default) is one event of type `message`.
- A larger message is cut into `n` parts of at most `max_event_bytes` each, never inside
  a character, stored in order as events of type `message-part <i>/<n>`; the SSE id the
  client sees is the last part's. A replay joins the parts and sends the message once,
  with that id.
- Every message is one append: all its events are stored atomically, or none is, so a
  reader never sees part of a message.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from mcp_eventlog_client import NewEvent

MESSAGE_EVENT = "message"
PRIMING_EVENT = "priming"
PART_EVENT = "message-part"
_PART = re.compile(r"message-part ([1-9][0-9]*)/([1-9][0-9]*)")


def events_of(data: str | None, max_event_bytes: int) -> list[NewEvent]:
    """The events that store one message's JSON (`None`: a priming event)."""
    if data is None:
        return [NewEvent(data="", event=PRIMING_EVENT)]
    parts = split_utf8(data, max_event_bytes)
    if len(parts) == 1:
        return [NewEvent(data=data, event=MESSAGE_EVENT)]
    count = len(parts)
    return [
        NewEvent(data=part, event=f"{PART_EVENT} {index}/{count}")
        for index, part in enumerate(parts, start=1)
    ]


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


def part_of(event_type: str | None) -> tuple[int, int] | None:
    """`(i, n)` of a `message-part <i>/<n>` event, None for any other type."""
    part = _PART.fullmatch(event_type or "")
    return None if part is None else (int(part.group(1)), int(part.group(2)))


class Unjoinable(ValueError):
    """Stored events that are not messages of this convention; `reason` says how."""

    reason = "not_a_message"


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
    for a part out of its place. Parts left over when a page ends belong to a message
    whose last parts are on the next page (a message is one atomic append).
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
