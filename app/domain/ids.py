"""Stream ids, generation tokens and event ids (`<token>:<seq>`)."""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass
from typing import Final

# 1-256 of these characters, not only dots: `.` and `..` are path segments a client's URL
# normalisation removes, so no client could reach such a stream. The
# length is checked beside the pattern (`STREAM_ID_MAX_LENGTH`).
STREAM_ID_PATTERN: Final = r"^[A-Za-z0-9._~:@=+\-]*[A-Za-z0-9_~:@=+\-][A-Za-z0-9._~:@=+\-]*$"
STREAM_ID_MAX_LENGTH: Final = 256
TOKEN_PATTERN: Final = r"^[A-Za-z0-9_\-]+$"  # noqa: S105 (a pattern, not a secret)
MAX_EVENT_ID_LENGTH: Final = 300
TOKEN_BYTES: Final = 16  # 128 random bits, 22 URL-safe characters
MAX_SEQ: Final = 2**63 - 1  # seqs are stored as 64-bit signed integers

_EVENT_ID = re.compile(r"([A-Za-z0-9_\-]+):([0-9]+)", re.ASCII)
_STREAM_ID = re.compile(STREAM_ID_PATTERN, re.ASCII)


@dataclass(frozen=True, slots=True)
class EventId:
    """A parsed event id: the generation it belongs to and its position in it."""

    token: str
    seq: int

    def __str__(self) -> str:
        return f"{self.token}:{self.seq}"


@dataclass(frozen=True, slots=True)
class StreamKey:
    """A stream across tenants: stream ids are chosen by writers and may repeat per tenant."""

    tenant: str
    stream_id: str


def new_token() -> str:
    """A fresh generation token: 128 bits from `secrets`, URL-safe, never containing `:`."""
    return secrets.token_urlsafe(TOKEN_BYTES)


def format_event_id(token: str, seq: int) -> str:
    """The wire form of an event id; a valid SSE `id` (no NUL, CR or LF)."""
    return f"{token}:{seq}"


def parse_event_id(raw: str) -> EventId | None:
    """Parse `<token>:<seq>`; None when the id is malformed.

    Malformed means: longer than 300 characters, a token outside `A-Z a-z 0-9 _ -`
    (or empty), or a seq that is not a plain ASCII decimal >= 0.
    """
    if len(raw) > MAX_EVENT_ID_LENGTH:
        return None
    match = _EVENT_ID.fullmatch(raw)
    if match is None:
        return None
    return EventId(token=match.group(1), seq=int(match.group(2)))


def is_valid_stream_id(stream_id: str) -> bool:
    """Whether a writer-chosen stream id has the contract's form."""
    return len(stream_id) <= STREAM_ID_MAX_LENGTH and _STREAM_ID.fullmatch(stream_id) is not None
