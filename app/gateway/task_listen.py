"""`notifications/tasks` on `subscriptions/listen` streams (SEP-2575's listen stream, with
the tasks extension's `taskIds` filter key), on every replica.

A `subscriptions/listen` whose filter asks only for `taskIds` is answered by the gateway:
an SSE response that opens with `notifications/subscriptions/acknowledged` (the filter it
honours: the ids of tasks the requester may see) and then carries a `notifications/tasks`
with the task's current state, and another each time it changes, every frame tagged with
the listen request's id under `_meta["io.modelcontextprotocol/subscriptionId"]`. The
states are read from the log, so a listener on any replica hears about a task whichever
replica runs it or takes its `tasks/update` / `tasks/cancel`. A task is followed until it
settles; the stream stays open (as a listen stream does) until the requester leaves.
Filters with other keys are the upstream's and pass through.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

from app.errors import UnknownTask
from app.gateway import task_wire as wire
from app.service.tasks import TaskService
from app.storage.tasks import TaskRecord

SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"
_POLL_SECONDS = 0.25
_KEEPALIVE_SECONDS = 15.0


def task_ids_only(params: dict[str, Any]) -> list[str] | None:
    """The `taskIds` of a listen filter that asks for nothing else (None: not such a one)."""
    wanted = params.get("notifications")
    if not isinstance(wanted, dict) or set(wanted) != {"taskIds"}:
        return None
    ids = wanted["taskIds"]
    if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
        return None
    return list(dict.fromkeys(ids))


class TaskListener:
    """Serves one listen stream's `notifications/tasks`."""

    def __init__(self, tasks: TaskService, tenant: str) -> None:
        self._tasks = tasks
        self._tenant = tenant

    async def frames(
        self, request_id: object, task_ids: list[str], principal: str | None
    ) -> AsyncIterator[bytes]:
        """The stream's SSE frames (see the module)."""
        seen: dict[str, tuple[str, Any]] = {}
        visible = [t for t in [await self._find(i, principal) for i in task_ids] if t]
        acknowledged = {"notifications": {"taskIds": [t.task_id for t in visible]}}
        yield _frame(request_id, "notifications/subscriptions/acknowledged", acknowledged)
        following = {t.task_id for t in visible}
        quiet = 0.0
        while True:
            for task_id in sorted(following):
                task = await self._find(task_id, principal)
                if task is None:
                    following.discard(task_id)
                    continue
                version = (task.status, task.last_updated_at)
                if seen.get(task_id) != version:
                    seen[task_id] = version
                    quiet = 0.0
                    note = wire.status_notification(task)
                    yield _frame(request_id, note["method"], note["params"])
                if task.state.terminal:
                    following.discard(task_id)
            await asyncio.sleep(_POLL_SECONDS)
            quiet += _POLL_SECONDS
            if quiet >= _KEEPALIVE_SECONDS:
                quiet = 0.0
                yield b": keepalive\n\n"

    async def _find(self, task_id: str, principal: str | None) -> TaskRecord | None:
        try:
            return await self._tasks.get(self._tenant, task_id, principal)
        except UnknownTask:
            return None


def _frame(request_id: object, method: str, params: dict[str, Any]) -> bytes:
    meta = {**params.get("_meta", {}), SUBSCRIPTION_ID: request_id}
    message = {"jsonrpc": "2.0", "method": method, "params": {**params, "_meta": meta}}
    return f"event: message\ndata: {json.dumps(message)}\n\n".encode()
