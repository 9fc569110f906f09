"""What a recording's client is yet to be sent, in bounded memory.

A `Backlog` sits between a recording and its client's response. It keeps every message's
place, in the order the recording made them, and the messages' data in memory while the
client keeps up: up to `EVENTLOG_GATEWAY_RELAY_BUFFER_BYTES` of it (at least one message,
however big). Past that the client is *behind*: each message stored from then on is kept
only as its ids — consecutive ids of one generation as one run — and its data is read back
from the log when its turn comes, a page (`EVENTLOG_LIVE_PAGE_BYTES`) at a time, as a live
reader reads. Once the client has been sent everything it is no longer behind, and the
next messages are held in memory again. The recording never waits for the client, and a
client that leaves takes what was held for it with it (`close`).

The client receives what the memory path would send: the same messages, each once, in
the recording's order, with the ids they were stored under (a message read back is joined
from its stored parts; its id is its last part's, as the recorder gives it).

A message that could not be stored (the log away; relayed without an id) cannot be read
back, so while behind its data is kept, counted against the same bound. One that does not
fit cuts the client's stream at its place (`RelayCut`, reason `unstored`): the client gets
every message before it and then the `-32010` `reset` error — the same verdict a
reconnect into that spoiled generation gets — and nothing after it. Stored events gone
before they could be read back (evicted by `max_events`, purged by a TTL) cut it the same
way (reason `evicted` / `expired`). The log unreadable for a while ends the response
without a cut: the client reconnects with its last id, which the log answers when back.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass

from mcp_eventlog_client.convention import PRIMING_EVENT, Reassembly

from app.domain.ids import format_event_id
from app.errors import StorageError
from app.event_stream import event_text
from app.gateway.errors import GatewayError
from app.service.reading import ReadPath, Step

log = logging.getLogger(__name__)

_READ_RETRIES = (0.5, 1.0, 2.0, 4.0)  # the log unreadable: waits before each new try


@dataclass(frozen=True, slots=True)
class Relayed:
    """One message for the client: its data, the future of its id (None: unstored), and
    how many stored events it takes (`parts`: its events end at that id's seq)."""

    stored: asyncio.Future[str | None]
    data: str
    parts: int = 1


class RelayCut(GatewayError):
    """The client cannot be sent the rest: `reason` for the `-32010` `reset` error."""

    code = "internal_error"

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason


class _Unreadable(GatewayError):
    """The log could not be read for a while: the client's stream ends there."""

    code = "database_unavailable"

    def __init__(self) -> None:
        super().__init__("the log could not be read back for the relay")


@dataclass(frozen=True, slots=True)
class _Pending:
    """A message not yet stored (or given up); `held`: its data stays for the client."""

    relayed: Relayed
    held: bool


@dataclass(frozen=True, slots=True)
class _Message:
    """A message held in memory, with its id (None: unstored)."""

    data: str
    id: str | None


@dataclass(slots=True)
class _Run:
    """Stored messages to read back: the events of `token` in (after, through]."""

    token: str
    after: int
    through: int


_Entry = _Message | _Run | RelayCut


class Backlog:
    """A recording's messages for its client, in bounded memory (see the module)."""

    def __init__(
        self, reads: ReadPath, *, tenant: str, limit: int, page_events: int, page_bytes: int
    ) -> None:
        self._reads = reads
        self._tenant = tenant
        self._limit = limit
        self._page_events = page_events
        self._page_bytes = page_bytes
        # Settled entries, in order; every one before every entry of `_pending`.
        self._ready: deque[_Entry] = deque()
        self._pending: deque[_Pending] = deque()  # not yet settled, in order
        self._held = 0  # characters of message data held for the client
        self._behind = False
        self._ended = False
        self._stopped = False  # closed, or cut: nothing more is taken
        self._changed = asyncio.Event()

    @property
    def behind(self) -> bool:
        """Whether messages are read back from the log rather than held in memory."""
        return self._behind

    @property
    def held(self) -> int:
        """Characters of message data held in memory for the client."""
        return self._held

    def put(self, relayed: Relayed) -> None:
        """The recording's next message (taken at once; the recording never waits)."""
        if self._stopped:
            return
        size = len(relayed.data)
        held = not self._behind and (self._held == 0 or self._held + size <= self._limit)
        if held:
            self._held += size
        else:
            self._behind = True
        self._pending.append(_Pending(relayed, held))
        relayed.stored.add_done_callback(self._settled)

    def end(self) -> None:
        """The recording is over: the client's stream ends after what was put."""
        self._ended = True
        self._changed.set()

    def close(self) -> None:
        """The client left: nothing is kept for it any more."""
        self._stopped = True
        self._ready.clear()
        self._pending.clear()
        self._held = 0

    async def bodies(self) -> AsyncGenerator[bytes]:
        """What the client is sent, as it is stored; `RelayCut` where it cannot go on.

        The messages held and stored by the time the client is written to go out in one
        write (in order), as one commit stores them together."""
        while (entry := await self._next()) is not None:
            if isinstance(entry, RelayCut):
                raise entry
            if isinstance(entry, _Run):
                try:
                    async for body in self._read_back(entry):
                        yield body
                except _Unreadable:
                    return  # the client reconnects with its last id (see the module)
                continue
            out = [self._encoded(entry)]
            while self._ready and isinstance(self._ready[0], _Message):
                out.append(self._encoded(self._take()))
            yield b"".join(out)

    async def _next(self) -> _Entry | None:
        while not self._ready:
            if self._ended and not self._pending:
                return None
            self._changed.clear()
            await self._changed.wait()
        return self._take()

    def _take(self) -> _Entry:
        entry = self._ready.popleft()
        if isinstance(entry, _Message):
            self._held -= len(entry.data)
        if not self._ready and not self._pending:
            # Everything put is on its way: what comes next is held in memory again, and
            # goes out after the rest of this entry (a run is read back to its end first).
            self._behind = False
        return entry

    def _encoded(self, entry: _Entry) -> bytes:
        assert isinstance(entry, _Message)
        return event_text(entry.data, id=entry.id).encode()

    def _settled(self, _stored: asyncio.Future[str | None]) -> None:
        # Futures may resolve out of order (a message refused at once by the recorder
        # overtakes earlier ones in flight): entries are settled from the front only.
        while self._pending and not self._stopped and self._pending[0].relayed.stored.done():
            self._settle(self._pending.popleft())
        self._changed.set()

    def _settle(self, pending: _Pending) -> None:
        relayed = pending.relayed
        stored = relayed.stored
        event_id = None if stored.cancelled() else stored.result()
        if pending.held:
            self._ready.append(_Message(relayed.data, event_id))
        elif event_id is not None:
            self._extend(event_id, relayed.parts)
        elif self._held == 0 or self._held + len(relayed.data) <= self._limit:
            self._held += len(relayed.data)  # not in the log: memory is its only place
            self._ready.append(_Message(relayed.data, None))
        else:
            detail = "a message the log could not store came while the client was behind"
            self._ready.append(RelayCut("unstored", detail))
            self._stopped = True
            self._pending.clear()

    def _extend(self, event_id: str, parts: int) -> None:
        token, _, last = event_id.rpartition(":")
        through = int(last)
        run = self._ready[-1] if self._ready else None
        if isinstance(run, _Run) and run.token == token and run.through == through - parts:
            run.through = through
        else:
            self._ready.append(_Run(token, through - parts, through))

    async def _read_back(self, run: _Run) -> AsyncIterator[bytes]:
        """The run's messages, read from the log a page at a time."""
        joined = Reassembly()
        after = run.after
        while after < run.through:
            step = await self._read(run.token, after, run.through - after)
            page = step.page
            if page is None or not page.contiguous or not page.events:
                gen = step.generation
                gone = "expired" if gen is None or gen.expired else "evicted"
                raise RelayCut(gone, f"events after {run.token}:{after} are no longer stored")
            out: list[bytes] = []
            # A run starts and ends at a message's bounds (`after` is its first message's
            # first seq minus one), so the joiner sees whole messages across its pages.
            for event in page.events:
                event_id = format_event_id(run.token, event.seq)
                if event.event == PRIMING_EVENT:
                    out.append(event_text("", id=event_id).encode())
                    continue
                message = joined.feed(event.event, event.data)
                if message is not None:
                    out.append(event_text(message, id=event_id).encode())
            after = page.events[-1].seq
            yield b"".join(out)

    async def _read(self, token: str, after: int, count: int) -> Step:
        """A page of at most `count` events after `after`, retried while the log is away
        (`_Unreadable` once the retries are spent)."""
        for wait in (*_READ_RETRIES, None):
            try:
                return await self._reads.step(
                    token,
                    tenant=self._tenant,
                    after=after,
                    limit=min(count, self._page_events),
                    max_bytes=self._page_bytes,
                )
            except StorageError as error:
                if wait is None:
                    log.warning("reading back %s:%d for a relay failed: %s", token, after, error)
                    raise _Unreadable from error
                await asyncio.sleep(wait)
        raise AssertionError("unreachable: the last try returns or raises")
