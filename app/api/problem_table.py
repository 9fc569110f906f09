"""The table of problem codes: each code the service answers with, its status, the
headers that go with it, what it means, the group that says what a caller does next, and
the exception class the clients name it by.

It is the one source of these facts. `app/api/problems.py` answers by it; the clients'
code tables (`clients/python/src/mcp_eventlog_client/codes.py`,
`clients/typescript/src/codes.ts`) and `tests/fixtures/problem-codes.json` are written
from it by `make codes` (`app/api/code_tables.py`), and a test fails when they differ.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import NamedTuple

from app.domain.append import AppendConflict

_RETRY = MappingProxyType({"Retry-After": "1"})
# A body refused part-way is not read to its end: the connection cannot be reused.
_CLOSE = MappingProxyType({"Connection": "close"})
_RETRY_AND_CLOSE = MappingProxyType({**_RETRY, **_CLOSE})
_CHALLENGE = MappingProxyType({"WWW-Authenticate": 'Bearer realm="mcp-eventlog"'})


class ProblemGroup(StrEnum):
    """What a caller does next about a refusal (`ADVICE` says it): each problem code is in
    one group, and each client has one exception class per group above the code's own."""

    CONFLICT = "conflict"
    NOT_FOUND = "not_found"
    GONE = "gone"
    TOO_LARGE = "too_large"
    RETRY_LATER = "retry_later"
    FENCED = "fenced"
    INVALID_REQUEST = "invalid_request"
    ACCESS_DENIED = "access_denied"
    SERVICE_FAULT = "service_fault"


G = ProblemGroup

ADVICE: Mapping[ProblemGroup, str] = MappingProxyType(
    {
        G.CONFLICT: (
            "The request contradicts what is stored (a seq out of order, a claim past the tail or"
            " of another stream or session, a task change its status forbids): read the state "
            "again before deciding; the same request fails the same way."
        ),
        G.NOT_FOUND: "Nothing has that id for this key's tenant (or no such route): check the id.",
        G.GONE: (
            "What was asked for was there and is no longer kept (evicted, expired): start over "
            "from what is kept; the service never skips it silently."
        ),
        G.TOO_LARGE: (
            "Over a size limit of the service: send less at once (smaller events, fewer events "
            "per batch, fewer or smaller headers)."
        ),
        G.RETRY_LATER: (
            "The service, its database or the gateway's upstream cannot take the request now "
            "(busy, starting, a slow body): nothing was stored; retry after a while, after "
            "`Retry-After` when the answer carries it."
        ),
        G.FENCED: (
            "This writer may no longer write the generation or task: it was superseded, finished "
            "or abandoned. Stop writing it; open a new generation if there is more to say."
        ),
        G.INVALID_REQUEST: (
            "The request itself is wrong (its body, media type, method, a value or an id): fix "
            "it; sent again unchanged it fails the same way."
        ),
        G.ACCESS_DENIED: (
            "The key, its scope, the `Host` or the `Origin` is not accepted: fix the caller's "
            "configuration, not the request."
        ),
        G.SERVICE_FAULT: (
            "The service failed on its side (a defect, a database error): nothing was stored; its"
            " log says why, and a retry may fail the same way."
        ),
    }
)
"""Each group's advice: the docstring of its exception class in the clients."""


@dataclass(frozen=True, slots=True)
class ProblemCode:
    """How one problem code is answered, and how the clients name it."""

    status: int
    group: ProblemGroup
    name: str
    """The code's exception class in both clients (generated: `make codes`)."""
    meaning: str
    """One line for the reader of the table (and of the clients' fixture)."""
    headers: Mapping[str, str] = field(default_factory=dict)
    said: str | None = None
    """The detail the client gets instead of the error's own, which is for the service log."""
    logged: int | None = None
    """The level the error is logged at: a fault of the service's, not of the request."""


PROBLEM_CODES: Mapping[str, ProblemCode] = MappingProxyType(
    {
        "abandoned": ProblemCode(
            409,
            G.FENCED,
            "Abandoned",
            "the writer's lease ran out and the generation was abandoned (fenced)",
        ),
        "ambiguous_stream": ProblemCode(
            409,
            G.INVALID_REQUEST,
            "AmbiguousStream",
            "a stream id several tenants use, asked about without saying which tenant",
        ),
        "background_task_down": ProblemCode(
            503,
            G.RETRY_LATER,
            "BackgroundTaskDown",
            "readiness: a background task of the process is down",
        ),
        "bad_request": ProblemCode(
            400, G.INVALID_REQUEST, "BadRequest", "the framework could not read the request"
        ),
        "batch_too_large": ProblemCode(
            413,
            G.TOO_LARGE,
            "BatchTooLarge",
            "a batch holds more events than EVENTLOG_MAX_BATCH_EVENTS",
            _CLOSE,
        ),
        "beyond_tail": ProblemCode(
            409,
            G.CONFLICT,
            "BeyondTail",
            "a claim or a page after a seq the generation never reached",
        ),
        "body_timeout": ProblemCode(
            408,
            G.RETRY_LATER,
            "BodyTimeout",
            "the body did not arrive within EVENTLOG_BODY_TIMEOUT_SECONDS",
        ),
        "body_too_large": ProblemCode(
            413, G.TOO_LARGE, "BodyTooLarge", "the body is over EVENTLOG_MAX_BODY_BYTES", _CLOSE
        ),
        "cross_session": ProblemCode(
            409,
            G.CONFLICT,
            "CrossSession",
            "the gateway: a claim of another MCP session or another credential",
        ),
        "cross_stream": ProblemCode(
            409,
            G.CONFLICT,
            "CrossStream",
            "a live read's claim names a generation of another stream",
        ),
        "database_unavailable": ProblemCode(
            503,
            G.RETRY_LATER,
            "DatabaseUnavailable",
            "the database is unreachable, restarting or busy; nothing was stored",
            _RETRY,
            said="the database is unavailable; nothing was stored, retry later",
            logged=logging.WARNING,
        ),
        "event_too_large": ProblemCode(
            413,
            G.TOO_LARGE,
            "EventTooLarge",
            "an event's data is over EVENTLOG_MAX_EVENT_BYTES",
            _CLOSE,
        ),
        "evicted": ProblemCode(
            410, G.GONE, "Evicted", "events of the requested range were evicted (never skipped)"
        ),
        "expired": ProblemCode(
            410, G.GONE, "Expired", "the generation's events were purged by its time to live"
        ),
        "forbidden": ProblemCode(
            403, G.ACCESS_DENIED, "Forbidden", "the key lacks the scope the route needs"
        ),
        "header_timeout": ProblemCode(
            408,
            G.RETRY_LATER,
            "HeaderTimeout",
            "a request's head did not arrive within EVENTLOG_HEADER_TIMEOUT_SECONDS",
            _CLOSE,
        ),
        "headers_too_large": ProblemCode(
            431,
            G.TOO_LARGE,
            "HeadersTooLarge",
            "a request's head is over EVENTLOG_MAX_HEADER_BYTES or EVENTLOG_MAX_HEADERS lines",
            _CLOSE,
        ),
        "host_not_allowed": ProblemCode(
            421, G.ACCESS_DENIED, "HostNotAllowed", "the Host is not one the service answers as"
        ),
        "internal_error": ProblemCode(
            500,
            G.SERVICE_FAULT,
            "InternalError",
            "an unexpected error of the service (its log has it)",
        ),
        "invalid_transition": ProblemCode(
            409,
            G.CONFLICT,
            "InvalidTransition",
            "a task status change the task's state does not allow",
        ),
        "invalid_json": ProblemCode(
            422,
            G.INVALID_REQUEST,
            "InvalidJson",
            "the body is not strict UTF-8 JSON (or has a key twice)",
        ),
        "malformed_id": ProblemCode(
            400, G.INVALID_REQUEST, "MalformedId", "a live read's claim is not <token>:<seq>"
        ),
        "method_not_allowed": ProblemCode(
            405, G.INVALID_REQUEST, "MethodNotAllowed", "the route does not answer this method"
        ),
        "not_acceptable": ProblemCode(
            406,
            G.INVALID_REQUEST,
            "NotAcceptable",
            "the client accepts none of the route's media types",
        ),
        "not_found": ProblemCode(404, G.NOT_FOUND, "NotFound", "no such route (or console file)"),
        "origin_not_allowed": ProblemCode(
            403, G.ACCESS_DENIED, "OriginNotAllowed", "a browser page of an origin not accepted"
        ),
        "overloaded": ProblemCode(
            503,
            G.RETRY_LATER,
            "Overloaded",
            "the process holds as many request bodies as it may",
            _RETRY_AND_CLOSE,
        ),
        "reserved_event_type": ProblemCode(
            422,
            G.INVALID_REQUEST,
            "ReservedEventType",
            "an event's type is a control event name of live reads (reset, end)",
        ),
        "schema_not_current": ProblemCode(
            503,
            G.RETRY_LATER,
            "SchemaNotCurrent",
            "readiness: the database schema is not the newest",
        ),
        "seq_conflict": ProblemCode(
            409,
            G.CONFLICT,
            "SeqConflict",
            "the batch overlaps stored events with other content (or unverifiable ones)",
        ),
        "seq_gap": ProblemCode(409, G.CONFLICT, "SeqGap", "first_seq is beyond tail_seq + 1"),
        "storage_error": ProblemCode(
            500,
            G.SERVICE_FAULT,
            "StorageFailed",
            "the database failed; nothing was stored",
            said="the database failed; nothing was stored",
            logged=logging.ERROR,
        ),
        "superseded": ProblemCode(
            409, G.FENCED, "Superseded", "a newer generation of the stream fenced this one"
        ),
        "terminal": ProblemCode(
            409,
            G.FENCED,
            "TerminalGeneration",
            "the generation is finished; nothing more is appended",
        ),
        "too_many_connections": ProblemCode(
            503,
            G.RETRY_LATER,
            "TooManyConnections",
            "the process holds EVENTLOG_MAX_CONNECTIONS connections",
            _RETRY_AND_CLOSE,
        ),
        "too_many_pages": ProblemCode(
            503,
            G.RETRY_LATER,
            "TooManyPages",
            "the process sends as many pages of events at once as it may (count or bytes)",
            _RETRY_AND_CLOSE,
        ),
        "too_many_readers": ProblemCode(
            503,
            G.RETRY_LATER,
            "TooManyReaders",
            "the process serves EVENTLOG_LIVE_MAX_READERS live readers",
            _RETRY_AND_CLOSE,
        ),
        "unauthorized": ProblemCode(
            401,
            G.ACCESS_DENIED,
            "Unauthorized",
            "no key, or a key the service does not know",
            _CHALLENGE,
        ),
        "unknown_generation": ProblemCode(
            404, G.NOT_FOUND, "UnknownGeneration", "no generation has this token (for this tenant)"
        ),
        "unknown_stream": ProblemCode(
            404, G.NOT_FOUND, "UnknownStream", "no stream has this id (for this tenant)"
        ),
        "unknown_task": ProblemCode(
            404,
            G.NOT_FOUND,
            "UnknownTask",
            "no task of this id the caller may see (unknown, expired or another's)",
        ),
        "unknown_attempt": ProblemCode(
            409, G.CONFLICT, "UnknownAttempt", "a task attempt number that was never started"
        ),
        "unsupported_media_type": ProblemCode(
            415,
            G.INVALID_REQUEST,
            "UnsupportedMediaType",
            "the body is not declared as JSON, or is encoded",
        ),
        "upstream_unavailable": ProblemCode(
            502,
            G.RETRY_LATER,
            "UpstreamUnavailable",
            "the gateway's upstream MCP server is unreachable or failed before answering",
        ),
        "upstream_unreachable": ProblemCode(
            503,
            G.RETRY_LATER,
            "UpstreamUnreachable",
            "readiness: the gateway's upstream MCP server does not answer",
            _RETRY,
        ),
        "validation_error": ProblemCode(
            422,
            G.INVALID_REQUEST,
            "ValidationFailed",
            "the request does not match the schema, or breaks a rule of the contract",
        ),
    }
)
# One code, two answers: an append to an expired generation conflicts with its state (409,
# as every refused append does), where a read of its events finds them gone (410).
APPEND_CONFLICT_EXPIRED = ProblemCode(
    409, G.GONE, "Expired", "an append to a generation its time to live expired"
)
SECOND_ROWS: tuple[tuple[str, ProblemCode], ...] = (
    (AppendConflict.EXPIRED.value, APPEND_CONFLICT_EXPIRED),
)
"""The codes answered with a second status besides their row of `PROBLEM_CODES`."""


class PublishedCode(NamedTuple):
    """One row of the published table: one per code and status (`expired` has two)."""

    code: str
    status: int
    group: ProblemGroup
    name: str
    meaning: str


def problem_codes() -> list[PublishedCode]:
    """Every (code, status) the service answers with, sorted, as the clients see them."""
    rows = [*PROBLEM_CODES.items(), *SECOND_ROWS]
    return sorted(PublishedCode(c, r.status, r.group, r.name, r.meaning) for c, r in rows)
