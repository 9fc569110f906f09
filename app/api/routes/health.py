"""Liveness (`/healthz`), readiness (`/readyz`) and the metrics (`/metrics`)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST
from prometheus_client.exposition import generate_latest

from app import __version__
from app.api.deps import api_state
from app.api.problems import problem, problem_responses
from app.api.schemas import Health
from app.bootstrap import NotReady

router = APIRouter(tags=["health"])

_RETRY = {"Retry-After": "5"}
_CODES = {
    NotReady.DATABASE: "database_unavailable",
    NotReady.SCHEMA: "schema_not_current",
    NotReady.WRITES: "database_unavailable",
    NotReady.BACKGROUND: "background_task_down",
}


class Alive(Health):
    """Liveness, and the version of the service that answers (which clients go with it:
    the README's "Which versions go together")."""

    version: str


# HEAD too (load balancers and uptime checks often probe with it), kept out of the
# OpenAPI document: it is the GET without a body.
@router.head("/healthz", include_in_schema=False)
@router.get("/healthz")
async def healthz() -> Alive:
    """The process is alive (it does not touch the database; see `/readyz`), and its version."""
    return Alive(status="ok", version=__version__)


@router.head("/readyz", response_model=Health, include_in_schema=False)
@router.get("/readyz", response_model=Health, responses=problem_responses(503))
async def readyz(request: Request) -> Health | Response:
    """Ready: the database answers, its schema is the newest, a write can commit, and no
    background task is down."""
    unready = await api_state(request).container.unready()
    if unready is None:
        return Health(status="ok")
    why, detail = unready
    return problem(_CODES[why], detail, headers=_RETRY)


@router.get("/metrics", response_class=Response)
async def metrics(request: Request) -> Response:
    """Prometheus text exposition of this process's metrics."""
    registry = api_state(request).metrics.registry
    return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)
