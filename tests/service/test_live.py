"""The live-read use case's ends: a storage failure ends a live read quietly (the reader
reconnects and is decided again) and frees its slot, whether it is read as frames or as
encoded bodies."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest
from fastapi import FastAPI

from app.service.frames import Frame
from app.settings import Settings
from app.storage.errors import StorageUnavailable
from tests.support.app import started_app, state_of

TENANT = "default"


@pytest.fixture
async def app(settings: Settings) -> AsyncIterator[FastAPI]:
    async with started_app(settings) as (app, _client):
        yield app


def encode(batch: Sequence[Frame]) -> bytes:
    return repr(list(batch)).encode()


@pytest.mark.parametrize("served_as", ["frames", "bodies"])
async def test_a_storage_failure_ends_the_read_and_frees_its_slot(
    app: FastAPI, monkeypatch: pytest.MonkeyPatch, served_as: str
) -> None:
    container = state_of(app).container
    gen = await container.eventlog.open_generation(TENANT, "s.failing")
    follow = await container.live.follow(TENANT, "s.failing", f"{gen.token}:0")
    assert container.fanout.readers == 1

    async def failing(*_args: Any, **_kwargs: Any) -> Any:
        raise StorageUnavailable("the database went away")

    monkeypatch.setattr(container.reads, "step", failing)
    live = container.live
    served = live.frames(follow) if served_as == "frames" else live.bodies(follow, encode)
    assert [batch async for batch in served] == []  # ended, not raised
    assert container.fanout.readers == 0
    assert list(container.fanout.watched()) == []
