"""What a live reader is sent: events, `reset`, `end` and heartbeats, as frames.

The use case (`app/service/live.py`) decides which frames a reader gets; its shared
frames (`app/service/sharing.py`) make a page's event frames once for every reader given
that page; the HTTP layer (`app/api/routes/live.py`) renders them as Server-Sent Events.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.domain.decision import Reason


@dataclass(frozen=True, slots=True)
class EventFrame:
    """One stored event, delivered as `<token>:<seq>`."""

    token: str
    seq: int
    event: str | None
    data: str


@dataclass(frozen=True, slots=True)
class ResetFrame:
    """Refuse to splice: the reader discards what it holds; `generation` follows, if known."""

    reason: Reason
    generation: str | None


@dataclass(frozen=True, slots=True)
class EndFrame:
    """The followed generation is terminal and all of it was delivered."""

    generation: str
    terminal_seq: int


@dataclass(frozen=True, slots=True)
class Heartbeat:
    """Nothing happened for a heartbeat interval."""


@dataclass(frozen=True, slots=True)
class Closing:
    """The process is stopping: reconnect after `retry_ms` with the last id (on any replica
    the reader continues exactly); the connection ends after it."""

    retry_ms: int


Frame = EventFrame | ResetFrame | EndFrame | Heartbeat | Closing


class PageFrames(tuple[EventFrame, ...]):
    """A page's events as frames, made by `SharedFrames`: every reader given the same page
    object gets the same `PageFrames`, so what is made of it (its encoded body) is made
    once for all of them. Any other batch of frames is one reader's own."""

    __slots__ = ()
