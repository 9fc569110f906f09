"""The rules of a task's life: its states, who may move it, and where it may go.

A task is `working` when created. Its worker (the holder of the current `attempt`) moves it
`working → input_required | terminal` and `input_required → working | terminal`; the
terminal states (`completed`, `failed`, `cancelled`) are absorbing. Pure: the service reads
the stored task, asks `check_transition`, and raises the refusal it returns.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Final


class TaskStatus(StrEnum):
    """The statuses of MCP's `io.modelcontextprotocol/tasks` extension."""

    WORKING = "working"
    INPUT_REQUIRED = "input_required"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def terminal(self) -> bool:
        """Whether nothing moves the task any more."""
        return self in TERMINAL


TERMINAL: Final = frozenset({TaskStatus.COMPLETED, TaskStatus.FAILED, TaskStatus.CANCELLED})
ACTIVE: Final = frozenset({TaskStatus.WORKING, TaskStatus.INPUT_REQUIRED})

ALLOWED: Final[dict[TaskStatus, frozenset[TaskStatus]]] = {
    TaskStatus.WORKING: frozenset({TaskStatus.INPUT_REQUIRED, *TERMINAL}),
    TaskStatus.INPUT_REQUIRED: frozenset({TaskStatus.WORKING, *TERMINAL}),
}


class TaskRefusal(StrEnum):
    """Why a worker's write to a task is refused (the problem code it is answered with)."""

    SUPERSEDED = "superseded"  # a newer attempt fenced this worker
    UNKNOWN_ATTEMPT = "unknown_attempt"  # an attempt number never started
    TERMINAL = "terminal"  # the task is finished; terminal is absorbing
    INVALID_TRANSITION = "invalid_transition"  # not an edge of the graph above


def check_worker(current_attempt: int, attempt: int, status: TaskStatus) -> TaskRefusal | None:
    """Whether the holder of `attempt` may still write a task at `status`.

    Fencing first: a stale worker learns it was superseded even when the task has since
    finished, so that it never mistakes another attempt's outcome for its own.
    """
    if attempt < current_attempt:
        return TaskRefusal.SUPERSEDED
    if attempt > current_attempt:
        return TaskRefusal.UNKNOWN_ATTEMPT
    if status.terminal:
        return TaskRefusal.TERMINAL
    return None


def check_transition(
    current_attempt: int, attempt: int, status: TaskStatus, target: TaskStatus
) -> TaskRefusal | None:
    """Whether the holder of `attempt` may move a task from `status` to `target`."""
    refusal = check_worker(current_attempt, attempt, status)
    if refusal is not None:
        return refusal
    return None if target in ALLOWED[status] else TaskRefusal.INVALID_TRANSITION


WORKER_LOST_CODE: Final = -32603  # JSON-RPC "internal error"


def worker_lost_error() -> dict[str, Any]:
    """The error a task whose worker's lease lapsed is failed with (JSON-RPC error shape)."""
    return {
        "code": WORKER_LOST_CODE,
        "message": "the task's worker stopped renewing its lease before the task settled",
        "data": {"reason": "worker_lost"},
    }


def task_stream_id(task_id: str) -> str:
    """The log stream of a task's events: one generation per attempt."""
    return f"task:{task_id}"


def payload_problem(
    target: TaskStatus, *, result: Any, error: Any, input_requests: Any
) -> str | None:
    """What is wrong with a status change's payload, or None: a `completed` task carries
    its `result`, a `failed` one its JSON-RPC `error`, an `input_required` one its
    `input_requests` (a non-empty object, by key), and none carries another's."""
    given = {"result": result, "error": error, "input_requests": input_requests}
    wanted = {
        TaskStatus.COMPLETED: "result",
        TaskStatus.FAILED: "error",
        TaskStatus.INPUT_REQUIRED: "input_requests",
    }.get(target)
    stray = sorted(name for name, value in given.items() if value is not None and name != wanted)
    if stray:
        return f"a change to {target.value} carries no {', '.join(stray)}"
    if wanted is None:
        return None
    value = given[wanted]
    if not isinstance(value, dict) or (wanted == "input_requests" and not value):
        return f"a change to {target.value} carries {wanted} (a non-empty JSON object)"
    if wanted == "error" and not _json_rpc_error(value):
        return "error is a JSON-RPC error object: an integer code and a string message"
    return None


def _json_rpc_error(value: dict[str, Any]) -> bool:
    code, message = value.get("code"), value.get("message")
    return isinstance(code, int) and not isinstance(code, bool) and isinstance(message, str)


def accepted_responses(
    requests: dict[str, Any] | None, answered: dict[str, Any] | None, responses: dict[str, Any]
) -> dict[str, Any]:
    """The responses that answer an outstanding request: keys asked for and not yet
    answered (anything else is ignored)."""
    asked, done = requests or {}, answered or {}
    return {key: value for key, value in responses.items() if key in asked and key not in done}
