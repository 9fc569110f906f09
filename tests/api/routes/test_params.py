"""Path and query parameters (`app/api/routes/params.py`), on both databases: integers and
numbers are plain decimal digits, stream ids are not dots alone."""

from __future__ import annotations

import io

import httpx
import pytest

from app.admin_cli import run_admin
from app.admin_client import AdminClient
from app.cli import _parser
from app.settings import Settings
from tests.support.app import started_app
from tests.support.strict_bodies import problem_code
from tests.support.writer_calls import open_generation


@pytest.mark.parametrize(
    "query",
    ["after=1_0", "after=%2010", "after=10%20", "after=%2B1", "after=1%0A", "limit=1_0", "limit="],
)
async def test_query_integers_are_plain_digits(
    client: httpx.AsyncClient, token: str, query: str
) -> None:
    answer = await client.get(f"/v1/generations/{token}/events?{query}")
    assert problem_code(answer) == "validation_error"
    admin = await client.get(f"/admin/v1/generations/{token}/events?{query}")
    assert problem_code(admin) == "validation_error"


@pytest.mark.parametrize("query", ["limit=1_0", "limit=%201", "limit=%2B1"])
async def test_admin_list_limits_are_plain_digits(client: httpx.AsyncClient, query: str) -> None:
    for path in ("/admin/v1/streams", "/admin/v1/decisions"):
        assert problem_code(await client.get(f"{path}?{query}")) == "validation_error"


async def test_leading_zeros_are_still_a_number(client: httpx.AsyncClient, token: str) -> None:
    answer = await client.get(f"/v1/generations/{token}/events?after=00&limit=010")
    assert answer.status_code == 200
    assert [e["data"] for e in answer.json()["events"]] == ["kept"]


@pytest.mark.parametrize("stream_id", ["%2E", "%2E%2E", "...", "%2e%2E%2e%2E"])
async def test_stream_ids_of_dots_alone_are_refused(
    client: httpx.AsyncClient, stream_id: str
) -> None:
    opened = await client.post(f"/v1/streams/{stream_id}/generations")
    assert opened.status_code == 422, opened.text
    assert opened.json()["code"] == "validation_error"
    claim = {"last_event_id": "abc:1"}
    resumed = await client.post(f"/v1/streams/{stream_id}/resume", json=claim)
    assert resumed.status_code == 422, resumed.text
    listing = (await client.get("/admin/v1/streams")).json()
    assert listing["streams"] == []


async def test_ids_with_dots_and_more_are_streams(client: httpx.AsyncClient) -> None:
    for stream_id in (".a", "a..", "..-", "sess-1.req-7"):
        assert (await client.post(f"/v1/streams/{stream_id}/generations")).status_code == 201


@pytest.mark.parametrize("stream_id", [".", "..", "..."])
async def test_the_admin_cli_answers_a_dots_stream_with_the_refusal(
    settings: Settings, stream_id: str
) -> None:
    """It used to send `/streams/.`, which URL normalisation makes `/streams/` (the
    listing), and crash on the listing's body with a `KeyError` traceback."""
    async with started_app(settings) as (app, _client):
        for argv in (["stream", stream_id], ["explain", stream_id, "abc:1"]):
            args = _parser().parse_args(["admin", *argv])
            out = io.StringIO()
            transport = httpx.ASGITransport(app=app)
            async with AdminClient("http://eventlog.test", None, transport=transport) as admin:
                code = await run_admin(args, admin, out)
            assert code == 1, (argv, out.getvalue())


@pytest.mark.parametrize(
    "wait", ["1_0", "+1", " 1", "1 ", "1e1", "inf", "nan", "-0", "0x1", "1.", ".5", "\u0661"]
)
async def test_wait_is_as_strict_as_after_and_limit(client: httpx.AsyncClient, wait: str) -> None:
    token = (await open_generation(client, "s"))["generation"]
    answer = await client.get(f"/v1/generations/{token}/events", params={"wait": wait})
    assert answer.status_code == 422, (wait, answer.text)
    assert answer.json()["code"] == "validation_error"
    for looser in ("after", "limit"):  # the rule `wait` now shares with these
        refused = await client.get(f"/v1/generations/{token}/events", params={looser: wait})
        assert refused.status_code == 422, (looser, wait)


async def test_plain_waits_are_served(client: httpx.AsyncClient) -> None:
    token = (await open_generation(client, "s"))["generation"]
    for wait in ("0", "0.05", "0.000000001", "00"):
        answer = await client.get(f"/v1/generations/{token}/events", params={"wait": wait})
        assert answer.status_code == 200, (wait, answer.text)
