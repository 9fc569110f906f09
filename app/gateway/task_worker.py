"""The worker side of the gateway's tasks: one upstream call run to a settled task.

The replica that created a task runs it: it sends the `tools/call` to the upstream and
holds the task's worker lease (attempt 1) while the call runs, renewing it every third of
the lease; the call's progress notifications are appended as the task's events. The
upstream's answer settles the task — a result `completed` (a tool error too, with
`isError`), a JSON-RPC error `failed`, an `InputRequiredResult` `input_required` with its
requests, after which the worker waits for every request to be answered (`tasks/update`,
on any replica, is read from the log) and sends the answers in the next round.

A cancel is recorded by whichever replica takes it; this worker learns it from its next
renewal (`409 terminal`) — or at once when the cancel came to this replica — and cuts the
upstream call. A worker that dies stops renewing: the lease runs out and the sweep of any
replica settles the task `failed` / `worker_lost`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from typing import Any

from app.domain.append import EventBody
from app.domain.backoff import Backoff
from app.domain.tasks import TaskStatus
from app.errors import StorageUnavailable, TaskConflict, UnknownTask, UpstreamUnavailable
from app.gateway.errors import GatewayError
from app.gateway.task_calls import Unanswered, call
from app.gateway.upstream import Upstream
from app.service.tasks import TaskService
from app.storage.tasks import TaskRecord

log = logging.getLogger(__name__)
# Waiting for input, the log is read every 0.1 s at first, then less often (up to 1 s): a
# prompt answer is taken at once, a requester that takes an hour costs a read a second.
_INPUT_POLLS = Backoff(first=0.1, most=1.0, factor=1.5)
_RETRIES = Backoff(first=0.25, most=2.0)


class _Stopped(GatewayError):
    """The task settled without this worker (cancelled, lost, expired): stop quietly."""

    code = "internal_error"

    def __init__(self) -> None:
        super().__init__("the task settled without this worker")


class TaskWorkers:
    """The tasks this replica runs, by id."""

    def __init__(
        self,
        tasks: TaskService,
        upstream: Upstream,
        tenant: str,
        lease_seconds: int,
    ) -> None:
        self._tasks = tasks
        self._upstream = upstream
        self._tenant = tenant
        self._renew_every = max(0.2, lease_seconds / 3)
        self._running: dict[str, asyncio.Task[None]] = {}

    def start(
        self, task: TaskRecord, message: dict[str, Any], headers: list[tuple[str, str]]
    ) -> None:
        """Run `message` (a `tools/call`) against the upstream as `task`, in the background."""
        runner = asyncio.create_task(self._run(task, message, headers), name=f"task {task.task_id}")
        self._running[task.task_id] = runner
        runner.add_done_callback(lambda _: self._running.pop(task.task_id, None))

    def cut(self, task_id: str) -> None:
        """Stop running `task_id` here, if it runs here (it was cancelled)."""
        runner = self._running.get(task_id)
        if runner is not None:
            runner.cancel()

    async def close(self, grace: float) -> None:
        """Let the calls in flight finish for up to `grace` seconds, then stop the rest
        (their tasks are then settled `worker_lost` by the lease rule)."""
        running = list(self._running.values())
        if running:
            log.info("waiting up to %s s for %d task call(s) to finish", grace, len(running))
            await asyncio.wait(running, timeout=grace)
        for runner in running:
            runner.cancel()
        for runner in running:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await runner

    async def _run(
        self, task: TaskRecord, message: dict[str, Any], headers: list[tuple[str, str]]
    ) -> None:
        rounds = asyncio.create_task(self._rounds(task, message, headers))
        try:
            while not rounds.done():
                await asyncio.wait({rounds}, timeout=self._renew_every)
                if not rounds.done() and not await self._renewed(task):
                    rounds.cancel()
        finally:
            if not rounds.done():
                rounds.cancel()
            try:
                await rounds
            except (asyncio.CancelledError, _Stopped):
                pass
            except Exception:  # renewals stop with it: the lease rule settles the task
                log.exception("task %s: the worker failed", task.task_id)

    async def _renewed(self, task: TaskRecord) -> bool:
        try:
            await self._tasks.renew(self._tenant, task.task_id, attempt=task.attempt)
        except (TaskConflict, UnknownTask):
            return False
        except Exception:  # the database down a moment: the lease has room for the next try
            log.warning("task %s: renewing its lease failed", task.task_id, exc_info=True)
        return True

    async def _rounds(
        self, task: TaskRecord, message: dict[str, Any], headers: list[tuple[str, str]]
    ) -> None:
        params = dict(message.get("params") or {})
        meta = dict(params.get("_meta") or {})
        meta["progressToken"] = f"task:{task.task_id}"
        params["_meta"] = meta

        async def progressed(note: dict[str, Any]) -> None:
            await self._event(task, note)

        while True:
            sent = {"jsonrpc": "2.0", "id": message.get("id", 1), "method": "tools/call"}
            try:
                answer = await call(self._upstream, headers, {**sent, "params": params}, progressed)
            except (UpstreamUnavailable, Unanswered) as lost:
                error = {"code": -32603, "message": str(lost), "data": {"reason": "upstream_lost"}}
                await self._settle(task, TaskStatus.FAILED, error=error)
                return
            if "error" in answer:
                await self._settle(task, TaskStatus.FAILED, error=answer["error"])
                return
            outcome = answer.get("result")
            if not isinstance(outcome, dict):
                outcome = {"content": [], "isError": False}
            if outcome.get("resultType") != "input_required":
                await self._settle(task, TaskStatus.COMPLETED, result=outcome)
                return
            requests = outcome.get("inputRequests") or {}
            await self._settle(task, TaskStatus.INPUT_REQUIRED, input_requests=requests)
            params["inputResponses"] = await self._answers(task, set(requests))
            if "requestState" in outcome:
                params["requestState"] = outcome["requestState"]
            else:
                params.pop("requestState", None)
            await self._settle(task, TaskStatus.WORKING)

    async def _answers(self, task: TaskRecord, keys: set[str]) -> dict[str, Any]:
        """The requester's answers to every key, once all are given (from any replica)."""
        pauses = _INPUT_POLLS.pauses()
        while True:
            try:
                seen = await self._tasks.get(self._tenant, task.task_id, task.principal)
            except UnknownTask:
                raise _Stopped from None
            except StorageUnavailable:
                await asyncio.sleep(_RETRIES.most)
                continue
            if seen.state.terminal:
                raise _Stopped
            answered = seen.input_responses or {}
            if keys <= set(answered):
                return {k: answered[k] for k in keys}
            await asyncio.sleep(next(pauses))

    async def _settle(self, task: TaskRecord, status: TaskStatus, **payload: Any) -> None:
        pauses = _RETRIES.pauses()
        while True:
            try:
                await self._tasks.transition(
                    self._tenant, task.task_id, attempt=task.attempt, status=status, **payload
                )
                return
            except (TaskConflict, UnknownTask):
                # Settled meanwhile — or by an earlier try whose answer the outage lost.
                raise _Stopped from None
            except StorageUnavailable:
                # The outcome is held here until the database is back: a settle is never
                # dropped (the lease, renewed meanwhile when it can be, bounds the wait).
                log.warning("task %s: the database is unavailable; settling again", task.task_id)
                await asyncio.sleep(next(pauses))

    async def _event(self, task: TaskRecord, note: dict[str, Any]) -> None:
        body = EventBody(data=json.dumps(note), event=str(note.get("method", "message")))
        try:
            await self._tasks.append(
                self._tenant, task.task_id, attempt=task.attempt, batch=[body], first_seq=None
            )
        except (TaskConflict, UnknownTask):
            raise _Stopped from None
        except Exception:  # an event the log could not take: the call goes on
            log.warning("task %s: a progress event was not stored", task.task_id, exc_info=True)
