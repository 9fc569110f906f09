"""The MCP SDK's example `InMemoryEventStore`, as a peer.

The `mcp` 2.3.0 wheel ships only the `EventStore` interface, not its example store. This
class follows the algorithm of the example in modelcontextprotocol/python-sdk
(`examples/servers/simple-streamablehttp/mcp_simple_streamablehttp/event_store.py`, MIT
licence; written afresh here, not copied): a `deque(maxlen=max_events_per_stream)` per
stream, a dict from event id (a uuid4) to its entry, and a replay that scans the stream's
deque from its oldest event until it meets the last event id, then sends every event
after it. Replay is therefore linear in the events the stream holds, and events beyond
`max_events_per_stream` (100 by default) are dropped silently.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from uuid import uuid4

from mcp.server.streamable_http import (
    EventCallback,
    EventId,
    EventMessage,
    EventStore,
    StreamId,
)
from mcp.types import JSONRPCMessage


@dataclass(slots=True)
class _Entry:
    event_id: EventId
    stream_id: StreamId
    message: JSONRPCMessage | None


class InMemoryEventStore(EventStore):
    """Bounded per-stream deques plus an id index (the SDK example's design)."""

    def __init__(self, max_events_per_stream: int = 100) -> None:
        self.max_events_per_stream = max_events_per_stream
        self.streams: dict[StreamId, deque[_Entry]] = {}
        self.event_index: dict[EventId, _Entry] = {}

    async def store_event(self, stream_id: StreamId, message: JSONRPCMessage | None) -> EventId:
        """Append to the stream's deque; forget the event it pushes out, if any."""
        event_id = str(uuid4())
        entry = _Entry(event_id, stream_id, message)
        stream = self.streams.get(stream_id)
        if stream is None:
            stream = self.streams[stream_id] = deque(maxlen=self.max_events_per_stream)
        if len(stream) == self.max_events_per_stream:
            self.event_index.pop(stream[0].event_id, None)
        stream.append(entry)
        self.event_index[event_id] = entry
        return event_id

    async def replay_events_after(
        self, last_event_id: EventId, send_callback: EventCallback
    ) -> StreamId | None:
        """Scan the stream from its oldest event; send everything after `last_event_id`."""
        last = self.event_index.get(last_event_id)
        if last is None:
            return None
        found = False
        for entry in self.streams.get(last.stream_id, deque()):
            if found:
                if entry.message is not None:
                    await send_callback(EventMessage(entry.message, entry.event_id))
            elif entry.event_id == last_event_id:
                found = True
        return last.stream_id
