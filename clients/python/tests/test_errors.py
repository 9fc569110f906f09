"""The client's problem-code table is the service's, as one fixture says, and every code
is in the one group that says what a caller does next."""

from __future__ import annotations

import json
from pathlib import Path

import mcp_eventlog_client
import pytest
from mcp_eventlog_client import (
    AccessDeniedError,
    ChannelUnavailable,
    ConflictError,
    EventLogError,
    FencedError,
    GoneError,
    HttpError,
    InvalidRequestError,
    NotFoundError,
    RetryLaterError,
    ServiceFaultError,
    ServiceRefusal,
    ServiceUnreachable,
    TaskFailed,
    TooLargeError,
    UntrustedResponse,
    error_for,
    errors,
)
from mcp_eventlog_client.codes import GROUPS
from mcp_eventlog_client.errors import refusal_classes
from mcp_eventlog_client.task_runner import TaskStopped

FIXTURE = Path(__file__).resolve().parents[3] / "tests" / "fixtures" / "problem-codes.json"


def documented() -> dict[str, set[int]]:
    """Every problem code the service answers with, and its statuses (`expired` has two:
    409 on an append, 410 on a read)."""
    codes = json.loads(FIXTURE.read_text())["codes"]
    assert [row["code"] for row in codes] == sorted(row["code"] for row in codes)
    statuses: dict[str, set[int]] = {}
    for row in codes:
        statuses.setdefault(row["code"], set()).add(row["status"])
    return statuses


def test_the_client_knows_every_code_the_service_answers_with_and_no_other() -> None:
    known = refusal_classes()
    assert set(known) == set(documented())
    for code, statuses in documented().items():
        assert known[code].http_status in statuses, code


def test_each_code_maps_to_its_own_class_whose_docstring_states_its_statuses() -> None:
    for code, statuses in documented().items():
        error = error_for(min(statuses), code, "detail")
        assert type(error) is not ServiceRefusal, code
        assert error.code == code
        summary = (type(error).__doc__ or "").split("\n")[0]
        assert summary.startswith(f"{type(error).http_status}:"), code
        assert all(str(status) in summary for status in statuses), (code, summary)


def test_a_code_the_client_does_not_know_is_a_bare_refusal() -> None:
    error = error_for(418, "teapot", "short and stout")
    assert type(error) is ServiceRefusal
    assert (error.status, error.code, error.detail) == (418, "teapot", "short and stout")


def groups_documented() -> dict[str, str]:
    """Every code's group (what a caller does next), as the fixture says."""
    return {row["code"]: row["group"] for row in json.loads(FIXTURE.read_text())["codes"]}


def test_every_code_is_in_exactly_one_group_the_fixtures() -> None:
    assert set(GROUPS) == set(json.loads(FIXTURE.read_text())["groups"])
    for code, group in groups_documented().items():
        kind = refusal_classes()[code]
        assert [name for name, cls in GROUPS.items() if issubclass(kind, cls)] == [group], code
    for cls in GROUPS.values():
        assert cls.__bases__ == (ServiceRefusal,), cls


@pytest.mark.parametrize(
    ("status", "code", "group"),
    [
        (409, "superseded", FencedError),
        (409, "abandoned", FencedError),
        (409, "seq_gap", ConflictError),
        (404, "unknown_stream", NotFoundError),
        (410, "evicted", GoneError),
        (409, "expired", GoneError),
        (413, "event_too_large", TooLargeError),
        (503, "database_unavailable", RetryLaterError),
        (422, "validation_error", InvalidRequestError),
        (401, "unauthorized", AccessDeniedError),
        (500, "storage_error", ServiceFaultError),
    ],
)
def test_a_caller_catches_a_refusal_by_its_group(
    status: int, code: str, group: type[ServiceRefusal]
) -> None:
    with pytest.raises(group) as caught:
        raise error_for(status, code, "detail")
    assert (caught.value.status, caught.value.code, caught.value.detail) == (status, code, "detail")
    others = [cls for cls in GROUPS.values() if cls is not group]
    assert not isinstance(caught.value, tuple(others))


def test_every_group_and_code_class_is_exported_by_the_package_and_errors() -> None:
    for cls in [*GROUPS.values(), *refusal_classes().values()]:
        assert getattr(mcp_eventlog_client, cls.__name__) is cls
        assert getattr(errors, cls.__name__) is cls
        assert cls.__name__ in mcp_eventlog_client.__all__


def test_the_tree_has_one_root_under_exception() -> None:
    """Only `EventLogError` sits directly under a builtin: the package's own failures too
    (the channel's fallback, a task's stop and its failure) are caught with it."""
    for kind in [ChannelUnavailable, TaskFailed, TaskStopped, HttpError, UntrustedResponse]:
        assert issubclass(kind, EventLogError)
    assert ServiceUnreachable.__bases__ == (EventLogError,)
    assert EventLogError.__bases__ == (Exception,)
    failed = TaskFailed(-32602, "bad arguments", {"field": "x"})
    assert (failed.status, failed.code, failed.rpc_code) == (0, "task_failed", -32602)
    assert failed.to_error() == {"code": -32602, "message": "bad arguments", "data": {"field": "x"}}
    unavailable = ChannelUnavailable("frame_too_large", "about 2 MiB")
    assert (unavailable.reason, unavailable.detail, unavailable.status) == (
        "frame_too_large",
        "about 2 MiB",
        0,
    )
    assert TaskStopped("superseded").reason == "superseded"
