"""Refusals raised by the use cases. They say what went wrong in the problem's words; the
API's error table (`app/api/problems.py`) decides the HTTP status and problem `code`."""

from __future__ import annotations

from enum import StrEnum

from app.domain.paging import PageRefusal


class ServiceRefusal(Exception):
    """A request the service refuses; `detail` says why, for a human."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


class PageRefused(ServiceRefusal):
    """A page of events cannot be served without skipping events (or is beyond the tail)."""

    def __init__(self, refusal: PageRefusal, detail: str) -> None:
        super().__init__(detail)
        self.refusal = refusal


class Limit(StrEnum):
    """Which configured limit a request is over."""

    BATCH_EVENTS = "batch_events"
    EVENT_BYTES = "event_bytes"


class LimitExceeded(ServiceRefusal):
    """An event or a batch is over the configured limits."""

    def __init__(self, limit: Limit, detail: str) -> None:
        super().__init__(detail)
        self.limit = limit


class InvalidRequest(ServiceRefusal):
    """The request is well-formed but breaks a rule of the contract (a value over a limit)."""


class AmbiguousStream(ServiceRefusal):
    """A stream id that several tenants use, asked about without saying which tenant."""
