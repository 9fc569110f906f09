"""What the routers depend on, as `Annotated` aliases, all read from one typed `ApiState`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from app.api.auth import Keyring, Principal, Scope
from app.api.metrics import Metrics
from app.bootstrap import Container
from app.errors import InvalidRequest
from app.service.admin import AdminService
from app.service.admission import Admission
from app.service.eventlog import EventLogService
from app.service.live import LiveReads
from app.settings import Settings


class ChannelSlots:
    """The append channels open at once in this process, per key, against a limit.

    One event loop serves a process, so a plain dict is enough (no lock); a key's entry
    goes when its last channel closes, so the dict holds only keys with a channel open.
    """

    def __init__(self, per_key: int) -> None:
        self.per_key = per_key
        self._open: dict[bytes, int] = {}

    def take(self, key: bytes) -> bool:
        """Hold one more channel for `key`; False (nothing held) when it has its limit."""
        held = self._open.get(key, 0)
        if held >= self.per_key:
            return False
        self._open[key] = held + 1
        return True

    def give(self, key: bytes) -> None:
        """Return a channel taken with `take`."""
        held = self._open.pop(key) - 1
        if held:
            self._open[key] = held


@dataclass(frozen=True, slots=True)
class ApiState:
    """Everything a request may need: the service's parts, the keys and the metrics."""

    container: Container
    keyring: Keyring
    metrics: Metrics
    channels: ChannelSlots
    """The append channels open per key (`app/api/routes/channel.py`)."""


def api_state(request: Request) -> ApiState:
    """The state `create_app` stored on the application (its one attribute)."""
    state: ApiState = request.app.state.api
    return state


# Documents the scheme in OpenAPI; `auto_error=False` so that the keyring, not FastAPI,
# decides between open service, 401 and 403.
_bearer = HTTPBearer(auto_error=False, description="A key from EVENTLOG_KEYS")


async def get_settings(request: Request) -> Settings:
    """The settings the app was created with."""
    return api_state(request).container.settings


async def get_service(request: Request) -> EventLogService:
    """The writer use cases."""
    return api_state(request).container.eventlog


async def get_live(request: Request) -> LiveReads:
    """The live-read use cases."""
    return api_state(request).container.live


async def get_admission(request: Request) -> Admission:
    """The process's page places and budget of bytes in flight."""
    return api_state(request).container.admission


async def get_admin_service(request: Request) -> AdminService:
    """The operator use cases."""
    return api_state(request).container.admin


def _authenticate(request: Request, credentials: HTTPAuthorizationCredentials | None) -> Principal:
    header = None if credentials is None else f"{credentials.scheme} {credentials.credentials}"
    return api_state(request).keyring.authenticate(header)


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


def page_limit(limit: int | None, settings: Settings) -> int:
    """A page size as asked (default `default_page_limit`); over `max_page_limit` is 422."""
    if limit is None:
        return settings.default_page_limit
    if limit > settings.max_page_limit:
        raise InvalidRequest(f"limit is over the maximum ({settings.max_page_limit})")
    return limit


def page_wait(wait: float | None, settings: Settings) -> float | None:
    """A long-poll's `wait` as asked (None: answer at once); over `live_max_wait_seconds` is 422."""
    if wait is not None and wait > settings.live_max_wait_seconds:
        raise InvalidRequest(f"wait is over the maximum ({settings.live_max_wait_seconds:g})")
    return wait


SettingsDep = Annotated[Settings, Depends(get_settings)]
ServiceDep = Annotated[EventLogService, Depends(get_service)]
PrincipalDep = Annotated[Principal, Depends(get_principal)]
AdminDep = Annotated[Principal, Depends(get_admin)]
AdminServiceDep = Annotated[AdminService, Depends(get_admin_service)]
LiveDep = Annotated[LiveReads, Depends(get_live)]
AdmissionDep = Annotated[Admission, Depends(get_admission)]
