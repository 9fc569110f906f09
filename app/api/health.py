"""Liveness (`/healthz`) and readiness (`/readyz`)."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, Request
from fastapi.responses import Response

from app.api.problems import problem, problem_responses
from app.api.schemas import Health
from app.storage.errors import StorageError
from app.storage.migrate import head_revision
from app.storage.readiness import database_revision

router = APIRouter(tags=["health"])


@router.get("/healthz")
async def healthz() -> Health:
    """The process is alive (it does not touch the database; see `/readyz`)."""
    return Health(status="ok")


@router.get("/readyz", response_model=Health, responses=problem_responses(503))
async def readyz(request: Request) -> Health | Response:
    """Ready: the database answers and its schema is at the newest migration (else 503)."""
    head: str | None = request.app.state.head_revision
    if head is None:
        # Read once, on first use: the migration scripts are files, not the database.
        head = request.app.state.head_revision = await asyncio.to_thread(head_revision)
    try:
        revision = await database_revision(request.app.state.engines)
    except StorageError:
        return problem(503, "database_unavailable", "the database does not answer", headers=_RETRY)
    if revision != head:
        return problem(
            503,
            "schema_not_current",
            f"the schema is at {revision or 'nothing'}; the newest migration is {head}",
            headers=_RETRY,
        )
    return Health(status="ok")


_RETRY = {"Retry-After": "5"}
