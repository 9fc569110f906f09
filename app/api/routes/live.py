"""Live reads over HTTP: `GET /v1/streams/{stream_id}/live` as Server-Sent Events.

The use case (`app/service/live.py`) decides the claim and yields frames, encoded by the
fan-out with this module's renderer (once per page for a crowd); this module only checks
what the client accepts, renders frames as SSE text and runs the response so that a
client that goes away is noticed at once (its reader slot and watch freed).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from typing import Annotated

from fastapi import APIRouter, Header, Query, Request
from pydantic import BaseModel
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.types import Receive, Scope, Send

from app.api.deps import LiveDep, PrincipalDep, SettingsDep
from app.api.problems import problem_responses
from app.api.routes.params import StreamId
from app.domain.ids import MAX_EVENT_ID_LENGTH, format_event_id
from app.errors import DuplicateClaim, NotAcceptable
from app.event_stream import event_text
from app.service.admission import Admission
from app.service.eventlog import EventLogService
from app.service.frames import Closing, EndFrame, EventFrame, Frame, Heartbeat, ResetFrame
from app.service.live import LiveReads
from app.storage.records import EventPage, GenerationRecord

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
    request: Request,
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
    claim = claimed_id(request, accept, last_event_id_header, last_event_id)
    return await followed(live, principal.tenant, stream_id, claim, settings.live_retry_ms)


def claimed_id(
    request: Request, accept: str | None, header: str | None, query: str | None
) -> str | None:
    """The id a live read claims, of a client that accepts SSE (else 406): the
    `Last-Event-ID` header, else the `last_event_id` query parameter, else none."""
    if not accepts_event_stream(accept):
        raise NotAcceptable(f"this route answers {EVENT_STREAM} only")
    if len(request.headers.getlist("last-event-id")) > 1:
        # Which one a proxy or a framework keeps differs: none is taken rather than a guess.
        raise DuplicateClaim("Last-Event-ID is sent more than once")
    # An empty header is what a client with no id would send if it sent one: no claim.
    return header or query or None


async def followed(
    live: LiveReads, tenant: str, stream_id: str, claim: str | None, retry_ms: int
) -> Response:
    """The live read of `stream_id` from `claim` as SSE: the verdict first, then every
    event as it is appended."""
    follow = await live.follow(tenant, stream_id, claim)
    return EventStreamResponse(live.bodies(follow, rendered), follow.close, retry_ms)


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
    event = None if frame.event == "message" else frame.event  # `message` is SSE's default
    return event_text(frame.data, id=format_event_id(frame.token, frame.seq), event=event)


def _render_control(frame: ResetFrame | EndFrame | Heartbeat | Closing) -> str:
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
    if isinstance(frame, Closing):
        # The process stops: the reconnect hint (an EventSource reconnects with its last id
        # after `retry:`, and any replica continues it exactly); no blank line, as above.
        return f": closing: reconnect with the last id\nretry: {frame.retry_ms}\n"
    # A comment line alone, with no blank line after it: a blank line would make some
    # parsers (httpx-sse, which the MCP Python SDK uses) dispatch an empty event.
    return ": keep-alive\n"


def rendered(batch: Sequence[Frame]) -> bytes:
    """A batch of frames as the bytes of an SSE body chunk (the fan-out keeps the bytes of
    a page's frames for every reader given that page)."""
    return "".join(render(frame) for frame in batch).encode()


class EventStreamResponse(StreamingResponse):
    """A `text/event-stream` response fed by a live read, until it ends or the client goes.

    Starlette's `StreamingResponse` (its headers, no `content-length`, its
    `stream_response` and `listen_for_disconnect`); only the race between the two is this
    class's, so that `close` (which frees the reader slot) runs in every case, even when
    not a single frame was read.
    """

    media_type = EVENT_STREAM

    def __init__(self, bodies: AsyncGenerator[bytes], close: Callable[[], None], retry_ms: int):
        self._opened = _opened_with(f"retry: {retry_ms}\n".encode(), bodies)
        super().__init__(
            self._opened,
            headers={
                "cache-control": "no-cache",
                "x-accel-buffering": "no",  # proxies such as nginx: do not buffer
            },
        )
        self._bodies = bodies
        self._close = close

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        # Not StreamingResponse.__call__: under ASGI >= 2.4 it stops listening for
        # `http.disconnect` and notices a gone client only when a send fails, and a live
        # reader may send nothing for a heartbeat (15 s); it must free its slot and watch at
        # once. (Under 2.3 it races the two in an anyio task group, whose cancellation
        # repeats at every await until the task ends; here a gone client cancels the
        # reader once, as asyncio does, and its clean-up runs as written.)
        streaming = asyncio.ensure_future(self.stream_response(send))
        listening = asyncio.ensure_future(self.listen_for_disconnect(receive))
        try:
            await asyncio.wait((streaming, listening), return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (streaming, listening):
                task.cancel()
            for task in (streaming, listening):
                # A send to a client that went away fails with OSError: a normal end here.
                with contextlib.suppress(asyncio.CancelledError, OSError):
                    await task
            await self._opened.aclose()
            await self._bodies.aclose()
            self._close()


async def _opened_with(first: bytes, bodies: AsyncGenerator[bytes]) -> AsyncGenerator[bytes]:
    # No blank line after the `retry:` line, for the same reason as the heartbeat's.
    yield first
    async for body in bodies:
        yield body


# -- pages: sent in chunks, counted while they are, and a wait that notices its client go ----

PAGE_CHUNK_BYTES = 64 * 1024


async def page_or_wait(
    request: Request,
    service: EventLogService,
    live: LiveReads,
    tenant: str,
    token: str,
    *,
    after: int,
    limit: int,
    wait: float | None,
) -> tuple[GenerationRecord, EventPage]:
    """A page of `token`'s events after `after`: read at once, or, with `wait`, a long-poll."""
    if wait is None:
        return await service.page(tenant, token, after=after, limit=limit)
    return await waited_page(request, live, tenant, token, after=after, limit=limit, wait=wait)


async def waited_page(
    request: Request,
    live: LiveReads,
    tenant: str,
    token: str,
    *,
    after: int,
    limit: int,
    wait: float,
) -> tuple[GenerationRecord, EventPage]:
    """A long-poll: `LiveReads.page`, ended at once when its client goes away (it holds a
    reader slot and a watch while it waits: a gone client holds neither a moment longer,
    and the next append reads nothing for it)."""
    left = asyncio.Event()

    async def listen() -> None:
        while (await request.receive())["type"] != "http.disconnect":
            pass
        left.set()

    listener = asyncio.ensure_future(listen())
    try:
        return await live.page(tenant, token, after=after, limit=limit, wait=wait, left=left)
    finally:
        listener.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await listener


async def served_page(
    admission: Admission,
    read: Callable[[], Awaitable[tuple[GenerationRecord, EventPage]]],
    answer: Callable[[GenerationRecord, EventPage], BaseModel],
) -> Response:
    """A page read by `read` (at once or as a long-poll) and sent as the JSON of
    `answer(gen, page)`: in a place among the pages served at once (503 `too_many_pages`
    when none is free) and in the process's budget of bytes in flight (503 past it), both
    held until the last byte is sent, in chunks: a client that does not read holds one
    answer, counted."""
    give_place = admission.page_place()
    try:
        gen, page = await read()
        response = ChunkedJSON(answer(gen, page).model_dump(mode="json"))
        give_bytes = admission.page_bytes(len(response.body))
    except BaseException:
        give_place()
        raise
    response.releases = (give_bytes, give_place)
    return response


class ChunkedJSON(JSONResponse):
    """A JSON answer sent `PAGE_CHUNK_BYTES` at a time; `releases` run once it is sent
    (or the client went away)."""

    releases: tuple[Callable[[], None], ...] = ()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await send(
                {
                    "type": "http.response.start",
                    "status": self.status_code,
                    "headers": self.raw_headers,
                }
            )
            body = self.body
            for start in range(0, max(len(body), 1), PAGE_CHUNK_BYTES):
                end = start + PAGE_CHUNK_BYTES
                chunk = body[start:end]
                await send(
                    {"type": "http.response.body", "body": chunk, "more_body": end < len(body)}
                )
        finally:
            for release in self.releases:
                release()
