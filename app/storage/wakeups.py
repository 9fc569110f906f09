"""Wake-ups for live readers: which streams changed, told as soon as it is committed.

Where wake-ups come from is one small interface, `WakeupSource`, with one implementation
per source: `LocalCommits` here (this process's own writes, told by the transaction
runner after COMMIT, with what they appended), and one per database for other processes'
writes — `PostgresNotifications` (LISTEN/NOTIFY, `app/storage/postgres.py`) and
`SqliteDataVersion` (polling `PRAGMA data_version`, `app/storage/sqlite.py`). What a
transaction changed is tracked in `app/storage/changes.py`. A wake-up only says "read
again": a lost or late one can delay an event, never lose or reorder it.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Collection
from typing import Protocol

from app.storage.changes import Changes


class Wakeable(Protocol):
    """What a wake-up source tells (the live readers' hub)."""

    def wake(
        self,
        stream_pks: Collection[int] | None,
        sent_at: float | None = None,
        *,
        appended: Changes | None = None,
    ) -> None:
        """These streams changed (None: any may have); `sent_at` is when, if known;
        `appended`: what this process's own commit appended to them."""

    def watched(self) -> Collection[int]:
        """The streams some reader in this process follows now."""

    def source_up(self, source: str, up: bool) -> None:
        """A source connected (or lost its connection)."""


class WakeupSource(Protocol):
    """One place wake-ups come from; `run` tells `hub` about changes until cancelled."""

    name: str

    async def run(self, hub: Wakeable) -> None: ...


class LocalCommits:
    """This process's own commits (the transaction runner calls `committed` after COMMIT)."""

    name = "local"

    def __init__(self) -> None:
        self._hubs: list[Wakeable] = []
        self.origin = uuid.uuid4().hex[:16]
        """Names this database's announcements to other processes, so that it can skip
        its own (its readers were woken at COMMIT)."""

    def committed(self, changes: Changes) -> None:
        """Wake the readers of the streams a committed transaction changed."""
        if changes:
            for hub in self._hubs:
                hub.wake(changes, time.time(), appended=changes)

    async def run(self, hub: Wakeable) -> None:
        self._hubs.append(hub)
        try:
            await asyncio.Event().wait()  # nothing to poll: `committed` is called directly
        finally:
            self._hubs.remove(hub)
