"""Server-Sent Events, parsed incrementally from an upstream's bytes (the gateway writes
its own with `app.event_stream`, as the live reads do).

The parser follows the HTML standard's event-stream interpretation: lines end in CRLF, LF
or CR; `data` lines are joined with LF; `id` (without NUL), `event` and `retry` fields;
comments and unknown fields are ignored; an event is dispatched at a blank line. A line
longer than `max_line` characters is refused (`SseTooLarge`), so a hostile upstream
cannot make the gateway buffer without bound.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator
from dataclasses import dataclass

from app.errors import UpstreamError


class SseTooLarge(UpstreamError):
    """An upstream's event (or line) is over the gateway's limit."""

    code = "upstream_unavailable"


@dataclass(frozen=True, slots=True)
class SseEvent:
    """One dispatched event: its data (None: no `data` field at all), id, type, retry."""

    data: str | None
    id: str | None = None
    event: str | None = None
    retry: int | None = None


class SseParser:
    """Feed it text as it arrives; it returns the events completed by each piece."""

    def __init__(self, max_event: int) -> None:
        self._max_event = max_event
        self._held: list[str] = []  # the line under way, in the pieces it came in
        self._held_size = 0
        self._pending_cr = False
        self._reset()

    def _reset(self) -> None:
        self._data: list[str] = []
        self._size = 0
        self._id: str | None = None
        self._event: str | None = None
        self._retry: int | None = None
        self._fields = False

    def feed(self, text: str) -> list[SseEvent]:
        """The events that `text` completes, in order."""
        if self._pending_cr and text.startswith("\n"):
            text = text[1:]
        self._pending_cr = False
        if "\n" not in text and "\r" not in text:  # a long line in many pieces: join once
            self._hold(text)
            return []
        buffer = "".join((*self._held, text))
        self._held.clear()
        self._held_size = 0
        events: list[SseEvent] = []
        # Lines are cut by index and the rest kept once at the end (not re-sliced a line at
        # a time), and each terminator is searched for once: linear in the piece's size.
        at, lf, cr = 0, buffer.find("\n"), buffer.find("\r")
        while lf != -1 or cr != -1:
            if cr == -1 or (lf != -1 and lf < cr):
                start, end = lf, lf + 1
            elif cr + 1 < len(buffer) and buffer[cr + 1] == "\n":
                start, end = cr, cr + 2
            else:
                start, end = cr, cr + 1
                if end == len(buffer):
                    self._pending_cr = True  # a CRLF may be cut between two pieces
            event = self._line(buffer[at:start])
            at = end
            if lf != -1 and lf < at:
                lf = buffer.find("\n", at)
            if cr != -1 and cr < at:
                cr = buffer.find("\r", at)
            if event is not None:
                events.append(event)
        self._hold(buffer[at:])
        return events

    def _hold(self, rest: str) -> None:
        if rest:
            self._held.append(rest)
            self._held_size += len(rest)
        if self._held_size > self._max_event:
            raise SseTooLarge(f"an SSE line over {self._max_event} characters")

    def _line(self, line: str) -> SseEvent | None:
        if not line:
            if not self._fields:
                return None
            data = "\n".join(self._data) if self._data else None
            event = SseEvent(data, self._id, self._event, self._retry)
            self._reset()
            return event
        if line.startswith(":"):
            return None
        name, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._size += len(value) + 1
            if self._size > self._max_event:
                raise SseTooLarge(f"an SSE event over {self._max_event} characters")
            self._data.append(value)
        elif name == "id":
            if "\0" in value:
                return None
            self._id = value
        elif name == "event":
            self._event = value
        elif name == "retry":
            if value.isdigit():
                self._retry = int(value)
        else:
            return None
        self._fields = True
        return None


async def events_of(chunks: AsyncIterable[str], max_event: int) -> AsyncIterator[SseEvent]:
    """The events of a stream of decoded text chunks."""
    parser = SseParser(max_event)
    async for chunk in chunks:
        for event in parser.feed(chunk):
            yield event
