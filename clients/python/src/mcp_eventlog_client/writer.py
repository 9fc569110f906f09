"""The writer API as typed async calls: what MCP servers use to store and resume streams."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from typing import Any, Literal, get_args
from urllib.parse import quote

import anyio
import httpx

from mcp_eventlog_client.channel import (
    MAX_LEASE_FRAME_GENERATIONS,
    AppendChannel,
    ChannelUnavailable,
)
from mcp_eventlog_client.connection import RetryPolicy, ServiceClient, ServiceConnection
from mcp_eventlog_client.errors import EventLogError
from mcp_eventlog_client.live import Follower, LiveItem
from mcp_eventlog_client.models import (
    AppendResult,
    EventPage,
    Generation,
    Lease,
    NewEvent,
    ResumeAnswer,
    StoredEvent,
    StreamView,
    read_answer,
)

GenerationReason = Literal["initial", "failover", "retry", "reset"]
AppendTransport = Literal["channel", "rest"]
"""How `append` reaches the service: the append channel (one WebSocket, REST where it
cannot pass) or one REST request per append."""

APPEND_TRANSPORT_ENV = "EVENTLOG_APPEND_TRANSPORT"


def choose_append_transport(
    given: AppendTransport | None, default: AppendTransport
) -> AppendTransport:
    """`given`, else `EVENTLOG_APPEND_TRANSPORT`, else `default`; `ValueError` for another."""
    chosen = given or os.environ.get(APPEND_TRANSPORT_ENV) or default
    if chosen not in get_args(AppendTransport):
        raise ValueError(
            f"{APPEND_TRANSPORT_ENV} (or append_transport) is {chosen!r}: one of 'channel', 'rest'"
        )
    transport: AppendTransport = chosen  # type: ignore[assignment]
    return transport


def _segment(value: str) -> str:
    return quote(value, safe="")


class EventLogClient(ServiceClient):
    """A typed async client for the writer API (`/v1`).

    Refusals raise the `EventLogError` subclass of their problem code (see
    `mcp_eventlog_client.errors`). What is retried (transport errors, 5xx) is only what is safe:
    appends that carry `first_seq` (a repeat is answered 200 `duplicate`, nothing is stored
    twice), resume and reads. Opening a generation is never retried: a repeat would open a
    second one and supersede the first.

    `append_transport` (default: `EVENTLOG_APPEND_TRANSPORT`, else `"rest"`) chooses how
    appends travel: `"channel"` sends them all over one WebSocket (`AppendChannel`), and
    over REST where a WebSocket cannot pass (the upgrade refused or failed, a frame over
    the channel's size, no asyncio loop), each such append counted in `fallbacks` by
    reason and the change logged; `"rest"` sends one request per append.

    Use it as `async with EventLogClient(...) as log:`, or call `aclose()`; see
    `ServiceConnection` for `base_url`, `key`, `http` and the environment defaults.
    """

    def __init__(
        self,
        base_url: str | None = None,
        key: str | None = None,
        *,
        http: httpx.AsyncClient | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        timeout: float = 10.0,
        retry: RetryPolicy | None = None,
        connection: ServiceConnection | None = None,
        append_transport: AppendTransport | None = None,
    ) -> None:
        super().__init__(
            base_url,
            key,
            http=http,
            transport=transport,
            timeout=timeout,
            retry=retry,
            connection=connection,
        )
        self.append_transport = choose_append_transport(append_transport, "rest")
        self.channel = (
            AppendChannel(self.connection) if self.append_transport == "channel" else None
        )
        self.fallbacks: Counter[str] = Counter()
        """Appends sent over REST although the channel was chosen, by reason (see
        `AppendChannel`: `upgrade_refused`, `upgrade_failed`, `channel_down`,
        `frame_too_large`, `no_asyncio`, `closed`)."""

    async def aclose(self) -> None:
        """Close the append channel, and release the connection pool unless the connection
        was given (its owner closes it, as for a `TaskClient`)."""
        if self.channel is not None:
            await self.channel.aclose()
        await super().aclose()

    async def open_generation(
        self,
        stream_id: str,
        *,
        reason: GenerationReason | None = None,
        producer: str | None = None,
        max_events: int | None = None,
        ttl_seconds: int | None = None,
        lease_seconds: int | None = None,
        pipeline: int | None = None,
    ) -> Generation:
        """Open a new current generation of `stream_id`; the previous one is fenced.

        `lease_seconds` is the writer lease (default: the service's, 30 s): append or
        `renew_lease` within it, or the generation is abandoned. `pipeline` declares how
        many events the writer may show before the service acknowledged them (default 0:
        none); a claim beyond the tail within it is a lost tail, not an invalid id.
        Never retried (see the class docstring): a failure is raised at once.
        """
        options = {
            "reason": reason,
            "producer": producer,
            "max_events": max_events,
            "ttl_seconds": ttl_seconds,
            "lease_seconds": lease_seconds,
            "pipeline": pipeline,
        }
        body = {name: value for name, value in options.items() if value is not None}
        answer = await self.connection.request(
            "POST", f"/v1/streams/{_segment(stream_id)}/generations", json=body, retry=False
        )
        return read_answer(Generation.from_json, answer)

    async def append(
        self,
        generation: str,
        events: Sequence[NewEvent],
        *,
        first_seq: int | None = None,
        terminal: bool = False,
    ) -> AppendResult:
        """Append a batch atomically; retried only when `first_seq` makes a repeat idempotent.

        Over the channel when it was chosen (see the class), else (or where it cannot
        pass) over REST; the answers and errors are the same either way.
        """
        body: dict[str, Any] = {
            "events": [e.to_json() for e in events],
            "first_seq": first_seq,
            "terminal": terminal,
        }
        if self.channel is not None:
            try:
                return await self.channel.append({"generation": generation, **body})
            except ChannelUnavailable as unavailable:
                self.fallbacks[unavailable.reason] += 1
        answer = await self.connection.request(
            "POST",
            f"/v1/generations/{_segment(generation)}/events",
            json=body,
            retry=first_seq is not None,
        )
        return read_answer(AppendResult.from_json, answer)

    async def renew_lease(self, generation: str) -> Lease:
        """Renew `generation`'s writer lease (`Abandoned` — problem code `abandoned` —
        once it has run out; `Superseded`, `TerminalGeneration` once it ended).

        Over the channel when it was chosen (a lease frame), else over REST
        (`POST /v1/generations/{generation}/lease`); retried like an append with
        `first_seq`, since a repeat only renews again.
        """
        if self.channel is not None:
            try:
                return await self.channel.renew_lease(generation)
            except ChannelUnavailable as unavailable:
                self.fallbacks[unavailable.reason] += 1
        answer = await self.connection.request(
            "POST", f"/v1/generations/{_segment(generation)}/lease", json={}, retry=True
        )
        return read_answer(Lease.from_json, answer)

    async def renew_leases(self, generations: Sequence[str]) -> dict[str, Lease | EventLogError]:
        """Renew the leases of several generations at once; each generation's `Lease`, or
        the error that refused it (`Abandoned` and the like, per generation).

        Over the channel, one lease frame per 1,000 generations (the service renews each
        frame's in one write); over REST (or where the channel cannot pass), one request
        per generation, all at once.
        """
        tokens = list(dict.fromkeys(generations))
        outcomes: dict[str, Lease | EventLogError] = {}
        if self.channel is not None:
            try:
                for start in range(0, len(tokens), MAX_LEASE_FRAME_GENERATIONS):
                    chunk = tokens[start : start + MAX_LEASE_FRAME_GENERATIONS]
                    outcomes.update(await self.channel.renew_leases(chunk))
                return outcomes
            except ChannelUnavailable as unavailable:
                self.fallbacks[unavailable.reason] += 1

        async def renew(token: str) -> None:
            try:
                outcomes[token] = await self.renew_lease(token)
            except EventLogError as error:
                outcomes[token] = error

        async with anyio.create_task_group() as tasks:
            for token in tokens:
                if token not in outcomes:
                    tasks.start_soon(renew, token)
        return outcomes

    async def resume(
        self, last_event_id: str, *, stream_id: str | None = None, limit: int | None = None
    ) -> ResumeAnswer:
        """The verdict on `last_event_id`, on `stream_id`'s route or (without it) `/v1/resume`."""
        body: dict[str, Any] = {"last_event_id": last_event_id}
        if limit is not None:
            body["limit"] = limit
        path = "/v1/resume" if stream_id is None else f"/v1/streams/{_segment(stream_id)}/resume"
        answer = await self.connection.request("POST", path, json=body, retry=True)
        return read_answer(ResumeAnswer.from_json, answer)

    async def page(
        self,
        generation: str,
        *,
        after: int = 0,
        limit: int | None = None,
        wait: float | None = None,
    ) -> EventPage:
        """The events of `generation` after seq `after`; `Evicted` rather than skip any.

        With `wait` (seconds, at most the service's `EVENTLOG_LIVE_MAX_WAIT_SECONDS`, else
        `ValidationFailed`), a page that would be empty is answered when an event is
        appended, the generation ends or is superseded, or `wait` runs out (then empty).
        """
        params: dict[str, Any] = {"after": after}
        if limit is not None:
            params["limit"] = limit
        answer = await self.connection.long_poll(
            f"/v1/generations/{_segment(generation)}/events", params=params, wait=wait
        )
        return read_answer(EventPage.from_json, answer)

    def follow(
        self,
        stream_id: str,
        last_event_id: str | None = None,
        *,
        retry: RetryPolicy | None = None,
        idle_timeout: float = 45.0,
    ) -> AsyncGenerator[LiveItem]:
        """Follow `stream_id` as it is written: events, `LiveReset`s and a final `LiveEnd`.

        From `last_event_id` (None: the stream's current generation from seq 1). The claim
        is decided like a resume: an invalid one raises its error (`MalformedId`,
        `UnknownGeneration`, `CrossStream`, `BeyondTail`; `UnknownStream` for a stream
        without a generation) and nothing is yielded. When the service ends a connection
        the follower reconnects with its last id after the service's `retry:`; a dropped
        connection, one silent for `idle_timeout` seconds (the service sends a keep-alive
        every 15 s by default) or a 5xx is reconnected with `retry`'s backoff (default:
        the client's policy), and raised after that many failures in a row. The iteration
        ends after `LiveEnd`; to stop earlier, leave it inside
        `contextlib.aclosing(log.follow(...))`, which closes the connection at once.

        ```python
        async for item in log.follow("sess-1.req-7"):
            match item:
                case LiveEvent(id=event_id, data=data): ...
                case LiveReset(): ...  # discard what was read so far
                case LiveEnd(): ...
        ```
        """
        follower = Follower(
            self.connection, stream_id, last_event_id, retry=retry, idle_timeout=idle_timeout
        )
        return follower.items()

    async def events_after(
        self, generation: str, after: int, *, limit: int | None = None
    ) -> AsyncIterator[StoredEvent]:
        """Every event of `generation` after seq `after`, in order, page by page."""
        next_after: int | None = after
        while next_after is not None:
            page = await self.page(generation, after=next_after, limit=limit)
            for event in page.events:
                yield event
            next_after = page.next_after

    async def stream(self, stream_id: str) -> StreamView:
        """The stream and its current generation (`UnknownStream` when there is none)."""
        answer = await self.connection.request(
            "GET", f"/v1/streams/{_segment(stream_id)}", retry=True
        )
        return read_answer(StreamView.from_json, answer)
