"""The gateway as the task host of `io.modelcontextprotocol/tasks` (SEP-2663) for an
upstream that knows nothing of tasks (CONTRACT.md, "The gateway hosts tasks for any
server"; docs/tasks.md, "The gateway as task host").

For a 2026-07-28 POST it answers, or leaves to plain forwarding (`None`):
- `server/discover`: the upstream's answer with the extension advertised;
- `tools/list`: the upstream's answer with `execution.taskSupport` on the task tools;
- `tools/call` of a task tool: from a requester that declared the extension (in the
  request's `_meta` client capabilities), a `CreateTaskResult` once the task is committed,
  the call then run by `TaskWorkers`; from one that did not, the call forwarded
  synchronously (or -32021 for a `required` tool); other tools pass through;
- `tasks/get`, `tasks/update`, `tasks/cancel`: from the log, on any replica, with
  `Mcp-Name` checked against `taskId` (-32020, HTTP 400); unknown, expired and another
  principal's tasks are one answer, -32602; `tasks/result` and `tasks/list` (removed by
  the extension) are -32601;
- `subscriptions/listen` asking for `taskIds` only: `notifications/tasks` from the log
  (`app.gateway.task_listen`), on any replica;
- `tasks/stream` (SEP-2694 draft): the task's events after `after` as an SSE response of
  notifications (`id:` the event's seq), ended by the task's answer once it settled;
  `after` before what is retained is -32010 `events_gone` with `data.earliestSeq`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

from starlette.responses import Response, StreamingResponse

from app.errors import PageOutOfRange, TaskConflict, TaskEventsGone, UnknownTask
from app.gateway import task_wire as wire
from app.gateway.task_calls import Unanswered, call
from app.gateway.task_listen import TaskListener, task_ids_only
from app.gateway.task_spec import TaskSpec
from app.gateway.task_worker import TaskWorkers
from app.gateway.upstream import Upstream
from app.service.eventlog import EventLogService
from app.service.tasks import TaskService
from app.storage.tasks import TaskRecord

_TASK_METHODS = frozenset({"tasks/get", "tasks/update", "tasks/cancel", "tasks/stream"})
_REMOVED = frozenset({"tasks/result", "tasks/list"})
_STREAM_POLL_SECONDS = 0.2


def _json(body: bytes, status: int = 200) -> Response:
    return Response(body, status_code=status, media_type="application/json")


class TaskHost:
    """Answers the tasks extension's part of the MCP endpoint (see the module)."""

    def __init__(
        self,
        spec: TaskSpec,
        tasks: TaskService,
        eventlog: EventLogService,
        upstream: Upstream,
        tenant: str,
        lease_seconds: int,
    ) -> None:
        self._spec = spec
        self._tasks = tasks
        self._eventlog = eventlog
        self._upstream = upstream
        self._tenant = tenant
        self._lease_seconds = lease_seconds
        self.workers = TaskWorkers(tasks, upstream, tenant, lease_seconds)
        self._listener = TaskListener(tasks, tenant)

    async def answer(
        self, body: bytes, headers: list[tuple[str, str]], principal: str | None
    ) -> Response | None:
        """The answer to a 2026-07-28 POST, or None to forward it as it came."""
        try:
            message = json.loads(body)
        except ValueError:
            return None
        if not isinstance(message, dict) or not isinstance(message.get("method"), str):
            return None
        method: str = message["method"]
        params = message.get("params")
        params = params if isinstance(params, dict) else {}
        request_id = message.get("id")
        if method in _REMOVED:
            return _json(wire.error(request_id, wire.METHOD_NOT_FOUND, f"{method} was removed"))
        if method in _TASK_METHODS:
            return await self._task_method(method, request_id, params, headers, principal)
        if method == "tools/call":
            return await self._tool_call(message, params, headers, principal)
        if method in ("server/discover", "tools/list"):
            return await self._augmented(method, message, headers)
        if method == "subscriptions/listen":
            return self._listen(request_id, params, principal)
        return None

    def _listen(
        self, request_id: object, params: dict[str, Any], principal: str | None
    ) -> Response | None:
        task_ids = task_ids_only(params)
        if task_ids is None:
            return None
        if not wire.declared(params):
            return _json(wire.missing_capability(request_id, "a taskIds subscription"))
        frames = self._listener.frames(request_id, task_ids, principal)
        return StreamingResponse(frames, media_type="text/event-stream")

    async def _augmented(
        self, method: str, message: dict[str, Any], headers: list[tuple[str, str]]
    ) -> Response | None:
        try:
            answer = await call(self._upstream, headers, message)
        except Unanswered:
            return None  # forwarded again as it came: the requester sees what the upstream says
        if "error" in answer:
            # A refusal keeps its HTTP status (a -32020 is a 400): forwarded again as it
            # came (both methods only read), so the requester gets the upstream's response.
            return None
        result = answer.get("result")
        if isinstance(result, dict):
            if method == "server/discover":
                capabilities = result.setdefault("capabilities", {})
                capabilities.setdefault("extensions", {})[wire.EXTENSION] = {}
            else:
                for tool in result.get("tools") or []:
                    how = self._spec.of(str(tool.get("name")))
                    if how is not None:
                        tool.setdefault("execution", {})["taskSupport"] = how.support
        return _json(json.dumps(answer).encode())

    async def _tool_call(
        self,
        message: dict[str, Any],
        params: dict[str, Any],
        headers: list[tuple[str, str]],
        principal: str | None,
    ) -> Response | None:
        how = self._spec.of(str(params.get("name")))
        if how is None:
            return None
        request_id = message.get("id")
        if not wire.declared(params):
            if how.support == "required":
                return _json(wire.missing_capability(request_id, f"the tool {params.get('name')}"))
            return None
        if how.input_first and "inputResponses" not in params:
            return None
        mismatch = _header_mismatch(headers, "tools/call", params.get("name"))
        if mismatch is not None:
            return _json(wire.error(request_id, wire.HEADER_MISMATCH, mismatch), 400)
        stored = {"method": "tools/call", "params": {"name": params.get("name")}}
        task = await self._tasks.create(
            self._tenant,
            principal=principal,
            request=stored,
            lease_seconds=self._lease_seconds,
            producer="gateway",
        )
        self.workers.start(task, message, headers)
        return _json(wire.result(request_id, wire.created(task)))

    async def _task_method(
        self,
        method: str,
        request_id: object,
        params: dict[str, Any],
        headers: list[tuple[str, str]],
        principal: str | None,
    ) -> Response:
        task_id = params.get("taskId")
        mismatch = _header_mismatch(headers, method, task_id)
        if mismatch is not None:
            return _json(wire.error(request_id, wire.HEADER_MISMATCH, mismatch), 400)
        if not wire.declared(params):
            return _json(wire.missing_capability(request_id, method))
        if not isinstance(task_id, str):
            return _json(wire.error(request_id, wire.INVALID_PARAMS, "taskId must be a string"))
        try:
            if method == "tasks/get":
                task = await self._tasks.get(self._tenant, task_id, principal)
                return _json(wire.result(request_id, wire.detailed(task)))
            if method == "tasks/update":
                return await self._update(request_id, task_id, params, principal)
            if method == "tasks/cancel":
                await self._cancel(task_id, principal)
                return _json(wire.result(request_id, {"resultType": "complete"}))
            return await self._stream(request_id, task_id, params, principal)
        except UnknownTask:
            return _json(wire.error(request_id, wire.INVALID_PARAMS, "unknown task"))

    async def _update(
        self, request_id: object, task_id: str, params: dict[str, Any], principal: str | None
    ) -> Response:
        responses = params.get("inputResponses")
        if not isinstance(responses, dict):
            detail = "inputResponses must be an object"
            return _json(wire.error(request_id, wire.INVALID_PARAMS, detail))
        # A settled task takes no input; the ack says nothing about the task either way.
        with contextlib.suppress(TaskConflict):
            await self._tasks.answer_input(self._tenant, task_id, principal, responses)
        return _json(wire.result(request_id, {"resultType": "complete"}))

    async def _cancel(self, task_id: str, principal: str | None) -> None:
        await self._tasks.cancel(self._tenant, task_id, principal)
        self.workers.cut(task_id)

    async def _stream(
        self, request_id: object, task_id: str, params: dict[str, Any], principal: str | None
    ) -> Response:
        after = params.get("after", 0)
        if not isinstance(after, int) or isinstance(after, bool) or after < 0:
            return _json(wire.error(request_id, wire.INVALID_PARAMS, "after must be a seq >= 0"))
        task, token = await self._tasks.events_of(self._tenant, task_id, principal)
        try:
            async with self._tasks.gone_as_evicted(self._tenant, token):
                first = await self._eventlog.page(self._tenant, token, after=after, limit=1)
        except TaskEventsGone as gone:
            data = {"reason": "events_gone", "earliestSeq": gone.earliest_seq}
            return _json(wire.error(request_id, wire.EVENTS_GONE, str(gone), data))
        except PageOutOfRange as beyond:
            return _json(wire.error(request_id, wire.INVALID_PARAMS, str(beyond)))
        del first
        events = self._events(request_id, task, token, after, principal)
        return StreamingResponse(events, media_type="text/event-stream")

    async def _events(
        self, request_id: object, task: TaskRecord, token: str, after: int, principal: str | None
    ) -> AsyncIterator[bytes]:
        cursor = after
        while True:
            gen, page = await self._eventlog.page(self._tenant, token, after=cursor, limit=500)
            for event in page.events:
                yield f"id: {event.seq}\nevent: message\ndata: {event.data}\n\n".encode()
            cursor = page.through
            if gen.terminal and cursor >= (gen.terminal_seq or gen.tail_seq):
                break
            if not page.events:
                await asyncio.sleep(_STREAM_POLL_SECONDS)
        settled = await self._tasks.get(self._tenant, task.task_id, principal)
        final = wire.result(request_id, wire.detailed(settled)).decode()
        yield f"event: message\ndata: {final}\n\n".encode()

    async def close(self, grace: float) -> None:
        """Stop the calls this replica runs (after up to `grace` seconds)."""
        await self.workers.close(grace)


def _header_mismatch(headers: list[tuple[str, str]], method: str, name: object) -> str | None:
    """Why `Mcp-Method` / `Mcp-Name` do not match the body (SEP-2243), or None."""
    values = {n.lower(): v.strip() for n, v in headers}
    sent_method = values.get("mcp-method")
    if sent_method is not None and sent_method != method:
        return "the Mcp-Method header does not match the request's method"
    sent_name = values.get("mcp-name")
    if sent_name is None:
        return "the Mcp-Name header is missing"
    if sent_name != name:
        return "the Mcp-Name header does not match the request"
    return None
