"""Dependencies of the routers, as `Annotated` aliases."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from app.api.auth import Keyring, Principal, Scope
from app.service.admin import AdminService
from app.service.eventlog import EventLogService
from app.settings import Settings
from app.storage.store import Store

# Documents the scheme in OpenAPI; `auto_error=False` so that the keyring, not FastAPI,
# decides between open service, 401 and 403.
_bearer = HTTPBearer(auto_error=False, description="A key from EVENTLOG_KEYS")


async def get_settings(request: Request) -> Settings:
    """The settings the app was created with."""
    settings: Settings = request.app.state.settings
    return settings


async def get_store(request: Request) -> Store:
    """The store built by the lifespan."""
    store: Store = request.app.state.store
    return store


async def get_service(request: Request) -> EventLogService:
    """The writer use cases built by the lifespan."""
    service: EventLogService = request.app.state.service
    return service


async def get_admin_service(request: Request) -> AdminService:
    """The operator use cases built by the lifespan."""
    service: AdminService = request.app.state.admin
    return service


def _authenticate(request: Request, credentials: HTTPAuthorizationCredentials | None) -> Principal:
    keyring: Keyring = request.app.state.keyring
    header = None if credentials is None else f"{credentials.scheme} {credentials.credentials}"
    return keyring.authenticate(header)


async def get_principal(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Principal:
    """A writer: 401 without a valid key, 403 without the `writer` scope."""
    return Keyring.require(_authenticate(request, credentials), Scope.WRITER)


async def get_admin(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Principal:
    """An operator: 401 without a valid key, 403 without the `admin` scope."""
    return Keyring.require(_authenticate(request, credentials), Scope.ADMIN)


SettingsDep = Annotated[Settings, Depends(get_settings)]
StoreDep = Annotated[Store, Depends(get_store)]
ServiceDep = Annotated[EventLogService, Depends(get_service)]
PrincipalDep = Annotated[Principal, Depends(get_principal)]
AdminDep = Annotated[Principal, Depends(get_admin)]
AdminServiceDep = Annotated[AdminService, Depends(get_admin_service)]
