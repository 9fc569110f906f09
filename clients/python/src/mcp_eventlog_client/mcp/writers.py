"""The write path of an `EventLogEventStore`: each SDK stream's generation, its messages
appended one by one (`per_event`) or handed to its pipeline (`pipelined`), and a failed
store turned into a placeholder id that is never resumed."""

from __future__ import annotations

import logging
from collections import Counter, OrderedDict
from dataclasses import dataclass, field
from typing import Literal, Protocol

import anyio
import sniffio
from mcp.server.streamable_http import GET_STREAM_KEY, StreamId
from mcp_types import JSONRPCMessage

from mcp_eventlog_client import EventLogClient, EventLogError, NewEvent
from mcp_eventlog_client.mcp.events import events_of
from mcp_eventlog_client.mcp.leases import LeaseRenewer
from mcp_eventlog_client.mcp.names import StreamNames
from mcp_eventlog_client.mcp.owners import Owners
from mcp_eventlog_client.mcp.pipelines import StorePipelines
from mcp_eventlog_client.mcp.refusal import new_placeholder
from mcp_eventlog_client.mcp.replay import Owner, ends_request
from mcp_eventlog_client.pipeline import GenerationPipeline
from mcp_eventlog_client.writer import GenerationReason

log = logging.getLogger("mcp_eventlog_client.mcp.store")

Durability = Literal["pipelined", "per_event"]
"""When `store_event` returns: once the message is handed, in order, to the append
channel (`pipelined`, the default), or once the service committed it (`per_event`)."""

_FENCED = frozenset({"superseded", "terminal", "abandoned"})
"""Refusals that end a generation for its writer: the next message opens a new one."""


class WriteSource(Protocol):
    """What the write path reads of its store (`EventLogEventStore`), at each use: the
    service, the names, and the limits and options the store was given."""

    client: EventLogClient
    names: StreamNames
    producer: str
    durability: Durability
    pipeline: int
    lease_seconds: int | None
    keep_finished_seconds: float
    max_events: int | None
    ttl_seconds: int | None
    max_event_bytes: int
    max_message_bytes: int
    outage_seconds: float
    store_timeout: float
    failures: Counter[str]


@dataclass(slots=True)
class _Stream:
    """This process's writer state for one SDK stream of one session."""

    lock: anyio.Lock = field(default_factory=anyio.Lock)
    generation: str | None = None
    next_seq: int = 1
    pipeline: GenerationPipeline | None = None
    """The generation's pipelined writer (pipelined mode), else None."""
    last_write: float = 0.0
    """When an acknowledged append last renewed the generation's lease (per-event mode)."""

    def forget_pipeline(self) -> None:
        """No more is handed to the stream's pipeline (it stays until acknowledged)."""
        if self.pipeline is not None:
            self.pipeline.finished = True
            self.pipeline = None


def pipelined_now(durability: Durability) -> bool:
    """Pipelined mode, where it can run (its flusher and the channel need asyncio)."""
    if durability != "pipelined":
        return False
    try:
        return sniffio.current_async_library() == "asyncio"
    except sniffio.AsyncLibraryNotFoundError:
        return False


async def _append_message(client: EventLogClient, stream: _Stream, events: list[NewEvent]) -> str:
    """One message, one atomic append (all its parts, or none)."""
    assert stream.generation is not None
    result = await client.append(stream.generation, events, first_seq=stream.next_seq)
    stream.next_seq += len(events)
    stream.last_write = anyio.current_time()
    return result.event_ids[-1]


class StreamWriters:
    """Every SDK stream this process writes, by session scope and SDK stream id.

    Bounded: a stream that never gets its response (an abandoned GET stream) would
    otherwise stay forever. A forgotten stream's next write opens a new generation.
    """

    def __init__(
        self,
        source: WriteSource,
        owners: Owners,
        pipelines: StorePipelines,
        leases: LeaseRenewer,
        *,
        bound: int,
    ) -> None:
        self.source = source
        self._owners = owners
        self._pipelines = pipelines
        self._leases = leases
        self._streams: OrderedDict[tuple[str, StreamId], _Stream] = OrderedDict()
        self._bound = bound
        self._outage_until = 0.0

    async def write(self, scope: str, stream_id: StreamId, message: JSONRPCMessage | None) -> str:
        """Store one message of the session's SDK stream; its id (or a placeholder)."""
        key = (scope, stream_id)
        stream = self._stream(key)
        data = (
            None if message is None else message.model_dump_json(by_alias=True, exclude_unset=True)
        )
        # Pipelined, with room in the window and no other store of the stream under way:
        # handed without awaiting anything, so nothing can come between (the common case,
        # and the cheapest: no lock, no deadline).
        event_id = None if stream.lock.locked() else self._hand_now(stream, data)
        if event_id is None:
            # One append at a time per stream: the local seq counter follows append order.
            async with stream.lock:
                event_id = await self._store(scope, stream_id, stream, data)
        # A response (or error) is the last message of a request's stream; the standalone
        # GET stream has no end.
        ends = stream_id != GET_STREAM_KEY and ends_request(message)
        if ends and self._streams.get(key) is stream:
            # The request's stream is done: its lease is renewed only for
            # `keep_finished_seconds` more, and its pipeline is forgotten once
            # acknowledged.
            del self._streams[key]
            self._leases.keep_finished(stream.generation, self.source.keep_finished_seconds)
            if stream.pipeline is not None and stream.pipeline.unacknowledged:
                self._pipelines.finishing(key, stream.pipeline)
            stream.forget_pipeline()
        return event_id

    def _hand_now(self, stream: _Stream, data: str | None) -> str | None:
        """The message's id if its stream's pipeline takes it at once, else None."""
        pipeline = stream.pipeline
        if pipeline is None or pipeline.error is not None or stream.generation is None:
            return None
        if data is not None and len(data) * 3 > self.source.max_message_bytes:
            return None  # perhaps too large: `_store` measures it and refuses it
        if anyio.current_time() < self._outage_until:
            return None
        seq = pipeline.try_hand(events_of(data, self.source.max_event_bytes))
        return None if seq is None else f"{pipeline.generation}:{seq}"

    def _stream(self, key: tuple[str, StreamId]) -> _Stream:
        stream = self._streams.get(key)
        if stream is None:
            stream = self._streams[key] = _Stream()
            while len(self._streams) > self._bound:
                self._streams.popitem(last=False)
        else:
            self._streams.move_to_end(key)
        return stream

    def _went_down(self) -> None:
        """The service is down: stores fail fast for `outage_seconds`."""
        self._outage_until = anyio.current_time() + self.source.outage_seconds

    async def _store(
        self, scope: str, stream_id: StreamId, stream: _Stream, data: str | None
    ) -> str:
        source = self.source
        size = 0 if data is None else len(data.encode())
        if size > source.max_message_bytes:
            return self._failed(scope, stream_id, stream, "message_too_large", f"{size} bytes")
        if anyio.current_time() < self._outage_until:
            return self._failed(scope, stream_id, stream, "outage", "the service was just down")
        try:
            with anyio.fail_after(source.store_timeout):
                return await self._append(
                    scope, stream_id, stream, events_of(data, source.max_event_bytes)
                )
        except TimeoutError:
            self._went_down()
            detail = f"no acknowledgement within {source.store_timeout:g} s"
            return self._failed(scope, stream_id, stream, "timeout", detail)
        except EventLogError as error:
            if error.status == 0 or error.status >= 500:
                self._went_down()
            return self._failed(scope, stream_id, stream, error.code, error.detail)

    async def _append(
        self, scope: str, stream_id: StreamId, stream: _Stream, events: list[NewEvent]
    ) -> str:
        if pipelined_now(self.source.durability):
            return await self._hand(scope, stream_id, stream, events)
        if stream.generation is None:
            await self._open(scope, stream_id, stream)
        try:
            return await _append_message(self.source.client, stream, events)
        except EventLogError as fenced:
            if fenced.code not in _FENCED:
                raise
            # Someone (an operator, another writer, the lease sweep) ended this generation:
            # continue in a new one, so the old ids reset rather than resume into
            # different events.
            log.warning(
                "generation %s refused an append (%s); opening a new one",
                stream.generation,
                fenced.code,
            )
            await self._open(scope, stream_id, stream, reason="reset")
            return await _append_message(self.source.client, stream, events)

    async def _hand(
        self, scope: str, stream_id: StreamId, stream: _Stream, events: list[NewEvent]
    ) -> str:
        """Pipelined: the message's id at once; its append follows behind."""
        pipeline = stream.pipeline
        if stream.generation is None or pipeline is None or pipeline.error is not None:
            broke = pipeline is not None and pipeline.error is not None
            await self._open(scope, stream_id, stream, reason="reset" if broke else None)
            pipeline = stream.pipeline
        assert pipeline is not None
        try:
            seq = await pipeline.hand(events)
        except EventLogError:
            # The pipeline broke (already counted and marked by `_broken`) while this
            # message waited for the window: it goes into a new generation instead.
            await self._open(scope, stream_id, stream, reason="reset")
            pipeline = stream.pipeline
            assert pipeline is not None
            seq = await pipeline.hand(events)
        return f"{pipeline.generation}:{seq}"

    async def _open(
        self,
        scope: str,
        stream_id: StreamId,
        stream: _Stream,
        reason: GenerationReason | None = None,
    ) -> None:
        source = self.source
        pipelined = pipelined_now(source.durability)
        await self._pipelines.settle_finishing((scope, stream_id), within=source.store_timeout)
        generation = await source.client.open_generation(
            source.names.name(scope, stream_id),
            reason=reason,
            producer=source.producer,
            max_events=source.max_events,
            ttl_seconds=source.ttl_seconds,
            lease_seconds=source.lease_seconds,
            pipeline=source.pipeline if pipelined else None,
        )
        self._leases.granted(generation.lease_seconds)
        stream.forget_pipeline()
        stream.generation, stream.next_seq = generation.token, 1
        stream.last_write = anyio.current_time()
        self._owners.own(generation.token, Owner(scope, stream_id))
        if pipelined:
            stream.pipeline = GenerationPipeline(
                source.client,
                generation.token,
                window=source.pipeline,
                give_up_after=source.store_timeout,
                on_broken=lambda pipeline, error: self._broken(scope, stream_id, pipeline, error),
            )
            self._pipelines.add(stream.pipeline)
        self._leases.start()

    def session_ended(self, scope: str) -> None:
        """A session ended (or was forgotten): its streams' leases are no longer renewed
        (what they handed out is still stored), and its next messages, if any, start anew."""
        for key in [key for key in self._streams if key[0] == scope]:
            self._streams.pop(key).forget_pipeline()

    def _broken(
        self, scope: str, stream_id: StreamId, pipeline: GenerationPipeline, error: EventLogError
    ) -> None:
        """A pipeline lost events it had handed out: count it, and refuse its resumes."""
        self.source.failures[error.code] += 1
        if error.status == 0 or error.status >= 500:
            self._went_down()
        self._owners.own(pipeline.generation, Owner(scope, stream_id, broken=True))

    def _failed(
        self, scope: str, stream_id: StreamId, stream: _Stream, cause: str, detail: str
    ) -> str:
        """Count and log a failed store; give the message a placeholder id, never resumed."""
        self.source.failures[cause] += 1
        # The generation now lacks this message (or cannot be known to hold it): it is
        # never written again nor resumed, and the stream's next message opens a new one,
        # which supersedes it in the service too.
        broken = Owner(scope, stream_id, broken=True)
        if stream.generation is not None:
            self._owners.own(stream.generation, broken)
        placeholder = new_placeholder()
        self._owners.own(placeholder, broken)
        log.error(
            "could not store an event of MCP stream %r (%s: %s); it is sent live as %s, and "
            "a resume of generation %s is refused",
            stream_id,
            cause,
            detail,
            placeholder,
            stream.generation,
        )
        stream.generation, stream.next_seq = None, 1
        stream.forget_pipeline()
        return placeholder

    def writes(self, scope: str, sdk_stream: StreamId, generation: str) -> bool:
        """Whether this process is writing `generation` as the session's SDK stream now."""
        stream = self._streams.get((scope, sdk_stream))
        return stream is not None and stream.generation == generation

    def silent(self, written_before: float) -> list[str]:
        """The generations written here that no acknowledged append renewed since
        `written_before` (and finished pipelines, once acknowledged, are forgotten)."""
        silent = []
        for stream in list(self._streams.values()):
            pipeline = stream.pipeline
            if pipeline is not None and pipeline.error is None:
                if pipeline.last_write <= written_before:
                    silent.append(pipeline.generation)
            elif (
                pipeline is None
                and stream.generation is not None
                and stream.last_write <= written_before
            ):
                silent.append(stream.generation)
        self._pipelines.prune()
        return silent
