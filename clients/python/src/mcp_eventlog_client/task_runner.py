"""Run a coroutine as a durable task: for MCP servers that are not behind the gateway.

```python
runner = TaskRunner(TaskClient("http://127.0.0.1:8080"), lease_seconds=30)

async def work(run: TaskRun) -> dict[str, Any]:
    await run.progress({"progress": 50, "total": 100})
    answers = await run.ask({"confirm": {"method": "elicitation/create", "params": {...}}})
    return {"content": [{"type": "text", "text": "done"}], "isError": False}

started = await runner.start(work, principal="alice", request={"name": "slow"})
started.task             # stored before start() returns: tasks/get finds it on any replica
await started.wait()     # the settled task
```

What holds while a task runs here:

- **Durable before answering.** `start` returns once the service stored the task.
- **The lease is renewed however silent the work is.** A background heartbeat renews it
  every `lease_seconds / 3` (`renew_every`), so a coroutine that says nothing for many
  leases keeps its task `working`; progress events renew it too. If this process dies,
  the renewals stop and the service settles the task `failed` / `worker_lost` within the
  lease plus its sweep: never `working` for ever.
- **Every way out settles the task.** The coroutine's return value → `completed` with it as
  the result (a `CallToolResult`; `isError: true` stays `completed`). `TaskFailed` →
  `failed` with its JSON-RPC error. Any other exception → `failed` with `-32603` and the
  exception's text. Cancelling the coroutine from this process (`RunningTask.cancel`,
  `TaskRunner.aclose`) → `failed` with `-32603`, `data.reason = "worker_stopped"`.
- **A cancel is learned from the log.** A requester's `tasks/cancel` settles the task
  `cancelled` in the service; the worker's next write (the heartbeat included) is refused
  `409 terminal`, and the runner then cancels the coroutine and writes nothing more. So
  does a `Superseded` (another worker took the task over): the newer attempt owns it.
- **Input rounds.** `TaskRun.ask(requests)` moves the task to `input_required`, waits
  (polling its lease, which renews it) until every key is answered, moves it back to
  `working` and returns the answers.

Runs on asyncio (the coroutine is an `asyncio.Task`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from mcp_eventlog_client.errors import (
    EventLogError,
    ServiceRefusal,
    ServiceUnreachable,
    Superseded,
    TerminalGeneration,
    UnknownTask,
)
from mcp_eventlog_client.models import NewEvent
from mcp_eventlog_client.tasks import Task, TaskClient

logger = logging.getLogger("mcp_eventlog_client.tasks")
T = TypeVar("T")

INTERNAL_ERROR = -32603


class TaskFailed(EventLogError):
    """Raise from a task's coroutine to settle it `failed` with this JSON-RPC error."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(0, "task_failed", f"{code}: {message}")
        self.rpc_code = code
        self.message = message
        self.data = data

    def to_error(self) -> dict[str, Any]:
        """The JSON-RPC error object."""
        error: dict[str, Any] = {"code": self.rpc_code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error


class TaskStopped(EventLogError):
    """The task can no longer be written by this worker: it was cancelled or settled
    elsewhere (`TerminalGeneration`), or another attempt took it over (`Superseded`)."""

    def __init__(self, reason: str) -> None:
        super().__init__(0, "task_stopped", reason)
        self.reason = reason


def error_of(exception: BaseException) -> dict[str, Any]:
    """The JSON-RPC error a task that raised `exception` is settled with."""
    if isinstance(exception, TaskFailed):
        return exception.to_error()
    # The MCP SDK's own error (`McpError`) carries a JSON-RPC error object as `.error`.
    carried = getattr(exception, "error", None)
    code, message = getattr(carried, "code", None), getattr(carried, "message", None)
    if isinstance(code, int) and isinstance(message, str):
        return {"code": code, "message": message}
    return {"code": INTERNAL_ERROR, "message": str(exception) or type(exception).__name__}


def result_of(value: Any) -> dict[str, Any]:
    """The task result for what the coroutine returned: a mapping as it is, a pydantic
    model (the SDK's `CallToolResult`) dumped by its wire names."""
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        dumped = dump(by_alias=True, exclude_none=True, mode="json")
        if isinstance(dumped, dict):
            return dumped
    if isinstance(value, Mapping):
        return dict(value)
    raise TypeError(f"a task's result must be a JSON object, not {type(value).__name__}")


@dataclass
class TaskRun:
    """What the coroutine is given: its task, and the worker's writes to it."""

    tasks: TaskClient
    task: Task
    poll_seconds: float
    principal: str | None = None
    _stopped: asyncio.Event = field(default_factory=asyncio.Event)
    _stopped_here: bool = False

    @property
    def task_id(self) -> str:
        """The task's id."""
        return self.task.task_id

    @property
    def attempt(self) -> int:
        """This worker's attempt (its fencing token)."""
        return self.task.attempt

    async def progress(self, data: str | Mapping[str, Any], event: str = "progress") -> None:
        """Record a progress event (a mapping is sent as its JSON); renews the lease."""
        text = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
        await self._write(self.tasks.append(self.task_id, self.attempt, [NewEvent(text, event)]))

    async def say(self, status_message: str) -> None:
        """Set the task's `status_message` (renews the lease)."""
        self.task = await self._write(
            self.tasks.renew(self.task_id, self.attempt, status_message=status_message)
        )

    async def ask(
        self, input_requests: Mapping[str, Any], *, status_message: str | None = None
    ) -> dict[str, Any]:
        """One input round: `input_required` with `input_requests` (keys unique over the
        task's life) until every key is answered, then `working` again; the answers."""
        self.task = await self._write(
            self.tasks.set_status(
                self.task_id,
                self.attempt,
                "input_required",
                status_message=status_message,
                input_requests=input_requests,
            )
        )
        wanted = set(input_requests)
        while True:
            answers = self.task.input_responses or {}
            if wanted <= set(answers):
                break
            await asyncio.sleep(self.poll_seconds)
            self.task = await self._write(self.tasks.renew(self.task_id, self.attempt))
        self.task = await self._write(self.tasks.set_status(self.task_id, self.attempt, "working"))
        return {key: answers[key] for key in input_requests}

    async def _write(self, call: Awaitable[T]) -> T:
        try:
            return await call
        except (TerminalGeneration, Superseded, UnknownTask) as refused:
            self._stopped.set()
            raise TaskStopped(refused.code) from refused


@dataclass(eq=False)
class RunningTask:
    """A task being run: `task` as created, `wait()` for it settled."""

    task: Task
    _job: asyncio.Task[Task]
    _run: TaskRun
    _body: asyncio.Future[Any]

    async def wait(self) -> Task:
        """The task once this worker is done with it (settled, or taken from it)."""
        return await asyncio.shield(self._job)

    def cancel(self) -> None:
        """Stop the coroutine; the task is settled `failed` (`worker_stopped`)."""
        self._run._stopped_here = True
        self._body.cancel()

    def done(self) -> bool:
        """Whether this worker is done with the task."""
        return self._job.done()


Work = Callable[[TaskRun], Awaitable[Any]]


class TaskRunner:
    """Runs coroutines as tasks recorded in the log (see the module docstring).

    `lease_seconds` is each task's worker lease; `renew_every` (default a third of it) how
    often the heartbeat renews it; `poll_seconds` how often `TaskRun.ask` looks for answers.
    """

    def __init__(
        self,
        tasks: TaskClient,
        *,
        lease_seconds: int = 30,
        renew_every: float | None = None,
        poll_seconds: float = 0.25,
        producer: str | None = None,
    ) -> None:
        self.tasks = tasks
        self.lease_seconds = lease_seconds
        self.renew_every = renew_every if renew_every is not None else lease_seconds / 3
        self.poll_seconds = poll_seconds
        self.producer = producer
        self._running: set[RunningTask] = set()

    async def start(
        self,
        work: Work,
        *,
        principal: str | None = None,
        ttl_ms: int | None = None,
        poll_interval_ms: int | None = None,
        request: Mapping[str, Any] | None = None,
    ) -> RunningTask:
        """Create the task (durable when this returns) and run `work` in the background."""
        task = await self.tasks.create(
            principal=principal,
            ttl_ms=ttl_ms,
            poll_interval_ms=poll_interval_ms,
            request=request,
            lease_seconds=self.lease_seconds,
            producer=self.producer,
        )
        run = TaskRun(self.tasks, task, self.poll_seconds, principal)
        try:
            body = asyncio.ensure_future(work(run))
        except Exception as wrong:
            # `work` raised before it could run (not a coroutine function, a bad argument):
            # the stored task still settles, failed with why.
            await self._settle(run, "failed", error=error_of(wrong))
            raise
        job = asyncio.get_running_loop().create_task(self._drive(run, body))
        running = RunningTask(task, job, run, body)
        self._running.add(running)
        job.add_done_callback(lambda _: self._running.discard(running))
        return running

    async def run(self, work: Work, **options: Any) -> Task:
        """`start`, then wait for the task to settle."""
        started = await self.start(work, **options)
        return await started.wait()

    async def aclose(self) -> None:
        """Stop every coroutine still running; each task is settled `failed`."""
        running = list(self._running)
        for one in running:
            one.cancel()
        await asyncio.gather(*(one.wait() for one in running), return_exceptions=True)

    async def _drive(self, run: TaskRun, body: asyncio.Future[Any]) -> Task:
        heartbeat = asyncio.ensure_future(self._heartbeat(run, body))
        stopped = {
            "code": INTERNAL_ERROR,
            "message": "the worker stopped before the task settled",
            "data": {"reason": "worker_stopped"},
        }
        try:
            await asyncio.wait({body})
        except asyncio.CancelledError:
            # This job itself was cancelled (the loop is closing): the coroutine ends, and
            # the task with it.
            body.cancel()
            with contextlib.suppress(BaseException):
                await body
            return await asyncio.shield(self._settle(run, "failed", error=stopped))
        finally:
            heartbeat.cancel()
            with contextlib.suppress(BaseException):
                await heartbeat
        if body.cancelled() and run._stopped_here and not run._stopped.is_set():
            return await self._settle(run, "failed", error=stopped)
        if body.cancelled() or run._stopped.is_set():
            # Cancelled, settled or taken over in the service: no longer ours to write.
            return await self._current(run)
        failure = body.exception()
        if failure is not None:
            return await self._settle(run, "failed", error=error_of(failure))
        try:
            result = result_of(body.result())
        except TypeError as wrong:
            return await self._settle(run, "failed", error=error_of(wrong))
        try:
            return await self._settle(run, "completed", result=result)
        except ServiceRefusal as refused:
            # The result itself was refused (over a size limit, not JSON the service
            # takes): the task must still settle, so it fails saying why.
            error = {"code": INTERNAL_ERROR, "message": f"the result was not stored: {refused}"}
            return await self._settle(run, "failed", error=error)

    async def _heartbeat(self, run: TaskRun, body: asyncio.Future[Any]) -> None:
        """Renew the lease until the work ends; stop the work when the task is no longer
        this worker's (cancelled, settled elsewhere, taken over)."""
        while not body.done():
            await asyncio.sleep(self.renew_every)
            try:
                run.task = await run.tasks.renew(run.task_id, run.attempt)
            except (TerminalGeneration, Superseded, UnknownTask):
                run._stopped.set()
                body.cancel()
                return
            except EventLogError as failed:
                # Unreachable or refused for now: the next beat tries again, well within
                # the lease (a beat is a third of it by default).
                logger.warning("task %s: lease renewal failed: %s", run.task_id, failed)

    async def _settle(self, run: TaskRun, status: str, **payload: Any) -> Task:
        """Write the outcome. A status change is not retried by the connection; here a
        repeat after no answer is safe: if the first one was stored, the repeat is
        refused `terminal` and the stored task is read instead."""
        policy = run.tasks.connection.retry
        for attempt in range(policy.attempts):
            try:
                return await run.tasks.set_status(
                    run.task_id,
                    run.attempt,
                    status,  # type: ignore[arg-type]
                    **payload,
                )
            except (TerminalGeneration, Superseded, UnknownTask):
                return await self._current(run)
            except ServiceUnreachable:
                if attempt + 1 >= policy.attempts:
                    raise
                await asyncio.sleep(policy.delay(attempt))
        raise AssertionError("unreachable: the last attempt returns or raises")  # pragma: no cover

    async def _current(self, run: TaskRun) -> Task:
        with contextlib.suppress(EventLogError):
            return await run.tasks.get(run.task_id, principal=run.principal)
        return run.task
