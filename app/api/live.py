"""Live reads over HTTP: `GET /v1/streams/{stream_id}/live` as Server-Sent Events.

The use case (`app/service/live.py`) decides the claim and yields frames; this module
checks what the client accepts, renders frames as SSE text and runs the response so that
a client that goes away is noticed at once (its reader slot and watch freed).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncGenerator, Callable, Sequence
from typing import Annotated

from fastapi import APIRouter, Header, Query
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from app.api.deps import LiveDep, PrincipalDep, SettingsDep
from app.api.params import StreamId
from app.api.problems import problem_responses
from app.domain.ids import MAX_EVENT_ID_LENGTH, format_event_id
from app.errors import NotAcceptable
from app.service.live import (
    SHARED_MAX_CHARS,
    EndFrame,
    EventFrame,
    Frame,
    Heartbeat,
    RecentByIdentity,
    ResetFrame,
)

router = APIRouter(prefix="/v1", tags=["live"], responses=problem_responses(401, 403))

EVENT_STREAM = "text/event-stream"


# A claim past the longest well-formed id is malformed anyway; bounding it keeps a
# 16 MB query string out of the decision and the audit log.
Claim = Annotated[str | None, Query(max_length=4 * MAX_EVENT_ID_LENGTH)]


@router.get(
    "/streams/{stream_id}/live",
    response_class=Response,
    responses={
        200: {"content": {EVENT_STREAM: {}}, "description": "The stream, as Server-Sent Events"},
        **problem_responses(400, 404, 406, 409, 422, 503),
    },
)
async def follow_stream(
    stream_id: StreamId,
    principal: PrincipalDep,
    live: LiveDep,
    settings: SettingsDep,
    last_event_id: Claim = None,
    last_event_id_header: Annotated[str | None, Header(alias="Last-Event-ID")] = None,
    accept: Annotated[str | None, Header()] = None,
) -> Response:
    """Follow the stream from `Last-Event-ID` (header, else `last_event_id`, else its
    current generation from seq 1): the verdict first, then every event as it is appended."""
    if not accepts_event_stream(accept):
        raise NotAcceptable(f"this route answers {EVENT_STREAM} only")
    # An empty header is what a client with no id would send if it sent one: no claim.
    claim = last_event_id_header or last_event_id or None
    follow = await live.follow(principal.tenant, stream_id, claim)
    return EventStreamResponse(live.frames(follow), follow.close, settings.live_retry_ms)


def accepts_event_stream(accept: str | None) -> bool:
    """Whether an `Accept` header admits `text/event-stream` (no header admits anything)."""
    if accept is None or not accept.strip():
        return True
    for part in accept.split(","):
        media, *params = (item.strip().lower() for item in part.split(";"))
        if media not in (EVENT_STREAM, "text/*", "*/*"):
            continue
        quality = next((p.partition("=")[2] for p in params if p.startswith("q=")), "1")
        with contextlib.suppress(ValueError):
            if float(quality) > 0:
                return True
    return False


def render(frame: Frame) -> str:
    """One frame as SSE text: an event's data as one `data:` line per line of it."""
    if isinstance(frame, EventFrame):
        return _render_event(frame)
    return _render_control(frame)


def _render_event(frame: EventFrame) -> str:
    lines = [f"id: {format_event_id(frame.token, frame.seq)}"]
    if frame.event is not None and frame.event != "message":
        lines.append(f"event: {frame.event}")
    # SSE ends a line at CR, LF or CRLF and joins data lines with LF: text with LF line
    # ends arrives exactly; a CR cannot be carried and arrives as LF.
    text = frame.data.replace("\r\n", "\n").replace("\r", "\n")
    lines.extend(f"data: {line}" for line in text.split("\n"))
    return "\n".join(lines) + "\n\n"


def _render_control(frame: ResetFrame | EndFrame | Heartbeat) -> str:
    if isinstance(frame, ResetFrame):
        data: dict[str, object] = {
            "verdict": "reset",
            "reason": frame.reason.value,
            "discard_client_state": True,
            "generation": frame.generation,
        }
        return f"event: reset\ndata: {json.dumps(data)}\n\n"
    if isinstance(frame, EndFrame):
        data = {"generation": frame.generation, "terminal_seq": frame.terminal_seq}
        return f"event: end\ndata: {json.dumps(data)}\n\n"
    # A comment line alone, with no blank line after it: a blank line would make some
    # parsers (httpx-sse, which the MCP Python SDK uses) dispatch an empty event.
    return ": keep-alive\n"


class EventStreamResponse(Response):
    """A `text/event-stream` response fed by a live read, until it ends or the client goes.

    The body is written as the reader's frames come (never buffered); a client that
    disconnects ends it at once, and `close` (which frees the reader slot) runs in every
    case, even when not a single frame was read.
    """

    media_type = EVENT_STREAM

    def __init__(
        self,
        frames: AsyncGenerator[Sequence[Frame]],
        close: Callable[[], None],
        retry_ms: int,
    ) -> None:
        # Not Response.__init__: it would declare `content-length: 0` for the empty body.
        self.status_code = 200
        self.background = None
        self.raw_headers = [
            (b"content-type", b"text/event-stream; charset=utf-8"),
            (b"cache-control", b"no-cache"),
            (b"x-accel-buffering", b"no"),  # proxies such as nginx: do not buffer
        ]
        self._frames = frames
        self._close = close
        self._retry_ms = retry_ms

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        streaming = asyncio.ensure_future(self._stream(send))
        listening = asyncio.ensure_future(_disconnected(receive))
        try:
            await asyncio.wait((streaming, listening), return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (streaming, listening):
                task.cancel()
            for task in (streaming, listening):
                # A send to a client that went away fails with OSError: a normal end here.
                with contextlib.suppress(asyncio.CancelledError, OSError):
                    await task
            await self._frames.aclose()
            self._close()

    async def _stream(self, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
        # No blank line after it, for the same reason as the heartbeat's: it applies anyway.
        await _body(send, f"retry: {self._retry_ms}\n")
        async for batch in self._frames:
            await _body(send, rendered(batch))
        await send({"type": "http.response.body", "body": b"", "more_body": False})


# The readers given the same page get the same tuple of frames (`Hub.frames_of`), and
# share one encoded body.
_BODIES: RecentByIdentity[Sequence[Frame], bytes] = RecentByIdentity()


def rendered(batch: Sequence[Frame]) -> bytes:
    """A batch of frames as the bytes of an SSE body chunk."""
    shared = isinstance(batch, tuple) and bool(batch) and isinstance(batch[0], EventFrame)
    body = _BODIES.get(batch) if shared else None
    if body is None:
        body = "".join(render(frame) for frame in batch).encode()
        if shared and len(body) <= SHARED_MAX_CHARS:
            _BODIES.put(batch, body)
    return body


async def _body(send: Send, body: str | bytes) -> None:
    chunk = body.encode() if isinstance(body, str) else body
    await send({"type": "http.response.body", "body": chunk, "more_body": True})


async def _disconnected(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
