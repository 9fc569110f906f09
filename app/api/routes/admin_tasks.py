"""The admin API's tasks (scope `admin`): every tenant's, by status, with attempts and events."""

from __future__ import annotations

import base64
import binascii
import json
from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request
from pydantic import BaseModel

from app.api.deps import api_state, get_admin
from app.api.problems import problem_responses
from app.api.routes.admin import ListLimit, Tenant
from app.api.routes.admin_schemas import AdminGeneration
from app.api.routes.task_schemas import AdminTask, TaskList
from app.api.routes.tasks import TaskId
from app.api.schemas import EventOut
from app.domain.tasks import TaskStatus
from app.errors import InvalidRequest
from app.service.task_admin import TaskAdmin

router = APIRouter(
    prefix="/admin/v1",
    tags=["admin"],
    dependencies=[Depends(get_admin)],
    responses=problem_responses(401, 403),
)


async def get_task_admin(request: Request) -> TaskAdmin:
    """The operator's task reads."""
    return api_state(request).container.task_admin


TaskAdminDep = Annotated[TaskAdmin, Depends(get_task_admin)]
StatusFilter = Annotated[TaskStatus | None, Query(description="Only tasks in this status.")]


class AdminTaskDetail(BaseModel):
    """A task, its attempts (one generation of `task:<task_id>` each, epoch order) and
    the first retained events of its current attempt."""

    task: AdminTask
    attempts: list[AdminGeneration]
    events: list[EventOut]


@router.get("/tasks", responses=problem_responses(422))
async def list_tasks(
    admin: TaskAdminDep,
    status: StatusFilter = None,
    tenant: Tenant = None,
    limit: ListLimit = 100,
    cursor: str | None = None,
) -> TaskList:
    """Unexpired tasks of every tenant, newest first."""
    rows = await admin.listing(
        status=None if status is None else status.value,
        tenant=tenant,
        after=_decode(cursor),
        limit=limit,
    )
    last = rows[-1] if len(rows) == limit else None
    return TaskList(
        tasks=[AdminTask.of_record(row) for row in rows],
        next_cursor=None if last is None else _encode(last.created_at, last.task_id),
    )


@router.get("/tasks/{task_id}", responses=problem_responses(404, 422))
async def get_task(task_id: TaskId, admin: TaskAdminDep) -> AdminTaskDetail:
    """One task, whatever its tenant or principal, with its attempts and events."""
    detail = await admin.detail(task_id)
    current = detail.current
    return AdminTaskDetail(
        task=AdminTask.of_record(detail.task),
        attempts=[AdminGeneration.model_validate(gen) for gen in detail.attempts],
        events=[] if current is None else EventOut.page_of(current, detail.events),
    )


def _encode(created_at: datetime, task_id: str) -> str:
    raw = json.dumps([created_at.isoformat(), task_id], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode(cursor: str | None) -> tuple[datetime, str] | None:
    if cursor is None:
        return None
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        stamp, task_id = json.loads(raw)
        if isinstance(stamp, str) and isinstance(task_id, str):
            created = datetime.fromisoformat(stamp)
            if created.tzinfo is not None:
                return created, task_id
    except (binascii.Error, ValueError, TypeError):
        pass
    raise InvalidRequest("cursor is not one this service returned")
