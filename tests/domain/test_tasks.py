"""The task rules as tables: who may write a task, where it may go, what a change carries,
and which input responses count (app/domain/tasks.py; `make domain-coverage` holds 100%)."""

from __future__ import annotations

from typing import Any

import pytest

from app.domain.tasks import (
    ACTIVE,
    TERMINAL,
    TaskRefusal,
    TaskStatus,
    accepted_responses,
    check_transition,
    check_worker,
    payload_problem,
    task_stream_id,
    worker_lost_error,
)

W, IR, C, F, X = (
    TaskStatus.WORKING,
    TaskStatus.INPUT_REQUIRED,
    TaskStatus.COMPLETED,
    TaskStatus.FAILED,
    TaskStatus.CANCELLED,
)


def test_terminal_and_active_split_the_statuses() -> None:
    assert {s for s in TaskStatus if s.terminal} == TERMINAL == {C, F, X}
    assert {s for s in TaskStatus if not s.terminal} == ACTIVE == {W, IR}


@pytest.mark.parametrize(
    ("current", "attempt", "status", "refusal"),
    [
        (2, 1, W, TaskRefusal.SUPERSEDED),
        (2, 1, C, TaskRefusal.SUPERSEDED),  # fencing before the finished task
        (2, 3, W, TaskRefusal.UNKNOWN_ATTEMPT),
        (2, 2, F, TaskRefusal.TERMINAL),
        (2, 2, IR, None),
        (1, 1, W, None),
    ],
)
def test_who_may_write(
    current: int, attempt: int, status: TaskStatus, refusal: TaskRefusal | None
) -> None:
    assert check_worker(current, attempt, status) is refusal


# Every (from, to) pair of the graph: allowed edges answer None, the rest their refusal.
EDGES = {(W, IR), (W, C), (W, F), (W, X), (IR, W), (IR, C), (IR, F), (IR, X)}


@pytest.mark.parametrize("status", list(TaskStatus))
@pytest.mark.parametrize("target", list(TaskStatus))
def test_where_a_task_may_go(status: TaskStatus, target: TaskStatus) -> None:
    refusal = check_transition(1, 1, status, target)
    if status.terminal:
        assert refusal is TaskRefusal.TERMINAL
    elif (status, target) in EDGES:
        assert refusal is None
    else:
        assert refusal is TaskRefusal.INVALID_TRANSITION


def test_a_stale_worker_is_fenced_before_its_transition_is_judged() -> None:
    assert check_transition(3, 2, W, C) is TaskRefusal.SUPERSEDED


ERROR = {"code": -32000, "message": "boom"}


@pytest.mark.parametrize(
    ("target", "payload", "problem"),
    [
        (C, {"result": {"content": []}}, None),
        (F, {"error": ERROR}, None),
        (IR, {"input_requests": {"confirm": {}}}, None),
        (W, {}, None),
        (X, {}, None),
        (C, {}, "a change to completed carries result (a non-empty JSON object)"),
        (C, {"result": [1]}, "a change to completed carries result (a non-empty JSON object)"),
        (IR, {"input_requests": {}}, "a change to input_required carries input_requests"),
        (F, {"error": {"code": True, "message": "m"}}, "error is a JSON-RPC error object"),
        (F, {"error": {"code": 1}}, "error is a JSON-RPC error object"),
        (C, {"result": {}, "error": ERROR}, "a change to completed carries no error"),
        (W, {"result": {}, "input_requests": {"a": 1}}, "carries no input_requests, result"),
    ],
)
def test_what_a_change_carries(
    target: TaskStatus, payload: dict[str, Any], problem: str | None
) -> None:
    given = {"result": None, "error": None, "input_requests": None, **payload}
    found = payload_problem(target, **given)
    if problem is None:
        assert found is None
    else:
        assert found is not None
        assert problem in found


@pytest.mark.parametrize(
    ("requests", "answered", "responses", "accepted"),
    [
        ({"a": 1, "b": 2}, None, {"a": "x", "c": "y"}, {"a": "x"}),
        ({"a": 1, "b": 2}, {"a": "old"}, {"a": "new", "b": "z"}, {"b": "z"}),
        (None, None, {"a": "x"}, {}),
    ],
)
def test_which_input_responses_count(
    requests: dict[str, Any] | None,
    answered: dict[str, Any] | None,
    responses: dict[str, Any],
    accepted: dict[str, Any],
) -> None:
    assert accepted_responses(requests, answered, responses) == accepted


def test_a_lost_worker_and_the_task_stream_are_named_by_the_contract() -> None:
    error = worker_lost_error()
    assert error["code"] == -32603
    assert error["data"] == {"reason": "worker_lost"}
    assert isinstance(error["message"], str)
    assert task_stream_id("abc") == "task:abc"
