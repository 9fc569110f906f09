"""One replay of a client's `Last-Event-ID`: the verdict, the missed messages, the live tail.

`EventLogEventStore.replay_events_after` runs a `Replay`:

1. An `unstored:` placeholder, or a token of a generation whose store failed, is refused
   `reset`/`not_stored`; a token this process gave another session, `invalid`/
   `cross_session`. Neither asks the service.
2. Otherwise, once what this process handed out of that generation is acknowledged (a
   pipelined store; up to `replay_timeout`), the service decides (`resume` on the
   stream's own route when this process opened the generation, `/v1/resume` when not),
   within `replay_timeout`. A stream the service names that is not this session's is
   refused `invalid`/`cross_session`.
3. `resume`: the stored messages after the id are sent, joined from their parts, page by
   page. When the generation is one another process is still writing (this process did
   not open it) and its response is not among them, the replay follows the generation's
   live tail (`EventLogClient.follow`) until the response arrives, for at most
   `follow_seconds`. Without that, the rest of the stream would never reach this
   connection: the SDK forwards live only what this process stores.
4. The SDK registers the resumed stream for live messages only where some can still come:
   the standalone GET stream, or a request this process is still writing. When nothing
   more can (the response was just sent, the client already holds it because it lost the
   connection right after the result, the generation ended, a followed generation was
   done with), the replay returns None and the SDK ends the response at once: a
   well-formed, empty end, never a stream that stays open for ever.
5. Any other verdict, or stored events that are not messages of the convention, fail the
   client's request with `RESUME_REFUSED` (`mcp_eventlog_client.mcp.refusal`).

What was sent is always a true prefix of one generation: when paging or following stops
part-way (the service failed, the time is up) the replay returns None, the SDK ends the
response, and the client reconnects from the last id it got, to be decided again.
"""

from __future__ import annotations

import logging
from contextlib import aclosing
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Protocol

import anyio
from mcp.server.streamable_http import GET_STREAM_KEY, EventCallback, EventMessage, StreamId
from mcp_types import JSONRPCError, JSONRPCMessage, JSONRPCResponse
from mcp_types import jsonrpc_message_adapter as message_adapter
from pydantic import ValidationError

from mcp_eventlog_client import (
    EventLogClient,
    EventLogError,
    LiveEnd,
    LiveReset,
    ResumeAnswer,
    Verdict,
)
from mcp_eventlog_client.mcp.events import NotAMessage, Reassembly, Unjoinable, part_of
from mcp_eventlog_client.mcp.names import StreamNames
from mcp_eventlog_client.mcp.refusal import (
    CROSS_SESSION,
    NOT_STORED,
    TIMEOUT,
    UNAVAILABLE,
    UNSTORED_PREFIX,
    refuse,
)
from mcp_eventlog_client.mcp.scope import current_scope

log = logging.getLogger("mcp_eventlog_client.mcp.store")


class ReplaySource(Protocol):
    """What a replay needs of its store (`EventLogEventStore`): the service, the names, the
    limits, and what this process itself wrote."""

    client: EventLogClient
    names: StreamNames
    producer: str
    page_limit: int | None
    replay_timeout: float
    follow_seconds: float

    def owner_of(self, token: str) -> Owner | None: ...

    async def settle(self, token: str) -> None: ...

    def writes(self, scope: str, sdk_stream: StreamId, generation: str) -> bool: ...


_NOT_THIS_SESSION = "the event id does not belong to this session"
_NOT_STORED = "a message of this stream after the id could not be stored"


@dataclass(frozen=True, slots=True)
class Owner:
    """The session and SDK stream of a generation (or placeholder); `broken` once a store
    into it failed."""

    scope: str
    sdk_stream: StreamId
    broken: bool = False


@dataclass(frozen=True, slots=True)
class _Replayed:
    """A replay that just resumed `sdk_stream` of `scope`; the client is now at `last_id`."""

    scope: str
    sdk_stream: StreamId
    last_id: str


# Set by a resume, read by the priming event the SDK stores right after it, in the same task
# (`streamable_http.py`, `replay_sender`): that event needs no write.
_replayed: ContextVar[_Replayed | None] = ContextVar("mcp_eventlog_replayed", default=None)


def take_replayed(scope: str, sdk_stream: StreamId) -> str | None:
    """The id for the priming event the SDK stores right after a replay of this stream."""
    replayed = _replayed.get()
    if replayed is None or replayed.scope != scope:
        return None
    _replayed.set(None)
    return replayed.last_id if replayed.sdk_stream == sdk_stream else None


def ends_request(message: JSONRPCMessage | None) -> bool:
    """A response (or error) is the last message of a request's stream."""
    return isinstance(message, JSONRPCResponse | JSONRPCError)


@dataclass(slots=True)
class _Progress:
    """How far a replay got: the id the client is at, the last stored event read, the
    messages sent, and whether the request's response was among them."""

    client_id: str
    read_id: str
    sent: int = 0
    answered: bool = False
    joined: Reassembly = field(default_factory=Reassembly)


class Replay:
    """One `replay_events_after` call (see the module)."""

    def __init__(
        self, store: ReplaySource, last_event_id: str, send_callback: EventCallback
    ) -> None:
        self.store = store
        self.last_event_id = last_event_id
        self.send = send_callback

    async def run(self) -> StreamId | None:
        """Send what the client missed; the SDK stream resumed, or None."""
        scope = current_scope()
        if scope is None:
            log.error("replay outside SessionScopeMiddleware: refusing %r", self.last_event_id)
            return None
        if self.last_event_id.startswith(UNSTORED_PREFIX):
            await self._refuse_known(scope, self.store.owner_of(self.last_event_id))
            return None
        # What this process handed out of the generation is acknowledged first (or the
        # generation is known broken), so the verdict is on what the client was shown.
        await self.store.settle(self.last_event_id.rpartition(":")[0])
        known = self.store.owner_of(self.last_event_id.rpartition(":")[0])
        if known is not None and (known.scope != scope or known.broken):
            await self._refuse_known(scope, known)
            return None
        answer = await self._verdict(scope, known)
        if answer is None:
            return None
        owner = None if answer.stream_id is None else self.store.names.parse(answer.stream_id)
        if owner is None or owner[0] != scope:
            await self._refuse_foreign(answer, owner)
            return None
        return await self._resume(answer, scope, owner[1], written_here=known is not None)

    async def _refuse_known(self, scope: str, owner: Owner | None) -> None:
        """Refuse a placeholder, or a token this process knows to be unusable here."""
        if owner is not None and owner.scope != scope:
            log.warning("not resuming %r: it belongs to another session", self.last_event_id)
            await refuse(
                self.send, owner.sdk_stream, Verdict.INVALID, CROSS_SESSION, _NOT_THIS_SESSION
            )
            return
        log.warning("not resuming %r: a message of its stream was not stored", self.last_event_id)
        sdk_stream = None if owner is None else owner.sdk_stream
        await refuse(self.send, sdk_stream, Verdict.RESET, NOT_STORED, _NOT_STORED)

    async def _verdict(self, scope: str, known: Owner | None) -> ResumeAnswer | None:
        store = self.store
        route = None if known is None else store.names.name(scope, known.sdk_stream)
        sdk_stream = None if known is None else known.sdk_stream
        try:
            with anyio.fail_after(store.replay_timeout):
                return await store.client.resume(
                    self.last_event_id, stream_id=route, limit=store.page_limit
                )
        except TimeoutError:
            log.warning("not resuming %r: no verdict in time", self.last_event_id)
            detail = f"no verdict within {store.replay_timeout:g} s"
            await refuse(self.send, sdk_stream, UNAVAILABLE, TIMEOUT, detail)
        except EventLogError as error:
            log.warning("not resuming %r: the service failed (%s)", self.last_event_id, error)
            await refuse(self.send, sdk_stream, UNAVAILABLE, error.code, error.detail)
        return None

    async def _refuse_foreign(self, answer: ResumeAnswer, owner: tuple[str, str] | None) -> None:
        """Refuse an id whose stream is not one of this session's."""
        if answer.stream_id is None:
            # The service itself found no stream (malformed id, unknown token): no stream,
            # so no request id: the error's id is null.
            _log_refusal(answer)
            await refuse(self.send, None, answer.verdict, answer.reason, answer.detail)
            return
        # A real token of another session (or of a stream not written by this store):
        # whatever the service's verdict, this session may not see it.
        log.warning("not resuming %r: it belongs to another session", answer.last_event_id)
        sdk_stream = None if owner is None else owner[1]
        await refuse(self.send, sdk_stream, Verdict.INVALID, CROSS_SESSION, _NOT_THIS_SESSION)

    async def _resume(
        self, answer: ResumeAnswer, scope: str, sdk_stream: StreamId, *, written_here: bool
    ) -> StreamId | None:
        if answer.verdict is not Verdict.RESUME:
            _log_refusal(answer)
            if sdk_stream != GET_STREAM_KEY:
                await refuse(self.send, sdk_stream, answer.verdict, answer.reason, answer.detail)
            return None
        progress = _Progress(client_id=answer.last_event_id, read_id=answer.last_event_id)
        try:
            if not await self._send_stored(answer, progress):
                return None
            if self._registers(answer, scope, sdk_stream):
                _replayed.set(_Replayed(scope, sdk_stream, progress.client_id))
                return sdk_stream
            if await self._finished(answer, progress):
                return None
            if await self._follows(answer, written_here):
                await self._follow(answer, sdk_stream, progress)
                return None
        except Unjoinable as bad:
            if progress.sent:
                log.warning("resume of %s stopped mid-way: %s", answer.last_event_id, bad)
                return None
            log.warning("not resuming %r: %s", answer.last_event_id, bad)
            await refuse(self.send, sdk_stream, Verdict.INVALID, bad.reason, str(bad))
            return None
        # A stream this process opened and has since forgotten (its memory is bounded):
        # its next message, if any, reaches the client through the SDK.
        _replayed.set(_Replayed(scope, sdk_stream, progress.client_id))
        return sdk_stream

    def _registers(self, answer: ResumeAnswer, scope: str, sdk_stream: StreamId) -> bool:
        """Whether the SDK should go on sending this stream's live messages here: the
        standalone stream (it never ends), or a request this process is still writing."""
        assert answer.generation is not None
        if sdk_stream == GET_STREAM_KEY:
            return True
        return self.store.writes(scope, sdk_stream, answer.generation) and not answer.terminal

    async def _finished(self, answer: ResumeAnswer, progress: _Progress) -> bool:
        """Whether nothing more will come: the response was sent now, or the client already
        holds it (it lost the connection right after the result), or the generation ended.

        The SDK would otherwise register the stream, which no message reaches again, and
        the client's response would never end.
        """
        if progress.answered or answer.terminal:
            return True
        return progress.sent == 0 and await self._claim_answered(answer)

    async def _send_stored(self, answer: ResumeAnswer, progress: _Progress) -> bool:
        """Send the stored messages after the id; False when paging stopped part-way."""
        assert answer.generation is not None
        for event in answer.events:
            await self._deliver(event.id, event.event, event.data, progress)
        after = answer.next_after
        try:
            while after is not None:
                with anyio.fail_after(self.store.replay_timeout):
                    page = await self.store.client.page(
                        answer.generation, after=after, limit=self.store.page_limit
                    )
                for event in page.events:
                    await self._deliver(event.id, event.event, event.data, progress)
                after = page.next_after
        except (EventLogError, TimeoutError) as error:
            # What was sent is a true prefix; the client reconnects from its last id and
            # gets a verdict on that (e.g. reset/evicted) instead of a stream with a hole.
            log.warning("resume of %s stopped mid-way: %r", answer.last_event_id, error)
            return False
        return True

    async def _deliver(
        self, event_id: str, event_type: str | None, data: str, progress: _Progress
    ) -> None:
        """Feed one stored event; send the message it completes."""
        progress.read_id = event_id
        whole = progress.joined.feed(event_type, data)
        if whole is None:
            return
        try:
            message = message_adapter.validate_json(whole, by_name=False)
        except ValidationError as error:
            raise NotAMessage(f"event {event_id} is not a JSON-RPC message") from error
        await self.send(EventMessage(message, event_id))
        progress.client_id = event_id
        progress.sent += 1
        progress.answered = progress.answered or ends_request(message)

    async def _follows(self, answer: ResumeAnswer, written_here: bool) -> bool:
        """Whether the rest of this generation can only come from another process."""
        if written_here or self.store.follow_seconds <= 0 or answer.generation is None:
            return False
        return await self._written_elsewhere(answer)

    async def _written_elsewhere(self, answer: ResumeAnswer) -> bool:
        """Whether the generation is its stream's current one, opened by another producer
        (this process may have opened it and forgotten, its memory being bounded)."""
        assert answer.stream_id is not None
        try:
            current = (await self.store.client.stream(answer.stream_id)).current
        except EventLogError:
            return False
        return (
            current is not None
            and current.token == answer.generation
            and current.producer != self.store.producer
        )

    async def _claim_answered(self, answer: ResumeAnswer) -> bool:
        """Whether the message the client claims to hold is the request's response."""
        assert answer.generation is not None
        seq = int(answer.last_event_id.rpartition(":")[2])
        client, generation = self.store.client, answer.generation
        try:
            claimed = (await client.page(generation, after=seq - 1, limit=1)).events if seq else ()
            part = part_of(claimed[0].event) if claimed else None
            if part is not None:  # the claim is a message's last part: read the whole of it
                claimed = (await client.page(generation, after=seq - part[1], limit=part[1])).events
            joined = Reassembly()
            wholes = [joined.feed(event.event, event.data) for event in claimed]
            whole = wholes[-1] if wholes else None
            message = None if whole is None else message_adapter.validate_json(whole, by_name=False)
        except (EventLogError, Unjoinable, ValidationError):
            return False
        return ends_request(message)

    async def _follow(
        self, answer: ResumeAnswer, sdk_stream: StreamId, progress: _Progress
    ) -> bool:
        """Send the generation's live tail until its response; False when that did not come."""
        assert answer.stream_id is not None
        log.info("following %s: another process is writing it", answer.generation)
        with anyio.move_on_after(self.store.follow_seconds):
            try:
                follow = self.store.client.follow(answer.stream_id, progress.read_id)
                async with aclosing(follow) as items:
                    async for item in items:
                        if isinstance(item, LiveEnd):
                            return True
                        if isinstance(item, LiveReset):
                            await self._refuse_reset(sdk_stream, item)
                            return False
                        await self._deliver(item.id, item.event, item.data, progress)
                        if progress.answered:
                            return True
            except EventLogError as error:
                log.warning("following %s stopped: %s", answer.generation, error)
                return False
        log.info("stopped following %s after %g s", answer.generation, self.store.follow_seconds)
        return False

    async def _refuse_reset(self, sdk_stream: StreamId, reset: LiveReset) -> None:
        log.info("resume of %s: its generation was reset (%s)", self.last_event_id, reset.reason)
        detail = "the generation being followed was reset; discard partial output"
        await refuse(self.send, sdk_stream, Verdict.RESET, reset.reason, detail)


def _log_refusal(answer: ResumeAnswer) -> None:
    log.info(
        "not resuming %r: %s/%s (%s)",
        answer.last_event_id,
        answer.verdict,
        answer.reason,
        answer.detail,
    )
