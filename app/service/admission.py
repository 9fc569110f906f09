"""Admission: how many readers and page requests a process serves, and how many bytes of
answers it holds at once.

- reader slots, at most `max_readers` of them and at most `tenant_max` for one tenant
  (`has_room`, `take_slot`), each taken for a tenant: live readers and long-polls alike;
- what is being sent: the bytes of answers in flight, process-wide (`sending` for a live
  body, which waits for room; `page_bytes` for a page answer, refused rather than queued);
- the page requests served at once (`page_place`).

Which streams changed and who is rung is the hub's (`app/service/hub.py`): admission knows
nothing of streams.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from app.errors import TooManyPages
from app.service.observer import Observer


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


class Admission:
    """This process's reader slots, page places and budget of bytes in flight."""

    def __init__(
        self,
        observer: Observer,
        *,
        max_readers: int,
        tenant_max: int | None = None,
        max_bytes_in_flight: int = 64 * 1_048_576,
        max_pages: int = 64,
    ) -> None:
        self._observer = observer
        self._max_readers = max_readers
        self._tenant_max = max_readers if tenant_max is None else tenant_max
        self._readers = 0
        self._by_tenant: Counter[str] = Counter()
        self._budget = ByteBudget(max_bytes_in_flight)
        self._sending: dict[int, _Sent] = {}  # by id(body)
        self._max_pages = max_pages
        self._pages = 0

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

    # -- what is being sent -----------------------------------------------------------------

    @asynccontextmanager
    async def sending(self, body: bytes) -> AsyncIterator[None]:
        """Hold `body`'s bytes in the process-wide budget while the block sends it: waits
        for room first. A body shared by a crowd of readers is charged once for all."""
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

    def page_bytes(self, size: int) -> Callable[[], None]:
        """`size` bytes of a page answer in the process's budget
        (`EVENTLOG_MAX_RESPONSE_BYTES_IN_FLIGHT`) if there is room now, or `TooManyPages`
        (refused rather than queued): the function that gives them back (idempotent)."""
        if not self._budget.try_take(size):
            raise TooManyPages("as many bytes of answers in flight as the process may hold")
        return _once(lambda: self._budget.give(size))

    def page_place(self) -> Callable[[], None]:
        """A place for one page request (`EVENTLOG_MAX_PAGES_IN_FLIGHT`), or
        `TooManyPages`: the function that gives it back (idempotent)."""
        if self._pages >= self._max_pages:
            raise TooManyPages("as many page requests as the process serves at once")
        self._pages += 1
        return _once(self._give_page)

    def _give_page(self) -> None:
        self._pages -= 1


class ByteBudget:
    """Bytes of responses being sent at once, process-wide, at most `limit` of them.

    A body is charged while it is sent and given back once it is; a body alone over the
    limit is let through when nothing else is held (so that it is never stuck for good).
    `take` waits for room; `try_take` answers at once."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._used = 0
        self._waiters: list[asyncio.Future[None]] = []

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


class _Sent:
    """A body being sent, and by how many readers (it is charged to the budget once)."""

    __slots__ = ("body", "senders")

    def __init__(self, body: bytes) -> None:
        self.body = body
        self.senders = 0


def _once(give: Callable[[], None]) -> Callable[[], None]:
    """`give`, run on the first call only."""
    given = False

    def give_once() -> None:
        nonlocal given
        if not given:
            given = True
            give()

    return give_once
