"""The service's problem codes as exception classes, each under the group that says
what a caller does next (`errors.py` draws the whole tree).

Written by `make codes` from the service's table (`app/api/problem_table.py`); do not
edit it here: `tests/api/test_code_tables.py` fails when this file is not what
`make codes` writes.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from mcp_eventlog_client.error_base import ServiceRefusal


class ConflictError(ServiceRefusal):
    """The request contradicts what is stored (a seq out of order, a claim past the tail or of
    another stream or session, a task change its status forbids): read the state again before
    deciding; the same request fails the same way."""


class BeyondTail(ConflictError):
    """409: a claim or a page after a seq the generation never reached."""

    code = "beyond_tail"
    http_status = 409


class CrossSession(ConflictError):
    """409: the gateway: a claim of another MCP session or another credential."""

    code = "cross_session"
    http_status = 409


class CrossStream(ConflictError):
    """409: a live read's claim names a generation of another stream."""

    code = "cross_stream"
    http_status = 409


class InvalidTransition(ConflictError):
    """409: a task status change the task's state does not allow."""

    code = "invalid_transition"
    http_status = 409


class SeqConflict(ConflictError):
    """409: the batch overlaps stored events with other content (or unverifiable ones)."""

    code = "seq_conflict"
    http_status = 409


class SeqGap(ConflictError):
    """409: first_seq is beyond tail_seq + 1."""

    code = "seq_gap"
    http_status = 409


class UnknownAttempt(ConflictError):
    """409: a task attempt number that was never started."""

    code = "unknown_attempt"
    http_status = 409


class NotFoundError(ServiceRefusal):
    """Nothing has that id for this key's tenant (or no such route): check the id."""


class NotFound(NotFoundError):
    """404: no such route (or console file)."""

    code = "not_found"
    http_status = 404


class UnknownGeneration(NotFoundError):
    """404: no generation has this token (for this tenant)."""

    code = "unknown_generation"
    http_status = 404


class UnknownStream(NotFoundError):
    """404: no stream has this id (for this tenant)."""

    code = "unknown_stream"
    http_status = 404


class UnknownTask(NotFoundError):
    """404: no task of this id the caller may see (unknown, expired or another's)."""

    code = "unknown_task"
    http_status = 404


class GoneError(ServiceRefusal):
    """What was asked for was there and is no longer kept (evicted, expired): start over from
    what is kept; the service never skips it silently."""


class Evicted(GoneError):
    """410: events of the requested range were evicted (never skipped)."""

    code = "evicted"
    http_status = 410


class Expired(GoneError):
    """410: the generation's events were purged by its time to live (409: an append to a
    generation its time to live expired)."""

    code = "expired"
    http_status = 410


class TooLargeError(ServiceRefusal):
    """Over a size limit of the service: send less at once (smaller events, fewer events per
    batch, fewer or smaller headers)."""


class BatchTooLarge(TooLargeError):
    """413: a batch holds more events than EVENTLOG_MAX_BATCH_EVENTS."""

    code = "batch_too_large"
    http_status = 413


class BodyTooLarge(TooLargeError):
    """413: the body is over EVENTLOG_MAX_BODY_BYTES."""

    code = "body_too_large"
    http_status = 413


class EventTooLarge(TooLargeError):
    """413: an event's data is over EVENTLOG_MAX_EVENT_BYTES."""

    code = "event_too_large"
    http_status = 413


class HeadersTooLarge(TooLargeError):
    """431: a request's head is over EVENTLOG_MAX_HEADER_BYTES or EVENTLOG_MAX_HEADERS lines."""

    code = "headers_too_large"
    http_status = 431


class RetryLaterError(ServiceRefusal):
    """The service, its database or the gateway's upstream cannot take the request now (busy,
    starting, a slow body): nothing was stored; retry after a while, after `Retry-After` when
    the answer carries it."""


class BackgroundTaskDown(RetryLaterError):
    """503: readiness: a background task of the process is down."""

    code = "background_task_down"
    http_status = 503


class BodyTimeout(RetryLaterError):
    """408: the body did not arrive within EVENTLOG_BODY_TIMEOUT_SECONDS."""

    code = "body_timeout"
    http_status = 408


class DatabaseUnavailable(RetryLaterError):
    """503: the database is unreachable, restarting or busy; nothing was stored."""

    code = "database_unavailable"
    http_status = 503


class HeaderTimeout(RetryLaterError):
    """408: a request's head did not arrive within EVENTLOG_HEADER_TIMEOUT_SECONDS."""

    code = "header_timeout"
    http_status = 408


class Overloaded(RetryLaterError):
    """503: the process holds as many request bodies as it may."""

    code = "overloaded"
    http_status = 503


class SchemaNotCurrent(RetryLaterError):
    """503: readiness: the database schema is not the newest."""

    code = "schema_not_current"
    http_status = 503


class TooManyConnections(RetryLaterError):
    """503: the process holds EVENTLOG_MAX_CONNECTIONS connections."""

    code = "too_many_connections"
    http_status = 503


class TooManyPages(RetryLaterError):
    """503: the process sends as many pages of events at once as it may (count or bytes)."""

    code = "too_many_pages"
    http_status = 503


class TooManyReaders(RetryLaterError):
    """503: the process serves EVENTLOG_LIVE_MAX_READERS live readers."""

    code = "too_many_readers"
    http_status = 503


class UpstreamUnavailable(RetryLaterError):
    """502: the gateway's upstream MCP server is unreachable or failed before answering."""

    code = "upstream_unavailable"
    http_status = 502


class UpstreamUnreachable(RetryLaterError):
    """503: readiness: the gateway's upstream MCP server does not answer."""

    code = "upstream_unreachable"
    http_status = 503


class FencedError(ServiceRefusal):
    """This writer may no longer write the generation or task: it was superseded, finished or
    abandoned. Stop writing it; open a new generation if there is more to say."""


class Abandoned(FencedError):
    """409: the writer's lease ran out and the generation was abandoned (fenced)."""

    code = "abandoned"
    http_status = 409


class Superseded(FencedError):
    """409: a newer generation of the stream fenced this one."""

    code = "superseded"
    http_status = 409


class TerminalGeneration(FencedError):
    """409: the generation is finished; nothing more is appended."""

    code = "terminal"
    http_status = 409


class InvalidRequestError(ServiceRefusal):
    """The request itself is wrong (its body, media type, method, a value or an id): fix it; sent
    again unchanged it fails the same way."""


class AmbiguousStream(InvalidRequestError):
    """409: a stream id several tenants use, asked about without saying which tenant."""

    code = "ambiguous_stream"
    http_status = 409


class BadRequest(InvalidRequestError):
    """400: the framework could not read the request."""

    code = "bad_request"
    http_status = 400


class InvalidJson(InvalidRequestError):
    """422: the body is not strict UTF-8 JSON (or has a key twice)."""

    code = "invalid_json"
    http_status = 422


class MalformedId(InvalidRequestError):
    """400: a live read's claim is not <token>:<seq>."""

    code = "malformed_id"
    http_status = 400


class MethodNotAllowed(InvalidRequestError):
    """405: the route does not answer this method."""

    code = "method_not_allowed"
    http_status = 405


class NotAcceptable(InvalidRequestError):
    """406: the client accepts none of the route's media types."""

    code = "not_acceptable"
    http_status = 406


class ReservedEventType(InvalidRequestError):
    """422: an event's type is a control event name of live reads (reset, end)."""

    code = "reserved_event_type"
    http_status = 422


class UnsupportedMediaType(InvalidRequestError):
    """415: the body is not declared as JSON, or is encoded."""

    code = "unsupported_media_type"
    http_status = 415


class ValidationFailed(InvalidRequestError):
    """422: the request does not match the schema, or breaks a rule of the contract."""

    code = "validation_error"
    http_status = 422


class AccessDeniedError(ServiceRefusal):
    """The key, its scope, the `Host` or the `Origin` is not accepted: fix the caller's
    configuration, not the request."""


class Forbidden(AccessDeniedError):
    """403: the key lacks the scope the route needs."""

    code = "forbidden"
    http_status = 403


class HostNotAllowed(AccessDeniedError):
    """421: the Host is not one the service answers as."""

    code = "host_not_allowed"
    http_status = 421


class OriginNotAllowed(AccessDeniedError):
    """403: a browser page of an origin not accepted."""

    code = "origin_not_allowed"
    http_status = 403


class Unauthorized(AccessDeniedError):
    """401: no key, or a key the service does not know."""

    code = "unauthorized"
    http_status = 401


class ServiceFaultError(ServiceRefusal):
    """The service failed on its side (a defect, a database error): nothing was stored; its log
    says why, and a retry may fail the same way."""


class InternalError(ServiceFaultError):
    """500: an unexpected error of the service (its log has it)."""

    code = "internal_error"
    http_status = 500


class StorageFailed(ServiceFaultError):
    """500: the database failed; nothing was stored."""

    code = "storage_error"
    http_status = 500


GROUPS: Mapping[str, type[ServiceRefusal]] = MappingProxyType(
    {
        "conflict": ConflictError,
        "not_found": NotFoundError,
        "gone": GoneError,
        "too_large": TooLargeError,
        "retry_later": RetryLaterError,
        "fenced": FencedError,
        "invalid_request": InvalidRequestError,
        "access_denied": AccessDeniedError,
        "service_fault": ServiceFaultError,
    }
)
"""Each group of the service's table, by its name, with its class."""
REFUSALS: Mapping[str, type[ServiceRefusal]] = MappingProxyType(
    {kind.code: kind for group in GROUPS.values() for kind in group.__subclasses__()}
)
"""Every problem code of the service's table, with its class."""
