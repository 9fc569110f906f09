"""How MCP messages are stored as the service's events, and read back.

The convention's messages (`mcp_eventlog_client.convention`), as the store's `NewEvent`s:
a priming event is an empty event of type `priming`; a message is one event of type
`message`, or, over `max_event_bytes`, `n` events `message-part <i>/<n>` cut between
characters — all of one message in one append. A replay joins them (`Reassembly`).
"""

from __future__ import annotations

from mcp_eventlog_client import NewEvent
from mcp_eventlog_client.convention import (
    NotAMessage,
    Reassembly,
    Unjoinable,
    part_of,
    stored_events,
)

__all__ = ["NotAMessage", "Reassembly", "Unjoinable", "events_of", "part_of"]


def events_of(data: str | None, max_event_bytes: int) -> list[NewEvent]:
    """The events that store one message's JSON (`None`: a priming event)."""
    return [NewEvent(data=d, event=e) for e, d in stored_events(data, max_event_bytes)]
