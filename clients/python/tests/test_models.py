"""Records read from the service's JSON by their fields' declared types
(`mcp_eventlog_client.models.read_record`): what is required, what may be left out, and
that a value of another JSON type is malformed, never coerced."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from mcp_eventlog_client import MalformedResponse
from mcp_eventlog_client.models import EventPage, Generation, StreamView, read_answer
from mcp_eventlog_client.task_records import Task

GENERATION: dict[str, Any] = {
    "stream_id": "s",
    "generation": "tok",
    "epoch": 1,
    "reason": "initial",
    "producer": None,
    "head_seq": 0,
    "tail_seq": 0,
    "terminal": False,
    "terminal_seq": None,
    "created_at": "2026-01-01T00:00:00Z",
    "supersedes": None,
}
TASK: dict[str, Any] = {
    "task_id": "t",
    "status": "working",
    "status_message": None,
    "created_at": "2026-01-01T00:00:00Z",
    "last_updated_at": "2026-01-01T00:00:00Z",
    "ttl_ms": 1,
    "poll_interval_ms": 1,
    "attempt": 1,
    "generation": "g",
    "lease_expires_at": None,
    "cancel_requested": False,
}


def test_members_a_service_leaves_out_take_their_defaults() -> None:
    """An older service's generation: no lease, pipeline, `superseded` or `expired`."""
    read = Generation.from_json(GENERATION)
    assert (read.token, read.superseded, read.expired) == ("tok", False, False)
    assert (read.lease_seconds, read.pipeline, read.abandoned_at) == (None, 0, None)
    assert read.created_at == datetime(2026, 1, 1, tzinfo=UTC)
    nested = StreamView.from_json(
        {"stream_id": "s", "created_at": "2026-01-01T00:00:00Z"}
        | {"updated_at": "2026-01-01T00:00:00Z", "generations": 1, "current": GENERATION}
    )
    assert nested.current == read


@pytest.mark.parametrize(
    ("reader", "body"),
    [
        (Task.from_json, TASK | {"attempt": True}),  # a JSON boolean is no integer
        (Task.from_json, TASK | {"status": "paused"}),  # not one of the statuses
        (Task.from_json, {k: v for k, v in TASK.items() if k != "ttl_ms"}),
        (Task.from_json, TASK | {"created_at": None}),
        (Generation.from_json, GENERATION | {"superseded": "no"}),
        (EventPage.from_json, {"generation": "g", "events": [{"id": "g:1"}], "next_after": None}),
    ],
)
def test_a_value_of_another_type_or_a_required_member_left_out_is_malformed(
    reader: Any, body: dict[str, Any]
) -> None:
    with pytest.raises(MalformedResponse):
        read_answer(reader, body)
