"""The client's one error tree: every failure of a call is an `EventLogError`.

```
EventLogError                 status, code, detail (programs match on the class or `.code`)
├── ServiceRefusal            the service answered a problem (RFC 9457) with a stable `code`
│   ├── ConflictError         contradicts what is stored: read the state again
│   ├── NotFoundError         nothing has that id: check the id
│   ├── GoneError             no longer kept (evicted, expired): start over from what is
│   ├── TooLargeError         over a size limit: send less at once
│   ├── RetryLaterError       cannot take it now, nothing stored: retry after a while
│   ├── FencedError           this writer may no longer write it: stop, open a new one
│   ├── InvalidRequestError   the request itself is wrong: fix it
│   ├── AccessDeniedError     key, scope, Host or Origin refused: fix the configuration
│   ├── ServiceFaultError     the service failed on its side: report it
│   │   (under each group, one class per code of it: Superseded, SeqGap, …, in codes.py)
│   └── (a code this client does not know yet is a bare `ServiceRefusal`)
├── HttpError                 a non-2xx answer without a problem body (a proxy's error page)
├── ServiceUnreachable        no answer: connection refused or broken (status 0)
│   └── DeadlineExceeded      no whole answer within the attempt's deadline (status 0)
├── UntrustedResponse         an answer this client will not act on (status: the answer's)
│   ├── Redirected            a 3xx: never followed (the event data would go to another host)
│   ├── UnexpectedContentType not the media type the route answers with (HTML from a proxy)
│   ├── ResponseTooLarge      the decoded body (or one SSE line) is over the client's cap
│   └── MalformedResponse     not JSON, a field missing or of the wrong type, a broken SSE frame
├── ChannelUnavailable        the append channel cannot carry it: sent over REST (channel.py)
├── TaskStopped               the task is no longer this worker's to write (task_runner.py)
└── TaskFailed                raised by a task's work to settle it failed (task_runner.py)
```

Catch by group for what to do next (`except RetryLaterError`), by class or `.code` for one
case. The groups and the code classes are written by `make codes` from the service's own
table (`app/api/problem_table.py`) into `codes.py`, and a test fails when it drifts; the
same tree is the TypeScript client's. A newer service never breaks an older client: an
unknown code maps to a bare `ServiceRefusal`.
"""

from __future__ import annotations

from mcp_eventlog_client.codes import *  # noqa: F403  (every group and code class, re-exported)
from mcp_eventlog_client.codes import REFUSALS
from mcp_eventlog_client.error_base import EventLogError as EventLogError
from mcp_eventlog_client.error_base import ServiceRefusal as ServiceRefusal


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


def refusal_classes() -> dict[str, type[ServiceRefusal]]:
    """Every problem code this client knows, with its class."""
    return dict(REFUSALS)


def error_for(status: int, code: str, detail: str) -> EventLogError:
    """The exception for a problem `code`; `ServiceRefusal` for a code this client lacks."""
    return REFUSALS.get(code, ServiceRefusal)(status, code, detail)
