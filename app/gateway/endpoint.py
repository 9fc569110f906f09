"""The MCP endpoint: every request forwarded, every SSE response recorded (or answered).

- A GET with `Last-Event-ID` of a 2025-03-26 … 2025-11-25 session is answered from the
  log (`app.gateway.resume`); it never reaches the upstream with that header. A claim of
  the standalone GET stream gets what it missed from the log and then a fresh standalone
  stream of the upstream, recorded anew (that stream has no request to fail, and its old
  recording ended when its client left).
- Any other request goes to the upstream as it came (`app.gateway.upstream`); a JSON
  response comes back unchanged (decoded from any content coding the gateway reads), an SSE
  response is recorded into the log and relayed as it is stored
  (`app.gateway.recording`), with the log's ids.
- Requests of the 2026-07-28 revision and later (`MCP-Protocol-Version`) are forwarded
  unrecorded, streamed as they come; a `Last-Event-ID` on them is dropped.
- The upstream unreachable: 502 `upstream_unavailable`. A body over
  `EVENTLOG_MAX_BODY_BYTES` is refused 413 by the front door before anything is sent.

`Authorization` is forwarded and enters only the keyed hash of the session scope; it is
never logged or stored. The hash's key is `EVENTLOG_GATEWAY_SECRET`, else the one kept in
the database (`app.service.keys`), so every replica of one database names alike.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from collections.abc import AsyncGenerator, AsyncIterator

import httpx
from mcp_eventlog_client.convention import GET_STREAM, StreamNames, sdk_stream_of
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from app.api.routes.live import EventStreamResponse
from app.bootstrap import Container
from app.errors import UpstreamUnavailable
from app.gateway import messages
from app.gateway.keeper import LeaseKeeper
from app.gateway.metrics import GatewayMetrics
from app.gateway.recorder import Recorder
from app.gateway.recording import Recording, RecordingLimits
from app.gateway.relay import Backlog
from app.gateway.resume import Resumes
from app.gateway.scopes import Caller, Scopes
from app.gateway.task_host import TaskHost
from app.gateway.task_spec import TaskSpec
from app.gateway.upstream import (
    Upstream,
    decodable,
    forwarded,
    is_trusted,
    proxied,
    returned,
    trusted_networks,
)
from app.service.keys import SharedSecrets

log = logging.getLogger(__name__)

SSE_REVISION = "2025-11-25"  # the first revision whose streams start with a priming event
MODERN_REVISION = "2026-07-28"  # sessionless: no Last-Event-ID resumption, not recorded
SCOPE_KEY_NAME = "gateway.scope"  # the name the scopes' key is kept under in `secrets`
_RECONNECT_HEADERS = frozenset(
    {"authorization", "mcp-session-id", "mcp-protocol-version", "cookie"}
)


class Gateway:
    """The MCP endpoint (`handle` is a Starlette endpoint)."""

    def __init__(self, container: Container, upstream: Upstream, metrics: GatewayMetrics) -> None:
        settings = container.settings
        self._container = container
        self._settings = settings
        self._upstream = upstream
        self._metrics = metrics
        # The key of the scopes: the setting, else the database's (shared by every replica
        # of it, created by the first that asks), read once on the first request.
        self._keys = SharedSecrets(container.database)
        self._scopes: Scopes | None = None
        if settings.gateway_secret is not None:
            self._scopes = Scopes(settings.gateway_secret.encode())
        self._scopes_read = asyncio.Lock()
        self._names = StreamNames()
        self._tenant = settings.gateway_tenant
        self._producer = f"gateway:{socket.gethostname()}:{os.getpid()}"
        self._resumes = Resumes(container, self._names, self._tenant, metrics)
        self._recordings: set[Recording] = set()
        self._keeper = LeaseKeeper(
            container.eventlog.leases,
            self._tenant,
            settings.writer_lease_seconds / 3,
            self._recorded_tokens,
        )
        self._trusted_proxies = trusted_networks(settings.gateway_trusted_proxies)
        self._limits = RecordingLimits(
            max_event=settings.gateway_max_event_bytes,
            reconnects=settings.gateway_reconnects,
            max_retry_ms=settings.gateway_max_retry_ms,
            max_event_bytes=settings.max_event_bytes,
            fence_seconds=settings.gateway_fence_seconds,
        )
        self._stop_deadline: float | None = None  # the loop's time the grace ends
        self._stop_timer: asyncio.TimerHandle | None = None
        self._task_host: TaskHost | None = None
        if settings.gateway_tasks:
            self._task_host = TaskHost(
                TaskSpec.parse(settings.gateway_tasks),
                container.tasks,
                container.eventlog,
                upstream,
                self._tenant,
                settings.writer_lease_seconds,
            )

    @property
    def upstream(self) -> Upstream:
        """The upstream's client."""
        return self._upstream

    async def handle(self, request: Request) -> Response:
        if self._scopes is None:
            await self._read_scopes()
        version = request.headers.get("mcp-protocol-version")
        revision = version or "unknown"
        modern = version is not None and version >= MODERN_REVISION
        claim = request.headers.get("last-event-id") or None
        if request.method == "GET" and claim is not None and not modern:
            caller = self._caller(request, request.headers.get("mcp-session-id"))
            self._metrics.requests.labels("GET", "resume", revision).inc()

            async def standalone(replayed: bytes) -> Response:
                return await self._forward(request, version, replayed)

            return await self._resumes.answer(claim, caller, standalone)
        return await self._forward(request, version)

    async def _forward(
        self, request: Request, version: str | None, replayed: bytes = b""
    ) -> Response:
        """Forward the request; record its SSE response (after `replayed`, the messages of
        a standalone stream's earlier recording the client missed)."""
        revision = version or "unknown"
        modern = version is not None and version >= MODERN_REVISION
        body = await request.body() if request.method in ("POST", "PUT", "PATCH") else b""
        peer = request.client.host if request.client is not None else None
        headers = proxied(
            forwarded(request.headers.items()),
            peer=peer,
            scheme=request.url.scheme,
            host=request.headers.get("host"),
            trusted=is_trusted(peer, self._trusted_proxies),
        )
        if modern and request.method == "POST" and self._task_host is not None:
            assert self._scopes is not None  # read by `handle` before anything else
            principal = self._scopes.principal(request.headers.get("authorization"))
            hosted = await self._task_host.answer(body, headers, principal)
            if hosted is not None:
                self._metrics.requests.labels("POST", str(hosted.status_code), revision).inc()
                return hosted
        try:
            response = await self._upstream.open(
                request.method,
                headers,
                body,
                request.url.query,
            )
        except UpstreamUnavailable:
            self._metrics.upstream_errors.labels("unreachable").inc()
            self._metrics.requests.labels(request.method, "502", revision).inc()
            raise
        if self._upstream.last_latency is not None:
            self._metrics.upstream_latency.observe(self._upstream.last_latency)
        self._metrics.requests.labels(request.method, str(response.status_code), revision).inc()
        content_type = response.headers.get("content-type", "")
        if (
            modern
            or response.status_code != 200
            or not content_type.startswith("text/event-stream")
        ):
            return _passed_through(response)
        if not decodable(response.headers):
            log.warning(
                "an SSE response in a coding the gateway does not read (%s) is relayed unrecorded",
                response.headers["content-encoding"],
            )
            return _passed_through(response)
        requests = messages.requests_in(body)
        if request.method == "POST" and not requests:
            return _passed_through(response)
        return self._record(request, response, requests, version, replayed)

    async def _read_scopes(self) -> None:
        async with self._scopes_read:
            if self._scopes is None:
                secret = await self._keys.value(SCOPE_KEY_NAME)
                self._scopes = Scopes(secret.encode())

    def _caller(self, request: Request, session_id: str | None) -> Caller:
        assert self._scopes is not None  # read by `handle` before anything else
        return Caller(self._scopes, session_id, request.headers.get("authorization"))

    def _scope(self, request: Request, session_id: str | None) -> str:
        """The scope a response is recorded under: its session's, or one of its own."""
        return self._caller(request, session_id).recording_scope()

    def _record(
        self,
        request: Request,
        response: httpx.Response,
        requests: list[dict[str, object]],
        version: str | None,
        replayed: bytes,
    ) -> Response:
        session_id = response.headers.get("mcp-session-id") or request.headers.get("mcp-session-id")
        request_id = requests[0]["id"] if requests else None
        sdk_stream = GET_STREAM if request_id is None else sdk_stream_of(request_id)
        stream_id = self._names.name(self._scope(request, session_id), sdk_stream)
        s = self._settings
        recorder = Recorder(
            self._container.eventlog,
            tenant=self._tenant,
            stream_id=stream_id,
            producer=self._producer,
            max_batch_events=s.max_batch_events,
            on_unstored=lambda count, _why: self._metrics.unstored.inc(count),
            on_stored=self._metrics.recorded.inc,
        )
        reconnect = [(n, v) for n, v in request.headers.items() if n.lower() in _RECONNECT_HEADERS]
        if session_id is not None and not any(n.lower() == "mcp-session-id" for n, _ in reconnect):
            reconnect.append(("mcp-session-id", session_id))
        reconnect.append(("accept", "text/event-stream"))
        recording = Recording(
            upstream=self._upstream,
            response=response,
            recorder=recorder,
            request_ids=[r["id"] for r in requests],
            reconnect_headers=reconnect,
            prime=_primes(version, requests),
            limits=self._limits,
            on_lost=lambda kind: self._metrics.upstream_errors.labels("lost").inc(),
            backlog=Backlog(
                self._container.reads,
                tenant=self._tenant,
                limit=s.gateway_relay_buffer_bytes,
                page_events=s.default_page_limit,
                page_bytes=s.live_page_bytes,
            ),
        )
        self._recordings.add(recording)
        self._metrics.recordings.inc()
        self._keeper.ensure_running()
        recording.start()
        assert recording.task is not None
        recording.task.add_done_callback(lambda _task: self._finished(recording))
        relayed = EventStreamResponse(
            _after(replayed, recording.relay()), lambda: None, s.live_retry_ms
        )
        relayed.headers.update(returned(response.headers))
        return relayed

    def _recorded_tokens(self) -> list[str]:
        """The generations of the recordings still going, whose leases the keeper renews."""
        recorders = (r.recorder for r in self._recordings)
        return [r.token for r in recorders if r.token is not None and not r.terminal]

    def _finished(self, recording: Recording) -> None:
        self._recordings.discard(recording)
        self._metrics.recordings.dec()

    def stopping(self) -> None:
        """The process was told to stop (SIGTERM): the standalone streams, which never end
        by themselves, end now; the calls in flight have the grace period to finish, then
        those still unfinished are failed with `-32011` (`upstream_lost`), relayed to their
        clients — so every relay has ended, and uvicorn stops waiting, by the grace."""
        if self._stop_deadline is not None:
            return
        loop = asyncio.get_running_loop()
        grace = self._settings.gateway_shutdown_grace_seconds
        self._stop_deadline = loop.time() + grace
        calls = sum(not r.standalone for r in self._recordings)
        log.info("waiting up to %s s for %d recording(s) to finish", grace, calls)
        for recording in list(self._recordings):
            if recording.standalone and recording.task is not None:
                recording.task.cancel()
        self._stop_timer = loop.call_later(grace, self._cut_unfinished)

    def _cut_unfinished(self) -> None:
        for recording in list(self._recordings):
            if recording.task is not None and not recording.task.done():
                recording.task.cancel()  # the recording stores and relays its -32011

    async def close(self) -> None:
        """Finish the in-flight recordings (up to the grace period, counted from the stop
        signal when there was one); the rest are marked `upstream_lost` (their clients get
        the -32011 error); then close the upstream."""
        loop = asyncio.get_running_loop()
        grace = self._settings.gateway_shutdown_grace_seconds
        deadline = self._stop_deadline or loop.time() + grace
        if self._stop_timer is not None:
            self._stop_timer.cancel()
        tasks = [r.task for r in self._recordings if r.task is not None]
        if tasks:
            log.info("waiting for %d recording(s) to finish", len(tasks))
            _done, pending = await asyncio.wait(tasks, timeout=max(0.0, deadline - loop.time()))
            for task in pending:
                task.cancel()
            for task in pending:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        await self._keeper.stop()
        if self._task_host is not None:
            await self._task_host.close(max(0.0, deadline - loop.time()))
        await self._upstream.aclose()


def _primes(version: str | None, requests: list[dict[str, object]]) -> bool:
    """Whether the session's revision is 2025-11-25 (or a later one with sessions)."""
    if version is None and requests and requests[0].get("method") == "initialize":
        params = requests[0].get("params")
        asked = params.get("protocolVersion") if isinstance(params, dict) else None
        version = asked if isinstance(asked, str) else None
    return version is not None and SSE_REVISION <= version < MODERN_REVISION


async def _after(first: bytes, rest: AsyncGenerator[bytes]) -> AsyncGenerator[bytes]:
    try:
        if first:
            yield first
        async for body in rest:
            yield body
    finally:
        await rest.aclose()


def _passed_through(response: httpx.Response) -> Response:
    """The upstream's response as it is produced (JSON unchanged, SSE event by event)."""
    return StreamingResponse(
        _raw(response),
        status_code=response.status_code,
        headers=returned(response.headers),
        background=BackgroundTask(response.aclose),
    )


async def _raw(response: httpx.Response) -> AsyncIterator[bytes]:
    # Decoded as `returned` labels it: in a coding the gateway reads, decoded; else raw.
    chunks = response.aiter_bytes() if decodable(response.headers) else response.aiter_raw()
    try:
        async for chunk in chunks:
            yield chunk
    except httpx.HTTPError as error:
        log.warning("upstream response broke off: %s", type(error).__name__)
    finally:  # the client may have left: the upstream's connection goes back at once
        await response.aclose()
