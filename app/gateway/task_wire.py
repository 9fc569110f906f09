"""The tasks extension's wire shapes (SEP-2663) made from the log's task records.

A `CreateTaskResult` is flat (`resultType: "task"` and the task's fields at the top); a
`tasks/get` answer (DetailedTask) is `resultType: "complete"` with the fields and, by
status, the inlined `result`, `error` or the `inputRequests` not answered yet. Durations
are integer milliseconds (`ttlMs`, `pollIntervalMs`), times ISO-8601 in UTC. The task's
fields and what its status inlines are made by the Python client's one implementation
(`mcp_eventlog_client.task_records`, which its own `Task.to_mcp` answers with too); here,
the results and envelopes around them.
"""

from __future__ import annotations

import json
from typing import Any

from mcp_eventlog_client.task_records import mcp_detailed, mcp_task_fields

from app.storage.tasks import TaskRecord

EXTENSION = "io.modelcontextprotocol/tasks"
CAPABILITIES_META = "io.modelcontextprotocol/clientCapabilities"
# JSON-RPC codes of the 2026-07-28 revision and the extension.
INVALID_PARAMS = -32602
METHOD_NOT_FOUND = -32601
HEADER_MISMATCH = -32020
MISSING_CAPABILITY = -32021
EVENTS_GONE = -32010


def task_fields(task: TaskRecord) -> dict[str, Any]:
    """The `Task` fields every answer about a task carries."""
    return mcp_task_fields(task)


def created(task: TaskRecord) -> dict[str, Any]:
    """The `CreateTaskResult` of a stored task."""
    return {"resultType": "task", **mcp_task_fields(task)}


def detailed(task: TaskRecord) -> dict[str, Any]:
    """The `tasks/get` answer: the task with what its status inlines."""
    return {"resultType": "complete", **mcp_detailed(task)}


def status_notification(task: TaskRecord) -> dict[str, Any]:
    """`notifications/tasks` for the task's current status."""
    params = detailed(task)
    params.pop("resultType")
    return {"jsonrpc": "2.0", "method": "notifications/tasks", "params": params}


def declared(params: dict[str, Any]) -> bool:
    """Whether the request's `_meta` client capabilities declare the tasks extension."""
    meta = params.get("_meta")
    capabilities = meta.get(CAPABILITIES_META) if isinstance(meta, dict) else None
    extensions = capabilities.get("extensions") if isinstance(capabilities, dict) else None
    return isinstance(extensions, dict) and EXTENSION in extensions


def result(request_id: object, value: dict[str, Any]) -> bytes:
    """A JSON-RPC result response."""
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "result": value}).encode()


def error(request_id: object, code: int, message: str, data: Any = None) -> bytes:
    """A JSON-RPC error response."""
    body: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        body["data"] = data
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "error": body}).encode()


def missing_capability(request_id: object, what: str) -> bytes:
    """-32021: the request needs the tasks extension the requester did not declare."""
    data: dict[str, Any] = {"requiredCapabilities": {"extensions": {EXTENSION: {}}}}
    return error(request_id, MISSING_CAPABILITY, f"{what} needs the {EXTENSION} extension", data)
