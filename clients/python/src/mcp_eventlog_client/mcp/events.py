"""How MCP messages are stored as the service's events, and read back.

- A message whose JSON fits in one event (`max_event_bytes` of UTF-8, the service's
  `EVENTLOG_MAX_EVENT_BYTES`, 1 MiB by default) is one event of SSE type `message`.
- A larger message is split into parts of at most `max_event_bytes` each, stored in order
  as events of type `message-part <i>/<n>`; the SSE id the client sees is the last part's.
  A replay joins the parts and sends the message once, with that id.
- A priming event (the SDK's `message is None`) is an empty event of type `priming`,
  stored and never replayed.

Parts are appended in batches of at most `max_batch_bytes` of JSON (the service's request
body limit, `EVENTLOG_MAX_BODY_BYTES`, is 16 MiB by default); each batch is atomic and
carries `first_seq`, so a retried batch is never stored twice.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
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
        pieces.append(raw[start:end].decode())
        start = end
    return pieces


def batches(events: list[NewEvent], max_batch_bytes: int) -> Iterator[list[NewEvent]]:
    """Consecutive batches whose events' JSON adds up to at most `max_batch_bytes`.

    Sizes are measured as `json.dumps` writes them (ASCII-escaped: the largest form any
    HTTP client sends), so a batch stays under the service's body limit whatever it holds.
    A batch holds at least one event.
    """
    batch: list[NewEvent] = []
    size = 0
    for event in events:
        cost = len(json.dumps(event.data)) + 64
        if batch and size + cost > max_batch_bytes:
            yield batch
            batch, size = [], 0
        batch.append(event)
        size += cost
    if batch:
        yield batch


class MidMessage(ValueError):
    """A replay began inside a split message: the id it resumes from was never handed out."""


@dataclass(slots=True)
class Reassembly:
    """Joins stored events back into messages, in order, skipping priming events.

    `feed` returns a message's JSON when an event completes one. Parts left over when the
    replay ends belong to a message still being stored: its `store_event` has not returned,
    so no client has it yet, and it is not sent (the SDK forwards it live once stored).
    """

    parts: list[str] = field(default_factory=list)
    delivered: int = 0

    def feed(self, event_type: str | None, data: str) -> str | None:
        """The whole message completed by this event, if any."""
        if event_type == PRIMING_EVENT:
            return None
        part = _PART.fullmatch(event_type or "")
        if part is None:
            self.parts.clear()
            self.delivered += 1
            return data
        index, count = int(part.group(1)), int(part.group(2))
        if index != len(self.parts) + 1:
            raise MidMessage(f"part {index}/{count} without the parts before it")
        self.parts.append(data)
        if index < count:
            return None
        message = "".join(self.parts)
        self.parts.clear()
        self.delivered += 1
        return message
