"""The wake-up hub: one per process, between the wake-up sources and the live readers.

- watches: a reader's doorbell, armed before it reads and rung by any change of its
  stream after (`watch`); the sources tell the hub of changes (`wake`, `watched`,
  `source_up`, run by `run`). A stream with many readers here is rung after a delay that
  grows with them, so that changes meanwhile reach each reader in one read and one send;
- listeners: what is kept per stream elsewhere and made stale by a change of it (the
  live reads' shared reads and handed-over appends) is told of each change before any
  reader is rung, and of a stream no reader watches any more (`listen`);
- draining: on shutdown every reader and waiter is rung and told to end (`drain`).

Who may read at all, and how much is sent at once, is the admission's
(`app/service/admission.py`), not the hub's. Every wake-up only means "read again": the
tables stay the only source of truth.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import defaultdict
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from typing import Protocol

from app.service.observer import Observer
from app.storage.changes import Changes
from app.storage.wakeups import WakeupSource


class StreamListener(Protocol):
    """Something kept per stream that a change of the stream makes stale."""

    def changed(
        self, stream_pks: Collection[int] | None, watched: Collection[int], appended: Changes | None
    ) -> None:
        """These streams changed (None: any may have); `watched` are those of them some
        reader watches; `appended`: what this process's own commit appended to them."""

    def unwatched(self, stream_pk: int) -> None:
        """No reader watches the stream any more."""


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


class Hub:
    """This process's watches, and the sources that ring them."""

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
        self._draining = False
        self._watches: defaultdict[int, set[Watch]] = defaultdict(set)
        self._fanout_per_reader = fanout_per_reader
        self._fanout_max = fanout_max
        self._pending: dict[int, asyncio.TimerHandle] = {}
        self._listeners: list[StreamListener] = []

    def listen(self, listener: StreamListener) -> None:
        """Tell `listener` of every change from now on, in the order listeners were added,
        before the readers of the changed streams are rung."""
        self._listeners.append(listener)

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
                for listener in self._listeners:
                    listener.unwatched(stream_pk)

    def wake(
        self,
        stream_pks: Collection[int] | None,
        sent_at: float | None = None,
        *,
        appended: Changes | None = None,
    ) -> None:
        """Ring the readers of these streams (None: of every stream).

        `appended` is what this process's own commit appended: the listeners are told of
        it (and of the change) before any reader is rung, so that a woken reader finds
        them current. A stream with many readers here is rung after a delay that grows
        with them.
        """
        if sent_at is not None:
            self._observer.live_notified(max(0.0, time.time() - sent_at))
        pks = list(self._watches) if stream_pks is None else stream_pks
        watched = [pk for pk in pks if self._watches.get(pk)]
        for listener in self._listeners:
            listener.changed(stream_pks, watched, appended)
        for pk in watched:
            delay = min(self._fanout_max, len(self._watches[pk]) * self._fanout_per_reader)
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
