"""Path and query parameters the routers share (one definition each)."""

from __future__ import annotations

import re
from typing import Annotated, Any

from fastapi import Path, Query
from pydantic import BeforeValidator

from app.domain.ids import MAX_SEQ, STREAM_ID_PATTERN

_DECIMAL = re.compile(r"[0-9]{1,20}", re.ASCII)


def _decimal(value: Any) -> Any:
    # A query integer is plain ASCII digits: Python's int() (and so pydantic's lax mode)
    # would also take `1_0`, ` 10 `, `+5` and `10\n`, which no client means to send.
    if isinstance(value, str) and not _DECIMAL.fullmatch(value):
        raise ValueError("must be a whole number written as plain decimal digits")
    return value


QueryInt = Annotated[int, BeforeValidator(_decimal)]
"""An integer query parameter: plain decimal digits only."""

StreamId = Annotated[
    str,
    Path(
        pattern=STREAM_ID_PATTERN,
        min_length=1,
        max_length=256,
        description="1-256 chars of `A-Z a-z 0-9 . _ ~ : @ = + -`, chosen by the writer.",
    ),
]
Token = Annotated[str, Path(max_length=64, description="A generation token.")]
After = Annotated[QueryInt, Query(ge=0, le=MAX_SEQ, description="Events with a greater seq.")]
PageSize = Annotated[
    QueryInt | None,
    Query(ge=1, description="Events at most (default `EVENTLOG_DEFAULT_PAGE_LIMIT`)."),
]
Wait = Annotated[
    float | None,
    Query(ge=0, description="Seconds to wait for an event when none is there yet (long-poll)."),
]
