"""What a crowd of live readers shares instead of doing once each, owned by the live reads
(`app/service/live.py`):
- identical reads in flight (`SharedReads`, retired by a change of their stream);
- this process's own latest append to a watched stream (`Handoffs`, instead of reading it
  back, kept until the stream's next change);
- a page's frames and their encoded body (`SharedFrames`, found by the page's identity).

The first two are told of changes by the wake-up hub (`app/service/hub.py`, as its
`StreamListener`s); nothing here knows where changes come from.
"""

from __future__ import annotations

import asyncio
import functools
from collections import defaultdict
from collections.abc import Awaitable, Callable, Collection, Hashable, Sequence
from typing import Any, Generic, TypeVar

from app.service.frames import EventFrame, Frame, PageFrames
from app.service.reading import Step
from app.storage.changes import Changes, TailAppend
from app.storage.records import EventPage

T = TypeVar("T")

# What a crowd of readers of one stream shares (a page's frames, their encoded body) is kept
# only for pages of at most this much data, and only for the last few of them.
SHARED_MAX_CHARS = 512 * 1024  # above a live page (EVENTLOG_LIVE_PAGE_BYTES) and its framing
_SHARED_KEPT = 16

# A handed-over append is kept per watched stream until its next change: bounded, so that
# a process following many streams never holds many large batches.
_HANDOFF_MAX_CHARS = 64 * 1024

Encode = Callable[[Sequence[Frame]], bytes]
"""How this process's readers are sent a batch of frames (the HTTP layer's renderer)."""
K = TypeVar("K")
V = TypeVar("V")


class SharedReads:
    """Identical reads of a stream that are in flight at once are one database read.

    The readers of a generation woken by one append all ask the same question (the page
    after the same seq): one read answers them all, so the database and its pool see one
    read per wake-up rather than one per reader. A read is joined only while it can see
    everything its joiners were woken for: a wake-up of its stream retires it (whoever
    asks after that starts a new one), and a read starts its snapshot after it began.
    """

    def __init__(self, kept_for: float = 0.0) -> None:
        self._inflight: defaultdict[int, dict[Hashable, asyncio.Future[Any]]] = defaultdict(dict)
        # A read that is done is still joined for `kept_for` seconds, unless a wake-up of its
        # stream retires it first: readers of a crowd that arrive one after another then
        # share one page (and one encoded body) rather than each reading and holding its
        # own. Only what a wake-up would have told them of could be newer, and a wake-up
        # retires the read and rings them.
        self._kept_for = kept_for

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
        failed = future.cancelled() or future.exception() is not None  # (retrieved: not logged)
        if self._kept_for > 0 and not failed:
            asyncio.get_running_loop().call_later(
                self._kept_for, self._forget, stream_pk, key, future
            )
        else:
            self._forget(stream_pk, key, future)

    def _forget(self, stream_pk: int, key: Hashable, future: asyncio.Future[Any]) -> None:
        reads = self._inflight.get(stream_pk)
        if reads is not None and reads.get(key) is future:
            del reads[key]
            if not reads:
                del self._inflight[stream_pk]

    def retire(self, stream_pks: Collection[int] | None) -> None:
        """The streams changed: reads in flight may predate it, so none is joined again."""
        if stream_pks is None:
            self._inflight.clear()
        else:
            for pk in stream_pks:
                self._inflight.pop(pk, None)

    def changed(
        self, stream_pks: Collection[int] | None, watched: Collection[int], appended: Changes | None
    ) -> None:
        """The hub's word of a change: retire the streams' reads."""
        self.retire(stream_pks)

    def unwatched(self, stream_pk: int) -> None:
        """Nothing to drop: a read in flight ends by itself, and a change retires it."""


class Handoffs:
    """This process's latest append to each watched stream, kept until the stream's next
    change (which only a read can show), so that its readers are given it without reading
    it back: the same `Step` object for every reader."""

    def __init__(self) -> None:
        self._handed: dict[int, TailAppend] = {}
        self._steps: dict[int, tuple[TailAppend, Step]] = {}

    def handed(self, stream_pk: int, token: str, after: int) -> Step | None:
        """This process's latest append to the stream, if it is the latest change of it
        and starts right after `<token>:<after>`: the step a read would give (the
        generation as that commit left it, current then), the same object for every reader."""
        handed = self._handed.get(stream_pk)
        if handed is None or handed.generation.token != token or handed.after != after:
            return None
        step = self._steps.get(stream_pk)
        if step is None or step[0] is not handed:
            page = EventPage(after, handed.events[-1].seq, handed.events)
            step = (handed, Step(handed.generation, page, handed.generation))
            self._steps[stream_pk] = step
        return step[1]

    def changed(
        self, stream_pks: Collection[int] | None, watched: Collection[int], appended: Changes | None
    ) -> None:
        """The hub's word of a change: keep what this process appended to each watched
        stream (if it is small enough), forget any older append."""
        if stream_pks is None:
            self._handed.clear()
            self._steps.clear()
        for pk in watched:
            handed = None if appended is None else appended.get(pk)
            if handed is not None and _handable(handed):
                self._handed[pk] = handed
            else:
                self._handed.pop(pk, None)

    def unwatched(self, stream_pk: int) -> None:
        """No reader follows the stream here any more: nothing is kept for it."""
        self._handed.pop(stream_pk, None)
        self._steps.pop(stream_pk, None)


class RecentByIdentity(Generic[K, V]):
    """Values made lately for objects, found by the object's identity (it is held meanwhile,
    so its id cannot be reused); the oldest is dropped past `kept`. A value dropped too soon
    only costs making it again."""

    def __init__(self, kept: int) -> None:
        self._kept = kept
        self._entries: dict[int, tuple[K, V]] = {}

    def get(self, key: K) -> V | None:
        """The value kept for this very object, if it is still kept."""
        entry = self._entries.get(id(key))
        return entry[1] if entry is not None and entry[0] is key else None

    def put(self, key: K, value: V) -> None:
        """Keep `value` for `key`, dropping the oldest entry when full."""
        if len(self._entries) >= self._kept:
            del self._entries[next(iter(self._entries))]
        self._entries[id(key)] = (key, value)


class SharedFrames:
    """A page's frames and their encoded body, made once for every reader given the same
    page object (a shared read or a handed-over append gives them one)."""

    def __init__(self) -> None:
        self._frames: RecentByIdentity[EventPage, PageFrames] = RecentByIdentity(_SHARED_KEPT)
        self._bodies: RecentByIdentity[PageFrames, tuple[Encode, bytes]] = RecentByIdentity(
            _SHARED_KEPT
        )

    def frames_of(self, token: str, page: EventPage) -> PageFrames:
        """A page's events as frames, made once for all the readers given the same page."""
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


def _handable(appended: TailAppend) -> bool:
    return sum(len(event.data) for event in appended.events) <= _HANDOFF_MAX_CHARS
