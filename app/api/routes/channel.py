"""The append channel: `GET /v1/append`, many appends over one WebSocket (the contract's
"Append channel").

The upgrade is admitted once: the front door has checked its Host and Origin
(`hosts.py`); here the key (401/403 as a problem+json denial, as the REST append answers)
and the channels the key holds open (`EVENTLOG_CHANNEL_MAX_PER_KEY`, else closed 1013).
Then each text frame is an Append body plus its generation and an id, appended through
the same use case as the REST append (`EventLogService.append`: one implementation of the
rules, feeding the same group commit, so N channels share fsyncs), and answered — in the
order the frames came — with the REST answer's fields and status, or with its status and
problem code. A refused frame never closes the channel; abuse of the channel itself does:

| what | close code | reason |
|---|---|---|
| a binary frame | 1003 | `binary_frame` |
| a frame over `EVENTLOG_MAX_BODY_BYTES` | 1009 | `body_too_large` (uvicorn closes it first) |
| nothing in flight and no frame for `EVENTLOG_CHANNEL_IDLE_SECONDS` | 1001 | `idle_timeout` |
| an answer the producer leaves unread that long | 1008 | `not_reading` |
| one channel more than the key may hold | 1013 | `too_many_channels` |

Bounds: at most `EVENTLOG_CHANNEL_MAX_IN_FLIGHT` frames of a channel are read and not yet
answered; past it the channel is not read (uvicorn then stops reading its socket, so TCP
holds the producer back). Frames of one generation are appended one after the other, in
frame order; frames of different generations run side by side.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any

from fastapi import APIRouter, WebSocket
from pydantic import ValidationError
from starlette.websockets import WebSocketDisconnect

from app.api.auth import Keyring, Principal, Scope
from app.api.deps import ApiState
from app.api.frontdoor.media import strict_json
from app.api.problems import problem_code, send_problem
from app.api.routes.appends import appended_status, event_bodies
from app.api.schemas import AppendFrame, AppendResponse, LeaseFrame, LeaseResponse
from app.errors import EventLogError, InvalidRequest, NotAdmitted
from app.service.eventlog import EventLogService
from app.settings import Settings
from app.storage.records import Lease
from app.text import check_utf8

log = logging.getLogger(__name__)

router = APIRouter(prefix="/v1", tags=["writer"])

Answer = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Close:
    """The channel ends here: after the answers before it, with this code and reason."""

    code: int
    reason: str


LEFT = Close(1000, "")  # the producer went away: nothing more can be sent
_INTERNAL = {"status": 500, "code": "internal_error", "detail": "an unexpected error; see the log"}
_SCALARS = str | int | float | bool | None
_CLOSE_WAIT = 1.0  # seconds to get a close frame out to a producer that does not read


@router.websocket("/append")
async def append_channel(websocket: WebSocket) -> None:
    """Admit the producer once, then answer its frames until it leaves or abuses it."""
    state: ApiState = websocket.app.state.api
    authorization = websocket.headers.get("authorization")
    try:
        principal = Keyring.require(state.keyring.authenticate(authorization), Scope.WRITER)
    except NotAdmitted as refused:
        await send_problem(refused, websocket.scope, websocket.receive, websocket.send)
        return
    key = hashlib.sha256((authorization or "").encode("latin-1", "replace")).digest()
    await websocket.accept()
    if not state.channels.take(key):
        await websocket.close(1013, "too_many_channels")
        return
    try:
        container = state.container
        await Channel(websocket, container.eventlog, principal, container.settings).serve()
    finally:
        state.channels.give(key)


class Channel:
    """One producer's channel: a reader of frames and an answerer, in frame order."""

    def __init__(
        self,
        websocket: WebSocket,
        service: EventLogService,
        principal: Principal,
        settings: Settings,
    ) -> None:
        self._websocket = websocket
        self._service = service
        self._tenant = principal.tenant
        self._max_bytes = settings.max_body_bytes
        self._idle_seconds = settings.channel_idle_seconds
        self._room = asyncio.Semaphore(settings.channel_max_in_flight)
        self._in_flight = 0
        self._answers: asyncio.Queue[asyncio.Future[Answer] | Close] = asyncio.Queue()
        self._appending: set[asyncio.Task[Answer]] = set()
        self._last_of: dict[str, asyncio.Task[Answer]] = {}
        self._idle: asyncio.Timeout | None = None

    async def serve(self) -> None:
        """Read and answer until the channel ends; appends under way finish (they commit)."""
        reading = asyncio.create_task(self._read())
        try:
            await self._answer()
        finally:
            reading.cancel()
            await asyncio.gather(reading, *self._appending, return_exceptions=True)

    # --- reading ---------------------------------------------------------------------

    async def _read(self) -> None:
        try:
            async with asyncio.timeout_at(self._deadline()) as idle:
                self._idle = idle
                try:
                    while (end := await self._read_one()) is None:
                        pass
                finally:
                    # A timeout that was left cannot be moved: the answerer stops moving it.
                    self._idle = None
        except TimeoutError:
            end = Close(1001, "idle_timeout")
        except Exception:
            log.exception("the append channel's reader failed")
            end = Close(1011, "internal_error")
        self._answers.put_nowait(end)

    async def _read_one(self) -> Close | None:
        """Read one frame (waiting for room first) and start it; a `Close` ends reading."""
        await self._room.acquire()
        message = await self._websocket.receive()
        if message["type"] == "websocket.disconnect":
            return LEFT
        text = message.get("text")
        if text is None:
            return Close(1003, "binary_frame")
        if len(text) > self._max_bytes and len(text.encode()) > self._max_bytes:
            return Close(1009, "body_too_large")
        self._in_flight += 1
        self._reschedule()
        self._answers.put_nowait(self._start(text))
        return None

    def _start(self, text: str) -> asyncio.Future[Answer]:
        """The frame's answer to come: refused at once, or its append (after the previous
        frame of the same generation, so that one generation's frames keep their order)."""
        frame_id: Any = None
        try:
            raw = strict_json(text)
            if isinstance(raw, dict) and isinstance(raw.get("id"), _SCALARS):
                frame_id = raw.get("id")
            if isinstance(raw, dict) and "lease" in raw:
                lease = LeaseFrame.model_validate(raw)
            else:
                frame = AppendFrame.model_validate(raw)
        except EventLogError as refused:
            # Refused before its value was kept (a lone surrogate in its data, a key twice
            # in a nested object): the frame is still answered under its own id.
            return _ready(refused_answer(own_id(text), refused))
        except ValidationError as invalid:
            return _ready(invalid_answer(frame_id, invalid))
        if "lease" in raw:
            if lease.generations is not None:  # renewed together, in one write
                return self._track(None, self._renew_many(frame_id, lease.generations))
            assert lease.generation is not None
            previous = self._last_of.get(lease.generation)
            return self._track(lease.generation, self._renew(frame_id, lease.generation, previous))
        previous = self._last_of.get(frame.generation)
        return self._track(frame.generation, self._append(frame_id, frame, previous))

    def _track(
        self, generation: str | None, work: Coroutine[Any, Any, Answer]
    ) -> asyncio.Task[Answer]:
        """Run a frame's work; the next frame of `generation` (if any) waits for it."""
        task = asyncio.create_task(work)
        self._appending.add(task)
        if generation is not None:
            self._last_of[generation] = task
        task.add_done_callback(lambda done: self._finished(generation, done))
        return task

    def _finished(self, generation: str | None, task: asyncio.Task[Answer]) -> None:
        self._appending.discard(task)
        if generation is not None and self._last_of.get(generation) is task:
            del self._last_of[generation]

    async def _append(
        self, frame_id: Any, frame: AppendFrame, previous: asyncio.Task[Answer] | None
    ) -> Answer:
        if previous is not None:
            await asyncio.wait((previous,))
        batch = event_bodies(frame.events)
        try:
            result = await self._service.append(
                self._tenant,
                frame.generation,
                batch,
                first_seq=frame.first_seq,
                terminal=frame.terminal,
            )
        except EventLogError as refused:
            return refused_answer(frame_id, refused)
        except Exception:
            log.exception("an append over the channel failed")
            return {"id": frame_id, **_INTERNAL}
        status = appended_status(result)
        return {"id": frame_id, "status": status, **AppendResponse.of(result).model_dump()}

    async def _renew(
        self, frame_id: Any, generation: str, previous: asyncio.Task[Answer] | None
    ) -> Answer:
        if previous is not None:
            await asyncio.wait((previous,))
        try:
            lease = await self._service.leases.renew(self._tenant, generation)
        except EventLogError as refused:
            return refused_answer(frame_id, refused)
        except Exception:
            log.exception("a lease renewal over the channel failed")
            return {"id": frame_id, **_INTERNAL}
        return {"id": frame_id, "status": 200, **_lease_answer(lease)}

    async def _renew_many(self, frame_id: Any, tokens: list[str]) -> Answer:
        try:
            outcomes = await self._service.leases.renew_many(self._tenant, tokens)
        except EventLogError as refused:  # the write as a whole failed (the database)
            return refused_answer(frame_id, refused)
        except Exception:
            log.exception("a lease renewal over the channel failed")
            return {"id": frame_id, **_INTERNAL}
        leases = [_lease_outcome(t, outcome) for t, outcome in zip(tokens, outcomes, strict=True)]
        return {"id": frame_id, "status": 200, "leases": leases}

    # --- answering -------------------------------------------------------------------

    async def _answer(self) -> None:
        """Send each answer in frame order; end at a `Close` or when sending fails."""
        while True:
            item = await self._answers.get()
            if isinstance(item, Close):
                await self._close(item)
                return
            answer = await item
            try:
                async with asyncio.timeout(self._idle_seconds):
                    await self._websocket.send_text(json.dumps(answer, separators=(",", ":")))
            except TimeoutError:
                await self._close(Close(1008, "not_reading"))
                return
            except (WebSocketDisconnect, OSError, RuntimeError):
                return  # the producer is gone (uvicorn says so with a disconnect error)
            self._in_flight -= 1
            self._room.release()
            self._reschedule()

    async def _close(self, end: Close) -> None:
        if end is LEFT:
            return
        log.info("closing an append channel: %d %s", end.code, end.reason)
        try:
            async with asyncio.timeout(_CLOSE_WAIT):
                await self._websocket.close(end.code, end.reason)
        except (TimeoutError, WebSocketDisconnect, OSError, RuntimeError):
            pass  # it leaves without a close frame; uvicorn drops the connection

    # --- the idle timeout ------------------------------------------------------------

    def _deadline(self) -> float | None:
        """When a silent channel is closed: never while a frame is unanswered."""
        if self._in_flight:
            return None
        return asyncio.get_running_loop().time() + self._idle_seconds

    def _reschedule(self) -> None:
        if self._idle is not None:
            self._idle.reschedule(self._deadline())


def _lease_answer(lease: Lease) -> Answer:
    return LeaseResponse.model_validate(lease).model_dump(mode="json")


def _lease_outcome(token: str, outcome: Lease | EventLogError) -> Answer:
    """One generation's part of a many-generation lease frame's answer."""
    if isinstance(outcome, Lease):
        return {"status": 200, **_lease_answer(outcome)}
    refused = refused_answer(None, outcome)
    del refused["id"]
    return {"generation": token, **refused}


def own_id(text: str) -> Any:
    """The `id` of a frame refused as it was parsed, when one can be told: its text is a
    JSON object with exactly one top-level `id`, a scalar that is valid UTF-8 (it is sent
    back as it came); otherwise None (which frame it was cannot be said)."""
    try:
        # Every object as its list of pairs: a key given twice is seen, not overwritten.
        pairs = json.loads(text, object_pairs_hook=lambda pairs: pairs)
    except (ValueError, RecursionError):
        return None
    if not isinstance(pairs, list) or not all(isinstance(p, tuple) for p in pairs):
        return None  # not an object (a JSON array decodes to a list of values)
    ids = [value for key, value in pairs if key == "id"]
    if len(ids) != 1 or not isinstance(ids[0], _SCALARS):
        return None
    try:
        return check_utf8(ids[0]) if isinstance(ids[0], str) else ids[0]
    except ValueError:
        return None


def _ready(answer: Answer) -> asyncio.Future[Answer]:
    future: asyncio.Future[Answer] = asyncio.get_running_loop().create_future()
    future.set_result(answer)
    return future


def refused_answer(frame_id: Any, error: EventLogError) -> Answer:
    """A refused frame's answer: the REST append's status and problem code for it."""
    row = problem_code(error)
    if row.logged is not None:
        log.log(row.logged, "%s: %s", error.code, error.detail)
    detail = row.said or error.detail
    return {"id": frame_id, "status": row.status, "code": error.code, "detail": detail} | dict(
        error.members
    )


def invalid_answer(frame_id: Any, invalid: ValidationError) -> Answer:
    """A frame that is not an append frame: 422 `validation_error`, as a bad REST body."""
    errors = [
        {"loc": list(e.get("loc", ())), "msg": e.get("msg", ""), "type": e.get("type", "")}
        for e in invalid.errors()
    ]
    answer = refused_answer(frame_id, InvalidRequest("the frame does not match the schema"))
    return answer | {"errors": errors}
