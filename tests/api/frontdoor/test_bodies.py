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

        async def post(path: str, key: str | None, *, typed: bool = True) -> Call:
            """POST the body to `path` as `key` (none: no authorization), typed as JSON."""
            headers = {} if key is None else {"authorization": f"Bearer {key}"}
            return await run(
                app, Call(body), "POST", path, **headers, **(json_type if typed else {})
            )

        events = f"/v1/generations/{TOKEN}/events"
        nobody = await post(events, None)
        assert (nobody.status, nobody.received) == (401, 0)
        writer = await post("/admin/v1/explain", WRITER_A)
        assert (writer.status, writer.received) == (403, 0)
        admin = await post(events, ADMIN)
        assert (admin.status, admin.received) == (403, 0)
        unknown = await post("/v1/no-such-route", WRITER_A, typed=False)
        assert (unknown.status, unknown.received) == (404, 0)
        allowed = await post(events, WRITER_A)
        assert (allowed.status, allowed.received) == (404, 1)  # read, then unknown_generation
