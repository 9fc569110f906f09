"""The front door's pieces in order (`app/api/frontdoor/stack.py`)."""

from __future__ import annotations

from fastapi import FastAPI

from app.api.auth import Keyring
from app.api.frontdoor.accounting import RequestAccounting
from app.api.frontdoor.bodies import BodyAdmission
from app.api.frontdoor.connections import ConnectionLimits, SharedConnectionLimits
from app.api.frontdoor.hosts import HostAndOrigin
from app.api.frontdoor.stack import install_front_door
from app.api.metrics import Metrics
from tests.support.app import make_settings


def test_the_pieces_stand_outermost_first() -> None:
    settings = make_settings("sqlite+aiosqlite://", max_header_bytes=4096)
    app = FastAPI()
    install_front_door(app, keyring=Keyring(()), settings=settings, metrics=Metrics())
    pieces = [middleware.cls for middleware in app.user_middleware]
    assert pieces == [SharedConnectionLimits, RequestAccounting, HostAndOrigin, BodyAdmission]
    shared = app.user_middleware[0].kwargs["limits"]
    assert shared == ConnectionLimits.of(settings)
    assert shared.max_header_bytes == 4096
