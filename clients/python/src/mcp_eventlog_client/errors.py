"""The client's one error tree: every failure of a call is an `EventLogError`.

```
EventLogError                 status, code, detail (programs match on the class or `.code`)
├── ServiceRefusal            the service answered a problem (RFC 9457) with a stable `code`:
│   ├── Superseded, TerminalGeneration, SeqConflict, ... one class per code of
│   │   tests/fixtures/problem-codes.json (`http_status` is the status it documents)
│   └── (a code this client does not know yet is a bare `ServiceRefusal`)
├── HttpError                 a non-2xx answer without a problem body (a proxy's error page)
├── ServiceUnreachable        no answer: connection refused or broken (status 0)
│   └── DeadlineExceeded      no whole answer within the attempt's deadline (status 0)
└── UntrustedResponse         an answer this client will not act on (status: the answer's)
    ├── Redirected            a 3xx: never followed (the event data would go to another host)
    ├── UnexpectedContentType not the media type the route answers with (HTML from a proxy)
    ├── ResponseTooLarge      the decoded body (or one SSE line) is over the client's cap
    └── MalformedResponse     not JSON, a field missing or of the wrong type, a broken SSE frame
```

A newer service never breaks an older client: an unknown code maps to `ServiceRefusal`.
Which codes the service answers with, and their statuses, is one fact kept in
`tests/fixtures/problem-codes.json`; `tests/client/test_errors.py` checks this table against it.
"""

from __future__ import annotations

from typing import ClassVar


class EventLogError(Exception):
    """A request the event-log service refused, or that got no answer this client trusts.

    `status` is the HTTP status (0 when no response arrived), `code` the stable code,
    `detail` a human-readable explanation.
    """

    code: str = "error"

    def __init__(self, status: int, code: str, detail: str) -> None:
        super().__init__(f"{status} {code}: {detail}")
        self.status = status
        self.code = code
        self.detail = detail
        self.retry_after: float | None = None
        """Seconds the service asked to wait (`Retry-After`), when it did."""


class ServiceRefusal(EventLogError):
    """The service refused the request with a problem `code` (one subclass per code)."""

    code = "refused"
    http_status: ClassVar[int] = 0
    """The status the service documents for this code."""


class Superseded(ServiceRefusal):
    """409: the generation is no longer its stream's current one; its appends are fenced."""

    code = "superseded"
    http_status = 409


class TerminalGeneration(ServiceRefusal):
    """409: the generation is finished; nothing more can be appended to it."""

    code = "terminal"
    http_status = 409


class Abandoned(ServiceRefusal):
    """409: the writer's lease ran out and the generation was abandoned; it is fenced."""

    code = "abandoned"
    http_status = 409


class SeqConflict(ServiceRefusal):
    """409: the batch overlaps stored events with different content (or unverifiable ones)."""

    code = "seq_conflict"
    http_status = 409


class SeqGap(ServiceRefusal):
    """409: `first_seq` is beyond `tail_seq + 1`."""

    code = "seq_gap"
    http_status = 409


class BeyondTail(ServiceRefusal):
    """409: a page was asked for after a seq the generation never reached."""

    code = "beyond_tail"
    http_status = 409


class MalformedId(ServiceRefusal):
    """400: a live read's claim is not `<token>:<seq>` (its verdict is `invalid`)."""

    code = "malformed_id"
    http_status = 400


class CrossStream(ServiceRefusal):
    """409: a live read's claim names a generation of another stream (`invalid`)."""

    code = "cross_stream"
    http_status = 409


class AmbiguousStream(ServiceRefusal):
    """409: the request names a stream ambiguously."""

    code = "ambiguous_stream"
    http_status = 409


class NotAcceptable(ServiceRefusal):
    """406: the request accepts none of the media types the route answers with."""

    code = "not_acceptable"
    http_status = 406


class TooManyReaders(ServiceRefusal):
    """503: the service process already serves as many live readers as it may."""

    code = "too_many_readers"
    http_status = 503


class TooManyPages(ServiceRefusal):
    """503: the service process already sends as many pages of events as it may; retry."""

    code = "too_many_pages"
    http_status = 503


class UnknownGeneration(ServiceRefusal):
    """404: no generation has this token (for this tenant)."""

    code = "unknown_generation"
    http_status = 404


class UnknownStream(ServiceRefusal):
    """404: no stream has this id (for this tenant)."""

    code = "unknown_stream"
    http_status = 404


class UnknownTask(ServiceRefusal):
    """404: no task of this id the caller may see (never issued, expired, or another's)."""

    code = "unknown_task"
    http_status = 404


class UnknownAttempt(ServiceRefusal):
    """409: the worker's `attempt` of a task was never started."""

    code = "unknown_attempt"
    http_status = 409


class InvalidTransition(ServiceRefusal):
    """409: a task status change its current status does not allow (`working → working`)."""

    code = "invalid_transition"
    http_status = 409


class NotFound(ServiceRefusal):
    """404: no such route."""

    code = "not_found"
    http_status = 404


class Evicted(ServiceRefusal):
    """410: events in the requested range were evicted; the service never skips them."""

    code = "evicted"
    http_status = 410


class Expired(ServiceRefusal):
    """410: the generation's events were purged by its time to live (409 on an append)."""

    code = "expired"
    http_status = 410


class EventTooLarge(ServiceRefusal):
    """413: an event's data is over the service's limit."""

    code = "event_too_large"
    http_status = 413


class BatchTooLarge(ServiceRefusal):
    """413: a batch holds more events than the service accepts at once."""

    code = "batch_too_large"
    http_status = 413


class BodyTooLarge(ServiceRefusal):
    """413: the request body is over the service's limit."""

    code = "body_too_large"
    http_status = 413


class BodyTimeout(ServiceRefusal):
    """408: the request body arrived too slowly."""

    code = "body_timeout"
    http_status = 408


class HeaderTimeout(ServiceRefusal):
    """408: the request's head (request line and headers) arrived too slowly."""

    code = "header_timeout"
    http_status = 408


class HeadersTooLarge(ServiceRefusal):
    """431: the request's headers are over the service's size or count limit."""

    code = "headers_too_large"
    http_status = 431


class ReservedEventType(ServiceRefusal):
    """422: an event's type is one the service's live reads use for control events."""

    code = "reserved_event_type"
    http_status = 422


class TooManyConnections(ServiceRefusal):
    """503: the service holds as many connections as it may; retry later."""

    code = "too_many_connections"
    http_status = 503


class UnsupportedMediaType(ServiceRefusal):
    """415: the body was not declared as JSON."""

    code = "unsupported_media_type"
    http_status = 415


class InvalidJson(ServiceRefusal):
    """422: the body is not valid JSON."""

    code = "invalid_json"
    http_status = 422


class ValidationFailed(ServiceRefusal):
    """422: the request does not match the schema or breaks a rule of the contract."""

    code = "validation_error"
    http_status = 422


class Unauthorized(ServiceRefusal):
    """401: no key, or a key the service does not know."""

    code = "unauthorized"
    http_status = 401


class Forbidden(ServiceRefusal):
    """403: the key's scope does not allow this request."""

    code = "forbidden"
    http_status = 403


class DatabaseUnavailable(ServiceRefusal):
    """503: the service's database is unreachable or locked; nothing was stored."""

    code = "database_unavailable"
    http_status = 503


class StorageFailed(ServiceRefusal):
    """500: the service's database failed; nothing was stored."""

    code = "storage_error"
    http_status = 500


class InternalError(ServiceRefusal):
    """500: an unexpected error in the service."""

    code = "internal_error"
    http_status = 500


class BadRequest(ServiceRefusal):
    """400: the request is not well-formed for this route (two `Last-Event-ID` headers, say)."""

    code = "bad_request"
    http_status = 400


class MethodNotAllowed(ServiceRefusal):
    """405: the route does not answer this HTTP method."""

    code = "method_not_allowed"
    http_status = 405


class HostNotAllowed(ServiceRefusal):
    """421: the `Host` names no host the service answers as."""

    code = "host_not_allowed"
    http_status = 421


class OriginNotAllowed(ServiceRefusal):
    """403: a browser page of another origin sent the request."""

    code = "origin_not_allowed"
    http_status = 403


class Overloaded(ServiceRefusal):
    """503: the service process holds as many request bodies as it may; retry later."""

    code = "overloaded"
    http_status = 503


class SchemaNotCurrent(ServiceRefusal):
    """503: (`/readyz`) the database schema is not at the newest migration."""

    code = "schema_not_current"
    http_status = 503


class BackgroundTaskDown(ServiceRefusal):
    """503: (`/readyz`) a background task of the service is not running."""

    code = "background_task_down"
    http_status = 503


class CrossSession(ServiceRefusal):
    """409: (the gateway) a claim of another MCP session or another credential (`invalid`)."""

    code = "cross_session"
    http_status = 409


class UpstreamUnavailable(ServiceRefusal):
    """502: (the gateway) its upstream MCP server is unreachable or failed before answering."""

    code = "upstream_unavailable"
    http_status = 502


class UpstreamUnreachable(ServiceRefusal):
    """503: (the gateway's `/readyz`) its upstream MCP server does not answer."""

    code = "upstream_unreachable"
    http_status = 503


class HttpError(EventLogError):
    """A non-2xx answer without a problem body (a proxy's or a load balancer's page)."""

    code = "http_error"


class ServiceUnreachable(EventLogError):
    """No response arrived (connection refused, timeout, broken connection), after retries.

    `status` is 0; the underlying error is the exception's `__cause__`.
    """

    code = "unreachable"


class DeadlineExceeded(ServiceUnreachable):
    """The answer did not arrive whole within the attempt's deadline (a service that drips).

    The deadline is for the whole attempt (connect, send, every read of the body), not per
    read: a service sending one byte a second cannot hold a call for longer.
    """

    code = "timeout"


class UntrustedResponse(EventLogError):
    """An answer this client will not act on; `status` is the answer's HTTP status."""

    code = "bad_response"


class Redirected(UntrustedResponse):
    """The service answered a redirect: never followed, the request's data stays here."""

    code = "redirected"


class UnexpectedContentType(UntrustedResponse):
    """The answer is not of the media type the route answers with (HTML from a captive
    proxy, a mistyped `EVENTLOG_URL`)."""

    code = "unexpected_content_type"


class ResponseTooLarge(UntrustedResponse):
    """The decoded answer (a gzip bomb is cut too) or one SSE line is over the client's cap."""

    code = "response_too_large"


class MalformedResponse(UntrustedResponse):
    """The answer is not what the contract says: not JSON, a field missing or of the wrong
    type, a broken SSE frame."""

    code = "malformed_response"


def _refusals(root: type[ServiceRefusal]) -> dict[str, type[ServiceRefusal]]:
    table: dict[str, type[ServiceRefusal]] = {}
    for cls in root.__subclasses__():
        table[cls.code] = cls
        table.update(_refusals(cls))
    return table


_BY_CODE: dict[str, type[ServiceRefusal]] = _refusals(ServiceRefusal)


def refusal_classes() -> dict[str, type[ServiceRefusal]]:
    """Every problem code this client knows, with its class."""
    return dict(_BY_CODE)


def error_for(status: int, code: str, detail: str) -> EventLogError:
    """The exception for a problem `code`; `ServiceRefusal` for a code this client lacks."""
    return _BY_CODE.get(code, ServiceRefusal)(status, code, detail)
