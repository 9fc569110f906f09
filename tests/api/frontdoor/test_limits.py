"""The bounds of request bodies (`app/api/frontdoor/limits.py`), on both databases: the
bytes of bodies held at once, refused past the budget and given back."""

from __future__ import annotations

import asyncio

from tests.support.app import make_settings, started_app
from tests.support.front_door import Call, assert_problem, headers_of, http_scope


async def test_bodies_held_at_once_are_bounded_and_given_back(database_url: str) -> None:
    """Past `max_body_bytes_in_flight`, 503 `overloaded` with Retry-After; then it recovers."""
    settings = make_settings(database_url, max_body_bytes=1000, max_body_bytes_in_flight=1500)
    async with started_app(settings) as (app, http):
        token = (await http.post("/v1/streams/s1/generations")).json()["generation"]
        slow_body = b'{"events": [{"data": "' + b"a" * 960 + b'"}]}'
        assert len(slow_body) <= 1000
        slow = Call(slow_body, chunks=2)
        headers = headers_of(content_type="application/json", content_length=str(len(slow_body)))
        scope = http_scope("POST", f"/v1/generations/{token}/events", headers)
        holding = asyncio.create_task(app(scope, slow.receive, slow.send))
        async with asyncio.timeout(30):
            await slow.waiting.wait()  # its budget is taken; the rest of its body is awaited
        other = {"events": [{"data": "b" * 600}]}
        refused = await http.post(f"/v1/generations/{token}/events", json=other)
        assert_problem(refused, 503, "overloaded")
        assert refused.headers["retry-after"] == "1"
        small = await http.post(f"/v1/generations/{token}/events", json={"events": [{"data": "c"}]})
        assert small.status_code == 201  # what fits in what is left still goes through
        slow.more.set()
        async with asyncio.timeout(30):
            await holding
        assert slow.status == 201
        again = await http.post(f"/v1/generations/{token}/events", json=other)
        assert again.status_code == 201, again.text  # the budget was given back
        page = (await http.get(f"/v1/generations/{token}/events")).json()
        assert [e["data"][0] for e in page["events"]] == ["c", "a", "b"]
