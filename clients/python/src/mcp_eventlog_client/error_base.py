"""The root of the client's error tree and the base of the service's refusals.

Apart from `errors.py` (which draws the tree and re-exports every class) so that the
generated `codes.py`, whose classes derive from `ServiceRefusal`, imports nothing that
imports it back.
"""

from __future__ import annotations

from typing import ClassVar


class EventLogError(Exception):
    """A request the event-log service refused, or that got no answer this client trusts,
    or work of this package that cannot go on (a task stopped, a channel unavailable).

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
    """The service refused the request with a problem `code`: one subclass per code, under
    the group that says what to do next (`ConflictError`, `RetryLaterError`, …)."""

    code = "refused"
    http_status: ClassVar[int] = 0
    """The status the service documents for this code."""
