"""What the use cases report as they run: decisions, appends, refusals, retention passes.

The audit log, the metrics and the warning log all listen here, so the resume path calls
one cheap, synchronous hook and knows nothing about any of them. An observer must not
block and must not raise: it runs inside a request.
"""

from __future__ import annotations

from collections.abc import Iterable

from app.domain.append import AppendConflict
from app.domain.outcomes import BatchAcknowledged, Decided, RetentionPass


class Observer:
    """A listener to the use cases; every hook does nothing unless overridden."""

    def decided(self, decided: Decided) -> None:
        """A resume claim was decided (and its answer is about to be returned)."""

    def appended(self, appended: BatchAcknowledged) -> None:
        """A batch was stored, or recognised as a duplicate."""

    def refused(self, refusal: AppendConflict) -> None:
        """An append was refused (`superseded` is a fenced, stale producer)."""

    def retention_ran(self, report: RetentionPass) -> None:
        """A retention pass ended (or was skipped: another replica held the lock)."""

    def abandoned(self, count: int) -> None:
        """This process recorded `count` generations as abandoned (their lease ran out)."""

    def audit_dropped(self, count: int) -> None:
        """Audit entries were dropped (buffer full, or an entry the database refused)."""

    def background_failed(self, task: str) -> None:
        """A background task died of an unexpected error (it is restarted)."""

    def live_readers(self, count: int) -> None:
        """This process now serves `count` live readers."""

    def live_delivered(self, count: int) -> None:
        """Live readers were sent `count` events."""

    def live_notified(self, lag: float) -> None:
        """A change was heard `lag` seconds after it was committed."""

    def live_source(self, source: str, up: bool) -> None:
        """A wake-up source connected (up) or lost its connection."""


class Observers(Observer):
    """Several observers as one, called in order."""

    def __init__(self, observers: Iterable[Observer] = ()) -> None:
        self._observers = tuple(observers)

    def decided(self, decided: Decided) -> None:
        for observer in self._observers:
            observer.decided(decided)

    def appended(self, appended: BatchAcknowledged) -> None:
        for observer in self._observers:
            observer.appended(appended)

    def refused(self, refusal: AppendConflict) -> None:
        for observer in self._observers:
            observer.refused(refusal)

    def retention_ran(self, report: RetentionPass) -> None:
        for observer in self._observers:
            observer.retention_ran(report)

    def abandoned(self, count: int) -> None:
        for observer in self._observers:
            observer.abandoned(count)

    def audit_dropped(self, count: int) -> None:
        for observer in self._observers:
            observer.audit_dropped(count)

    def background_failed(self, task: str) -> None:
        for observer in self._observers:
            observer.background_failed(task)

    def live_readers(self, count: int) -> None:
        for observer in self._observers:
            observer.live_readers(count)

    def live_delivered(self, count: int) -> None:
        for observer in self._observers:
            observer.live_delivered(count)

    def live_notified(self, lag: float) -> None:
        for observer in self._observers:
            observer.live_notified(lag)

    def live_source(self, source: str, up: bool) -> None:
        for observer in self._observers:
            observer.live_source(source, up)
