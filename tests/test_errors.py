"""The service's error tree (`app/errors.py`) has one root, shared by the admin client."""

from __future__ import annotations

import inspect

from app import admin_client, errors
from app.admin_client import AdminError
from app.error_root import EventLogError


def test_every_error_of_the_service_and_the_admin_client_derives_from_the_one_root() -> None:
    assert errors.EventLogError is EventLogError
    assert EventLogError.__bases__ == (Exception,)
    kinds = [
        kind
        for module in (errors, admin_client)
        for _, kind in inspect.getmembers(module, inspect.isclass)
        if issubclass(kind, BaseException) and kind.__module__ == module.__name__
    ]
    assert AdminError in kinds
    assert all(issubclass(kind, EventLogError) for kind in kinds)


def test_an_admin_error_keeps_its_status_code_and_detail() -> None:
    error = AdminError(404, "unknown_stream", "no stream 's' here")
    assert (error.status, error.code, error.detail) == (404, "unknown_stream", "no stream 's' here")
    assert str(error) == "404 unknown_stream: no stream 's' here"
