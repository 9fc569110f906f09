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
  stream names it); else problem+json (`malformed_id` 400, `unknown_generation` 404).

The standalone GET stream has no request to fail: a claim of it gets what it missed from
the log, then a fresh standalone stream of the upstream (`_standalone`).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Awaitable, Callable

from starlette.responses import Response

from app.api.live import EventStreamResponse
from app.api.problems import problem
from app.bootstrap import Container
from app.domain.decision import ScopeReason, Verdict
from app.domain.ids import parse_event_id
from app.domain.outcomes import Decided
from app.errors import InvalidClaim
from app.gateway import messages, sse
from app.gateway.metrics import GatewayMetrics
from app.gateway.names import GET_STREAM, Caller, StreamNames, request_id_of
from app.service.frames import EndFrame, EventFrame, Heartbeat, ResetFrame
from app.service.live import Follow

CROSS_SESSION = ScopeReason.CROSS_SESSION.value


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
            return problem(reason, reading.decision.detail, members={"verdict": "invalid"})
        named = self._names.parse(stream_id)
        if named is None or not caller.owns(named[0]):
            self._metrics.resumes.labels("invalid", CROSS_SESSION).inc()
            # Audited like a decision of the table (the decision log, the verdict metric,
            # the warning): a claim of another session's stream is a bug or a spoof.
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
            return self._refuse(
                sdk_stream, decision.verdict.value, decision.reason.value, decision.detail
            )
        return EventStreamResponse(self._bodies(follow, sdk_stream), follow.close, self._retry_ms)

    async def _standalone(
        self, claim: str, stream_id: str, standalone: Callable[[bytes], Awaitable[Response]]
    ) -> Response:
        """The standalone stream: what the claim missed (one page of it), then a fresh one.

        Its recording ended when its client left, so there is no live rest to follow; a
        reset asks nothing of the client (no request waits on this stream): it just gets
        the fresh stream. `invalid` is a problem, so the client stops reconnecting.
        """
        reading = await self._container.eventlog.resume(
            self._tenant,
            claim,
            asked_stream=stream_id,
            limit=self._container.settings.default_page_limit,
        )
        decision = reading.decision
        self._metrics.resumes.labels(decision.verdict.value, decision.reason.value).inc()
        if decision.verdict is Verdict.INVALID:
            return problem(decision.reason.value, decision.detail, members={"verdict": "invalid"})
        replayed: list[bytes] = []
        if decision.verdict is Verdict.RESUME and reading.page is not None:
            joiner = messages.Joiner()
            for event in reading.page.events:
                try:
                    message = joiner.add(event.event, event.data)
                except messages.Unjoinable:
                    break
                if message is not None:
                    token = reading.delivered.token if reading.delivered else ""
                    replayed.append(sse.encode(message, id=f"{token}:{event.seq}"))
        return await standalone(b"".join(replayed))

    def _refuse(self, sdk_stream: str, verdict: str, reason: str, detail: str) -> Response:
        body = _refusal(sdk_stream, verdict, reason, detail)
        return Response(
            body,
            media_type="text/event-stream",
            headers={"cache-control": "no-cache", "x-accel-buffering": "no"},
        )

    async def _bodies(self, follow: Follow, sdk_stream: str) -> AsyncGenerator[bytes]:
        joiner = messages.Joiner()
        async for batch in self._container.live.frames(follow):
            out: list[bytes] = []
            for frame in batch:
                if isinstance(frame, EventFrame):
                    try:
                        message = joiner.add(frame.event, frame.data)
                    except messages.Unjoinable as cut:
                        out.append(_refusal(sdk_stream, "invalid", "mid_message", str(cut)))
                        yield b"".join(out)
                        return
                    if message is not None:
                        out.append(sse.encode(message, id=f"{frame.token}:{frame.seq}"))
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


def _refusal(sdk_stream: str, verdict: str, reason: str, detail: str) -> bytes:
    request_id = request_id_of(sdk_stream)
    data = messages.refusal(request_id, verdict, reason, detail, known=sdk_stream != GET_STREAM)
    return sse.encode(data)
