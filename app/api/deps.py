"""Dependencies of the routers, as `Annotated` aliases."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request

from app.service.eventlog import EventLogService
from app.settings import Settings
from app.storage.store import Store

DEFAULT_TENANT = "default"


@dataclass(frozen=True, slots=True)
class Principal:
    """Who is calling: the tenant whose streams it sees, and its scope."""

    tenant: str
    scope: str


def get_settings(request: Request) -> Settings:
    """The settings the app was created with."""
    settings: Settings = request.app.state.settings
    return settings


def get_store(request: Request) -> Store:
    """The store built by the lifespan."""
    store: Store = request.app.state.store
    return store


def get_service(request: Request) -> EventLogService:
    """The writer use cases built by the lifespan."""
    service: EventLogService = request.app.state.service
    return service


def get_principal() -> Principal:
    """The caller. Without configured keys the service is open: one tenant, every scope."""
    return Principal(tenant=DEFAULT_TENANT, scope="admin")


SettingsDep = Annotated[Settings, Depends(get_settings)]
StoreDep = Annotated[Store, Depends(get_store)]
ServiceDep = Annotated[EventLogService, Depends(get_service)]
PrincipalDep = Annotated[Principal, Depends(get_principal)]
