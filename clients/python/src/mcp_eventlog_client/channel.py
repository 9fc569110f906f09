"""The append channel: every append of a process over one WebSocket (`GET /v1/append`).

Lease frames (`renew_lease`) travel the same way: a writer renews its generations' leases
on the channel it appends on.

One `AppendChannel` multiplexes the appends of every stream of every session on one
connection: each append is a text frame with an `id`, the service answers every frame in
the order the frames were sent, and at most `max_in_flight` frames wait for an answer at
once (further appends wait for a slot). What the REST append promises holds frame by frame:
the same answers, the same typed errors (`mcp_eventlog_client.errors`, from the answer's
`code`), the same retry rule.

When the channel drops (closed, broken, or no answer within the connection's `timeout`,
the deadline of each attempt), every unanswered frame that carries `first_seq` is sent
again, in the order it was first sent, on a new channel — the service answers a repeat
`200 duplicate`, so a retry is stored once. A frame without `first_seq` is never resent
(it may have been stored): it fails with `ServiceUnreachable`, as the REST append does.

The service is trusted to be the service, not to be well-behaved (as in
`mcp_eventlog_client.answers`): an answer frame is at most `max_answer_bytes`; a binary
frame, a frame that is not JSON, or an answer to another frame than the oldest one makes
the channel untrustworthy — the frame it answers fails with `MalformedResponse`, the
channel is closed, and the others are resent on a new one. The upgrade never follows a
redirect and never goes through a proxy from the environment.

Where a WebSocket cannot pass — the upgrade refused or failed, no asyncio loop, a frame
over `max_frame_bytes` — `append` raises `ChannelUnavailable`, and the caller
(`EventLogClient`) sends the append over REST instead; a refused upgrade keeps the
channel down for `retry_seconds`. Each such fallback is counted in `fallbacks` and
logged.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any, Final

import sniffio
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidStatus, WebSocketException

from mcp_eventlog_client.channel_link import Frame, Link, lease_outcomes, size_hint
from mcp_eventlog_client.connection import ServiceConnection
from mcp_eventlog_client.errors import (
    DeadlineExceeded,
    EventLogError,
    ServiceUnreachable,
)
from mcp_eventlog_client.models import AppendResult, Lease

log = logging.getLogger(__name__)

CHANNEL_PATH: Final = "/v1/append"
DEFAULT_MAX_IN_FLIGHT: Final = 32
"""Below the service's default `EVENTLOG_CHANNEL_MAX_IN_FLIGHT` (64)."""
DEFAULT_MAX_FRAME_BYTES: Final = 1024 * 1024
"""Larger appends go over REST, where an oversized body is a 413 rather than a closed
channel (every frame in flight would be resent)."""
TRY_AGAIN_LATER: Final = 1013
"""The close code of a channel the key may not hold (`too_many_channels`)."""
MAX_LEASE_FRAME_GENERATIONS: Final = 1_000
"""The most generations the service renews in one lease frame."""
DEFAULT_MAX_ANSWER_BYTES: Final = 1024 * 1024
"""An answer to a batch of 1,000 events is about 50 KB."""


class ChannelUnavailable(EventLogError):
    """The append cannot go over the channel; send it over REST. `reason` is counted."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(0, "channel_unavailable", f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


class _NoRedirects(connect):
    """websockets' `connect`, which never follows a redirect (the events stay here)."""

    def process_redirect(self, exc: Exception) -> Exception | str:
        return exc


class AppendChannel:
    """Appends over one WebSocket to the service of `connection` (its URL, key, deadline,
    retry policy). Use one per process: it multiplexes every stream.

    `append` returns the `AppendResult` or raises the `EventLogError` the REST append
    raises for the same answer; `ChannelUnavailable` says to send it over REST instead.
    Counters: `fallbacks` (by reason), `resent` (frames sent again after a drop),
    `reconnects`.
    """

    def __init__(
        self,
        connection: ServiceConnection,
        *,
        max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        max_answer_bytes: int = DEFAULT_MAX_ANSWER_BYTES,
        retry_seconds: float = 30.0,
    ) -> None:
        self.connection = connection
        base = connection.base_url
        scheme, sep, rest = base.partition("://")
        ws_scheme = {"http": "ws", "https": "wss"}.get(scheme.lower(), scheme)
        self.url = f"{ws_scheme}{sep}{rest}{CHANNEL_PATH}"
        self.max_in_flight = max_in_flight
        self.max_frame_bytes = max_frame_bytes
        self.max_answer_bytes = max_answer_bytes
        self.retry_seconds = retry_seconds
        self.resent = 0
        self.reconnects = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._slots = asyncio.Semaphore(max_in_flight)
        self._lock = asyncio.Lock()
        self._link: Link | None = None
        self._next_id = 0
        self._down_until = 0.0
        self._closed = False

    # -- the caller's side ------------------------------------------------------------

    async def append(self, body: dict[str, Any]) -> AppendResult:
        """Send one append (the REST body: `events`, `first_seq`, `terminal`, plus
        `generation`) and wait for its answer."""
        result: AppendResult = await self._send(
            body, AppendResult.from_json, idempotent=body.get("first_seq") is not None
        )
        return result

    async def renew_lease(self, generation: str) -> Lease:
        """Renew `generation`'s writer lease with a lease frame (`{"generation", "lease":
        true}`); the REST renewal's answer and errors. A repeat renews again, so it is
        retried like an append with `first_seq`."""
        lease: Lease = await self._send(
            {"generation": generation, "lease": True}, Lease.from_json, idempotent=True
        )
        return lease

    async def renew_leases(self, generations: list[str]) -> dict[str, Lease | EventLogError]:
        """Renew the leases of `generations` (at most `MAX_LEASE_FRAME_GENERATIONS`) with one
        lease frame (`{"generations": [...], "lease": true}`), renewed by the service in
        one write; each generation's `Lease`, or the error that refused it."""
        body = {"generations": generations, "lease": True}
        outcomes: dict[str, Lease | EventLogError] = await self._send(
            body, lease_outcomes, idempotent=True
        )
        return outcomes

    async def _send(
        self, body: dict[str, Any], reader: Callable[[dict[str, Any]], Any], *, idempotent: bool
    ) -> Any:
        self._bind()
        text_size = size_hint(body)
        if text_size > self.max_frame_bytes:
            raise self._fallback("frame_too_large", f"about {text_size} bytes")
        if time.monotonic() < self._down_until:
            raise self._fallback("channel_down", "the upgrade was refused a moment ago", quiet=True)
        attempts = self.connection.retry.attempts if idempotent else 1
        async with self._slots:
            for attempt in range(attempts):
                try:
                    return await self._exchange(body, reader, idempotent)
                except EventLogError as error:
                    # A 5xx answer is retried like the REST append's (the frame was
                    # answered, so the channel is fine).
                    if not (idempotent and error.status >= 500) or attempt + 1 >= attempts:
                        raise
                    await asyncio.sleep(self.connection.retry.delay(attempt, error.retry_after))
        raise AssertionError("unreachable: the last attempt returns or raises")  # pragma: no cover

    async def _exchange(
        self, body: dict[str, Any], reader: Callable[[dict[str, Any]], Any], idempotent: bool
    ) -> Any:
        loop = asyncio.get_running_loop()
        frame = Frame(body, reader, idempotent, loop.create_future())
        try:
            async with self._lock:
                link = self._link
                if link is None or link.closed:
                    link = await self._open()
                await self._put(link, frame)
            while True:
                link = frame.link
                try:
                    async with asyncio.timeout(self.connection.timeout):
                        return await asyncio.shield(frame.future)
                except TimeoutError:
                    if frame.future.done():
                        continue
                    # No answer within the attempt's deadline: the channel is given up and
                    # the frame resent on a new one (or failed, if it may not be).
                    if link is not None and link is frame.link:
                        detail = f"no answer within {self.connection.timeout:g} s"
                        link.fail(DeadlineExceeded(0, DeadlineExceeded.code, detail))
        finally:
            if not frame.future.done():
                frame.future.cancel()  # given up: its answer, if any, is dropped

    def _fallback(self, reason: str, detail: str, *, quiet: bool = False) -> ChannelUnavailable:
        if not quiet:
            log.warning(
                "the append channel %s is unavailable (%s: %s); appending over REST",
                self.url,
                reason,
                detail,
            )
        return ChannelUnavailable(reason, detail)

    def _bind(self) -> None:
        """Raise `ChannelUnavailable` outside asyncio; start afresh on a new event loop."""
        try:
            library = sniffio.current_async_library()
        except sniffio.AsyncLibraryNotFoundError:
            library = "none"
        if library != "asyncio":
            raise self._fallback("no_asyncio", f"running under {library}", quiet=True)
        loop = asyncio.get_running_loop()
        if loop is not self._loop:
            # A link, lock or slot of another (finished) loop cannot be used here.
            self._loop = loop
            self._slots = asyncio.Semaphore(self.max_in_flight)
            self._lock = asyncio.Lock()
            self._link = None

    # -- the connection's side --------------------------------------------------------

    async def _open(self) -> Link:
        """A new link (under `_lock`); `ChannelUnavailable` when no WebSocket can be had."""
        if self._closed:
            raise self._fallback("closed", "the channel was closed", quiet=True)
        headers = {
            name: value
            for name, value in self.connection.headers.items()
            if name.lower() == "authorization"
        }
        try:
            ws = await _NoRedirects(
                self.url,
                additional_headers=headers,
                user_agent_header="mcp-eventlog-client",
                proxy=None,
                compression=None,
                open_timeout=self.connection.timeout,
                ping_interval=None,
                close_timeout=1.0,
                max_size=self.max_answer_bytes,
                max_queue=None,
            )
        except InvalidStatus as refused:
            self._down_until = time.monotonic() + self.retry_seconds
            detail = f"HTTP {refused.response.status_code}"
            raise self._fallback("upgrade_refused", detail) from refused
        except (WebSocketException, OSError, TimeoutError, EOFError) as error:
            # No WebSocket at all (a proxy that does not pass one, a broken handshake, no
            # connection): REST for a while too, rather than a failed upgrade per append.
            self._down_until = time.monotonic() + self.retry_seconds
            detail = str(error) or type(error).__name__
            raise self._fallback("upgrade_failed", detail) from error
        link = Link(ws, self.url)
        link.reader = asyncio.get_running_loop().create_task(self._read(link))
        self._link = link
        return link

    async def _put(self, link: Link, frame: Frame) -> None:
        """Send `frame` on `link` (under `_lock`) with the channel's next frame id."""
        self._next_id += 1
        await link.put(frame, self._next_id)

    async def _read(self, link: Link) -> None:
        """Match answers to frames until the link ends; then recover its frames."""
        refused: ChannelUnavailable | None = None
        try:
            while True:
                message = await link.ws.recv()
                problem = link.answer(message)
                if problem is not None:
                    link.fail(problem)
                    break
        except ConnectionClosed as closed:
            if closed.rcvd is not None and closed.rcvd.code == TRY_AGAIN_LATER:
                # The key holds as many channels as the service allows: REST for a while.
                self._down_until = time.monotonic() + self.retry_seconds
                refused = self._fallback("too_many_channels", closed.rcvd.reason)
            if link.error is None:
                how = closed.rcvd or closed.sent
                said = f" ({how.code} {how.reason})".rstrip() if how is not None else ""
                link.error = ServiceUnreachable(
                    0, ServiceUnreachable.code, f"the append channel closed{said}"
                )
        except asyncio.CancelledError:
            link.closed = True
            raise
        except Exception as error:  # whatever broke, the frames must not hang
            link.error = link.error or ServiceUnreachable(
                0, ServiceUnreachable.code, f"the append channel broke: {error!r}"
            )
        link.closed = True
        link.ws.transport.abort()
        await self._recover(link, refused)

    async def _recover(self, link: Link, refused: ChannelUnavailable | None) -> None:
        """Resend `link`'s unanswered frames, in order, on a new link (or fail them; when
        the channel was `refused` to this key, their callers go over REST)."""
        error = link.error or ServiceUnreachable(0, ServiceUnreachable.code, "channel lost")
        async with self._lock:
            if self._link is link:
                self._link = None
            keep = link.survivors(error, self.connection.retry.attempts)
            link.frames.clear()
            if not keep:
                return
            if refused is not None:
                for frame in keep:  # their callers send them over REST (same first_seq)
                    frame.future.set_exception(refused)
                return
            log.warning(
                "the append channel %s dropped (%s); resending %d frame(s)",
                self.url,
                error.detail,
                len(keep),
            )
            try:
                await self._resend(keep)
            except ChannelUnavailable as unavailable:
                for frame in keep:  # their callers send them over REST (same first_seq)
                    if not frame.future.done():
                        frame.future.set_exception(unavailable)
            except Exception as failure:  # never leave a caller waiting
                detail = f"resending failed: {failure!r}"
                for frame in keep:
                    if not frame.future.done() and frame.link is link:
                        frame.future.set_exception(
                            ServiceUnreachable(0, ServiceUnreachable.code, detail)
                        )

    async def _resend(self, keep: list[Frame]) -> None:
        """After the backoff, `keep` on the current link or a new one, in their order."""
        await asyncio.sleep(self.connection.retry.delay(keep[0].sends - 1))
        current = self._link
        new = current if current is not None and not current.closed else await self._open()
        self.reconnects += 1
        for frame in keep:
            if not frame.future.done():
                self.resent += 1
                await self._put(new, frame)

    async def aclose(self) -> None:
        """Close the WebSocket; later appends go over REST."""
        self._closed = True
        link, self._link = self._link, None
        if link is None or link.closed:
            return
        link.closed = True
        try:
            if self._loop is asyncio.get_running_loop():
                await link.ws.close()
        except (ConnectionClosed, OSError):  # pragma: no cover - closing anyway
            pass
        if link.reader is not None:
            link.reader.cancel()
