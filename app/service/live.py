"""Live reads: a reader follows a stream as it is written, on any replica.

A reader's claim is decided by the resume table (the same audit entry and metrics as a
resume); then the reader is fed frames (`app/service/frames.py`) — events, `reset`,
`end`, heartbeats — read from the database at the reader's own pace, one page at a time.
This module is the use case: it follows, judges each read and pages. The process's
admission (`app/service/admission.py`) holds the reader slots and the budget of bytes in
flight; its hub (`app/service/hub.py`) wakes the readers of a stream when it changes
(this process's commits, PostgreSQL notifications, SQLite's data_version). Every wake-up
only means "read again", and a reader that hears nothing still reads again at each
heartbeat, so a lost wake-up delays, never loses. What a crowd of readers shares (reads in
flight, this process's own appends, a page's frames and body: `app/service/sharing.py`)
is this module's, told of changes by the hub.

Following a generation, each read is judged by `judge()` (`app/domain/follow.py`, where
the rules are listed): deliver, read on, `end`, `reset` then the next generation, or wait.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncGenerator, AsyncIterator, Iterator, Sequence
from dataclasses import dataclass

from app.domain.decision import Verdict
from app.domain.follow import Current, Move, Seen, Turn, judge
from app.errors import InvalidClaim, StorageError, TooManyReaders, UnknownStream
from app.service.admission import Admission, ReaderSlot
from app.service.eventlog import EventLogService
from app.service.frames import Closing, EndFrame, EventFrame, Frame, Heartbeat, ResetFrame
from app.service.hub import Hub, Watch
from app.service.observer import Observer
from app.service.reading import Reading, ReadPath, Step
from app.service.sharing import Encode, Handoffs, SharedFrames, SharedReads
from app.settings.slices import LiveLimits, PageLimits
from app.storage.records import EventPage, GenerationRecord

log = logging.getLogger(__name__)

# A read done is joined this long after (until a change of its stream retires it sooner).
_SHARED_READ_KEPT_S = 0.5


@dataclass(slots=True)
class _Cursor:
    """Where a reader is: the generation it follows and the last seq it was given."""

    generation: GenerationRecord
    after: int


@dataclass(frozen=True, slots=True)
class _Turn:
    """One read's outcome for a reader: frames to send, where it now is, and what next
    (`done`: the stream ended; `again`: read again at once; neither: wait for a change)."""

    frames: Sequence[Frame]
    cursor: _Cursor | None
    epoch: int
    done: bool = False
    again: bool = False


@dataclass(frozen=True, slots=True)
class Follow:
    """A decided live read holding a reader slot; `LiveReads.frames` serves it, and
    `close()` frees the slot (whether or not the frames were ever read).

    `reading` is the decision on the reader's claim; a reader with no claim has none and
    `start`, the generation it is given from seq 1 (the stream's current one then)."""

    stream_pk: int
    reading: Reading | None
    last_epoch: int
    slot: ReaderSlot
    start: GenerationRecord | None = None

    @property
    def tenant(self) -> str:
        """The tenant whose reader this is (its slot was taken for it)."""
        return self.slot.tenant

    def close(self) -> None:
        """Give the reader slot back (idempotent)."""
        self.slot.release()


class LiveReads:
    """The live-read use cases: follow a stream (frames), and wait for a page (long-poll).

    It takes a slot per reader from the admission and a watch per read from the hub, and
    owns what its crowd of readers shares: reads in flight and `handoffs`, which the hub
    tells of every change, and a page's frames and body."""

    def __init__(
        self,
        eventlog: EventLogService,
        reads: ReadPath,
        hub: Hub,
        admission: Admission,
        limits: LiveLimits,
        pages: PageLimits,
        observer: Observer,
    ) -> None:
        self._eventlog = eventlog
        self._reads = reads
        self._hub = hub
        self._admission = admission
        self._limits = limits
        self._pages = pages
        self._observer = observer
        self._shared = SharedReads(kept_for=_SHARED_READ_KEPT_S)
        self.handoffs = Handoffs()
        """This process's own latest append to each watched stream."""
        self._frames = SharedFrames()
        hub.listen(self._shared)  # first: a reader woken by a change reads anew
        hub.listen(self.handoffs)

    async def follow(self, tenant: str, stream_id: str, last_event_id: str | None) -> Follow:
        """Decide the reader's claim (audited like a resume) and take a reader slot.

        No claim means the stream's current generation from seq 1. `InvalidClaim` for an
        `invalid` claim, `UnknownStream` for a stream without a generation,
        `TooManyReaders` past the per-process cap.
        """
        if not self._admission.has_room(tenant):  # before any work
            raise self._too_many(tenant)
        if last_event_id is None:
            # No position is not a claim (CONTRACT.md, Follow, "Position"): the reader holds
            # nothing to splice, so it gets the current generation from seq 1 whatever its
            # state (a finished one whole, then `end`), and nothing is decided or audited.
            current = (await self._eventlog.stream(tenant, stream_id)).current
            if current is None:
                raise UnknownStream(stream_id)
            return Follow(current.stream_pk, None, current.epoch, self._slot(tenant), current)
        reading = await self._eventlog.resume(
            tenant,
            last_event_id,
            asked_stream=stream_id,
            limit=self._page_limit,
            max_bytes=self._limits.page_bytes,
        )
        decision = reading.decision
        if decision.verdict is Verdict.INVALID:
            raise InvalidClaim(decision.reason, decision.detail)
        claimed = reading.claimed
        assert claimed is not None  # a claim that is not invalid names a generation
        # The epoch is the decision's own snapshot's: a generation opened after it is one
        # the reader must still be given (a reset first when it supersedes the delivered
        # one), never one to wait past.
        delivered = reading.delivered
        epoch = claimed.epoch if delivered is None else max(claimed.epoch, delivered.epoch)
        return Follow(claimed.stream_pk, reading, epoch, self._slot(tenant))

    def _slot(self, tenant: str) -> ReaderSlot:
        slot = self._admission.take_slot(tenant)
        if slot is None:  # taken meanwhile by readers decided at the same time
            raise self._too_many(tenant)
        return slot

    def _too_many(self, tenant: str) -> TooManyReaders:
        return TooManyReaders(
            f"{self._admission.readers} live readers and waits already (or the share of "
            f"tenant {tenant!r} of them)"
        )

    @property
    def _page_limit(self) -> int:
        return self._pages.default_limit

    async def frames(self, follow: Follow) -> AsyncGenerator[Sequence[Frame]]:
        """The frames of a live read, a read's worth at a time, until the generation ends
        or the connection's lifetime is up.

        The reader slot is freed when it ends; call `follow.close()` as well in case the
        frames are never read at all.
        """
        with self._serving(follow) as watch:
            async for batch in self._serve(follow, watch):
                yield batch

    async def bodies(self, follow: Follow, encode: Encode) -> AsyncGenerator[bytes]:
        """As `frames`, each batch as `encode` makes it: a page's frames are encoded once
        for every reader given that page. A body is sent in chunks of at most
        `EVENTLOG_LIVE_CHUNK_BYTES`, held in the process's budget of bytes in flight
        while it is (a reader that does not read holds one page, never more, and the
        next page is read only once there is room for it)."""
        size = self._limits.chunk_bytes
        with self._serving(follow) as watch:
            async for batch in self._serve(follow, watch):
                body = self._frames.encoded(batch, encode)
                if len(body) <= size:
                    yield body
                    continue
                async with self._admission.sending(body):
                    for start in range(0, len(body), size):
                        yield body[start : start + size]

    @contextlib.contextmanager
    def _serving(self, follow: Follow) -> Iterator[Watch]:
        """The reader's watch while it is served; its slot is freed when it ends."""
        try:
            with self._hub.watch(follow.stream_pk) as watch:
                yield watch
        except StorageError as error:
            # The stream ends; the reader reconnects with its last id and is decided again.
            log.warning("live read of stream %s ended: %s", follow.stream_pk, error)
        finally:
            follow.close()

    async def _serve(self, follow: Follow, watch: Watch) -> AsyncIterator[Sequence[Frame]]:
        deadline = time.monotonic() + self._limits.max_seconds
        reading, epoch = follow.reading, follow.last_epoch
        cursor: _Cursor | None = None
        opening: list[Frame] = []
        if reading is None:  # no claim: the start generation from seq 1, as it stands
            assert follow.start is not None
            cursor = _Cursor(follow.start, 0)
        else:
            delivered = reading.delivered
            if reading.decision.verdict is Verdict.RESET:
                fresh = None if delivered is None else delivered.token
                opening.append(ResetFrame(reading.decision.reason, fresh))
            if delivered is not None:
                cursor = _Cursor(delivered, reading.after)
                opening.extend(self._deliver(cursor, reading.page))
        if opening:
            yield opening
        # A reader without a position that has been sent nothing yet holds nothing and
        # knows no generation: it is given the current generation from seq 1, whichever
        # that is when its first event comes. A `reset` naming the next generation would
        # tell it a name it cannot keep (a reset has no id), so if that one is superseded
        # before its first event and the reader reconnects, again without a position, it
        # would be handed a third generation after a reset naming the second.
        blank = reading is None
        while time.monotonic() < deadline:
            watch.arm()  # before reading: a change during the read rings it
            if self._hub.draining:  # the process stops: reconnect, elsewhere
                yield (Closing(self._limits.retry_ms),)
                return
            if cursor is None:
                cursor, epoch = await self._next_generation(follow.stream_pk, epoch)
                if cursor is not None:
                    continue
            else:
                turn = self._judge(await self._step(follow, cursor), cursor, epoch)
                cursor, epoch = turn.cursor, turn.epoch
                frames = turn.frames
                if blank and _only_a_move(frames, cursor):
                    frames = ()
                if frames:
                    blank = False
                    yield frames
                if turn.done:
                    return
                if turn.again:
                    continue
            remaining = deadline - time.monotonic()
            heartbeat = self._limits.heartbeat_seconds
            if not await watch.wait(min(heartbeat, remaining)) and remaining > heartbeat:
                yield (Heartbeat(),)

    async def _step(self, follow: Follow, cursor: _Cursor) -> Step:
        token, after, limit = cursor.generation.token, cursor.after, self._page_limit
        handed = self.handoffs.handed(follow.stream_pk, token, after)
        if handed is not None and handed.page is not None and len(handed.page.events) <= limit:
            return handed  # what this process just appended: no need to read it back
        max_bytes = self._limits.page_bytes
        return await self._shared.read(
            follow.stream_pk,
            ("step", follow.tenant, token, after, limit),
            lambda: self._reads.step(
                token, tenant=follow.tenant, after=after, limit=limit, max_bytes=max_bytes
            ),
        )

    def _judge(self, step: Step, cursor: _Cursor, epoch: int) -> _Turn:
        """What one read of a followed generation gives the reader: `judge()`'s turn
        (`app/domain/follow.py`), its page delivered and its control frame added."""
        gen, page, current = step.generation, step.page, step.current
        seen = None
        if page is not None and page.events:
            seen = Seen(page.events[-1].seq, page.contiguous)
        turn = judge(
            gen,
            after=cursor.after,
            seen=seen,
            followed_epoch=cursor.generation.epoch,
            epoch=epoch,
            current=None if current is None else Current(current.epoch, current.fully_retained),
        )
        # The page's frames are one tuple shared by every reader given the same page (and
        # rendered once for all of them): kept as it is unless a control frame follows.
        frames: Sequence[Frame] = ()
        if turn.deliver:
            assert gen is not None
            cursor.generation = gen
            frames = self._deliver(cursor, page)
        return _apply(turn, frames, cursor, gen, current)

    async def _next_generation(self, stream_pk: int, epoch: int) -> tuple[_Cursor | None, int]:
        """The stream's current generation if it is newer than `epoch` and whole."""
        current = await self._shared.read(
            stream_pk, "current", lambda: self._reads.current(stream_pk)
        )
        if current is None or current.epoch <= epoch:
            return None, epoch
        if not current.fully_retained:  # it cannot be started from seq 1: wait for the next
            return None, current.epoch
        return _Cursor(current, 0), current.epoch

    def _deliver(self, cursor: _Cursor, page: EventPage | None) -> tuple[EventFrame, ...]:
        if page is None or not page.events:
            return ()
        frames = self._frames.frames_of(cursor.generation.token, page)
        cursor.after = page.events[-1].seq
        self._observer.live_delivered(len(page.events))
        return frames

    async def page(
        self,
        tenant: str,
        token: str,
        *,
        after: int,
        limit: int,
        wait: float,
        left: asyncio.Event | None = None,
    ) -> tuple[GenerationRecord, EventPage]:
        """A page after `after`; when none is there yet, wait up to `wait` s for a change.

        A wait holds a reader slot (under the same caps as live readers, the tenant's
        share included) while it waits; `left` set (its client went away) or the process
        draining ends it at once, with what the last read found."""
        gen, page = await self._reads.page(token, tenant=tenant, after=after, limit=limit)
        if page.events or wait <= 0 or _settled(gen) or self._hub.draining:
            return gen, page
        slot = self._slot(tenant)
        deadline = time.monotonic() + wait
        try:
            with self._hub.watch(gen.stream_pk) as watch:
                while (remaining := deadline - time.monotonic()) > 0:
                    watch.arm()
                    gen, page = await self._reads.page(
                        token, tenant=tenant, after=after, limit=limit
                    )
                    if page.events or _settled(gen) or self._hub.draining:
                        break
                    if left is not None and left.is_set():
                        break
                    await watch.wait(remaining, unless=left)
                    if left is not None and left.is_set():
                        break  # nobody to answer: no read on the next append
        finally:
            slot.release()
        return gen, page


def _apply(
    turn: Turn,
    frames: Sequence[Frame],
    cursor: _Cursor,
    gen: GenerationRecord | None,
    current: GenerationRecord | None,
) -> _Turn:
    """The reader's frames and cursor after `turn` (its page already delivered)."""
    match turn.move:
        case Move.READ_ON:
            return _Turn(frames, cursor, turn.epoch, again=True)
        case Move.WAIT:
            return _Turn(frames, cursor, turn.epoch)
        case Move.END:
            assert gen is not None
            assert gen.terminal_seq is not None
            ended = EndFrame(gen.token, gen.terminal_seq)
            return _Turn([*frames, ended], cursor, turn.epoch, done=True)
        case Move.SWITCH:
            assert current is not None
            assert turn.reason is not None
            reset = ResetFrame(turn.reason, current.token)
            return _Turn([*frames, reset], _Cursor(current, 0), turn.epoch, again=True)
    assert turn.reason is not None  # Move.AWAIT_NEXT
    return _Turn([*frames, ResetFrame(turn.reason, None)], None, turn.epoch)


def _only_a_move(frames: Sequence[Frame], cursor: _Cursor | None) -> bool:
    """The frames are one `reset` naming the generation the reader now starts from seq 1."""
    if len(frames) != 1 or cursor is None or cursor.after != 0:
        return False
    [frame] = frames
    return isinstance(frame, ResetFrame) and frame.generation == cursor.generation.token


def _settled(gen: GenerationRecord) -> bool:
    """Nothing more will ever be appended to it."""
    return gen.terminal or gen.superseded or gen.expired or gen.abandoned
