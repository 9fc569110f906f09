"""The service's one clock, so tests can control time and the domain never reads it."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

Clock = Callable[[], datetime]


def utc_now() -> datetime:
    """The current time, in UTC."""
    return datetime.now(UTC)
