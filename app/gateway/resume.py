"""A `Last-Event-ID` reconnect, answered from the log (never forwarded to the upstream).

The claim is decided by the Resume table (`LiveReads.follow`: the same audit entry,
metrics and explain as any resume), after one rule of the gateway's own: a claim whose
generation is not a stream of the caller's scope — another MCP session's, or the same
session's under another credential (`app.gateway.names`) — is `invalid` /
`cross_session`, and nothing of that stream is sent (audited like a table decision:
the decision log, `eventlog_resume_verdicts_total`, the warning log).

- `resume`: the messages after the claim (priming events skipped, split messages joined),
  then the rest live as it is recorded — by whichever replica reads the upstream — until
  the terminal event; then the response ends.
- `reset`: an SSE response with one JSON-RPC error for the request, `-32010`,
  `data: {"verdict": "reset", "reason", "discard_client_state": true}`.
- `invalid`: the same with `"verdict": "invalid"` when the request is known (the claimed
  stream names it). A claim that names no stream (`malformed_id`, `unknown_generation`)
  cannot say which request waits on it: every unanswered request of the caller's MCP
  session — its recorded streams whose generation is not terminal, read from the log, so
  on any replica — gets that refusal, in one SSE response, so the official clients fail
  the request they wait on at once; a caller with no session, or none unanswered, gets
  problem+json (`malformed_id` 400, `unknown_generation` 404).

The standalone GET stream has no request to fail: a claim of it gets what it missed from
the log, then a fresh standalone stream of the upstream (`_standalone`); a reconnect that
missed nothing is its normal course, not audited as a resume decision.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Awaitable, Callable

from mcp_eventlog_client.convention import (
    GET_STREAM,
    Reassembly,
    StreamNames,
    Unjoinable,
    request_id_of,
)
from starlette.responses import Response

from app.api.problems import problem
from app.api.routes.live import EventStreamResponse
from app.bootstrap import Container
from app.domain.decision import Reason, ScopeReason, Verdict
from app.domain.ids import EventId, StreamKey, format_event_id, parse_event_id
from app.domain.outcomes import Decided
from app.errors import InvalidClaim
from app.event_stream import event_text
from app.gateway import messages
from app.gateway.metrics import GatewayMetrics
from app.gateway.scopes import Caller
from app.service.frames import EndFrame, EventFrame, Heartbeat, ResetFrame
from app.service.live import Follow
from app.service.reading import Reading

CROSS_SESSION = ScopeReason.CROSS_SESSION.value
STANDALONE = "standalone"  # the gateway's count of standalone reconnects that miss nothing
MAX_UNANSWERED = 100  # the refusals one unresolvable claim carries at most
_PAGE = 200
_MAX_PAGES = 25


class Resumes:
    """Answers the gateway's `Last-Event-ID` reconnects (see the module)."""

    def __init__(
        self, container: Container, names: StreamNames, tenant: str, metrics: GatewayMetrics
    ) -> None:
        self._container = container
        self._names = names
        self._tenant = tenant
        self._metrics = metrics
        self._retry_ms = container.settings.live_retry_ms

    async def answer(
        self,
        claim: str,
        caller: Caller,
        standalone: Callable[[bytes], Awaitable[Response]],
    ) -> Response:
        """The response to a GET carrying the claim `claim`, from `caller`;
        `standalone(replayed)` opens a fresh standalone stream after the bytes replayed."""
        parsed = parse_event_id(claim)
        stream_id = None
        if parsed is not None:
            step = await self._container.reads.step(
                parsed.token, tenant=self._tenant, after=0, limit=1
            )
            stream_id = None if step.generation is None else step.generation.stream_id
        if stream_id is None:  # malformed, or a token the log does not know
            reading = await self._container.eventlog.resume(
                self._tenant, claim, asked_stream=None, limit=1
            )
            reason = reading.decision.reason.value
            self._metrics.resumes.labels("invalid", reason).inc()
            return await self._unresolvable(caller, reason, reading.decision.detail)
        named = self._names.parse(stream_id)
        if named is None or not caller.owns(named[0]):
            return self._cross_session(claim, parsed, stream_id, named)
        sdk_stream = named[1]
        if sdk_stream == GET_STREAM:
            return await self._standalone(claim, stream_id, standalone)
        try:
            follow = await self._container.live.follow(self._tenant, stream_id, claim)
        except InvalidClaim as invalid:
            self._metrics.resumes.labels("invalid", invalid.code).inc()
            return self._refuse(sdk_stream, "invalid", invalid.code, invalid.detail)
        assert follow.reading is not None  # a read with a claim is always decided
        decision = follow.reading.decision
        self._metrics.resumes.labels(decision.verdict.value, decision.reason.value).inc()
        if decision.verdict is not Verdict.RESUME:
            follow.close()
            if decision.reason is Reason.ABANDONED:
                return _sse(_abandoned(sdk_stream))
            return self._refuse(
                sdk_stream, decision.verdict.value, decision.reason.value, decision.detail
            )
        return EventStreamResponse(self._bodies(follow, sdk_stream), follow.close, self._retry_ms)

    def _cross_session(
        self, claim: str, parsed: EventId | None, stream_id: str, named: tuple[str, str] | None
    ) -> Response:
        """A claim of a stream outside the caller's scope: refused `invalid` /
        `cross_session`, and audited like a decision of the table (the decision log, the
        verdict metric, the warning): such a claim is a bug or a spoof."""
        self._metrics.resumes.labels("invalid", CROSS_SESSION).inc()
        self._container.observer.decided(
            Decided(
                tenant=self._tenant,
                stream_id=stream_id,
                last_event_id=claim,
                verdict=Verdict.INVALID,
                reason=ScopeReason.CROSS_SESSION,
                generation=None if parsed is None else parsed.token,
                delivered=0,
            )
        )
        detail = "the id belongs to another MCP session (or another credential)"
        if named is None or named[1] == GET_STREAM:  # no request to fail
            return problem(CROSS_SESSION, detail, members={"verdict": "invalid"})
        return self._refuse(named[1], "invalid", CROSS_SESSION, detail)

    async def _unresolvable(self, caller: Caller, reason: str, detail: str) -> Response:
        """A claim that names no stream: every unanswered request of the caller's session
        fails with the refusal (the client waits on one of them, and which one the claim
        cannot say); with no session, or none unanswered, problem+json."""
        scope = caller.session_scope
        unanswered = [] if scope is None else await self._unanswered(scope)
        if not unanswered:
            return problem(reason, detail, members={"verdict": "invalid"})
        body = b"".join(_refusal(sdk, "invalid", reason, detail) for sdk in unanswered)
        return _sse(body)

    async def _unanswered(self, scope: str) -> list[str]:
        """The SDK streams of the requests of `scope` whose recording has no answer yet
        (current generation not terminal), read from the log: the same on every replica.
        At most `MAX_UNANSWERED`, among the session's first `_PAGE * _MAX_PAGES` streams by
        name: a bad claim costs a bounded read however long the session has run."""
        found: list[str] = []
        after: StreamKey | None = None
        prefix = self._names.name(scope, "")
        for _ in range(_MAX_PAGES):
            page = await self._container.admin.streams(
                prefix=prefix, tenant=self._tenant, after=after, limit=_PAGE
            )
            for record in page:
                named = self._names.parse(record.stream_id)
                current = record.current
                if named is None or named[1] == GET_STREAM or current is None:
                    continue  # the standalone stream has no request; a hashed id unknown here
                if not current.terminal:
                    found.append(named[1])
            if len(page) < _PAGE or len(found) >= MAX_UNANSWERED:
                break
            after = StreamKey(self._tenant, page[-1].stream_id)
        return found[:MAX_UNANSWERED]

    async def _standalone(
        self, claim: str, stream_id: str, standalone: Callable[[bytes], Awaitable[Response]]
    ) -> Response:
        """The standalone stream: what the claim missed (one page of it), then a fresh one.

        Its recording ended when its client left, so there is no live rest to follow; a
        reset asks nothing of the client (no request waits on this stream): it just gets
        the fresh stream. `invalid` is a problem, so the client stops reconnecting.

        A claim that misses nothing — the client held every message of that stream when it
        ended (its generation is terminal at or before the claim, or still open with
        nothing after it) — is the normal end of a standalone stream, not a resume
        decision: it is not audited (decision log, `eventlog_resume_verdicts_total`), only
        counted as `eventlog_gateway_resumes_total{verdict="resume",reason="standalone"}`.
        Every other claim is audited as the table decided it.
        """
        reading = await self._container.reads.decide(
            claim,
            tenant=self._tenant,
            asked_stream=stream_id,
            limit=self._container.settings.default_page_limit,
        )
        decision = reading.decision
        if _continues(reading, claim):
            self._metrics.resumes.labels("resume", STANDALONE).inc()
        else:
            self._container.observer.decided(reading.outcome(self._tenant, claim))
            self._metrics.resumes.labels(decision.verdict.value, decision.reason.value).inc()
        if decision.verdict is Verdict.INVALID:
            return problem(decision.reason.value, decision.detail, members={"verdict": "invalid"})
        replayed: list[bytes] = []
        if decision.verdict is Verdict.RESUME and reading.page is not None:
            joined = Reassembly()
            for event in reading.page.events:
                try:
                    message = joined.feed(event.event, event.data)
                except Unjoinable:
                    break
                if message is not None:
                    token = reading.delivered.token if reading.delivered else ""
                    event_id = format_event_id(token, event.seq)
                    replayed.append(event_text(message, id=event_id).encode())
        return await standalone(b"".join(replayed))

    def _refuse(self, sdk_stream: str, verdict: str, reason: str, detail: str) -> Response:
        return _sse(_refusal(sdk_stream, verdict, reason, detail))

    async def _bodies(self, follow: Follow, sdk_stream: str) -> AsyncGenerator[bytes]:
        joined = Reassembly()
        async for batch in self._container.live.frames(follow):
            out: list[bytes] = []
            for frame in batch:
                if isinstance(frame, EventFrame):
                    try:
                        message = joined.feed(frame.event, frame.data)
                    except Unjoinable as cut:
                        out.append(_refusal(sdk_stream, "invalid", "mid_message", cut.detail))
                        yield b"".join(out)
                        return
                    if message is not None:
                        event_id = format_event_id(frame.token, frame.seq)
                        out.append(event_text(message, id=event_id).encode())
                elif isinstance(frame, ResetFrame) and frame.reason is Reason.ABANDONED:
                    out.append(_abandoned(sdk_stream))
                    yield b"".join(out)
                    return
                elif isinstance(frame, ResetFrame):
                    detail = "the recorded stream was reset while it was followed"
                    out.append(_refusal(sdk_stream, "reset", frame.reason.value, detail))
                    yield b"".join(out)
                    return
                elif isinstance(frame, EndFrame):
                    yield b"".join(out)
                    return
                elif isinstance(frame, Heartbeat):
                    out.append(b": keep-alive\n")
            if out:
                yield b"".join(out)


def _continues(reading: Reading, claim: str) -> bool:
    """Whether a claim of a standalone stream misses nothing of it (see `_standalone`)."""
    parsed = parse_event_id(claim)
    claimed = reading.claimed
    if parsed is None or claimed is None:
        return False
    decision = reading.decision
    if decision.verdict is Verdict.RESUME:
        return parsed.seq >= claimed.tail_seq
    if decision.verdict is Verdict.RESET and decision.reason is Reason.TERMINAL:
        return claimed.terminal_seq is not None and parsed.seq >= claimed.terminal_seq
    return False


def _sse(body: bytes) -> Response:
    return Response(
        body,
        media_type="text/event-stream",
        headers={"cache-control": "no-cache", "x-accel-buffering": "no"},
    )


def _abandoned(sdk_stream: str) -> bytes:
    """A followed recording whose replica died (its lease ran out): the request's answer
    will never be recorded, so the client gets the error of a lost recording, -32011."""
    detail = "the replica recording this response stopped renewing its lease"
    return event_text(messages.recording_abandoned(request_id_of(sdk_stream), detail)).encode()


def _refusal(sdk_stream: str, verdict: str, reason: str, detail: str) -> bytes:
    request_id = request_id_of(sdk_stream)
    data = messages.refusal(request_id, verdict, reason, detail, known=sdk_stream != GET_STREAM)
    return event_text(data).encode()
