"""The writer API, route by route, on both databases."""

from __future__ import annotations

import json
from datetime import datetime

import httpx
import pytest
from sqlalchemy import delete
from sqlalchemy.ext.asyncio import create_async_engine

from app.settings import Settings
from app.storage.schema import events, generations
from tests.support.app import app_client, make_settings
from tests.support.writer_calls import append, datas, open_generation, resume, seqs

# --- open -------------------------------------------------------------------------------


async def test_open_returns_the_generation(client: httpx.AsyncClient) -> None:
    gen = await open_generation(client, "sess.1", producer="w1", max_events=7, ttl_seconds=60)
    assert gen["stream_id"] == "sess.1"
    assert (gen["epoch"], gen["reason"], gen["producer"]) == (1, "initial", "w1")
    assert (gen["head_seq"], gen["tail_seq"], gen["terminal"], gen["terminal_seq"]) == (
        1,
        0,
        False,
        None,
    )
    assert (gen["max_events"], gen["ttl_seconds"], gen["supersedes"]) == (7, 60, None)
    assert datetime.fromisoformat(gen["created_at"]).utcoffset() is not None


async def test_each_open_supersedes_the_previous(client: httpx.AsyncClient) -> None:
    first = await open_generation(client, "s")
    second = await open_generation(client, "s")
    third = await open_generation(client, "s", reason="retry")
    assert [g["epoch"] for g in (first, second, third)] == [1, 2, 3]
    assert second["reason"] == "reset"
    assert third["reason"] == "retry"
    assert (second["supersedes"], third["supersedes"]) == (
        first["generation"],
        second["generation"],
    )
    stream = (await client.get("/v1/streams/s")).json()
    assert stream["generations"] == 3
    assert stream["current"]["generation"] == third["generation"]


@pytest.mark.parametrize(
    "body",
    [
        {"reason": "because"},
        {"max_events": 0},
        {"max_events": "5"},
        {"max_events": 2_000_000},
        {"ttl_seconds": 10**9},
        {"producer": "a\nb"},
        {"unknown": 1},
    ],
)
async def test_open_refuses_bad_options(client: httpx.AsyncClient, body: dict[str, object]) -> None:
    response = await client.post("/v1/streams/s/generations", json=body)
    assert response.status_code == 422, response.text
    assert response.headers["content-type"] == "application/problem+json"
    assert response.json()["code"] == "validation_error"
    assert (await client.get("/v1/streams/s")).status_code == 404


@pytest.mark.parametrize("stream_id", ["a%20b", "x" * 257, "caf%C3%A9", "a%0Ab"])
async def test_bad_stream_ids_are_422(client: httpx.AsyncClient, stream_id: str) -> None:
    response = await client.post(f"/v1/streams/{stream_id}/generations")
    assert response.status_code == 422
    assert response.json()["code"] == "validation_error"


# --- append -----------------------------------------------------------------------------


async def test_appends_get_contiguous_seqs(client: httpx.AsyncClient) -> None:
    token = (await open_generation(client, "s"))["generation"]
    first = await append(client, token, ["a", "b"])
    second = await append(client, token, ["c"], first_seq=3, event="progress")
    assert first["event_ids"] == [f"{token}:1", f"{token}:2"]
    assert second["event_ids"] == [f"{token}:3"]
    assert (second["head_seq"], second["tail_seq"], second["duplicate"]) == (1, 3, False)
    page = (await client.get(f"/v1/generations/{token}/events")).json()
    assert [(e["id"], e["event"], e["data"]) for e in page["events"]] == [
        (f"{token}:1", None, "a"),
        (f"{token}:2", None, "b"),
        (f"{token}:3", "progress", "c"),
    ]


async def test_a_retry_is_answered_200_and_stored_once(client: httpx.AsyncClient) -> None:
    token = (await open_generation(client, "s"))["generation"]
    await append(client, token, ["a", "b"], first_seq=1)
    again = await append(client, token, ["a", "b"], first_seq=1, expect=200)
    assert again["duplicate"] is True
    assert again["event_ids"] == [f"{token}:1", f"{token}:2"]
    assert again["tail_seq"] == 2
    page = (await client.get(f"/v1/generations/{token}/events")).json()
    assert datas(page["events"]) == ["a", "b"]


async def test_seq_conflict_and_gap(client: httpx.AsyncClient) -> None:
    token = (await open_generation(client, "s"))["generation"]
    await append(client, token, ["a", "b"])
    conflict = await append(client, token, ["a", "X"], first_seq=1, expect=409)
    gap = await append(client, token, ["c"], first_seq=4, expect=409)
    overlap = await append(client, token, ["b", "c"], first_seq=2, expect=409)
    assert (conflict["code"], gap["code"], overlap["code"]) == (
        "seq_conflict",
        "seq_gap",
        "seq_conflict",
    )
    assert (await client.get(f"/v1/generations/{token}/events")).json()["tail_seq"] == 2


async def test_terminal_finishes_the_generation(client: httpx.AsyncClient) -> None:
    token = (await open_generation(client, "s"))["generation"]
    done = await append(client, token, ["a", "result"], terminal=True, first_seq=1)
    assert (done["terminal"], done["tail_seq"]) == (True, 2)
    refused = await append(client, token, ["late"], expect=409)
    assert refused["code"] == "terminal"
    assert (await append(client, token, ["a", "result"], first_seq=1, terminal=True, expect=200))[
        "duplicate"
    ]
    page = (await client.get(f"/v1/generations/{token}/events")).json()
    assert [e["terminal"] for e in page["events"]] == [False, True]
    assert page["terminal"] is True
    gen = (await client.get("/v1/streams/s")).json()["current"]
    assert (gen["terminal"], gen["terminal_seq"]) == (True, 2)


async def test_an_empty_terminal_batch_finishes_at_the_tail(client: httpx.AsyncClient) -> None:
    token = (await open_generation(client, "s"))["generation"]
    await append(client, token, ["a"])
    done = await append(client, token, [], terminal=True, first_seq=2)
    assert (done["terminal"], done["tail_seq"], done["event_ids"]) == (True, 1, [])
    again = await append(client, token, [], terminal=True, first_seq=2, expect=200)
    assert again["duplicate"] is True
    empty = await client.post(f"/v1/generations/{token}/events", json={"events": []})
    assert empty.status_code == 422


async def test_appends_to_unknown_generations_are_404(client: httpx.AsyncClient) -> None:
    refused = await append(client, "NoSuchTokenNoSuchToken", ["a"], expect=404)
    assert refused["code"] == "unknown_generation"


async def test_eviction_advances_the_head_in_the_same_append(client: httpx.AsyncClient) -> None:
    token = (await open_generation(client, "s", max_events=3))["generation"]
    await append(client, token, ["1", "2"])
    answer = await append(client, token, ["3", "4", "5"])
    assert (answer["head_seq"], answer["tail_seq"]) == (3, 5)
    page = (await client.get(f"/v1/generations/{token}/events?after=2")).json()
    assert seqs(page["events"]) == [3, 4, 5]
    gone = await client.get(f"/v1/generations/{token}/events?after=1")
    assert (gone.status_code, gone.json()["code"]) == (410, "evicted")
    big = await append(client, token, [str(i) for i in range(6, 16)])
    assert (big["head_seq"], big["tail_seq"]) == (13, 15)


async def test_limits_are_413_and_store_nothing(database_url: str) -> None:
    settings = make_settings(
        database_url, max_event_bytes=10, max_batch_events=3, max_body_bytes=4000
    )
    async with app_client(settings) as client:
        token = (await open_generation(client, "s"))["generation"]
        too_big = await append(client, token, ["ok", "x" * 11], expect=413)
        too_many = await append(client, token, ["a"] * 4, expect=413)
        body = await append(client, token, ["a"] * 3 + ["b" * 5000], expect=413)
        assert (too_big["code"], too_many["code"], body["code"]) == (
            "event_too_large",
            "batch_too_large",
            "body_too_large",
        )
        assert (await append(client, token, ["é" * 5]))["tail_seq"] == 1


@pytest.mark.parametrize(
    "payload",
    [
        {"events": [{"data": "a\x00b"}]},
        {"events": [{"data": "\ud800"}]},
        {"events": [{"data": "a", "event": "bad\ntype"}]},
        {"events": [{"data": 5}]},
        {"events": [{"data": "a"}], "first_seq": 0},
        {"events": [{"data": "a"}], "first_seq": 1.0},
        {"events": [{"data": "a"}], "first_seq": 2**63},
        {"events": [{"data": "a"}], "terminal": "yes"},
        {"events": "a"},
        {},
    ],
)
async def test_bad_batches_are_422_and_store_nothing(
    client: httpx.AsyncClient, payload: dict[str, object]
) -> None:
    token = (await open_generation(client, "s"))["generation"]
    response = await client.post(
        f"/v1/generations/{token}/events",
        content=json.dumps(payload),  # ASCII-escaped, so a lone surrogate can be sent
        headers={"content-type": "application/json"},
    )
    assert response.status_code == 422, response.text
    assert response.json()["code"] == "validation_error"
    assert (await client.get(f"/v1/generations/{token}/events")).json()["tail_seq"] == 0


async def test_bodies_must_be_json(client: httpx.AsyncClient) -> None:
    token = (await open_generation(client, "s"))["generation"]
    url = f"/v1/generations/{token}/events"
    typed = await client.post(
        url, content=b'{"events":[{"data":"a"}]}', headers={"content-type": "text/plain"}
    )
    broken = await client.post(
        url, content=b'{"events":', headers={"content-type": "application/json"}
    )
    assert (typed.status_code, typed.json()["code"]) == (415, "unsupported_media_type")
    assert (broken.status_code, broken.json()["code"]) == (422, "invalid_json")
    charset = await client.post(
        url,
        content=b'{"events":[{"data":"a"}]}',
        headers={"content-type": "application/json; charset=utf-8"},
    )
    assert charset.status_code == 201


# --- resume and paging ------------------------------------------------------------------


async def test_resume_pages_with_next_after(client: httpx.AsyncClient) -> None:
    token = (await open_generation(client, "s"))["generation"]
    await append(client, token, [str(i) for i in range(1, 11)])
    first = await resume(client, f"{token}:2", "s", limit=3)
    assert seqs(first["events"]) == [3, 4, 5]
    assert first["next_after"] == 5
    collected = seqs(first["events"])
    after = first["next_after"]
    while after is not None:
        page = (await client.get(f"/v1/generations/{token}/events?after={after}&limit=3")).json()
        collected += seqs(page["events"])
        after = page["next_after"]
    assert collected == list(range(3, 11))


async def test_pages_are_bounded_by_bytes(database_url: str) -> None:
    async with app_client(make_settings(database_url, max_page_bytes=25)) as client:
        token = (await open_generation(client, "s"))["generation"]
        await append(client, token, ["x" * 10] * 5 + ["y" * 100])
        page = (await client.get(f"/v1/generations/{token}/events")).json()
        assert (seqs(page["events"]), page["next_after"]) == ([1, 2], 2)
        big = (await client.get(f"/v1/generations/{token}/events?after=5")).json()
        assert (seqs(big["events"]), big["next_after"]) == ([6], None)


async def test_page_refusals(client: httpx.AsyncClient) -> None:
    token = (await open_generation(client, "s"))["generation"]
    await append(client, token, ["a"])
    beyond = await client.get(f"/v1/generations/{token}/events?after=2")
    unknown = await client.get("/v1/generations/NoSuchTokenNoSuchToken/events")
    negative = await client.get(f"/v1/generations/{token}/events?after=-1")
    limit = await client.get(f"/v1/generations/{token}/events?limit=100000")
    assert (beyond.status_code, beyond.json()["code"]) == (409, "beyond_tail")
    assert (unknown.status_code, unknown.json()["code"]) == (404, "unknown_generation")
    assert (negative.status_code, limit.status_code) == (422, 422)


async def test_superseded_without_a_whole_current_generation_delivers_nothing(
    client: httpx.AsyncClient,
) -> None:
    a = (await open_generation(client, "s"))["generation"]
    await append(client, a, ["a1"])
    b = (await open_generation(client, "s", max_events=2))["generation"]
    await append(client, b, ["b1", "b2", "b3"])
    answer = await resume(client, f"{a}:1", "s")
    assert (answer["verdict"], answer["reason"]) == ("reset", "superseded")
    assert (answer["generation"], answer["events"]) == (None, [])
    assert answer["discard_client_state"] is True


async def test_superseded_delivers_a_finished_current_generation(client: httpx.AsyncClient) -> None:
    a = (await open_generation(client, "s"))["generation"]
    b = (await open_generation(client, "s", reason="retry"))["generation"]
    await append(client, b, ["b1", "result"], terminal=True)
    answer = await resume(client, f"{a}:0", "s")
    assert (answer["generation"], datas(answer["events"]), answer["terminal"]) == (
        b,
        ["b1", "result"],
        True,
    )
    assert [e["terminal"] for e in answer["events"]] == [False, True]


async def test_terminal_policy_replay(database_url: str) -> None:
    settings = make_settings(database_url, terminal_resume="replay")
    async with app_client(settings) as client:
        token = (await open_generation(client, "s"))["generation"]
        await append(client, token, ["a", "b", "result"], terminal=True)
        behind = await resume(client, f"{token}:1", "s")
        assert (behind["verdict"], datas(behind["events"]), behind["terminal"]) == (
            "resume",
            ["b", "result"],
            True,
        )
        done = await resume(client, f"{token}:3", "s")
        assert (done["verdict"], done["reason"]) == ("reset", "terminal")


async def test_a_hole_in_the_store_is_never_served(
    client: httpx.AsyncClient, settings: Settings
) -> None:
    token = (await open_generation(client, "s"))["generation"]
    await append(client, token, [str(i) for i in range(1, 7)])
    # Simulate damage the counters do not know about: one event disappears.
    engine = create_async_engine(settings.database_url)
    async with engine.begin() as conn:
        pk = (await conn.execute(generations.select().where(generations.c.token == token))).one().id
        await conn.execute(delete(events).where(events.c.generation_pk == pk, events.c.seq == 4))
    await engine.dispose()
    answer = await resume(client, f"{token}:2", "s")
    assert (answer["verdict"], answer["reason"]) == ("reset", "eviction_hole")
    assert answer["events"] == []
    assert (await resume(client, f"{token}:4", "s"))["verdict"] == "resume"
    page = await client.get(f"/v1/generations/{token}/events?after=2")
    assert (page.status_code, page.json()["code"]) == (410, "evicted")


async def test_resume_limit_is_bounded(client: httpx.AsyncClient) -> None:
    response = await client.post("/v1/resume", json={"last_event_id": "a:1", "limit": 10**6})
    assert (response.status_code, response.json()["code"]) == (422, "validation_error")
    zero = await client.post("/v1/resume", json={"last_event_id": "a:1", "limit": 0})
    assert zero.status_code == 422


async def test_unknown_stream_is_404(client: httpx.AsyncClient) -> None:
    response = await client.get("/v1/streams/nope")
    assert (response.status_code, response.json()["code"]) == (404, "unknown_stream")
    assert response.headers["content-type"] == "application/problem+json"


# --- the documents ----------------------------------------------------------------------


async def test_openapi_describes_every_route_and_its_problems(client: httpx.AsyncClient) -> None:
    spec = (await client.get("/openapi.json")).json()
    paths = spec["paths"]
    expected = {
        ("/v1/streams/{stream_id}/generations", "post"): {"201", "413", "415", "422"},
        ("/v1/generations/{generation}/events", "post"): {"200", "201", "404", "409", "413", "422"},
        ("/v1/streams/{stream_id}/resume", "post"): {"200", "422"},
        ("/v1/resume", "post"): {"200", "422"},
        ("/v1/generations/{generation}/events", "get"): {"200", "404", "409", "410", "422"},
        ("/v1/streams/{stream_id}", "get"): {"200", "404"},
        ("/healthz", "get"): {"200"},
    }
    for (path, method), statuses in expected.items():
        documented = set(paths[path][method]["responses"])
        assert statuses <= documented, (path, method, documented)
    problem = spec["components"]["schemas"]["Problem"]
    assert {"type", "title", "status", "detail", "code"} <= set(problem["properties"])
    conflict = paths["/v1/generations/{generation}/events"]["post"]["responses"]["409"]
    assert "application/problem+json" in conflict["content"]


async def test_unknown_routes_and_methods_are_problems(client: httpx.AsyncClient) -> None:
    missing = await client.get("/v2/nothing")
    method = await client.delete("/v1/resume")
    assert (missing.status_code, missing.json()["code"]) == (404, "not_found")
    assert (method.status_code, method.json()["code"]) == (405, "method_not_allowed")


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


# --- the seed document's failures, end to end: nothing is ever spliced ------------------


@pytest.mark.parametrize("reason", ["failover", "retry"])
async def test_a_restarted_counter_is_reset_never_spliced(
    client: httpx.AsyncClient, reason: str
) -> None:
    stream = "sess-1.req-7"
    a = (await open_generation(client, stream, producer="worker-A"))["generation"]
    await append(client, a, [f"A{i}" for i in range(1, 48)])
    b = await open_generation(client, stream, reason=reason, producer="worker-B")
    assert b["supersedes"] == a
    assert b["reason"] == reason
    assert b["epoch"] == 2
    await append(client, b["generation"], [f"B{i}" for i in range(1, 13)])

    for answer in (
        await resume(client, f"{a}:47", stream),
        await resume(client, f"{a}:47"),
    ):
        assert (answer["verdict"], answer["reason"]) == ("reset", "superseded")
        assert answer["discard_client_state"] is True
        assert answer["generation"] == b["generation"]
        assert datas(answer["events"]) == [f"B{i}" for i in range(1, 13)]
        assert seqs(answer["events"]) == list(range(1, 13))
        assert answer["events"][0]["id"] == f"{b['generation']}:1"
        assert answer["stream_id"] == stream


async def test_the_stale_producer_is_fenced(client: httpx.AsyncClient) -> None:
    a = (await open_generation(client, "s"))["generation"]
    await append(client, a, ["A1"])
    await open_generation(client, "s", reason="failover")
    refused = await append(client, a, ["A2"], expect=409)
    assert refused["code"] == "superseded"
    page = await client.get(f"/v1/generations/{a}/events")
    assert datas(page.json()["events"]) == ["A1"]


async def test_a_bare_integer_id_is_invalid(client: httpx.AsyncClient) -> None:
    token = (await open_generation(client, "s"))["generation"]
    await append(client, token, ["x"] * 50)
    answer = await resume(client, "47", "s")
    assert (answer["verdict"], answer["reason"]) == ("invalid", "malformed_id")
    assert answer["events"] == []
    assert answer["generation"] is None
    assert answer["discard_client_state"] is False


async def test_every_row_end_to_end(client: httpx.AsyncClient) -> None:
    live = (await open_generation(client, "s", max_events=5))["generation"]
    await append(client, live, [str(i) for i in range(1, 11)])  # keeps 6..10
    other = (await open_generation(client, "t"))["generation"]
    await append(client, other, ["t1"])
    done = (await open_generation(client, "u"))["generation"]
    await append(client, done, ["u1", "u2"], terminal=True)

    cases = {
        f"{live}:x": ("invalid", "malformed_id"),
        "UnknownUnknownUnknown1:1": ("invalid", "unknown_generation"),
        f"{other}:1": ("invalid", "cross_stream"),
        f"{live}:11": ("invalid", "beyond_tail"),
        f"{live}:4": ("reset", "evicted"),
        f"{live}:0": ("reset", "evicted"),
        f"{live}:5": ("resume", "ok"),
        f"{live}:10": ("resume", "ok"),
    }
    for claim, expected in cases.items():
        answer = await resume(client, claim, "s")
        assert (answer["verdict"], answer["reason"]) == expected, claim
    terminal = await resume(client, f"{done}:1", "u")
    assert (terminal["verdict"], terminal["reason"]) == ("reset", "terminal")
    assert terminal["generation"] is None
    assert terminal["events"] == []

    resumed = await resume(client, f"{live}:5", "s")
    assert seqs(resumed["events"]) == [6, 7, 8, 9, 10]
    assert resumed["generation"] == live
    assert resumed["discard_client_state"] is False
    assert (resumed["head_seq"], resumed["tail_seq"]) == (6, 10)
    evicted = await resume(client, f"{live}:4", "s")
    assert evicted["generation"] is None
    assert evicted["discard_client_state"] is True


async def test_seq_zero_of_a_fresh_generation_resumes_from_the_start(
    client: httpx.AsyncClient,
) -> None:
    token = (await open_generation(client, "s"))["generation"]
    assert (await resume(client, f"{token}:0", "s"))["events"] == []
    await append(client, token, ["a", "b"])
    answer = await resume(client, f"{token}:0", "s")
    assert (answer["verdict"], datas(answer["events"])) == ("resume", ["a", "b"])
