"""A pipelined writer of one generation: events get their ids at once, commits follow behind.

`GenerationPipeline.hand(events)` gives the events the next seqs of the generation and
returns as soon as they are queued, in order, to be appended; a flusher sends them
behind, at most one frame in flight per generation, with every event handed meanwhile in
the next frame (a batch: one commit for many events). What holds:

- **Order and exactly once.** Seqs are assigned here, in hand order, and every frame
  carries `first_seq`; a frame is never changed once formed, so a resend (the channel's
  after a drop, or this writer's after a failed attempt) is the same frame, which the
  service stores once and answers `duplicate` when it already has it.
- **A bounded window.** At most `window` events are handed and not yet acknowledged
  (the `pipeline` the generation was opened with): `hand` waits for acknowledgements
  past it, so a writer the service falls behind is slowed, never runs away. A message of
  more events than the window is handed only when nothing is outstanding, and `hand`
  returns once it is acknowledged (stored per event: the window is never exceeded).
- **A visible loss.** A frame that cannot be stored (the service refused it, or did not
  acknowledge it within `give_up_after` seconds, retries included) breaks the pipeline:
  `error` is set, `on_broken` is called once, every later `hand` raises it, and nothing
  more is appended to the generation. Events it had handed out may be missing from the
  generation's tail: the service answers a claim of one `reset` (`lost_tail`,
  `abandoned` or `superseded`), never `invalid` (the window covers it) and never a
  splice (nothing is appended after a gap).

Needs asyncio (the flusher is an asyncio task, as the append channel is asyncio's).
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from mcp_eventlog_client.errors import DeadlineExceeded, EventLogError, ServiceUnreachable
from mcp_eventlog_client.models import NewEvent

if TYPE_CHECKING:
    from mcp_eventlog_client.writer import EventLogClient

log = logging.getLogger(__name__)

MAX_FRAME_EVENTS = 500
"""Events of one frame, below the service's `EVENTLOG_MAX_BATCH_EVENTS` (1,000)."""
MAX_FRAME_BYTES = 512 * 1024
"""About the data of one frame: one message larger than this goes alone."""


@dataclass(frozen=True, slots=True)
class _Handed:
    """One handed message: its events, appended atomically (never split across frames)."""

    first_seq: int
    events: Sequence[NewEvent]


class GenerationPipeline:
    """The pipelined writer of `generation`, whose next seq is `next_seq` (see the module).

    `client` appends (over its channel when it has one); `window` is the generation's
    declared `pipeline`; `give_up_after` bounds how long one frame is retried while the
    service does not answer or answers 5xx.
    """

    def __init__(
        self,
        client: EventLogClient,
        generation: str,
        *,
        window: int,
        next_seq: int = 1,
        give_up_after: float = 10.0,
        on_broken: Callable[[GenerationPipeline, EventLogError], None] | None = None,
    ) -> None:
        if window < 1:
            raise ValueError("a pipeline window is at least 1 event")
        self.client = client
        self.generation = generation
        self.window = window
        self.next_seq = next_seq
        """The seq the next handed event gets."""
        self.acked = next_seq - 1
        """The generation's tail as acknowledged: every seq up to it is stored."""
        self.give_up_after = give_up_after
        self.error: EventLogError | None = None
        """Why the pipeline broke (then nothing more is appended), or None."""
        self.finished = False
        """Set by the writer once nothing more will be handed (its stream ended)."""
        self.frames = 0
        """Frames acknowledged (each one commit of one or more events)."""
        self.last_write = asyncio.get_running_loop().time()
        """When the service last renewed the lease by an acknowledged append (loop time)."""
        self._on_broken = on_broken
        self._pending: deque[_Handed] = deque()
        self._progress = asyncio.Condition()
        self._flusher: asyncio.Task[None] | None = None

    @property
    def handed(self) -> int:
        """The seq of the last event handed out."""
        return self.next_seq - 1

    @property
    def unacknowledged(self) -> int:
        """Events handed out and not acknowledged yet."""
        return self.handed - self.acked

    async def hand(self, events: Sequence[NewEvent]) -> int:
        """Queue one message's events (atomically, after everything handed before); the
        seq of its last event. Raises the pipeline's `error` once it is broken."""
        need = len(events)
        alone = need > self.window
        async with self._progress:
            await self._progress.wait_for(
                lambda: (
                    self.error is not None
                    or self.unacknowledged + need <= self.window
                    or (alone and self.unacknowledged == 0)
                )
            )
        if self.error is not None:
            raise self.error
        self._queue(events)
        if alone and not await self.settle(self.handed):
            raise self.error or ServiceUnreachable(0, ServiceUnreachable.code, "not stored")
        return self.handed

    def try_hand(self, events: Sequence[NewEvent]) -> int | None:
        """`hand` without waiting: the seq of the message's last event when the window has
        room for it now (and the pipeline is whole), else None (then call `hand`)."""
        if self.error is not None or self.unacknowledged + len(events) > self.window:
            return None
        self._queue(events)
        return self.handed

    def _queue(self, events: Sequence[NewEvent]) -> None:
        self._pending.append(_Handed(self.next_seq, tuple(events)))
        self.next_seq += len(events)
        if self._flusher is None:
            self._flusher = asyncio.get_running_loop().create_task(self._flush())

    async def settle(self, seq: int | None = None, within: float | None = None) -> bool:
        """Wait until every event up to `seq` (default: all handed so far) is acknowledged;
        False when the pipeline broke first or `within` seconds ran out."""
        target = self.handed if seq is None else seq
        try:
            async with asyncio.timeout(within), self._progress:
                await self._progress.wait_for(
                    lambda: self.error is not None or self.acked >= target
                )
        except TimeoutError:
            return False
        return self.acked >= target

    async def aclose(self) -> None:
        """Stop flushing (what is not acknowledged yet may never be)."""
        flusher, self._flusher = self._flusher, None
        if flusher is not None:
            flusher.cancel()

    def _frame(self) -> _Handed:
        """The next frame: the oldest pending messages, as many as the limits allow."""
        first = self._pending.popleft()
        events = list(first.events)
        size = sum(len(event.data) for event in events)
        while self._pending:
            following = self._pending[0]
            grown = size + sum(len(event.data) for event in following.events)
            if len(events) + len(following.events) > MAX_FRAME_EVENTS or grown > MAX_FRAME_BYTES:
                break
            self._pending.popleft()
            events.extend(following.events)
            size = grown
        return _Handed(first.first_seq, events)

    async def _flush(self) -> None:
        """Send the pending messages, one frame at a time, until none is left."""
        try:
            while self._pending and self.error is None:
                frame = self._frame()
                error = await self._store(frame)
                async with self._progress:
                    if error is None:
                        self.acked = frame.first_seq + len(frame.events) - 1
                        self.frames += 1
                        self.last_write = asyncio.get_running_loop().time()
                    else:
                        self._break(error)
                    self._progress.notify_all()
        except Exception as failure:  # never leave a writer waiting on a dead flusher
            async with self._progress:
                self._break(ServiceUnreachable(0, ServiceUnreachable.code, repr(failure)))
                self._progress.notify_all()
        finally:
            if self._flusher is asyncio.current_task():
                self._flusher = None

    async def _store(self, frame: _Handed) -> EventLogError | None:
        """Append `frame`, retried with its `first_seq` while the service is unreachable
        or failing (5xx), for at most `give_up_after` seconds in all (the attempts
        included: an attempt still unanswered then is given up); the error that ended it."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.give_up_after
        retry = self.client.connection.retry
        attempt = 0
        while True:
            try:
                async with asyncio.timeout_at(deadline):
                    await self.client.append(
                        self.generation, frame.events, first_seq=frame.first_seq
                    )
                return None
            except TimeoutError:
                detail = f"not acknowledged within {self.give_up_after:g} s"
                return DeadlineExceeded(0, DeadlineExceeded.code, detail)
            except EventLogError as error:
                transient = error.status == 0 or error.status >= 500
                if not transient or loop.time() >= deadline:
                    return error
                pause = retry.delay(min(attempt, 8), error.retry_after)
                attempt += 1
            await asyncio.sleep(min(pause, max(0.0, deadline - loop.time())))

    def _break(self, error: EventLogError) -> None:
        if self.error is not None:
            return
        self.error = error
        self._pending.clear()
        log.error(
            "generation %s: events up to seq %d were handed out, only %d are stored (%s)",
            self.generation,
            self.handed,
            self.acked,
            error,
        )
        if self._on_broken is not None:
            self._on_broken(self, error)
