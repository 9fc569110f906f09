"""MCP's tasks extension (`io.modelcontextprotocol/tasks`, SEP-2663) for a server built on
the official Python SDK (`mcp` 2.3), with the task record in the log.

```python
from mcp.server.mcpserver import MCPServer
from mcp_eventlog_client.mcp.tasks import EventLogTasks
from mcp_eventlog_client.task_runner import TaskRunner
from mcp_eventlog_client.tasks import TaskClient

tasks = EventLogTasks(TaskRunner(TaskClient("http://127.0.0.1:8080")), tools={"slow_compute"})
server = MCPServer("demo", extensions=[tasks])
```

`mcp` 2.3 lets an extension serve new request methods (`Extension.methods`) and wrap
`tools/call` (`Extension.intercept_tool_call`); it ships no task store and no `tasks/*`
handlers of its own. This extension:

- advertises `io.modelcontextprotocol/tasks`;
- turns a call of a tool named in `tools` into a task when the request declared the
  extension: the task is stored in the log (so `tasks/get` resolves on every replica)
  before the `CreateTaskResult` is answered, and the tool's own handler runs as the task's
  coroutine under a `TaskRunner` (lease renewed, result, error or cancel recorded). A
  requester that did not declare the extension gets the call run synchronously, or
  `-32021` for a tool named in `required`;
- serves `tasks/get`, `tasks/update` and `tasks/cancel` from the log, so a replica that
  never saw the task answers them: an unknown, expired or another principal's task is
  `-32602`, as the extension says; a requester that did not declare the extension
  `-32021`; an `Mcp-Name` header naming another task than `params.taskId` `-32020`.

The principal a task is bound to is `principal(ctx)` (default: none, so the 128-bit task id
is the capability). Inside the tool, `current_task_run()` is the `TaskRun` (progress
events, input rounds) while it runs as a task, `None` otherwise.

`EventLogTaskStore` is the same calls shaped as the `TaskStore` of the SDK's unreleased
tasks extension (python-sdk PR #3005): create / get / result / complete / fail / cancel.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any, Literal

from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.extension import Extension, MethodBinding
from mcp.server.mcpserver.server import require_client_extension
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolRequestParams, CallToolResult, Request, RequestParams, Result
from pydantic import ConfigDict, Field

from mcp_eventlog_client.errors import TerminalGeneration, UnknownTask
from mcp_eventlog_client.task_runner import TaskRun, TaskRunner, result_of
from mcp_eventlog_client.tasks import Task, TaskClient

TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
INVALID_PARAMS = -32602

_CURRENT: contextvars.ContextVar[TaskRun | None] = contextvars.ContextVar(
    "mcp_eventlog_task_run", default=None
)


def current_task_run() -> TaskRun | None:
    """The `TaskRun` of the tool call running as a task in this context, if it is one."""
    return _CURRENT.get()


class TaskIdParams(RequestParams):
    """`tasks/get` and `tasks/cancel` params."""

    task_id: str = Field(alias="taskId")


class UpdateTaskParams(TaskIdParams):
    """`tasks/update` params: answers to the task's `inputRequests`, by key."""

    input_responses: dict[str, Any] = Field(alias="inputResponses")


class GetTaskRequest(Request[TaskIdParams, Literal["tasks/get"]]):
    """`tasks/get`, for `ClientSession.send_request` (its `Mcp-Name` is the task id)."""

    method: Literal["tasks/get"] = "tasks/get"
    name_param = "taskId"


class UpdateTaskRequest(Request[UpdateTaskParams, Literal["tasks/update"]]):
    """`tasks/update`, for `ClientSession.send_request`."""

    method: Literal["tasks/update"] = "tasks/update"
    name_param = "taskId"


class CancelTaskRequest(Request[TaskIdParams, Literal["tasks/cancel"]]):
    """`tasks/cancel`, for `ClientSession.send_request`."""

    method: Literal["tasks/cancel"] = "tasks/cancel"
    name_param = "taskId"


class TaskAnswer(Result):
    """What `tasks/get` (a `DetailedTask`), `tasks/update` and `tasks/cancel` answer, as sent:
    read it with `model_dump(by_alias=True, exclude_none=True)`."""

    model_config = ConfigDict(extra="allow")
    result_type: str | None = None


async def send_task_request(session: Any, request: Request[Any, Any]) -> dict[str, Any]:
    """Send a `tasks/*` request through an SDK `ClientSession`; its answer as a wire object."""
    answer = await session.send_request(request, TaskAnswer)
    dumped: dict[str, Any] = answer.model_dump(by_alias=True, exclude_none=True)
    return dumped


class CreateTaskResult(Result):
    """A `tools/call` answered with a task (`resultType: "task"`): the task's seed state."""

    model_config = ConfigDict(extra="allow")
    result_type: Literal["task"] = "task"
    task_id: str
    status: str
    poll_interval_ms: int | None = None


Principal = Callable[[ServerRequestContext[Any, Any]], str | None]


def _no_principal(ctx: ServerRequestContext[Any, Any]) -> str | None:
    return None


def _not_found(task_id: str) -> MCPError:
    # One answer for never issued, expired and another's: the id reveals nothing.
    return MCPError(code=INVALID_PARAMS, message="Failed to retrieve task: Task not found")


HEADER_MISMATCH = -32020


def _check(ctx: ServerRequestContext[Any, Any], task_id: str) -> None:
    """The request declared the extension (-32021), and its `Mcp-Name` header, where the
    transport carries one, names the task of its params (-32020)."""
    require_client_extension(ctx, TASKS_EXTENSION)
    headers = getattr(ctx.request, "headers", None)
    named = headers.get("mcp-name") if headers is not None else None
    if named is not None and named != task_id:
        raise MCPError(code=HEADER_MISMATCH, message="Mcp-Name does not match params.taskId")


def _declared(ctx: ServerRequestContext[Any, Any]) -> bool:
    try:
        require_client_extension(ctx, TASKS_EXTENSION)
    except MCPError:
        return False
    return True


class EventLogTasks(Extension):
    """The tasks extension over the log (see the module docstring)."""

    identifier = TASKS_EXTENSION

    def __init__(
        self,
        runner: TaskRunner,
        *,
        tools: Collection[str] = (),
        required: Collection[str] = (),
        principal: Principal = _no_principal,
        ttl_ms: int | None = None,
        poll_interval_ms: int | None = None,
    ) -> None:
        self.runner = runner
        self.tasks: TaskClient = runner.tasks
        self.required_tools = frozenset(required)
        self.task_tools = frozenset(tools) | self.required_tools
        self.principal = principal
        self.ttl_ms = ttl_ms
        self.poll_interval_ms = poll_interval_ms

    def methods(self) -> list[MethodBinding]:
        """`tasks/get`, `tasks/update`, `tasks/cancel`."""
        return [
            MethodBinding("tasks/get", TaskIdParams, self._get),
            MethodBinding("tasks/update", UpdateTaskParams, self._update),
            MethodBinding("tasks/cancel", TaskIdParams, self._cancel),
        ]

    async def intercept_tool_call(
        self,
        params: CallToolRequestParams,
        ctx: ServerRequestContext[Any, Any],
        call_next: CallNext,
    ) -> HandlerResult:
        """A call of a task tool from a requester that declared the extension becomes a
        task; the tool's handler is its coroutine."""
        if params.name not in self.task_tools:
            return await call_next(ctx)
        if not _declared(ctx):
            if params.name in self.required_tools:
                require_client_extension(ctx, TASKS_EXTENSION)  # raises -32021
            return await call_next(ctx)

        async def work(run: TaskRun) -> dict[str, Any]:
            _CURRENT.set(run)
            result = result_of(await call_next(ctx))
            result.pop("resultType", None)  # the task's result is the tool's, not an envelope
            return result

        request = {
            "method": "tools/call",
            "params": params.model_dump(by_alias=True, mode="json", exclude_none=True),
        }
        started = await self.runner.start(
            work,
            principal=self.principal(ctx),
            ttl_ms=self.ttl_ms,
            poll_interval_ms=self.poll_interval_ms,
            request=request,
        )
        return {"resultType": "task", **started.task.to_mcp()}

    async def _get(self, ctx: ServerRequestContext[Any, Any], params: Any) -> HandlerResult:
        _check(ctx, params.task_id)
        try:
            task = await self.tasks.get(params.task_id, principal=self.principal(ctx))
        except UnknownTask:
            raise _not_found(params.task_id) from None
        return {"resultType": "complete", **task.to_mcp()}

    async def _update(self, ctx: ServerRequestContext[Any, Any], params: Any) -> HandlerResult:
        _check(ctx, params.task_id)
        try:
            await self.tasks.answer(
                params.task_id, params.input_responses, principal=self.principal(ctx)
            )
        except UnknownTask:
            raise _not_found(params.task_id) from None
        except TerminalGeneration:
            pass  # a settled task takes no answers; the ack says nothing more
        return {"resultType": "complete"}

    async def _cancel(self, ctx: ServerRequestContext[Any, Any], params: Any) -> HandlerResult:
        _check(ctx, params.task_id)
        try:
            await self.tasks.cancel(params.task_id, principal=self.principal(ctx))
        except UnknownTask:
            raise _not_found(params.task_id) from None
        return {"resultType": "complete"}


class EventLogTaskStore:
    """The task calls shaped as the `TaskStore` of the SDK's unreleased tasks extension
    (python-sdk PR #3005: `create`, `get`, `result`, `complete`, `fail`, `cancel`), over
    the log: a thin adapter, so a server that adopts the SDK's extension when it ships
    keeps its tasks durable and readable from every replica.

    The PR's store is written by the process that runs the task; here each write is fenced
    by the attempt `create` returned (kept per task id in this adapter), so a write from a
    worker that lost the task is refused instead of overwriting the newer attempt's.
    """

    def __init__(self, tasks: TaskClient, *, lease_seconds: int | None = None) -> None:
        self.tasks = tasks
        self.lease_seconds = lease_seconds
        self._attempts: dict[str, int] = {}

    async def create(
        self,
        *,
        ttl_ms: int | None = None,
        poll_interval_ms: int | None = None,
        principal: str | None = None,
        request: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """A new `working` task, stored before this returns; its MCP `Task` shape."""
        task = await self.tasks.create(
            principal=principal,
            ttl_ms=ttl_ms,
            poll_interval_ms=poll_interval_ms,
            request=request,
            lease_seconds=self.lease_seconds,
        )
        self._attempts[task.task_id] = task.attempt
        return task.to_mcp()

    async def get(self, task_id: str, principal: str | None = None) -> dict[str, Any] | None:
        """The task's MCP shape, or None when unknown, expired or another principal's."""
        try:
            return (await self.tasks.get(task_id, principal=principal)).to_mcp()
        except UnknownTask:
            return None

    async def result(self, task_id: str, principal: str | None = None) -> dict[str, Any] | None:
        """The completed task's result (None until then)."""
        try:
            task = await self.tasks.get(task_id, principal=principal)
        except UnknownTask:
            return None
        return task.result if task.status == "completed" else None

    async def complete(self, task_id: str, result: Any) -> dict[str, Any]:
        """Settle the task `completed` with `result` (a `CallToolResult`)."""
        return await self._settle(task_id, "completed", result=result_of(result))

    async def fail(self, task_id: str, error: Mapping[str, Any]) -> dict[str, Any]:
        """Settle the task `failed` with a JSON-RPC error object."""
        return await self._settle(task_id, "failed", error=dict(error))

    async def cancel(self, task_id: str, principal: str | None = None) -> dict[str, Any]:
        """Cancel the task (a settled task stays as it is)."""
        return (await self.tasks.cancel(task_id, principal=principal)).to_mcp()

    async def _settle(self, task_id: str, status: Any, **payload: Any) -> dict[str, Any]:
        attempt = self._attempts.get(task_id)
        if attempt is None:
            attempt = (await self.tasks.get(task_id)).attempt
        task: Task = await self.tasks.set_status(task_id, attempt, status, **payload)
        self._attempts.pop(task_id, None)
        return task.to_mcp()


class PollTasks(ClientExtension):
    """The requester's side for the official Python SDK's `Client`: declares the tasks
    extension and resolves a `CreateTaskResult` by polling `tasks/get` (at the task's
    `pollIntervalMs`, at least `min_poll_seconds`) until it settles, so `call_tool`
    returns the final `CallToolResult`. A `failed` task raises its JSON-RPC error as
    `MCPError`; a `cancelled` one `MCPError(-32800)`; one that asks for input is answered
    by `answer(input_requests) -> input_responses` when given (else it raises).
    Call with `allow_claimed=True` to get the `CreateTaskResult` itself instead.
    """

    identifier = TASKS_EXTENSION

    def __init__(
        self,
        *,
        min_poll_seconds: float = 0.05,
        answer: Callable[[dict[str, Any]], Any] | None = None,
    ) -> None:
        self.min_poll_seconds = min_poll_seconds
        self.answer = answer

    def claims(self) -> Sequence[ResultClaim[Any]]:
        """The `task` result of `tools/call`."""
        return [ResultClaim(result_type="task", model=CreateTaskResult, resolve=self._resolve)]

    async def _resolve(self, created: CreateTaskResult, ctx: ClaimContext) -> CallToolResult:
        params = TaskIdParams(taskId=created.task_id)
        interval = max((created.poll_interval_ms or 0) / 1000, self.min_poll_seconds)
        answered: set[str] = set()
        while True:
            task = await send_task_request(ctx.session, GetTaskRequest(params=params))
            status = task.get("status")
            if status == "completed":
                return CallToolResult.model_validate(task.get("result") or {})
            if status == "failed":
                error = task.get("error") or {}
                raise MCPError(
                    code=int(error.get("code", -32603)),
                    message=str(error.get("message", "the task failed")),
                    data=error.get("data"),
                )
            if status == "cancelled":
                raise MCPError(code=-32800, message="the task was cancelled")
            asks = {
                key: request
                for key, request in (task.get("inputRequests") or {}).items()
                if key not in answered
            }
            if status == "input_required" and asks:
                if self.answer is None:
                    raise MCPError(code=-32603, message="the task asks for input: pass answer=")
                responses = await self.answer(asks)
                update = UpdateTaskParams(taskId=created.task_id, inputResponses=responses)
                await send_task_request(ctx.session, UpdateTaskRequest(params=update))
                answered |= set(asks)
            await asyncio.sleep(max(interval, (task.get("pollIntervalMs") or 0) / 1000))
