"""Path and query parameters the routers share (one definition each)."""

from __future__ import annotations

import re
from typing import Annotated, Any

from fastapi import Path, Query
from pydantic import BeforeValidator

from app.domain.ids import MAX_SEQ, STREAM_ID_MAX_LENGTH, STREAM_ID_PATTERN

_DECIMAL = re.compile(r"[0-9]{1,20}", re.ASCII)
_DECIMAL_NUMBER = re.compile(r"[0-9]{1,20}(?:\.[0-9]{1,9})?", re.ASCII)


def _decimal(value: Any) -> Any:
    # A query integer is plain ASCII digits: Python's int() (and so pydantic's lax mode)
    # would also take `1_0`, ` 10 `, `+5` and `10\n`, which no client means to send.
    if isinstance(value, str) and not _DECIMAL.fullmatch(value):
        raise ValueError("must be a whole number written as plain decimal digits")
    return value


def _decimal_number(value: Any) -> Any:
    # As `_decimal`, with an optional fraction: Python's float() would also take `1_0`,
    # `+1`, ` 1 `, `1e1`, `inf` and `nan`.
    if isinstance(value, str) and not _DECIMAL_NUMBER.fullmatch(value):
        raise ValueError("must be a number written as plain decimal digits (and a fraction)")
    return value


QueryInt = Annotated[int, BeforeValidator(_decimal)]
"""An integer query parameter: plain decimal digits only."""
QueryNumber = Annotated[float, BeforeValidator(_decimal_number)]
"""A number query parameter: plain decimal digits, optionally `.` and more digits."""

StreamId = Annotated[
    str,
    Path(
        pattern=STREAM_ID_PATTERN,
        min_length=1,
        max_length=STREAM_ID_MAX_LENGTH,
        description="1-256 chars of `A-Z a-z 0-9 . _ ~ : @ = + -`, not only dots, chosen by "
        "the writer.",
    ),
]
Token = Annotated[str, Path(max_length=64, description="A generation token.")]
After = Annotated[QueryInt, Query(ge=0, le=MAX_SEQ, description="Events with a greater seq.")]
PageSize = Annotated[
    QueryInt | None,
    Query(ge=1, description="Events at most (default `EVENTLOG_DEFAULT_PAGE_LIMIT`)."),
]
Wait = Annotated[
    QueryNumber | None,
    Query(ge=0, description="Seconds to wait for an event when none is there yet (long-poll)."),
]
