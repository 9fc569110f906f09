"""Everything that can go wrong, as one tree of exceptions every layer raises from.

Each error has a stable `code`, the problem code of the contract a client matches on, and
a `detail` for a human. No error here knows an HTTP status: the API's one table
(`app/api/problems.py`) maps each code to a status, its headers and the problem body.
The tree, with the code(s) each leaf answers with:

    EventLogError                    code, detail (app/error_root.py, the admin client's
    │                                `AdminError` derives from it too)
    ├── Rejected                     refused as asked, before anything was written
    │   │                            (on SQLite the group commit fails only that write)
    │   ├── NotFound
    │   │   ├── UnknownGeneration    unknown_generation
    │   │   ├── UnknownStream        unknown_stream
    │   │   └── UnknownTask          unknown_task (unknown, expired and another
    │   │                            principal's or tenant's tasks alike)
    │   ├── ConflictingBatch         superseded · terminal · abandoned · expired ·
    │   │                            seq_conflict · seq_gap (also a lease renewal's refusal)
    │   ├── PageOutOfRange           beyond_tail · expired · evicted
    │   ├── TaskEventsGone           evicted (with `earliest_seq`)
    │   ├── TaskConflict             superseded · unknown_attempt · terminal ·
    │   │                            invalid_transition (a worker's write to a task)
    │   ├── InvalidClaim             malformed_id · unknown_generation · cross_stream ·
    │   │                            beyond_tail (a live read's claim; verdict `invalid`)
    │   ├── LimitExceeded
    │   │   ├── BatchTooLarge        batch_too_large
    │   │   └── EventTooLarge        event_too_large
    │   ├── InvalidRequest           validation_error
    │   ├── ReservedEventType        reserved_event_type
    │   ├── DuplicateClaim           bad_request (two `Last-Event-ID` headers)
    │   ├── AmbiguousStream          ambiguous_stream
    │   ├── NotAcceptable            not_acceptable
    │   ├── TooManyReaders           too_many_readers
    │   ├── TooManyPages             too_many_pages
    │   ├── CrossSession             cross_session (the gateway: a claim of another
    │   │                            MCP session or credential; verdict `invalid`)
    │   └── NotAdmitted              the front door's, before the route's handler has a body
    │       ├── HostNotAllowed       host_not_allowed
    │       ├── OriginNotAllowed     origin_not_allowed
    │       ├── UnsupportedMediaType unsupported_media_type
    │       ├── Unauthenticated      unauthorized
    │       ├── Forbidden            forbidden
    │       ├── Overloaded           overloaded
    │       ├── BodyTooLarge         body_too_large
    │       ├── BodyTimeout          body_timeout
    │       ├── InvalidJson          invalid_json
    │       └── InvalidText          validation_error
    ├── UpstreamError                the gateway's upstream MCP server
    │   ├── UpstreamUnavailable      upstream_unavailable (unreachable, or failing before
    │   │                            it answered a forwarded request)
    │   └── UpstreamUnreachable      upstream_unreachable (readiness: it does not answer)
    └── StorageError                 the database failed, or could not be reached
        ├── StorageUnavailable       database_unavailable (unreachable, restarting, busy)
        └── StorageFailed            storage_error

Callers catch a group where the group is what they decide on: the group commit lets a
`Rejected` write fail alone (any other error fails its whole group), a live reader ends
on a `StorageError`, and a WebSocket upgrade can refuse on a `NotAdmitted`. The domain's
verdicts stay values (`AppendConflict`, `PageRefusal`, `Reason`); only the layers that act
on them raise.
"""

from __future__ import annotations

from types import MappingProxyType

from app.domain.append import AppendConflict
from app.domain.decision import Reason, Verdict
from app.domain.paging import PageRefusal
from app.domain.tasks import TaskRefusal
from app.error_root import EventLogError as EventLogError


class Rejected(EventLogError):
    """Refused as asked, before anything was written: no other write fails with it."""


class NotFound(Rejected):
    """A lookup found nothing (for this tenant); `looked_up` is what was looked up."""

    what: str
    """What kind of thing was looked up, as the detail names it."""

    def __init__(self, looked_up: str) -> None:
        super().__init__(f"no {self.what} {looked_up!r} here")
        self.looked_up = looked_up


class UnknownGeneration(NotFound):
    """No generation has that token for this tenant."""

    code = "unknown_generation"
    what = "generation"


class UnknownStream(NotFound):
    """No stream has that id for this tenant."""

    code = "unknown_stream"
    what = "stream"


class UnknownTask(NotFound):
    """No task of this id that the caller may see: never created, expired, or another
    principal's or tenant's. One answer for all, so that an id reveals nothing."""

    code = "unknown_task"
    what = "task"

    def __init__(self, looked_up: str) -> None:
        super().__init__(looked_up)
        # Not even the id the caller sent: every unknown_task answer is the same bytes.
        self.detail = "no task of this id that this caller may see"
        self.args = (self.detail,)


class ConflictingBatch(Rejected):
    """A batch conflicts with its generation's state (fenced, finished, out of order)."""

    def __init__(self, conflict: AppendConflict, detail: str) -> None:
        super().__init__(detail)
        self.conflict = conflict
        self.code = conflict.value


class PageOutOfRange(Rejected):
    """A page of events cannot be served without skipping events (or is beyond the tail)."""

    def __init__(self, refusal: PageRefusal, detail: str) -> None:
        super().__init__(detail)
        self.refusal = refusal
        self.code = refusal.value


class TaskEventsGone(Rejected):
    """A page of a task's events that starts before what is retained: `earliest_seq` is
    the first seq still there, where the reader can start over."""

    code = "evicted"

    def __init__(self, detail: str, earliest_seq: int) -> None:
        super().__init__(detail)
        self.earliest_seq = earliest_seq
        self.members = MappingProxyType({"earliest_seq": earliest_seq})


class TaskConflict(Rejected):
    """A worker's write that the task's state refuses (`app/domain/tasks.py`)."""

    def __init__(self, refusal: TaskRefusal, detail: str) -> None:
        super().__init__(detail)
        self.refusal = refusal
        self.code = refusal.value


class InvalidClaim(Rejected):
    """A live read's claim is `invalid`: no stream is served (the reason says why)."""

    members = MappingProxyType({"verdict": Verdict.INVALID.value})

    def __init__(self, reason: Reason, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason
        self.code = reason.value


class LimitExceeded(Rejected):
    """An event or a batch is over the configured limits."""


class BatchTooLarge(LimitExceeded):
    """A batch holds more events than `EVENTLOG_MAX_BATCH_EVENTS`."""

    code = "batch_too_large"


class EventTooLarge(LimitExceeded):
    """An event's data is over `EVENTLOG_MAX_EVENT_BYTES`."""

    code = "event_too_large"


class InvalidRequest(Rejected):
    """The request is well-formed but breaks a rule of the contract (a value over a limit)."""

    code = "validation_error"


class ReservedEventType(Rejected):
    """An event's type is the name of a control event of live reads (`reset`, `end`): a
    browser's `EventSource` would hand it to the listeners of the service's own events."""

    code = "reserved_event_type"


class AmbiguousStream(Rejected):
    """A stream id that several tenants use, asked about without saying which tenant."""

    code = "ambiguous_stream"


class NotAcceptable(Rejected):
    """The client accepts none of the media types the route answers with."""

    code = "not_acceptable"


class TooManyReaders(Rejected):
    """This process already serves `EVENTLOG_LIVE_MAX_READERS` live readers."""

    code = "too_many_readers"


class TooManyPages(Rejected):
    """This process already sends as many pages of events as it may at once
    (`EVENTLOG_MAX_PAGES_IN_FLIGHT`, `EVENTLOG_MAX_RESPONSE_BYTES_IN_FLIGHT`)."""

    code = "too_many_pages"


class DuplicateClaim(Rejected):
    """The request carries `Last-Event-ID` more than once: no one of them is taken."""

    code = "bad_request"


class CrossSession(Rejected):
    """The gateway: a claimed id belongs to another MCP session or another credential."""

    code = "cross_session"
    members = MappingProxyType({"verdict": Verdict.INVALID.value})


class NotAdmitted(Rejected):
    """The front door turned the request away before its handler had a byte of the body."""


class HostNotAllowed(NotAdmitted):
    """The `Host` names no host this service answers as (a DNS-rebinding page, say)."""

    code = "host_not_allowed"


class OriginNotAllowed(NotAdmitted):
    """A browser page of another origin sent the request."""

    code = "origin_not_allowed"


class UnsupportedMediaType(NotAdmitted):
    """The body is not declared as JSON (or is encoded)."""

    code = "unsupported_media_type"


class Unauthenticated(NotAdmitted):
    """No key, or a key that is not configured."""

    code = "unauthorized"


class Forbidden(NotAdmitted):
    """A valid key without the scope the route needs."""

    code = "forbidden"


class Overloaded(NotAdmitted):
    """The process holds as many request bodies as it may (`max_body_bytes_in_flight`)."""

    code = "overloaded"


class BodyTooLarge(NotAdmitted):
    """The body is over `max_body_bytes`."""

    code = "body_too_large"


class BodyTimeout(NotAdmitted):
    """The body did not arrive within `body_timeout_seconds`."""

    code = "body_timeout"


class InvalidJson(NotAdmitted):
    """The body is not strict JSON (not UTF-8, broken, or a key twice in one object)."""

    code = "invalid_json"


class InvalidText(NotAdmitted):
    """A string of the request is not valid UTF-8 (a lone surrogate)."""

    code = "validation_error"


class UpstreamError(EventLogError):
    """The gateway's upstream MCP server failed."""


class UpstreamUnavailable(UpstreamError):
    """The upstream did not answer a forwarded request (unreachable, or failed first)."""

    code = "upstream_unavailable"


class UpstreamUnreachable(UpstreamError):
    """Readiness: the upstream does not answer at all."""

    code = "upstream_unreachable"


class StorageError(EventLogError):
    """The database failed the request, or could not be reached for it."""


class StorageUnavailable(StorageError):
    """The database is unreachable, restarting or too busy; retrying later may succeed."""

    code = "database_unavailable"


class StorageFailed(StorageError):
    """The database failed in a way the caller cannot fix by retrying."""

    code = "storage_error"
