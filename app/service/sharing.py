"""What a crowd of live readers shares instead of doing once each: reads in flight, and
values made of one object (a page's frames, their encoded body), found by its identity.

Both are parts of the fan-out (`app/service/fanout.py`), which decides when a shared read
is retired; nothing here knows about streams changing.
"""

from __future__ import annotations

import asyncio
import functools
from collections import defaultdict
from collections.abc import Awaitable, Callable, Collection, Hashable
from typing import Any, Generic, TypeVar

T = TypeVar("T")
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


class ByteBudget:
    """Bytes of responses being sent at once, process-wide, at most `limit` of them.

    A body is charged while it is sent and given back once it is; a body alone over the
    limit is let through when nothing else is held (so that it is never stuck for good).
    `take` waits for room; `try_take` answers at once."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._used = 0
        self._waiters: list[asyncio.Future[None]] = []

    @property
    def used(self) -> int:
        """Bytes held now."""
        return self._used

    def try_take(self, size: int) -> bool:
        """Take `size` bytes if there is room now."""
        if self._used and self._used + size > self._limit:
            return False
        self._used += size
        return True

    async def take(self, size: int) -> None:
        """Take `size` bytes, waiting until there is room."""
        while not self.try_take(size):
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            finally:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)

    def give(self, size: int) -> None:
        """Give `size` bytes back; whoever waits tries again."""
        self._used -= size
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)
