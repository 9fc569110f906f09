"""One exception class per problem `code` the service answers with.

Every refusal of the service is an RFC 9457 problem with a stable `code`; programs match on
the class (or on `.code`), never on the human-readable `.detail`. A code this client does
not know yet maps to the base class, so a newer service never breaks an older client.
"""

from __future__ import annotations

import contextlib
from typing import Any

import httpx


class EventLogError(Exception):
    """A request the event-log service refused or could not answer.

    `status` is the HTTP status (0 when no response arrived), `code` the problem's stable
    code, `detail` its human-readable explanation.
    """

    code: str = "error"

    def __init__(self, status: int, code: str, detail: str) -> None:
        super().__init__(f"{status} {code}: {detail}")
        self.status = status
        self.code = code
        self.detail = detail
        self.retry_after: float | None = None
        """Seconds the service asked to wait (`Retry-After`), when it did."""


class Superseded(EventLogError):
    """409: the generation is no longer its stream's current one; its appends are fenced."""

    code = "superseded"


class TerminalGeneration(EventLogError):
    """409: the generation is finished; nothing more can be appended to it."""

    code = "terminal"


class SeqConflict(EventLogError):
    """409: the batch overlaps stored events with different content (or unverifiable ones)."""

    code = "seq_conflict"


class SeqGap(EventLogError):
    """409: `first_seq` is beyond `tail_seq + 1`."""

    code = "seq_gap"


class BeyondTail(EventLogError):
    """409: a page was asked for after a seq the generation never reached."""

    code = "beyond_tail"


class MalformedId(EventLogError):
    """400: a live read's claim is not `<token>:<seq>` (its verdict is `invalid`)."""

    code = "malformed_id"


class CrossStream(EventLogError):
    """409: a live read's claim names a generation of another stream (`invalid`)."""

    code = "cross_stream"


class AmbiguousStream(EventLogError):
    """409: the request names a stream ambiguously."""

    code = "ambiguous_stream"


class NotAcceptable(EventLogError):
    """406: the request accepts none of the media types the route answers with."""

    code = "not_acceptable"


class TooManyReaders(EventLogError):
    """503: the service process already serves as many live readers as it may."""

    code = "too_many_readers"


class UnknownGeneration(EventLogError):
    """404: no generation has this token (for this tenant)."""

    code = "unknown_generation"


class UnknownStream(EventLogError):
    """404: no stream has this id (for this tenant)."""

    code = "unknown_stream"


class NotFound(EventLogError):
    """404: no such route."""

    code = "not_found"


class Evicted(EventLogError):
    """410: events in the requested range were evicted; the service never skips them."""

    code = "evicted"


class Expired(EventLogError):
    """410: the generation's events were purged by its time to live."""

    code = "expired"


class EventTooLarge(EventLogError):
    """413: an event's data is over the service's limit."""

    code = "event_too_large"


class BatchTooLarge(EventLogError):
    """413: a batch holds more events than the service accepts at once."""

    code = "batch_too_large"


class BodyTooLarge(EventLogError):
    """413: the request body is over the service's limit."""

    code = "body_too_large"


class BodyTimeout(EventLogError):
    """408: the request body arrived too slowly."""

    code = "body_timeout"


class UnsupportedMediaType(EventLogError):
    """415: the body was not declared as JSON."""

    code = "unsupported_media_type"


class InvalidJson(EventLogError):
    """422: the body is not valid JSON."""

    code = "invalid_json"


class ValidationFailed(EventLogError):
    """422: the request does not match the schema or breaks a rule of the contract."""

    code = "validation_error"


class Unauthorized(EventLogError):
    """401: no key, or a key the service does not know."""

    code = "unauthorized"


class Forbidden(EventLogError):
    """403: the key's scope does not allow this request."""

    code = "forbidden"


class DatabaseUnavailable(EventLogError):
    """503: the service's database is unreachable or locked; nothing was stored."""

    code = "database_unavailable"


class StorageFailed(EventLogError):
    """500: the service's database failed; nothing was stored."""

    code = "storage_error"


class InternalError(EventLogError):
    """500: an unexpected error in the service."""

    code = "internal_error"


class ServiceUnreachable(EventLogError):
    """No response arrived (connection refused, timeout, broken connection), after retries.

    `status` is 0; the underlying httpx error is the exception's `__cause__`.
    """

    code = "unreachable"


_BY_CODE: dict[str, type[EventLogError]] = {
    cls.code: cls
    for cls in (
        Superseded,
        TerminalGeneration,
        SeqConflict,
        SeqGap,
        BeyondTail,
        MalformedId,
        CrossStream,
        AmbiguousStream,
        NotAcceptable,
        TooManyReaders,
        UnknownGeneration,
        UnknownStream,
        NotFound,
        Evicted,
        Expired,
        EventTooLarge,
        BatchTooLarge,
        BodyTooLarge,
        BodyTimeout,
        UnsupportedMediaType,
        InvalidJson,
        ValidationFailed,
        Unauthorized,
        Forbidden,
        DatabaseUnavailable,
        StorageFailed,
        InternalError,
    )
}


def error_for(status: int, code: str, detail: str) -> EventLogError:
    """The exception for a problem `code`; the base class for a code this client lacks."""
    return _BY_CODE.get(code, EventLogError)(status, code, detail)


def error_from_response(response: httpx.Response) -> EventLogError:
    """Read a refused response: a problem body when there is one, else its bare status."""
    body: Any = None
    with contextlib.suppress(ValueError):
        body = response.json()
    if isinstance(body, dict) and isinstance(body.get("code"), str):
        detail = body.get("detail")
        return error_for(response.status_code, body["code"], str(detail or ""))
    text = response.text[:200] or response.reason_phrase
    return EventLogError(response.status_code, "http_error", text)
