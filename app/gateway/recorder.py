"""Records one SSE stream's messages into the log, many messages to one durable commit.

`submit` queues a message and returns at once a future of the id it is stored under. One
append is in flight at a time; the messages that arrive meanwhile go into the next batch,
in order, so a slow commit (SQLite `FULL`, a PostgreSQL round trip) carries many messages
instead of serialising the stream on the disk. Each message's future resolves only once
its batch is stored, so a message is relayed only with an id the log has.

A batch the log cannot store (the database down, a limit) resolves its futures to None:
those messages go out without an id, and the generation is *spoiled* (it lacks them), so
the next batch first opens a new generation of the stream, which fences the spoiled one
(a resume from one of its ids is then `reset`, never a silent gap). When the log is back,
recording goes on there.

When the stream ends spoiled — the batch the log could not store was its last, often the
response itself — no next batch comes to fence it, and the spoiled generation would stay
open: a resume from one of its ids would replay what it has and then wait for a terminal
that never comes. `fence` closes that gap: once the recording is over it opens the new
generation anyway (reason `reset`, at once terminal, no events), retrying with backoff
while the log is away, up to `EVENTLOG_GATEWAY_FENCE_SECONDS`; resumes of the spoiled one
are then `reset` (and its live readers get the reset frame).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from app.domain.append import EventBody
from app.domain.backoff import Backoff
from app.domain.ids import format_event_id
from app.errors import EventLogError
from app.service.eventlog import EventLogService

log = logging.getLogger(__name__)
# A spoiled generation's fence is tried again at growing pauses, never more than this apart.
_FENCE_MOST_WAIT_SECONDS = 10.0


@dataclass(slots=True)
class _Entry:
    bodies: Sequence[EventBody]
    terminal: bool
    stored: asyncio.Future[str | None]


class Recorder:
    """The appends of one stream's recording (see the module)."""

    def __init__(
        self,
        eventlog: EventLogService,
        *,
        tenant: str,
        stream_id: str,
        producer: str,
        max_batch_events: int,
        on_unstored: Callable[[int, str], None],
        on_stored: Callable[[int], None],
    ) -> None:
        self._eventlog = eventlog
        self._tenant = tenant
        self.stream_id = stream_id
        self.token: str | None = None  # None: none yet, or spoiled: the next batch opens one
        self._reason = "initial"
        self._next_seq = 1
        self._producer = producer
        self._max_batch = max_batch_events
        self._pending: list[_Entry] = []
        self._flusher: asyncio.Task[None] | None = None
        self._on_unstored = on_unstored
        self._on_stored = on_stored
        self.terminal = False
        self.spoiled: str | None = None  # a stored generation that lacks messages, unfenced

    def submit(
        self, bodies: Sequence[EventBody], *, terminal: bool = False
    ) -> asyncio.Future[str | None]:
        """Queue one message's events (one atomic append); the future is its SSE id, or
        None when it could not be stored."""
        stored: asyncio.Future[str | None] = asyncio.get_running_loop().create_future()
        if self.terminal or len(bodies) > self._max_batch:
            self._unstored([_Entry(bodies, terminal, stored)], "over the batch limit or finished")
            return stored
        self._pending.append(_Entry(bodies, terminal, stored))
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.create_task(self._flush(), name=f"record {self.stream_id}")
        return stored

    async def room(self, most: int) -> None:
        """Wait while more than `most` submitted messages wait for their commit: the
        upstream is read no faster than the log stores, so the messages held here stay
        bounded however fast it sends. (Futures resolve in order: once the message `most`
        from the end is settled, at most `most` are left.)"""
        while len(self._pending) > most:
            await asyncio.wait({self._pending[-most - 1].stored})

    async def drain(self) -> None:
        """Wait until every submitted message is stored or given up."""
        while self._flusher is not None and not self._flusher.done():
            await asyncio.shield(self._flusher)

    async def fence(self, within: float, *, first_wait: float = 0.25) -> bool:
        """After the last `submit` (and `drain`): fence a spoiled generation that no later
        batch fenced — a new generation, terminal and empty, retried with backoff while
        the log is away, for up to `within` seconds. True when nothing is left spoiled."""
        spoiled = self.spoiled
        if spoiled is None:
            return True
        loop = asyncio.get_running_loop()
        deadline = loop.time() + within
        waits = Backoff(first=first_wait, most=_FENCE_MOST_WAIT_SECONDS).pauses()
        while True:
            wait = next(waits)
            try:
                # Once opened, the spoiled one is superseded: its resumes are `reset`.
                token = self.token if self.token is not None else await self._open()
                await self._eventlog.append(
                    self._tenant, token, [], first_seq=self._next_seq, terminal=True
                )
            except Exception as error:  # the log is still away: retry, never raise
                if loop.time() + wait > deadline:
                    log.error(
                        "generation %s of %s stays spoiled and open (not fenced in %.0f s): %s",
                        spoiled,
                        self.stream_id,
                        within,
                        error,
                    )
                    return False
                await asyncio.sleep(wait)
                continue
            self.terminal = True
            log.info(
                "generation %s of %s (spoiled) fenced by %s", spoiled, self.stream_id, self.token
            )
            return True

    async def _flush(self) -> None:
        while self._pending:
            batch = self._take()
            try:
                await self._append(batch)
            except EventLogError as error:
                self._unstored(batch, f"{error.code}: {error.detail}")
            except Exception:  # a recording never takes the stream down
                log.exception("recording %s failed", self.stream_id)
                self._unstored(batch, "internal error")

    def _take(self) -> list[_Entry]:
        """The next batch: whole messages, at most the batch limit, ending at a terminal."""
        batch: list[_Entry] = []
        events = 0
        while self._pending:
            entry = self._pending[0]
            if batch and events + len(entry.bodies) > self._max_batch:
                break
            batch.append(self._pending.pop(0))
            events += len(entry.bodies)
            if entry.terminal:
                break
        return batch

    async def _open(self) -> str:
        """Open the stream's next generation (which supersedes a spoiled one); its token."""
        generation = await self._eventlog.open_generation(
            self._tenant, self.stream_id, reason=self._reason, producer=self._producer
        )
        self.token, self._next_seq, self._reason = generation.token, 1, "reset"
        self.spoiled = None
        return generation.token

    async def _append(self, batch: list[_Entry]) -> None:
        token = self.token if self.token is not None else await self._open()
        bodies = [body for entry in batch for body in entry.bodies]
        terminal = batch[-1].terminal
        result = await self._eventlog.append(
            self._tenant, token, bodies, first_seq=self._next_seq, terminal=terminal
        )
        seq = result.first_seq
        for entry in batch:
            seq += len(entry.bodies)
            if not entry.stored.done():
                entry.stored.set_result(format_event_id(token, seq - 1))
        self._next_seq = seq
        self.terminal = terminal
        self._on_stored(len(batch))

    def _unstored(self, batch: list[_Entry], why: str) -> None:
        if not self.terminal:
            if self.token is not None:
                self.spoiled = self.token
            self.token = None  # spoiled: the next batch opens a new generation
            self._reason = "reset"
        for entry in batch:
            if not entry.stored.done():
                entry.stored.set_result(None)
        self._on_unstored(len(batch), why)
        log.warning(
            "%d message(s) of %s relayed without an id (not stored): %s",
            len(batch),
            self.stream_id,
            why,
        )
