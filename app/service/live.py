"""Live reads: a reader follows a stream as it is written, on any replica.

A reader's claim is decided by the resume table (the same audit entry and metrics as a
resume); then the reader is fed frames — events, `reset`, `end`, heartbeats — read from
the database at the reader's own pace, one page at a time. A `Hub` per process wakes the
readers of a stream when it changes (this process's commits, PostgreSQL notifications,
SQLite's data_version); every wake-up only means "read again", and a reader that hears
nothing still reads again at each heartbeat, so a lost wake-up delays, never loses.

Following a generation, each read is judged in this order:
1. the generation is gone or expired               → reset `expired`, then the next one
2. the next event to deliver was evicted           → reset `evicted`, then the next one
3. events after the position are retained          → deliver them (a hole: `eviction_hole`)
4. the generation is terminal and all is delivered → `end`, and the connection closes
5. the generation was superseded                   → reset `superseded`, then the next one
6. otherwise                                       → wait for a wake-up (or a heartbeat)
"The next one" is the stream's current generation from seq 1 when it is newer and still
whole, otherwise the next generation opened after it, as soon as it is.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections import defaultdict
from collections.abc import (
    AsyncGenerator,
    AsyncIterator,
    Awaitable,
    Callable,
    Collection,
    Hashable,
    Iterator,
    Sequence,
)
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from app.domain.decision import Reason, Verdict
from app.service.eventlog import EventLogService
from app.service.observer import Observer
from app.service.reading import Reading, ReadPath, Step
from app.settings import Settings
from app.storage.changes import Changes, TailAppend
from app.storage.errors import StorageError, UnknownStream
from app.storage.records import EventPage, GenerationRecord
from app.storage.wakeups import WakeupSource

log = logging.getLogger(__name__)

T = TypeVar("T")


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


Frame = EventFrame | ResetFrame | EndFrame | Heartbeat


class LiveRefused(Exception):
    """The claim is `invalid`: no stream is served (the reason says why)."""

    def __init__(self, reason: Reason, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


class TooManyReaders(Exception):
    """This process already serves `EVENTLOG_LIVE_MAX_READERS` live readers."""


class _Watch:
    """One reader's doorbell: armed before a read, rung by any change of its stream after."""

    def __init__(self) -> None:
        self._rung = asyncio.Event()

    def arm(self) -> None:
        self._rung.clear()

    def ring(self) -> None:
        self._rung.set()

    async def wait(self, within: float) -> bool:
        """True when rung within `within` seconds (a reader's doorbell has a deadline)."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(within):
                await self._rung.wait()
                return True
        return False


class _Slot:
    """A taken reader slot; `release` (idempotent) gives it back."""

    def __init__(self, hub: Hub) -> None:
        self._hub: Hub | None = hub

    def release(self) -> None:
        if self._hub is not None:
            self._hub._free_slot()
            self._hub = None


class _SharedReads:
    """Identical reads of a stream that are in flight at once are one database read.

    The readers of a generation woken by one append all ask the same question (the page
    after the same seq): one read answers them all, so the database and its pool see one
    read per wake-up rather than one per reader. A read is joined only while it can see
    everything its joiners were woken for: a wake-up of its stream retires it (whoever
    asks after that starts a new one), and a read starts its snapshot after it began.
    """

    def __init__(self) -> None:
        self._inflight: defaultdict[int, dict[Hashable, asyncio.Future[Any]]] = defaultdict(dict)

    async def read(self, stream_pk: int, key: Hashable, read: Callable[[], Awaitable[T]]) -> T:
        """`read()`'s answer, shared with every identical read of the stream in flight."""
        reads = self._inflight[stream_pk]
        future = reads.get(key)
        if future is None:
            future = asyncio.ensure_future(read())
            reads[key] = future
            future.add_done_callback(functools.partial(self._done, stream_pk, key))
        # Shielded: a reader that goes away must not cancel the read of the others.
        answer: T = await asyncio.shield(future)
        return answer

    def _done(self, stream_pk: int, key: Hashable, future: asyncio.Future[Any]) -> None:
        reads = self._inflight.get(stream_pk)
        if reads is not None and reads.get(key) is future:
            del reads[key]
            if not reads:
                del self._inflight[stream_pk]
        if not future.cancelled():
            future.exception()  # every waiter got it; retrieved so it is not logged again

    def retire(self, stream_pks: Collection[int] | None) -> None:
        """The streams changed: reads in flight may predate it, so none is joined again."""
        if stream_pks is None:
            self._inflight.clear()
        else:
            for pk in stream_pks:
                self._inflight.pop(pk, None)


class Hub:
    """This process's live readers and the sources that wake them (one per process)."""

    def __init__(
        self,
        sources: Collection[WakeupSource],
        observer: Observer,
        *,
        fanout_per_reader: float = 0.0,
        fanout_max: float = 0.0,
    ) -> None:
        self._sources = tuple(sources)
        self._observer = observer
        self._watches: defaultdict[int, set[_Watch]] = defaultdict(set)
        self._fanout_per_reader = fanout_per_reader
        self._fanout_max = fanout_max
        self._pending: dict[int, asyncio.TimerHandle] = {}
        self._handed: dict[int, TailAppend] = {}
        self._handed_steps: dict[int, tuple[TailAppend, Step]] = {}
        self._frames: RecentByIdentity[EventPage, tuple[EventFrame, ...]] = RecentByIdentity()
        self.shared = _SharedReads()
        self.readers = 0

    def take_slot(self, limit: int) -> _Slot:
        """A live reader's place in this process; `TooManyReaders` past `limit`."""
        if self.readers >= limit:
            raise TooManyReaders(f"{self.readers} live readers already")
        self.readers += 1
        self._observer.live_readers(self.readers)
        return _Slot(self)

    def _free_slot(self) -> None:
        self.readers -= 1
        self._observer.live_readers(self.readers)

    @contextmanager
    def watch(self, stream_pk: int) -> Iterator[_Watch]:
        """Ring the returned watch on every change of the stream while the block runs."""
        watch = _Watch()
        self._watches[stream_pk].add(watch)
        try:
            yield watch
        finally:
            watches = self._watches[stream_pk]
            watches.discard(watch)
            if not watches:
                del self._watches[stream_pk]
                self._handed.pop(stream_pk, None)
                self._handed_steps.pop(stream_pk, None)

    def wake(
        self,
        stream_pks: Collection[int] | None,
        sent_at: float | None = None,
        *,
        appended: Changes | None = None,
    ) -> None:
        """Ring the readers of these streams (None: of every stream).

        `appended` is what this process's own commit appended: kept for the readers of
        each stream (`handed`) until the next change of it, which only a read can show.
        A stream with many readers here is rung after a delay that grows with them.
        """
        if sent_at is not None:
            self._observer.live_notified(max(0.0, time.time() - sent_at))
        self.shared.retire(stream_pks)  # before ringing: a woken reader reads anew
        if stream_pks is None:
            self._handed.clear()
            self._handed_steps.clear()
        pks = list(self._watches) if stream_pks is None else stream_pks
        for pk in pks:
            watches = self._watches.get(pk)
            if not watches:
                continue
            handed = None if appended is None else appended.get(pk)
            if handed is not None and _handable(handed):
                self._handed[pk] = handed
            else:
                self._handed.pop(pk, None)
            delay = min(self._fanout_max, len(watches) * self._fanout_per_reader)
            if delay < 0.001:
                self._ring(pk)
            elif pk not in self._pending:
                self._pending[pk] = asyncio.get_running_loop().call_later(delay, self._ring, pk)

    def _ring(self, stream_pk: int) -> None:
        self._pending.pop(stream_pk, None)
        for watch in self._watches.get(stream_pk, ()):
            watch.ring()

    def handed(self, stream_pk: int, token: str, after: int) -> Step | None:
        """This process's latest append to the stream, if it is the latest change of it
        and starts right after `<token>:<after>`: the step a read would give (the
        generation as that commit left it, current then), the same object for every reader."""
        handed = self._handed.get(stream_pk)
        if handed is None or handed.generation.token != token or handed.after != after:
            return None
        step = self._handed_steps.get(stream_pk)
        if step is None or step[0] is not handed:
            page = EventPage(after, handed.events[-1].seq, handed.events)
            step = (handed, Step(handed.generation, page, handed.generation))
            self._handed_steps[stream_pk] = step
        return step[1]

    def frames_of(self, token: str, page: EventPage) -> tuple[EventFrame, ...]:
        """A page's events as frames, made once for all the readers given the same page
        (a shared read or a handed-over append gives them one object)."""
        frames = self._frames.get(page)
        if frames is None:
            frames = tuple(EventFrame(token, e.seq, e.event, e.data) for e in page.events)
            if sum(len(e.data) for e in page.events) <= SHARED_MAX_CHARS:
                self._frames.put(page, frames)
        return frames

    def watched(self) -> Collection[int]:
        """The streams some reader follows now."""
        return list(self._watches)

    def source_up(self, source: str, up: bool) -> None:
        """A wake-up source connected or lost its connection."""
        self._observer.live_source(source, up)

    async def run(self) -> None:
        """Listen to every source until cancelled (a background task)."""
        async with asyncio.TaskGroup() as group:
            for source in self._sources:
                group.create_task(source.run(self), name=f"wakeups-{source.name}")


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
    `close()` frees the slot (whether or not the frames were ever read)."""

    tenant: str
    stream_pk: int
    reading: Reading
    last_epoch: int
    slot: _Slot

    def close(self) -> None:
        """Give the reader slot back (idempotent)."""
        self.slot.release()


class LiveReads:
    """The live-read use cases: follow a stream (frames), and wait for a page (long-poll)."""

    def __init__(
        self,
        eventlog: EventLogService,
        reads: ReadPath,
        hub: Hub,
        settings: Settings,
        observer: Observer,
    ) -> None:
        self._eventlog = eventlog
        self._reads = reads
        self._hub = hub
        self._settings = settings
        self._observer = observer

    async def follow(self, tenant: str, stream_id: str, last_event_id: str | None) -> Follow:
        """Decide the reader's claim (audited like a resume) and take a reader slot.

        No claim means the stream's current generation from seq 1. `LiveRefused` for an
        `invalid` claim, `UnknownStream` for a stream without a generation,
        `TooManyReaders` past the per-process cap.
        """
        if self._hub.readers >= self._settings.live_max_readers:  # before any work
            raise TooManyReaders(f"{self._hub.readers} live readers already")
        if last_event_id is None:
            current = (await self._eventlog.stream(tenant, stream_id)).current
            if current is None:
                raise UnknownStream(stream_id)
            last_event_id = f"{current.token}:0"
        reading = await self._eventlog.resume(
            tenant, last_event_id, asked_stream=stream_id, limit=self._page_limit
        )
        decision = reading.decision
        if decision.verdict is Verdict.INVALID:
            raise LiveRefused(decision.reason, decision.detail)
        claimed = reading.claimed
        assert claimed is not None  # a claim that is not invalid names a generation
        current = await self._reads.current(claimed.stream_pk)
        epoch = max(claimed.epoch, 0 if current is None else current.epoch)
        slot = self._hub.take_slot(self._settings.live_max_readers)
        return Follow(tenant, claimed.stream_pk, reading, epoch, slot)

    @property
    def _page_limit(self) -> int:
        return self._settings.default_page_limit

    async def frames(self, follow: Follow) -> AsyncGenerator[Sequence[Frame]]:
        """The frames of a live read, a read's worth at a time, until the generation ends
        or the connection's lifetime is up.

        The reader slot is freed when it ends; call `follow.close()` as well in case the
        frames are never read at all.
        """
        try:
            with self._hub.watch(follow.stream_pk) as watch:
                async for batch in self._serve(follow, watch):
                    yield batch
        except StorageError as error:
            # The stream ends; the reader reconnects with its last id and is decided again.
            log.warning("live read of stream %s ended: %s", follow.stream_pk, error)
        finally:
            follow.close()

    async def _serve(self, follow: Follow, watch: _Watch) -> AsyncIterator[Sequence[Frame]]:
        deadline = time.monotonic() + self._settings.live_max_seconds
        reading, epoch = follow.reading, follow.last_epoch
        cursor: _Cursor | None = None
        delivered = reading.delivered
        opening: list[Frame] = []
        if reading.decision.verdict is Verdict.RESET:
            fresh = None if delivered is None else delivered.token
            opening.append(ResetFrame(reading.decision.reason, fresh))
        if delivered is not None:
            claim = reading.decision.claim
            start = claim.seq if delivered is reading.claimed and claim is not None else 0
            cursor = _Cursor(delivered, start)
            opening.extend(self._deliver(cursor, reading.page))
        if opening:
            yield opening
        while time.monotonic() < deadline:
            watch.arm()  # before reading: a change during the read rings it
            if cursor is None:
                cursor, epoch = await self._next_generation(follow.stream_pk, epoch)
                if cursor is not None:
                    continue
            else:
                turn = self._judge(await self._step(follow, cursor), cursor, epoch)
                cursor, epoch = turn.cursor, turn.epoch
                if turn.frames:
                    yield turn.frames
                if turn.done:
                    return
                if turn.again:
                    continue
            remaining = deadline - time.monotonic()
            heartbeat = self._settings.live_heartbeat_seconds
            if not await watch.wait(min(heartbeat, remaining)) and remaining > heartbeat:
                yield (Heartbeat(),)

    async def _step(self, follow: Follow, cursor: _Cursor) -> Step:
        token, after, limit = cursor.generation.token, cursor.after, self._page_limit
        handed = self._hub.handed(follow.stream_pk, token, after)
        if handed is not None and handed.page is not None and len(handed.page.events) <= limit:
            return handed  # what this process just appended: no need to read it back
        return await self._hub.shared.read(
            follow.stream_pk,
            ("step", follow.tenant, token, after, limit),
            lambda: self._reads.step(token, tenant=follow.tenant, after=after, limit=limit),
        )

    def _judge(self, step: Step, cursor: _Cursor, epoch: int) -> _Turn:
        """What one read of a followed generation gives the reader (rules in the module doc).

        Delivering a page that reaches the tail of the snapshot settles the rest in the same
        turn (`end`, or a reset when superseded, or wait): reading again at once would only
        find what the read just saw, and a later change rings the watch armed before it.
        """
        gen = step.generation
        if gen is None or gen.expired:
            return self._reset(Reason.EXPIRED, step, cursor, epoch)
        if cursor.after < gen.head_seq - 1:
            return self._reset(Reason.EVICTED, step, cursor, epoch)
        # The page's frames are one tuple shared by every reader given the same page (and
        # rendered once for all of them): kept as it is unless a control frame follows.
        frames: Sequence[Frame] = ()
        if step.page is not None and step.page.events:
            if not step.page.contiguous:
                return self._reset(Reason.EVICTION_HOLE, step, cursor, epoch)
            cursor.generation = gen
            frames = self._deliver(cursor, step.page)
            if cursor.after < gen.tail_seq:  # the page was cut short: read on
                return _Turn(frames, cursor, epoch, again=True)
        if gen.terminal and cursor.after >= gen.tail_seq:
            assert gen.terminal_seq is not None
            ended = EndFrame(gen.token, gen.terminal_seq)
            return _Turn([*frames, ended], cursor, epoch, done=True)
        if gen.superseded:
            reset = self._reset(Reason.SUPERSEDED, step, cursor, epoch)
            return _Turn([*frames, *reset.frames], reset.cursor, reset.epoch, again=reset.again)
        return _Turn(frames, cursor, epoch)

    def _reset(self, reason: Reason, step: Step, cursor: _Cursor, epoch: int) -> _Turn:
        """Reset, then the stream's newer current generation from seq 1 if it is whole."""
        epoch = max(epoch, cursor.generation.epoch)
        current = step.current
        if current is not None and current.epoch > epoch and current.fully_retained:
            fresh = _Cursor(current, 0)
            return _Turn([ResetFrame(reason, current.token)], fresh, current.epoch, again=True)
        newest = epoch if current is None else max(epoch, current.epoch)
        return _Turn([ResetFrame(reason, None)], None, newest)

    async def _next_generation(self, stream_pk: int, epoch: int) -> tuple[_Cursor | None, int]:
        """The stream's current generation if it is newer than `epoch` and whole."""
        current = await self._hub.shared.read(
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
        frames = self._hub.frames_of(cursor.generation.token, page)
        cursor.after = page.events[-1].seq
        self._observer.live_delivered(len(page.events))
        return frames

    async def page(
        self, tenant: str, token: str, *, after: int, limit: int, wait: float
    ) -> tuple[GenerationRecord, EventPage]:
        """A page after `after`; when none is there yet, wait up to `wait` s for a change."""
        gen, page = await self._reads.page(token, tenant=tenant, after=after, limit=limit)
        if page.events or wait <= 0 or _settled(gen):
            return gen, page
        deadline = time.monotonic() + wait
        with self._hub.watch(gen.stream_pk) as watch:
            while (remaining := deadline - time.monotonic()) > 0:
                watch.arm()
                gen, page = await self._reads.page(token, tenant=tenant, after=after, limit=limit)
                if page.events or _settled(gen):
                    break
                await watch.wait(remaining)
        return gen, page


K = TypeVar("K")
V = TypeVar("V")

# What a crowd of readers of one stream shares (a page's frames, their encoded body) is kept
# only for pages of at most this much data, and only for the last few of them.
SHARED_MAX_CHARS = 256 * 1024
_SHARED_KEPT = 16


class RecentByIdentity(Generic[K, V]):
    """Values made lately for objects, found by the object's identity (it is held meanwhile,
    so its id cannot be reused); the oldest is dropped past `kept`. A value dropped too soon
    only costs making it again."""

    def __init__(self, kept: int = _SHARED_KEPT) -> None:
        self._kept = kept
        self._entries: dict[int, tuple[K, V]] = {}

    def get(self, key: K) -> V | None:
        entry = self._entries.get(id(key))
        return entry[1] if entry is not None and entry[0] is key else None

    def put(self, key: K, value: V) -> None:
        if len(self._entries) >= self._kept:
            del self._entries[next(iter(self._entries))]
        self._entries[id(key)] = (key, value)


# A handed-over append is kept per watched stream until its next change: bounded, so that
# a process following many streams never holds many large batches.
_HANDOFF_MAX_CHARS = 64 * 1024


def _handable(appended: TailAppend) -> bool:
    return sum(len(event.data) for event in appended.events) <= _HANDOFF_MAX_CHARS


def _settled(gen: GenerationRecord) -> bool:
    """Nothing more will ever be appended to it."""
    return gen.terminal or gen.superseded or gen.expired
