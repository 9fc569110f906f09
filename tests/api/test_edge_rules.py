"""Smaller edges a hostile caller found, on both databases.

Stream ids made only of dots, stored event types a browser would take for the service's
own control events, a `wait` looser than `after` and `limit`, and an admin prefix filter
that ignored letter case on SQLite alone.
"""

from __future__ import annotations

import io

import httpx
import pytest

from app.admin_cli import run_admin
from app.admin_client import AdminClient
from app.cli import _parser
from app.settings import Settings
from tests.support.app import started_app
from tests.support.writer_calls import open_generation


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


@pytest.mark.parametrize("event_type", ["reset", "end"])
async def test_control_event_names_are_reserved_on_append(
    client: httpx.AsyncClient, event_type: str
) -> None:
    """A stored `reset` or `end` would reach a browser `EventSource`'s listeners of the
    service's own control events (docs/live.md)."""
    token = (await open_generation(client, "s"))["generation"]
    batch = {"events": [{"data": "ok"}, {"data": "{}", "event": event_type}]}
    refused = await client.post(f"/v1/generations/{token}/events", json=batch)
    assert refused.status_code == 422, refused.text
    assert refused.json()["code"] == "reserved_event_type"
    assert "events[1]" in refused.json()["detail"]
    page = (await client.get(f"/v1/generations/{token}/events")).json()
    assert (page["events"], page["tail_seq"]) == ([], 0)  # the batch is atomic: none of it
    # Letter case and longer names are other types: SSE dispatches by the exact name.
    for other in (event_type.upper(), event_type + "ed", "message", "progress"):
        batch = {"events": [{"data": "ok", "event": other}]}
        stored = await client.post(f"/v1/generations/{token}/events", json=batch)
        assert stored.status_code == 201, (other, stored.text)


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


async def test_the_admin_prefix_filter_is_case_sensitive_on_both_databases(
    client: httpx.AsyncClient,
) -> None:
    for stream_id in ("Alpha-1", "alpha-2", "ALPHA-3", "beta"):
        await open_generation(client, stream_id)

    async def listed(prefix: str) -> list[str]:
        body = (await client.get("/admin/v1/streams", params={"prefix": prefix})).json()
        return [s["stream_id"] for s in body["streams"]]

    assert await listed("alpha") == ["alpha-2"]
    assert await listed("Alpha") == ["Alpha-1"]
    assert await listed("ALPHA") == ["ALPHA-3"]
    assert await listed("A") == ["ALPHA-3", "Alpha-1"]
    assert await listed("") == ["ALPHA-3", "Alpha-1", "alpha-2", "beta"]
    assert await listed("alpha-2") == ["alpha-2"]
