"""Liveness."""

from __future__ import annotations

from fastapi import APIRouter

from app.api.schemas import Health

router = APIRouter(tags=["health"])


@router.get("/healthz")
async def healthz() -> Health:
    """The process is alive (it does not touch the database; see `/readyz`)."""
    return Health(status="ok")
