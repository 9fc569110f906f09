"""The live fan-out: one per process, between the wake-up sources and the live readers.

It owns everything the readers of a process share, behind methods:
- reader slots, at most `max_readers` of them and at most `tenant_max` for one tenant
  (`has_room`, `take_slot`), each taken for a tenant: live readers and long-polls alike;
- what is being sent: the bytes of pages in flight, process-wide (`sending`, `try_send`),
  and the page requests served at once (`take_page`);
- draining: on shutdown every reader and waiter is rung and told to end (`drain`);
- watches: a reader's doorbell, armed before it reads and rung by any change of its
  stream after (`watch`); the sources tell it of changes (`wake`, `watched`,
  `source_up`, run by `run`). A stream with many readers here is rung after a delay that
  grows with them, so that changes meanwhile reach each reader in one read and one send;
- what a crowd shares instead of doing once each: identical reads in flight
  (`read_shared`, retired by a wake-up of their stream), this process's own latest
  append to a stream (`handed`, instead of reading it back), a page's frames
  (`frames_of`) and their encoded body (`encoded`).

Every wake-up only means "read again": the tables stay the only source of truth.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter, defaultdict
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Collection,
    Hashable,
    Iterator,
    Sequence,
)
from contextlib import asynccontextmanager, contextmanager
from typing import TypeVar

from app.service.frames import EventFrame, Frame, PageFrames
from app.service.observer import Observer
from app.service.reading import Step
from app.service.sharing import ByteBudget, RecentByIdentity, SharedReads
from app.storage.changes import Changes, TailAppend
from app.storage.records import EventPage
from app.storage.wakeups import WakeupSource

T = TypeVar("T")

# What a crowd of readers of one stream shares (a page's frames, their encoded body) is kept
# only for pages of at most this much data, and only for the last few of them.
SHARED_MAX_CHARS = 512 * 1024  # above a live page (EVENTLOG_LIVE_PAGE_BYTES) and its framing
_SHARED_KEPT = 16

# A read done is joined this long after (until a change of its stream retires it sooner).
_SHARED_READ_KEPT_S = 0.5

# A handed-over append is kept per watched stream until its next change: bounded, so that
# a process following many streams never holds many large batches.
_HANDOFF_MAX_CHARS = 64 * 1024

Encode = Callable[[Sequence[Frame]], bytes]
"""How this process's readers are sent a batch of frames (the HTTP layer's renderer)."""


class Watch:
    """One reader's doorbell: armed before a read, rung by any change of its stream after."""

    __slots__ = ("_rung",)

    def __init__(self) -> None:
        self._rung = asyncio.Event()

    def arm(self) -> None:
        """Forget earlier rings: from now on, a change of the stream rings it."""
        self._rung.clear()

    def ring(self) -> None:
        """The stream changed since the watch was armed."""
        self._rung.set()

    async def wait(self, within: float, *, unless: asyncio.Event | None = None) -> bool:
        """True when rung within `within` seconds (a reader's doorbell has a deadline);
        `unless` set (a waiter's client left) ends the wait at once, as not rung."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(within):
                if unless is None:
                    await self._rung.wait()
                    return True
                rung = asyncio.ensure_future(self._rung.wait())
                left = asyncio.ensure_future(unless.wait())
                try:
                    await asyncio.wait((rung, left), return_when=asyncio.FIRST_COMPLETED)
                finally:
                    rung.cancel()
                    left.cancel()
                return self._rung.is_set() and not unless.is_set()
        return False


class ReaderSlot:
    """A live reader's place in this process, taken for `tenant`; `release` (idempotent)
    gives it back."""

    __slots__ = ("_free", "tenant")

    def __init__(self, tenant: str, free: Callable[[ReaderSlot], None]) -> None:
        self.tenant = tenant
        self._free: Callable[[ReaderSlot], None] | None = free

    def release(self) -> None:
        """Give the place back (once, however often it is called)."""
        if self._free is not None:
            free, self._free = self._free, None
            free(self)


class Fanout:
    """This process's live readers, what they share, and the sources that wake them."""

    def __init__(
        self,
        sources: Collection[WakeupSource],
        observer: Observer,
        *,
        max_readers: int,
        tenant_max: int | None = None,
        fanout_per_reader: float = 0.0,
        fanout_max: float = 0.0,
        max_bytes_in_flight: int = 64 * 1_048_576,
        max_pages: int = 64,
    ) -> None:
        self._sources = tuple(sources)
        self._observer = observer
        self._max_readers = max_readers
        self._tenant_max = max_readers if tenant_max is None else tenant_max
        self._readers = 0
        self._by_tenant: Counter[str] = Counter()
        self._draining = False
        self._budget = ByteBudget(max_bytes_in_flight)
        self._sending: dict[int, _Sent] = {}  # by id(body)
        self._max_pages = max_pages
        self._pages = 0
        self._watches: defaultdict[int, set[Watch]] = defaultdict(set)
        self._fanout_per_reader = fanout_per_reader
        self._fanout_max = fanout_max
        self._pending: dict[int, asyncio.TimerHandle] = {}
        self._shared = SharedReads(kept_for=_SHARED_READ_KEPT_S)
        self._handed: dict[int, TailAppend] = {}
        self._handed_steps: dict[int, tuple[TailAppend, Step]] = {}
        self._frames: RecentByIdentity[EventPage, PageFrames] = RecentByIdentity(_SHARED_KEPT)
        self._bodies: RecentByIdentity[PageFrames, tuple[Encode, bytes]] = RecentByIdentity(
            _SHARED_KEPT
        )

    # -- reader slots -----------------------------------------------------------------------

    @property
    def readers(self) -> int:
        """How many reader slots are taken now."""
        return self._readers

    def has_room(self, tenant: str) -> bool:
        """Whether `take_slot(tenant)` would give a slot now (asked before any work)."""
        return self._readers < self._max_readers and self._by_tenant[tenant] < self._tenant_max

    def take_slot(self, tenant: str) -> ReaderSlot | None:
        """A reader's place in this process, or None past `max_readers` (or past the
        tenant's share, `tenant_max`)."""
        if not self.has_room(tenant):
            return None
        self._readers += 1
        self._by_tenant[tenant] += 1
        self._observer.live_readers(self._readers)
        return ReaderSlot(tenant, self._free)

    def _free(self, slot: ReaderSlot) -> None:
        self._readers -= 1
        self._by_tenant[slot.tenant] -= 1
        if not self._by_tenant[slot.tenant]:
            del self._by_tenant[slot.tenant]
        self._observer.live_readers(self._readers)

    # -- shutdown ---------------------------------------------------------------------------

    @property
    def draining(self) -> bool:
        """The process is stopping: every reader and waiter ends at once."""
        return self._draining

    def drain(self) -> None:
        """Ring every watch and have every reader end (a reader checks `draining` after
        each wake-up and before each wait)."""
        self._draining = True
        for watches in list(self._watches.values()):
            for watch in watches:
                watch.ring()

    # -- what is being sent -------------------------------------------------------------------

    @asynccontextmanager
    async def sending(self, body: bytes) -> AsyncIterator[None]:
        """Hold `body`'s bytes in the process-wide budget while the block sends it: waits
        for room first. A body shared by a crowd (`encoded`) is charged once for all."""
        key = id(body)
        held = self._sending.get(key)
        if held is None or held.body is not body:
            await self._budget.take(len(body))
            held = self._sending[key] = _Sent(body)
        held.senders += 1
        try:
            yield
        finally:
            held.senders -= 1
            if held.senders == 0:
                if self._sending.get(key) is held:
                    del self._sending[key]
                self._budget.give(len(body))

    def try_send(self, size: int) -> Callable[[], None] | None:
        """Hold `size` bytes if there is room now: the function that gives them back, or
        None (a page request is refused rather than queued)."""
        if not self._budget.try_take(size):
            return None
        given = False

        def give() -> None:
            nonlocal given
            if not given:
                given = True
                self._budget.give(size)

        return give

    @property
    def bytes_in_flight(self) -> int:
        """Bytes of responses being sent now."""
        return self._budget.used

    def take_page(self) -> Callable[[], None] | None:
        """A place for one page request, or None past `max_pages`: the function that gives
        it back (idempotent)."""
        if self._pages >= self._max_pages:
            return None
        self._pages += 1
        given = False

        def give() -> None:
            nonlocal given
            if not given:
                given = True
                self._pages -= 1

        return give

    # -- watches and wake-ups ---------------------------------------------------------------

    @contextmanager
    def watch(self, stream_pk: int) -> Iterator[Watch]:
        """Ring the returned watch on every change of the stream while the block runs."""
        watch = Watch()
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
        self._shared.retire(stream_pks)  # before ringing: a woken reader reads anew
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

    # -- what a crowd shares ----------------------------------------------------------------

    async def read_shared(
        self, stream_pk: int, key: Hashable, read: Callable[[], Awaitable[T]]
    ) -> T:
        """`read()`'s answer, shared with every read of the stream under the same `key` in
        flight since its last change (`key` says what is asked: equal keys, equal reads)."""
        return await self._shared.read(stream_pk, key, read)

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

    def frames_of(self, token: str, page: EventPage) -> PageFrames:
        """A page's events as frames, made once for all the readers given the same page
        (a shared read or a handed-over append gives them one object)."""
        frames = self._frames.get(page)
        if frames is None:
            frames = PageFrames(EventFrame(token, e.seq, e.event, e.data) for e in page.events)
            if sum(len(e.data) for e in page.events) <= SHARED_MAX_CHARS:
                self._frames.put(page, frames)
        return frames

    def encoded(self, batch: Sequence[Frame], encode: Encode) -> bytes:
        """`encode(batch)`: made once for every reader given the same page's frames
        (`frames_of`), made anew for any other batch."""
        if not isinstance(batch, PageFrames):
            return encode(batch)
        kept = self._bodies.get(batch)
        if kept is not None and kept[0] is encode:
            return kept[1]
        body = encode(batch)
        if len(body) <= SHARED_MAX_CHARS:
            self._bodies.put(batch, (encode, body))
        return body


class _Sent:
    """A body being sent, and by how many readers (it is charged to the budget once)."""

    __slots__ = ("body", "senders")

    def __init__(self, body: bytes) -> None:
        self.body = body
        self.senders = 0


def _handable(appended: TailAppend) -> bool:
    return sum(len(event.data) for event in appended.events) <= _HANDOFF_MAX_CHARS
