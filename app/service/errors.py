"""Refusals raised by the use cases (mapped to problem+json by the API)."""

from __future__ import annotations


class ServiceRefusal(Exception):
    """A request the service refuses, with its HTTP status and stable problem `code`."""

    status = 400
    code = "bad_request"

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


class PageRefused(ServiceRefusal):
    """A page of events cannot be served without skipping events (or is beyond the tail)."""

    def __init__(self, code: str, status: int, detail: str) -> None:
        super().__init__(detail)
        self.code = code
        self.status = status


class LimitExceeded(ServiceRefusal):
    """An event or a batch is over the configured limits."""

    status = 413

    def __init__(self, code: str, detail: str) -> None:
        super().__init__(detail)
        self.code = code


class InvalidRequest(ServiceRefusal):
    """The request is well-formed JSON but breaks a rule of the contract."""

    status = 422

    def __init__(self, code: str, detail: str) -> None:
        super().__init__(detail)
        self.code = code
