"""When a page of a generation's events can be served, and when it must be refused."""

from __future__ import annotations

from enum import StrEnum


class PageRefusal(StrEnum):
    """Why a page read is refused (the problem `code`)."""

    BEYOND_TAIL = "beyond_tail"
    EXPIRED = "expired"
    EVICTED = "evicted"


def check_page(*, after: int, head_seq: int, tail_seq: int, expired: bool) -> PageRefusal | None:
    """None when the events after `after` can be served without skipping any."""
    if after > tail_seq:
        return PageRefusal.BEYOND_TAIL
    if expired:
        return PageRefusal.EXPIRED
    if after < head_seq - 1:
        return PageRefusal.EVICTED
    return None
