"""Request bodies of the task API (`app/api/routes/task_schemas.py`): strict, bounded, and
plain text where a person reads them."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from app.api.routes.task_schemas import (
    MAX_LEASE_SECONDS,
    AttemptRequest,
    CreateTaskRequest,
    LeaseRequest,
    StatusRequest,
    TaskEventsRequest,
)
from app.domain.tasks import TaskStatus


def test_every_field_of_a_new_task_is_optional() -> None:
    assert CreateTaskRequest().model_dump(exclude_none=True) == {}


@pytest.mark.parametrize(
    "body",
    [
        {"principal": ""},
        {"principal": "p" * 257},
        {"principal": "a\x00b"},
        {"principal": "\ud800"},
        {"ttl_ms": 0},
        {"ttl_ms": "60"},
        {"poll_interval_ms": 86_400_001},
        {"lease_seconds": 0},
        {"lease_seconds": MAX_LEASE_SECONDS + 1},
        {"surprise": 1},
    ],
)
def test_a_new_task_is_strict(body: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        CreateTaskRequest.model_validate(body)


def test_a_status_comes_as_its_json_string() -> None:
    change = StatusRequest.model_validate({"attempt": 1, "status": "completed"})
    assert change.status is TaskStatus.COMPLETED
    with pytest.raises(ValidationError):
        StatusRequest.model_validate({"attempt": 1, "status": "done"})


@pytest.mark.parametrize("attempt", [0, 2**31, "1", 1.0, True])
def test_an_attempt_is_a_positive_32_bit_integer(attempt: object) -> None:
    with pytest.raises(ValidationError):
        LeaseRequest.model_validate({"attempt": attempt})
    assert LeaseRequest.model_validate({"attempt": 2**31 - 1}).attempt == 2**31 - 1


def test_a_status_message_is_bounded_plain_text() -> None:
    assert LeaseRequest(attempt=1, status_message="x" * 4_096).status_message
    for message in ("x" * 4_097, "nul\x00"):
        with pytest.raises(ValidationError):
            LeaseRequest.model_validate({"attempt": 1, "status_message": message})


def test_a_takeover_names_the_attempt_it_supersedes() -> None:
    assert AttemptRequest(supersedes=3).supersedes == 3
    with pytest.raises(ValidationError):
        AttemptRequest.model_validate({})


def test_progress_events_are_at_least_one() -> None:
    with pytest.raises(ValidationError):
        TaskEventsRequest.model_validate({"attempt": 1, "events": []})
    events = TaskEventsRequest.model_validate({"attempt": 1, "events": [{"data": "50%"}]})
    assert events.first_seq is None
