"""The admin API, endpoint by endpoint, on both databases."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.support.operators import ADMIN, WRITER_A, WRITER_B, KeyedApp, keyed_app, ok
from tests.support.writer_calls import open_generation

keyed = pytest.fixture(keyed_app, name="keyed")


@pytest.fixture
def admin(keyed: KeyedApp) -> httpx.AsyncClient:
    return keyed.as_key(ADMIN)


@pytest.fixture
def writer(keyed: KeyedApp) -> httpx.AsyncClient:
    return keyed.as_key(WRITER_A)


async def open_with(
    client: httpx.AsyncClient, stream_id: str, data: list[str], **options: Any
) -> str:
    gen = await ok(
        await client.post(f"/v1/streams/{stream_id}/generations", json=options or None), 201
    )
    token: str = gen["generation"]
    if data:
        await ok(
            await client.post(
                f"/v1/generations/{token}/events", json={"events": [{"data": d} for d in data]}
            ),
            201,
        )
    return token


async def resume(client: httpx.AsyncClient, stream_id: str, last_event_id: str) -> Any:
    return await ok(
        await client.post(f"/v1/streams/{stream_id}/resume", json={"last_event_id": last_event_id})
    )


async def test_streams_listing_pages_with_a_cursor(
    admin: httpx.AsyncClient, writer: httpx.AsyncClient, keyed: KeyedApp
) -> None:
    for name in ("job.1", "job.2", "job.3", "other"):
        await open_with(writer, name, ["x"])
    await open_with(keyed.as_key(WRITER_B), "job.2", [])
    seen: list[tuple[str, str]] = []
    cursor = None
    while True:
        params: dict[str, Any] = {"prefix": "job.", "limit": 2}
        if cursor:
            params["cursor"] = cursor
        page = await ok(await admin.get("/admin/v1/streams", params=params))
        seen += [(s["stream_id"], s["tenant"]) for s in page["streams"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == [("job.1", "a"), ("job.2", "a"), ("job.2", "b"), ("job.3", "a")]
    only_b = await ok(await admin.get("/admin/v1/streams", params={"tenant": "b"}))
    [stream] = only_b["streams"]
    assert stream["current"]["tenant"] == "b"
    assert stream["current"]["tail_seq"] == 0
    bad = await admin.get("/admin/v1/streams", params={"cursor": "not-a-cursor"})
    assert bad.status_code == 422


async def test_stream_detail_shows_every_generation(
    admin: httpx.AsyncClient, writer: httpx.AsyncClient
) -> None:
    first = await open_with(writer, "s1", ["aa", "bbb"], producer="worker-a")
    second = await open_with(writer, "s1", ["cccc"], reason="failover", max_events=1)
    await ok(
        await writer.post(f"/v1/generations/{second}/events", json={"events": [{"data": "dd"}]}),
        201,
    )
    detail = await ok(await admin.get("/admin/v1/streams/s1"))
    assert detail["tenant"] == "a"
    assert detail["created_at"] == old_created_at(detail)
    assert detail["updated_at"] >= detail["created_at"]
    old, new = detail["generations"]
    assert (old["generation"], old["epoch"], old["producer"]) == (first, 1, "worker-a")
    assert (old["superseded"], old["expired"], old["terminal"]) == (True, False, False)
    assert (old["retained_events"], old["retained_bytes"]) == (2, 5)
    assert (new["generation"], new["reason"], new["supersedes"]) == (second, "failover", first)
    # max_events=1: the first event was evicted, only "dd" is kept.
    assert (new["head_seq"], new["tail_seq"], new["retained_events"]) == (2, 2, 1)
    assert new["retained_bytes"] == 2
    assert (await admin.get("/admin/v1/streams/nope")).status_code == 404


async def test_a_stream_id_used_by_two_tenants_needs_the_tenant(
    admin: httpx.AsyncClient, writer: httpx.AsyncClient, keyed: KeyedApp
) -> None:
    await open_with(writer, "dup", [])
    await open_with(keyed.as_key(WRITER_B), "dup", ["x"])
    ambiguous = await admin.get("/admin/v1/streams/dup")
    assert ambiguous.status_code == 409
    assert ambiguous.json()["code"] == "ambiguous_stream"
    b = await ok(await admin.get("/admin/v1/streams/dup", params={"tenant": "b"}))
    assert b["generations"][0]["tail_seq"] == 1
    missing = await admin.get("/admin/v1/streams/dup", params={"tenant": "c"})
    assert missing.status_code == 404


async def test_generation_and_its_events(
    admin: httpx.AsyncClient, writer: httpx.AsyncClient
) -> None:
    token = await open_with(writer, "s1", ["e1", "e2", "e3"])
    gen = await ok(await admin.get(f"/admin/v1/generations/{token}"))
    assert (gen["stream_id"], gen["tenant"], gen["tail_seq"]) == ("s1", "a", 3)
    page = await ok(
        await admin.get(f"/admin/v1/generations/{token}/events", params={"after": 1, "limit": 1})
    )
    assert [e["id"] for e in page["events"]] == [f"{token}:2"]
    assert page["next_after"] == 2
    beyond = await admin.get(f"/admin/v1/generations/{token}/events", params={"after": 9})
    assert beyond.status_code == 409
    unknown = await admin.get("/admin/v1/generations/AAAAAAAAAAAAAAAAAAAAAA")
    assert unknown.status_code == 404
    assert unknown.json()["code"] == "unknown_generation"


async def test_force_terminate(admin: httpx.AsyncClient, writer: httpx.AsyncClient) -> None:
    token = await open_with(writer, "s1", ["a", "b"])
    done = await ok(await admin.post(f"/admin/v1/generations/{token}/terminate"))
    assert (done["terminal"], done["terminal_seq"]) == (True, 2)
    again = await ok(await admin.post(f"/admin/v1/generations/{token}/terminate"))
    assert again["terminal_at"] == done["terminal_at"]  # idempotent
    refused = await writer.post(f"/v1/generations/{token}/events", json={"events": [{"data": "c"}]})
    assert refused.status_code == 409
    assert refused.json()["code"] == "terminal"
    verdict = await resume(writer, "s1", f"{token}:1")
    assert (verdict["verdict"], verdict["reason"]) == ("reset", "terminal")


async def test_purge_keeps_tombstones(admin: httpx.AsyncClient, writer: httpx.AsyncClient) -> None:
    old = await open_with(writer, "s1", ["a", "b"])
    new = await open_with(writer, "s1", ["c"])
    purged = await ok(await admin.delete("/admin/v1/streams/s1"))
    assert purged == {"stream_id": "s1", "tenant": "a", "tombstoned": 2, "purged_events": 3}
    verdict = await resume(writer, "s1", f"{new}:1")
    assert (verdict["verdict"], verdict["reason"]) == ("reset", "expired")
    # The superseded one still answers as a known token, not as a spoof.
    verdict = await resume(writer, "s1", f"{old}:1")
    assert (verdict["verdict"], verdict["reason"]) == ("reset", "superseded")
    assert verdict["generation"] is None  # nothing left to start over with
    detail = await ok(await admin.get("/admin/v1/streams/s1"))
    assert all(g["expired"] and g["retained_events"] == 0 for g in detail["generations"])
    stats = await ok(await admin.get("/admin/v1/stats"))
    assert stats["retained_events"] == 0
    again = await ok(await admin.delete("/admin/v1/streams/s1"))
    assert (again["tombstoned"], again["purged_events"]) == (0, 0)


async def _explain(admin: httpx.AsyncClient, **body: Any) -> Any:
    return await ok(await admin.post("/admin/v1/explain", json=body))


async def test_explain_a_reset_shows_every_check(
    admin: httpx.AsyncClient, writer: httpx.AsyncClient
) -> None:
    old = await open_with(writer, "s1", ["a", "b"])
    new = await open_with(writer, "s1", ["c"])
    answer = await _explain(admin, stream_id="s1", last_event_id=f"{old}:2")
    assert (answer["verdict"], answer["reason"]) == ("reset", "superseded")
    assert answer["discard_client_state"] is True
    assert [(c["row"], c["reason"], c["matched"]) for c in answer["checks"]] == [
        ("1", "malformed_id", False),
        ("2", "unknown_generation", False),
        ("3", "cross_stream", False),
        ("4", "beyond_tail", False),
        ("4a", "lost_tail", False),
        ("4b", "abandoned", False),
        ("5", "superseded", True),
    ]
    assert answer["generation"]["generation"] == old
    assert answer["would_deliver"] == {"generation": new, "after": 0, "events": 1}


@pytest.mark.parametrize(
    ("claim", "stream", "expected"),
    [
        ("{new}:1", "s1", ("resume", "ok", 1)),
        ("{new}:0", "s1", ("resume", "ok", 2)),
        ("{new}:9", "s1", ("invalid", "beyond_tail", None)),
        ("{new}:1", "s2", ("invalid", "cross_stream", None)),
        ("{new}:1", None, ("resume", "ok", 1)),
        ("AAAAAAAAAAAAAAAAAAAAAA:1", "s1", ("invalid", "unknown_generation", None)),
        ("not an id", "s1", ("invalid", "malformed_id", None)),
    ],
)
async def test_explain_verdicts(
    admin: httpx.AsyncClient,
    writer: httpx.AsyncClient,
    claim: str,
    stream: str | None,
    expected: tuple[str, str, int | None],
) -> None:
    new = await open_with(writer, "s1", ["a", "b"])
    body: dict[str, Any] = {"last_event_id": claim.format(new=new)}
    if stream:
        body["stream_id"] = stream
    answer = await _explain(admin, **body)
    delivered = answer["would_deliver"]
    assert (answer["verdict"], answer["reason"], delivered and delivered["events"]) == expected
    assert answer["checks"][-1]["matched"] is True
    assert not any(c["matched"] for c in answer["checks"][:-1])


async def test_explain_as_a_tenant_sees_what_that_tenant_would(
    admin: httpx.AsyncClient, writer: httpx.AsyncClient
) -> None:
    token = await open_with(writer, "s1", ["a"])
    as_a = await _explain(admin, stream_id="s1", last_event_id=f"{token}:1", tenant="a")
    as_b = await _explain(admin, stream_id="s1", last_event_id=f"{token}:1", tenant="b")
    assert as_a["reason"] == "ok"
    assert as_b["reason"] == "unknown_generation"


async def test_explain_sees_an_eviction(
    admin: httpx.AsyncClient, writer: httpx.AsyncClient
) -> None:
    token = await open_with(writer, "s1", ["a", "b", "c", "d"], max_events=2)
    answer = await _explain(admin, stream_id="s1", last_event_id=f"{token}:1")
    assert (answer["verdict"], answer["reason"]) == ("reset", "evicted")
    assert answer["would_deliver"] is None


async def test_explain_is_not_recorded(admin: httpx.AsyncClient, writer: httpx.AsyncClient) -> None:
    token = await open_with(writer, "s1", ["a"])
    await _explain(admin, stream_id="s1", last_event_id=f"{token}:1")
    listed = await ok(await admin.get("/admin/v1/decisions"))
    assert listed["decisions"] == []


async def test_decisions_are_recorded_and_filtered(
    admin: httpx.AsyncClient, writer: httpx.AsyncClient
) -> None:
    old = await open_with(writer, "s1", ["a", "b"])
    new = await open_with(writer, "s1", ["c"])
    await resume(writer, "s1", f"{new}:0")
    await resume(writer, "s1", f"{old}:2")
    await resume(writer, "s1", "bogus")
    await resume(writer, "s2", f"{new}:1")
    listed = await ok(await admin.get("/admin/v1/decisions"))
    assert [(d["stream_id"], d["verdict"], d["reason"]) for d in listed["decisions"]] == [
        ("s2", "invalid", "cross_stream"),
        ("s1", "invalid", "malformed_id"),
        ("s1", "reset", "superseded"),
        ("s1", "resume", "ok"),
    ]
    ok_row = listed["decisions"][-1]
    assert (ok_row["tenant"], ok_row["generation"], ok_row["events"]) == ("a", new, 1)
    assert ok_row["last_event_id"] == f"{new}:0"
    reset_row = listed["decisions"][-2]
    assert (reset_row["generation"], reset_row["events"]) == (new, 1)  # the fresh start
    by_stream = await ok(await admin.get("/admin/v1/decisions", params={"stream_id": "s2"}))
    assert len(by_stream["decisions"]) == 1
    invalid = await ok(await admin.get("/admin/v1/decisions", params={"verdict": "invalid"}))
    assert {d["reason"] for d in invalid["decisions"]} == {"cross_stream", "malformed_id"}
    by_reason = await ok(await admin.get("/admin/v1/decisions", params={"reason": "ok"}))
    assert len(by_reason["decisions"]) == 1
    newest = await ok(await admin.get("/admin/v1/decisions", params={"limit": 1}))
    assert newest["decisions"][0]["stream_id"] == "s2"
    bad = await admin.get("/admin/v1/decisions", params={"verdict": "maybe"})
    assert bad.status_code == 422


async def test_a_long_malformed_claim_is_recorded_cut_short(
    admin: httpx.AsyncClient, writer: httpx.AsyncClient
) -> None:
    await resume(writer, "s1", "x" * 5000)
    [row] = (await ok(await admin.get("/admin/v1/decisions")))["decisions"]
    assert row["last_event_id"] == "x" * 300
    assert row["reason"] == "malformed_id"


async def test_stats(admin: httpx.AsyncClient, writer: httpx.AsyncClient, keyed: KeyedApp) -> None:
    old = await open_with(writer, "s1", ["aa", "bb"])
    await open_with(writer, "s1", ["c"])
    done = await open_with(writer, "s2", ["d"])
    await ok(await admin.post(f"/admin/v1/generations/{done}/terminate"))
    await open_with(keyed.as_key(WRITER_B), "s3", [])
    await ok(await admin.delete("/admin/v1/streams/s3"))
    await resume(writer, "s1", f"{old}:2")
    await resume(writer, "s1", f"{old}:2")
    stats = await ok(await admin.get("/admin/v1/stats"))
    assert stats["streams"] == 3
    assert stats["generations"] == {
        "live": 1,
        "terminal": 1,
        "superseded": 1,
        "abandoned": 0,
        "expired": 1,
    }
    assert (stats["retained_events"], stats["retained_bytes"]) == (4, 6)
    assert stats["verdicts"] == [{"verdict": "reset", "reason": "superseded", "count": 2}]


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("GET", "/admin/v1/streams?prefix=a%00", None),
        ("GET", "/admin/v1/streams?tenant=a%00", None),
        ("GET", "/admin/v1/streams/s1?tenant=a%00", None),
        ("GET", "/admin/v1/decisions?stream_id=a%00b", None),
        ("GET", "/admin/v1/decisions?tenant=a%00", None),
        ("POST", "/admin/v1/explain", {"last_event_id": "t:1", "tenant": "a\x00"}),
        ("POST", "/admin/v1/explain", {"last_event_id": "t:1", "stream_id": "a\x00"}),
    ],
)
async def test_nul_in_an_admin_parameter_is_422(
    admin: httpx.AsyncClient, method: str, path: str, body: object
) -> None:
    # PostgreSQL refuses NUL in text; it must be refused before it reaches a query.
    response = await admin.request(method, path, json=body)
    assert response.status_code == 422, response.text
    assert response.json()["code"] == "validation_error"


def old_created_at(detail: dict[str, Any]) -> str:
    """A stream is created with its first generation."""
    created: str = detail["generations"][0]["created_at"]
    return created


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
