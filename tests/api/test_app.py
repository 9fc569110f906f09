"""The application factory (`app/api/app.py`), on both databases."""

from __future__ import annotations

import httpx

from tests.support.front_door import assert_problem


async def test_a_trailing_slash_is_not_redirected(client: httpx.AsyncClient) -> None:
    """A redirect would echo the request's Host into Location."""
    answer = await client.post("/v1/streams/s1/generations/", headers={"host": "eventlog.test"})
    assert_problem(answer, 404, "not_found")
    assert "location" not in answer.headers
