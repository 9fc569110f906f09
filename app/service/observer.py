"""What the writer use cases report as they run: decisions, appends, refused appends.

The audit log, the metrics and the warning log all listen here, so the resume path calls
one cheap, synchronous hook and knows nothing about any of them. An observer must not
block and must not raise: it runs inside a request.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Protocol

from app.domain.append import Refusal
from app.storage.records import AppendResult

if TYPE_CHECKING:  # the service module imports this one
    from app.service.eventlog import ResumeAnswer


class EventLogObserver(Protocol):
    """A listener to the writer use cases."""

    def decided(self, tenant: str, last_event_id: str, answer: ResumeAnswer) -> None:
        """A resume claim was decided (and its answer is about to be returned)."""

    def appended(self, result: AppendResult) -> None:
        """A batch was stored, or recognised as a duplicate."""

    def refused(self, refusal: Refusal) -> None:
        """An append was refused (`superseded` is a fenced, stale producer)."""


class Observers:
    """Several observers as one, called in order."""

    def __init__(self, observers: Iterable[EventLogObserver] = ()) -> None:
        self._observers = tuple(observers)

    def decided(self, tenant: str, last_event_id: str, answer: ResumeAnswer) -> None:
        """Tell every observer about a decision."""
        for observer in self._observers:
            observer.decided(tenant, last_event_id, answer)

    def appended(self, result: AppendResult) -> None:
        """Tell every observer about an append."""
        for observer in self._observers:
            observer.appended(result)

    def refused(self, refusal: Refusal) -> None:
        """Tell every observer about a refused append."""
        for observer in self._observers:
            observer.refused(refusal)
