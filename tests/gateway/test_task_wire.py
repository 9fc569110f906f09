"""The tasks extension's wire shapes (`app/gateway/task_wire.py`) made from stored task
records: a flat `CreateTaskResult`, a `tasks/get` answer that inlines what its status
carries, and the JSON-RPC envelopes."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime, timedelta, timezone

import pytest

from app.gateway import task_wire as wire
from app.storage.tasks import TaskRecord

CREATED = datetime(2026, 7, 28, 12, 0, 0, tzinfo=UTC)


def record(**changes: object) -> TaskRecord:
    task = TaskRecord(
        task_id="t-1",
        tenant="default",
        principal=None,
        status="working",
        status_message=None,
        created_at=CREATED,
        last_updated_at=CREATED + timedelta(seconds=1),
        ttl_ms=60_000,
        poll_interval_ms=500,
        expires_at=CREATED + timedelta(minutes=1),
        attempt=1,
        generation="g",
        lease_seconds=30,
        lease_expires_at=None,
        request={"method": "tools/call"},
        result=None,
        error=None,
        input_requests=None,
        input_responses=None,
        cancel_requested_at=None,
        settled_at=None,
    )
    return dataclasses.replace(task, **changes)


def test_a_created_task_is_flat_with_iso_times_in_utc() -> None:
    east = timezone(timedelta(hours=2))
    task = record(created_at=CREATED.astimezone(east), status_message="started")
    assert wire.created(task) == {
        "resultType": "task",
        "taskId": "t-1",
        "status": "working",
        "createdAt": "2026-07-28T12:00:00Z",
        "lastUpdatedAt": "2026-07-28T12:00:01Z",
        "ttlMs": 60_000,
        "pollIntervalMs": 500,
        "statusMessage": "started",
    }


def test_a_naive_time_is_read_as_utc() -> None:
    naive = CREATED.replace(tzinfo=None)
    assert wire.task_fields(record(created_at=naive))["createdAt"] == "2026-07-28T12:00:00Z"


@pytest.mark.parametrize(
    ("changes", "inlined"),
    [
        ({"status": "completed", "result": {"content": []}}, {"result": {"content": []}}),
        ({"status": "failed", "error": {"code": -1}}, {"error": {"code": -1}}),
        (
            {
                "status": "input_required",
                "input_requests": {"a": {"q": 1}, "b": {"q": 2}},
                "input_responses": {"a": {"x": 1}},
            },
            {"inputRequests": {"b": {"q": 2}}},
        ),
        ({"status": "working"}, {}),
    ],
)
def test_a_detailed_task_inlines_what_its_status_carries(
    changes: dict[str, object], inlined: dict[str, object]
) -> None:
    task = record(**changes)
    answer = wire.detailed(task)
    assert answer == {"resultType": "complete", **wire.task_fields(task), **inlined}
    note = wire.status_notification(task)
    assert note["method"] == "notifications/tasks"
    assert "resultType" not in note["params"]


def test_the_extension_is_declared_in_the_requests_client_capabilities() -> None:
    declared = {"_meta": {wire.CAPABILITIES_META: {"extensions": {wire.EXTENSION: {}}}}}
    assert wire.declared(declared)
    assert not wire.declared({})
    assert not wire.declared({"_meta": {wire.CAPABILITIES_META: {"extensions": {}}}})
    assert not wire.declared({"_meta": "no"})


def test_the_envelopes() -> None:
    assert json.loads(wire.result(7, {"a": 1})) == {"jsonrpc": "2.0", "id": 7, "result": {"a": 1}}
    assert json.loads(wire.error("r", wire.INVALID_PARAMS, "bad")) == {
        "jsonrpc": "2.0",
        "id": "r",
        "error": {"code": -32602, "message": "bad"},
    }
    missing = json.loads(wire.missing_capability(1, "the tool x"))["error"]
    assert missing["code"] == wire.MISSING_CAPABILITY
    assert missing["data"] == {"requiredCapabilities": {"extensions": {wire.EXTENSION: {}}}}
