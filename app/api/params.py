"""Path and query parameters the routers share (one definition each)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Path, Query

from app.domain.ids import MAX_SEQ, STREAM_ID_PATTERN

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
After = Annotated[int, Query(ge=0, le=MAX_SEQ, description="Events with a greater seq.")]
PageSize = Annotated[
    int | None, Query(ge=1, description="Events at most (default `EVENTLOG_DEFAULT_PAGE_LIMIT`).")
]
Wait = Annotated[
    float | None,
    Query(ge=0, description="Seconds to wait for an event when none is there yet (long-poll)."),
]
