"""One WebSocket of the append channel (`mcp_eventlog_client.channel`) and the frames sent
on it that wait for their answer: how a frame goes out, how an answer is matched to it,
and which frames may be sent again once the link is lost."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from websockets.asyncio.client import ClientConnection
from websockets.exceptions import ConnectionClosed

from mcp_eventlog_client.errors import (
    EventLogError,
    MalformedResponse,
    ServiceUnreachable,
    error_for,
)
from mcp_eventlog_client.models import Lease, read_answer

log = logging.getLogger("mcp_eventlog_client.channel")


@dataclass(eq=False, slots=True)
class Frame:
    """One append on its way: sent (perhaps again) until it is answered or fails."""

    body: dict[str, Any]
    reader: Callable[[dict[str, Any]], Any]  # the answer's model (`AppendResult`, `Lease`)
    idempotent: bool
    future: asyncio.Future[Any]
    id: int = 0
    sends: int = 0
    link: Link | None = None


class Link:
    """One WebSocket connection and the frames sent on it that wait for their answer.

    The service answers frames in the order they were sent, so `frames` is that order and
    an answer always resolves the oldest one.
    """

    def __init__(self, ws: ClientConnection, url: str) -> None:
        self.ws = ws
        self.url = url
        self.frames: deque[Frame] = deque()
        self.error: EventLogError | None = None
        self.closed = False
        self.reader: asyncio.Task[None] | None = None

    async def put(self, frame: Frame, frame_id: int) -> None:
        """Send `frame` as `frame_id` (under the channel's lock, so the wire order is
        `frames`'s)."""
        frame.id = frame_id
        frame.sends += 1
        frame.link = self
        self.frames.append(frame)
        text = json.dumps({"id": frame.id, **frame.body}, separators=(",", ":"), ensure_ascii=False)
        # Shielded: a caller that gives up mid-send must not leave a frame in `frames` that
        # never went out (the next answer would then look like another frame's). A closed
        # link: its reader sees the close and resends what is unanswered.
        with contextlib.suppress(ConnectionClosed):
            await asyncio.shield(self.ws.send(text))

    def fail(self, error: EventLogError) -> None:
        """Give the link up: its reader ends, and recovery resends or fails its frames."""
        if self.closed:
            return
        self.closed = True
        self.error = error
        self.ws.transport.abort()

    def answer(self, message: str | bytes) -> MalformedResponse | None:
        """Resolve the oldest frame with `message`; a problem when it is not an answer."""
        if isinstance(message, bytes):
            return self._garbage("a binary frame")
        try:
            doc = json.loads(message)
        except ValueError:
            return self._garbage(f"a frame that is not JSON: {message[:80]!r}")
        if not isinstance(doc, dict) or type(doc.get("id")) is not int:
            return self._garbage(f"a frame without an id: {message[:80]!r}")
        if not self.frames or self.frames[0].id != doc["id"]:
            expected = self.frames[0].id if self.frames else None
            return self._garbage(f"an answer to frame {doc['id']}, expected {expected}")
        frame = self.frames.popleft()
        if frame.future.done():
            return None  # its caller gave up
        status = doc.get("status")
        if status in (200, 201) and type(status) is int:
            try:
                result = read_answer(frame.reader, doc)
            except MalformedResponse as error:
                frame.future.set_exception(error)
                return None
            sent = len(frame.body.get("events", ()))
            if sent and len(result.event_ids) != sent:
                detail = f"{len(result.event_ids)} ids for {sent} events"
                frame.future.set_exception(
                    MalformedResponse(status, MalformedResponse.code, detail)
                )
            else:
                frame.future.set_result(result)
        elif type(status) is int and 400 <= status <= 599 and isinstance(doc.get("code"), str):
            frame.future.set_exception(error_for(status, doc["code"], str(doc.get("detail") or "")))
        else:
            detail = f"an answer without a status of the contract: {message[:80]!r}"
            frame.future.set_exception(MalformedResponse(0, MalformedResponse.code, detail))
        return None

    def _garbage(self, what: str) -> MalformedResponse:
        """The oldest frame fails untrusted; the channel is then given up."""
        error = MalformedResponse(0, MalformedResponse.code, f"the append channel sent {what}")
        if self.frames:
            frame = self.frames.popleft()
            if not frame.future.done():
                frame.future.set_exception(error)
        log.error("the append channel %s sent %s; closing it", self.url, what)
        return error

    def survivors(self, error: EventLogError, attempts: int) -> list[Frame]:
        """The unanswered frames that may be sent again (with `first_seq`, fewer than
        `attempts` sends); the others fail now, with `error`."""
        keep = []
        for frame in self.frames:
            if frame.future.done():
                continue
            if not frame.idempotent:
                detail = f"{error.detail}; not resent (no first_seq: it may have been stored)"
                frame.future.set_exception(ServiceUnreachable(0, ServiceUnreachable.code, detail))
            elif frame.sends >= attempts:
                frame.future.set_exception(error)
            else:
                keep.append(frame)
        return keep


def lease_outcomes(body: dict[str, Any]) -> dict[str, Lease | EventLogError]:
    """The answer to a many-generation lease frame: each generation's lease or refusal."""
    outcomes: dict[str, Lease | EventLogError] = {}
    for entry in body["leases"]:
        status = entry["status"]
        if status == 200:
            lease = Lease.from_json(entry)
            outcomes[lease.generation] = lease
        else:
            token = entry["generation"]
            outcomes[token] = error_for(int(status), str(entry["code"]), str(entry.get("detail")))
    return outcomes


def size_hint(body: dict[str, Any]) -> int:
    """About the frame's size in bytes (its events' data), without encoding it twice."""
    size = 128
    for event in body.get("events", ()):
        data = event.get("data") or ""
        size += 32 + len(data) * (1 if data.isascii() else 3)
        size += len(event.get("event") or "")
    return size
