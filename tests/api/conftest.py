"""Fixtures of the API's tests."""

from __future__ import annotations

import httpx
import pytest

from tests.support.strict_bodies import APPEND, OPEN


@pytest.fixture
async def token(client: httpx.AsyncClient) -> str:
    """A generation of stream `strict` with one event."""
    gen = (await client.post(OPEN)).json()["generation"]
    stored = await client.post(APPEND.format(token=gen), json={"events": [{"data": "kept"}]})
    assert stored.status_code == 201
    return str(gen)
