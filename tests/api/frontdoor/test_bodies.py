"""Body admission (`app/api/frontdoor/bodies.py`), on both databases: a body is read only
after the caller's key and the route are checked."""

from __future__ import annotations

from tests.support.app import started_app
from tests.support.front_door import Call, run
from tests.support.operators import ADMIN, WRITER_A, keyed_settings

TOKEN = "AAAAAAAAAAAAAAAAAAAAAA"


async def test_no_body_is_read_before_the_key_and_the_route_are_checked(
    database_url: str,
) -> None:
    """401, 403 and 404 come before a single byte of the body is asked for."""
    body = b'{"events": [{"data": "' + b"x" * 4000 + b'"}]}'
    length = str(len(body))
    json_type = {"content_type": "application/json", "content_length": length}
    async with started_app(keyed_settings(database_url)) as (app, _client):
        nobody = await run(app, Call(body), "POST", f"/v1/generations/{TOKEN}/events", **json_type)
        assert (nobody.status, nobody.received) == (401, 0)
        writer = await run(
            app,
            Call(body),
            "POST",
            "/admin/v1/explain",
            authorization=f"Bearer {WRITER_A}",
            **json_type,
        )
        assert (writer.status, writer.received) == (403, 0)
        admin = await run(
            app,
            Call(body),
            "POST",
            f"/v1/generations/{TOKEN}/events",
            authorization=f"Bearer {ADMIN}",
            **json_type,
        )
        assert (admin.status, admin.received) == (403, 0)
        unknown = await run(
            app, Call(body), "POST", "/v1/no-such-route", authorization=f"Bearer {WRITER_A}"
        )
        assert (unknown.status, unknown.received) == (404, 0)
        allowed = await run(
            app,
            Call(body),
            "POST",
            f"/v1/generations/{TOKEN}/events",
            authorization=f"Bearer {WRITER_A}",
            **json_type,
        )
        assert (allowed.status, allowed.received) == (404, 1)  # read, then unknown_generation
